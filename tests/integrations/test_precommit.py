"""The pre-commit hooks, run by the real `pre-commit` as a user's repository would run them: both
hooks in one configuration, and the configuration and the commands docs/integrations.md gives users.

`pre-commit` builds the hook's environment by pip-installing the repository (network to PyPI for
the dependencies), so this is slow: both tests name the same repository and commit and share
pre-commit's store, so it is built once, and both hooks use it.  The
repository the hooks come from is a clone of this checkout made without tags, as a copy of a
repository may be; its HEAD is the checkout as the next commit would hold it (see
`_clone_of_the_checkout`), since a user's `rev:` names a commit.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT

BAD_SCRIPT = textwrap.dedent(
    """\
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder

    dataset = ImageFolder("data")  # (its items decode files: the loader's cost)


    def train(model, optimizer):
        loader = DataLoader(dataset, batch_size=32, num_workers=4)
        model.cuda()
        for x, y in loader:
            loss = model(x.cuda(non_blocking=True), y)
            loss.backward()
            optimizer.step()
    """
)


def _pre_commit() -> list[str]:
    found = Path(sys.executable).with_name("pre-commit")
    if found.exists():
        return [str(found)]
    if shutil.which("pre-commit"):
        return ["pre-commit"]
    pytest.skip("pre-commit is not installed (it is a dev dependency: pip install -e '.[dev]')")


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=_ENV).stdout


_ENV = {
    **os.environ,
    "PRE_COMMIT_COLOR": "never",
    "NO_COLOR": "1",
    "GIT_AUTHOR_NAME": "dev",
    "GIT_AUTHOR_EMAIL": "dev@example.com",
    "GIT_COMMITTER_NAME": "dev",
    "GIT_COMMITTER_EMAIL": "dev@example.com",
}


def _clone_of_the_checkout(clone: Path) -> None:
    """A clone of this checkout without its tags, whose HEAD is the checkout's HEAD plus, when
    tracked files have changes not committed yet, a commit of them: CI's clean clone tests HEAD,
    and a working tree tests the hooks and the docs as they stand (untracked files are left out,
    as `git commit -a` leaves them)."""
    _git(clone.parent, "clone", "-q", "--no-tags", str(ROOT), str(clone))
    changed = [name for name in _git(ROOT, "diff", "HEAD", "--name-only", "--no-renames", "-z").split("\0") if name]
    if not changed:
        return
    for name in changed:
        source, target = ROOT / name, clone / name
        if source.is_file() or source.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
        else:
            target.unlink(missing_ok=True)
    _git(clone, "add", "-A", "--", *changed)
    _git(clone, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "the checkout's uncommitted changes")


@pytest.fixture(scope="module")
def hooks(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The hooks' repository (`_clone_of_the_checkout`: what a user's `rev:` gets), and the
    environment of pre-commit runs that share one store: the first test to run builds the hook
    environment of HEAD's commit there, the other finds it."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: pre-commit needs one to clone")
    root = tmp_path_factory.mktemp("hooks")
    hooks_repo = root / "gpulint-hooks"
    _clone_of_the_checkout(hooks_repo)
    if not (hooks_repo / ".pre-commit-hooks.yaml").exists():
        pytest.fail(".pre-commit-hooks.yaml is not committed at HEAD")
    return hooks_repo, {**_ENV, "PRE_COMMIT_HOME": str(root / "pre-commit-home")}


def _project(tmp_path: Path) -> Path:
    """A user's repository with one training script that has a finding."""
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    (project / "train.py").write_text(BAD_SCRIPT)
    # (its finding, GL102, is held back as a hint by default: this user's project shows hints)
    (project / "pyproject.toml").write_text("[tool.gpulint]\nshow-hints = true\n")
    (project / "README.md").write_text("not python: the hook must not see it\n")
    _git(project, "add", ".")
    return project


def _run_pre_commit(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`pre-commit ARGS` in `project` (it builds the hook environment: minutes at most)."""
    return subprocess.run([*_pre_commit(), *args], cwd=project, env=env, capture_output=True, text=True, timeout=900)


def _hook_reports(output: str) -> dict[str, str]:
    """What `pre-commit --verbose` printed for each hook, by hook id in the order the hooks ran:
    the hook's status line (`name....Failed`) and the lines under it up to the next hook's."""
    parts = output.split("\n- hook id: ")
    reports = {}
    for index in range(1, len(parts)):
        status = parts[index - 1].rsplit("\n", 1)[-1]
        hook_id, _, body = parts[index].partition("\n")
        if index + 1 < len(parts):
            body = body.rsplit("\n", 1)[0]  # (its last line is the next hook's status line)
        reports[hook_id] = f"{status}\n{body}"
    return reports


@pytest.mark.slow
def test_hooks_with_real_pre_commit(tmp_path, hooks):
    """Both hooks in one run (of the commit that the documented configuration pins below, so the
    hook environment is built once).  pre-commit compares the working tree before and after each
    hook, so each hook's own report says whether it wrote."""
    hooks_repo, env = hooks
    project = _project(tmp_path)
    head = _git(hooks_repo, "rev-parse", "HEAD").strip()
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hooks_repo}\n    rev: {head}\n    hooks:\n      - id: gpulint\n      - id: gpulint-fix\n"
    )
    _git(project, "add", ".pre-commit-config.yaml")
    run = _run_pre_commit(project, env, "run", "--all-files", "--verbose")
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    reports = _hook_reports(output)
    assert list(reports) == ["gpulint", "gpulint-fix"], output  # the check runs on the unfixed file

    check = reports["gpulint"]
    assert (
        check.split("\n", 1)[0].endswith("Failed") and "- exit code: 1" in check and "train.py:9:14: GL102" in check
    ), output
    assert "files were modified by this hook" not in check, output  # the check hook writes nothing

    fix = reports["gpulint-fix"]
    assert fix.startswith("gpulint (fix)") and fix.split("\n", 1)[0].endswith("Failed"), output
    assert "files were modified by this hook" in fix, output  # pre-commit fails a hook that modified files
    fixed = (project / "train.py").read_text()
    assert "pin_memory=True" in fixed and fixed != BAD_SCRIPT, output


REPOSITORY = "https://github.com/gpulint/gpulint"


def _documented_section() -> str:
    """The pre-commit section of docs/integrations.md."""
    text = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    return text.split("## pre-commit\n", 1)[1].split("\n## ", 1)[0]


def _documented_config() -> str:
    """The `.pre-commit-config.yaml` that docs/integrations.md shows."""
    block = re.search(r"```yaml\n(.*?)```", _documented_section(), re.DOTALL)
    assert block is not None, "docs/integrations.md shows no pre-commit configuration"
    return block[1]


def _documented_commands() -> list[list[str]]:
    """The commands the section gives (the `$ ` lines of its console blocks), as argument lists."""
    blocks = re.findall(r"```console\n(.*?)```", _documented_section(), re.DOTALL)
    return [shlex.split(line[2:]) for block in blocks for line in block.splitlines() if line.startswith("$ ")]


@pytest.mark.slow
def test_the_documented_configuration_pins_a_commit_and_runs(tmp_path, hooks):
    """The snippet users copy and the commands that pin it, run against a copy of gpulint's
    repository that has no tags: `pre-commit autoupdate --freeze` and `git ls-remote ... HEAD`
    both give HEAD's SHA, and pre-commit checks that out, builds it and blocks a file with a finding."""
    hooks_repo, env = hooks
    project = _project(tmp_path)
    assert not _git(hooks_repo, "tag", "--list").strip()
    head = _git(hooks_repo, "rev-parse", "HEAD").strip()
    config = _documented_config()
    assert f"repo: {REPOSITORY}\n" in config and re.search(r"^\s+rev: \S+", config, re.MULTILINE), config
    config_file = project / ".pre-commit-config.yaml"
    config_file.write_text(config.replace(REPOSITORY, str(hooks_repo)))

    commands = _documented_commands()
    assert [command[:2] for command in commands] == [["pre-commit", "autoupdate"], ["git", "ls-remote"]], commands
    printed = {}
    for command in commands:
        argv = [arg.replace(REPOSITORY, str(hooks_repo)) for arg in command]
        if argv[0] == "pre-commit":
            done = _run_pre_commit(project, env, *argv[1:])
        else:
            done = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        printed[argv[0]] = done.stdout
    pinned = re.search(r"^\s+rev: ([0-9a-f]{40})\b", config_file.read_text(), re.MULTILINE)
    assert pinned is not None and pinned[1] == head, config_file.read_text()
    advertised = {ref: sha for sha, ref in (line.split("\t") for line in printed["git"].splitlines())}
    assert advertised["HEAD"] == head, printed["git"]

    _git(project, "add", ".pre-commit-config.yaml")
    run = _run_pre_commit(project, env, "run", "--all-files", "--verbose")
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "Failed" in output and "train.py:9:14: GL102" in output, output
    assert (project / "train.py").read_text() == BAD_SCRIPT
