"""The pre-commit hooks, run by the real `pre-commit` as a user's repository would run them.

`pre-commit try-repo` builds the hook's environment by pip-installing the repository (network to
PyPI for the dependencies), so this is slow; both hooks share one environment.  The repository tried
is a clone of this checkout's HEAD: `try-repo` on a working tree would also pick up uncommitted
edits of tracked files, which are not what a user's `rev:` gets.
"""

from __future__ import annotations

import os
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
    pytest.fail("pre-commit is a dev dependency and must be installed to run this test")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.slow
def test_hooks_with_real_pre_commit(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: try-repo needs one")
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

    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "PRE_COMMIT_COLOR": "never",
        "NO_COLOR": "1",
        "GIT_AUTHOR_NAME": "dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
    }

    def try_repo(hook: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*_pre_commit(), "try-repo", str(hooks_repo), hook, "--all-files", "--verbose"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    check = try_repo("gpulint")
    output = check.stdout + check.stderr
    assert check.returncode == 1, output
    assert "Failed" in output and "train.py:6:14: GL102" in output, output
    assert (project / "train.py").read_text() == BAD_SCRIPT  # the check hook writes nothing

    fix = try_repo("gpulint-fix")
    output = fix.stdout + fix.stderr
    assert fix.returncode == 1, output  # pre-commit fails a hook that modified files
    fixed = (project / "train.py").read_text()
    assert "pin_memory=True" in fixed and fixed != BAD_SCRIPT, output
