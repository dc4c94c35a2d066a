"""The pre-commit hooks, run by the real `pre-commit` as a user's repository would run them: with
`try-repo`, and with the configuration docs/integrations.md tells users to write.

`pre-commit` builds the hook's environment by pip-installing the repository (network to
PyPI for the dependencies), so this is slow: each test builds it once, and both hooks share it.  The repository tried
is a clone of this checkout's HEAD: `try-repo` on a working tree would also pick up uncommitted
edits of tracked files, which are not what a user's `rev:` gets.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpulint import __version__
from tests.helpers import ROOT

BAD_SCRIPT = textwrap.dedent(
    """\
    import torch
    from torch.utils.data import DataLoader


    def train(dataset, model, optimizer):
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


def _hooks_repo_and_project(tmp_path: Path) -> tuple[Path, Path]:
    """A clone of this checkout's HEAD (what a user's `rev:` gets), and a user's repository with
    one training script that has a finding."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: pre-commit needs one to clone")
    hooks_repo = tmp_path / "gpulint-hooks"
    _git(tmp_path, "clone", "-q", str(ROOT), str(hooks_repo))
    if not (hooks_repo / ".pre-commit-hooks.yaml").exists():
        pytest.fail(".pre-commit-hooks.yaml is not committed at HEAD")
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    (project / "train.py").write_text(BAD_SCRIPT)
    (project / "README.md").write_text("not python: the hook must not see it\n")
    _git(project, "add", ".")
    return hooks_repo, project


def _home(tmp_path: Path) -> dict[str, str]:
    """The environment of a pre-commit run whose hook environments are built under `tmp_path`."""
    return {**_ENV, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}


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
def test_hooks_with_real_pre_commit(tmp_path):
    """Both hooks in one `try-repo` run (try-repo builds the environment in a temporary store of
    its own every time it runs, so one run per hook would build it twice).  pre-commit compares the
    working tree before and after each hook, so each hook's own report says whether it wrote."""
    hooks_repo, project = _hooks_repo_and_project(tmp_path)
    run = _run_pre_commit(project, _home(tmp_path), "try-repo", str(hooks_repo), "--all-files", "--verbose")
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    reports = _hook_reports(output)
    assert list(reports) == ["gpulint", "gpulint-fix"], output  # the check runs on the unfixed file

    check = reports["gpulint"]
    assert (
        check.split("\n", 1)[0].endswith("Failed") and "- exit code: 1" in check and "train.py:6:14: GL102" in check
    ), output
    assert "files were modified by this hook" not in check, output  # the check hook writes nothing

    fix = reports["gpulint-fix"]
    assert fix.startswith("gpulint (fix)") and fix.split("\n", 1)[0].endswith("Failed"), output
    assert "files were modified by this hook" in fix, output  # pre-commit fails a hook that modified files
    fixed = (project / "train.py").read_text()
    assert "pin_memory=True" in fixed and fixed != BAD_SCRIPT, output


def _documented_config() -> str:
    """The `.pre-commit-config.yaml` that docs/integrations.md shows."""
    section = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8").split("## pre-commit\n", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert block is not None, "docs/integrations.md shows no pre-commit configuration"
    return block[1]


@pytest.mark.slow
def test_the_documented_configuration_runs_the_tagged_release(tmp_path):
    """The snippet users copy, with its `rev:` made by the release procedure (docs/releasing.md:
    `git tag -a vX.Y.Z`), checks out, builds, and blocks a file with a finding; and
    `pre-commit autoupdate --freeze`, which the docs give for pinning a commit, pins the SHA."""
    hooks_repo, project = _hooks_repo_and_project(tmp_path)
    tag = f"v{__version__}"
    # -f: a clone of a released checkout has the tag already, on the release's commit; the test
    # tags the code under test.
    _git(hooks_repo, "tag", "-f", "-a", tag, "-m", f"gpulint {__version__}")
    config = _documented_config()
    assert f"rev: {tag}" in config, "the docs pin a release other than the current version"
    assert "https://github.com/gpulint/gpulint" in config
    config_file = project / ".pre-commit-config.yaml"
    config_file.write_text(config.replace("https://github.com/gpulint/gpulint", str(hooks_repo)))
    _git(project, "add", ".pre-commit-config.yaml")
    env = _home(tmp_path)

    run = _run_pre_commit(project, env, "run", "--all-files", "--verbose")
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "Failed" in output and "train.py:6:14: GL102" in output, output
    assert (project / "train.py").read_text() == BAD_SCRIPT

    frozen = _run_pre_commit(project, env, "autoupdate", "--freeze")
    assert frozen.returncode == 0, frozen.stdout + frozen.stderr
    pinned = re.search(rf"rev: ([0-9a-f]{{40}})\s+# frozen: {re.escape(tag)}", config_file.read_text())
    assert pinned is not None, config_file.read_text()
    # (the SHA of the annotated tag, as pre-commit writes it, or of its commit: either names the release)
    released = _git(hooks_repo, "rev-parse", "HEAD").strip()
    assert _git(hooks_repo, "rev-parse", f"{pinned[1]}^{{commit}}").strip() == released
