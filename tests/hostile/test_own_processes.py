"""The processes gpulint starts for its own work, in a folder built to take them over.

A `struct.py` or a `gpulint/` package planted in the folder gpulint runs in must not run in the
language server's lint worker nor in the lint's spawned workers; a repository whose `.git/config`
names commands (`core.fsmonitor`, a filter driver, a hook) must not have them run by the review bot
or the run history.  gpulint is started as an installed `gpulint` command starts (a script outside
the folder, so the folder is not on the import path of gpulint itself), each run bounded in time.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.hostile.conftest import BOUND_S, FIXABLE, SHOW_HINTS
from tests.integrations.conftest import git, review_repo  # noqa: F401 - review_repo is a fixture

# An installed `gpulint` is a script in the environment's bin folder: Python puts that folder, not
# the working directory, first on gpulint's import path.  This one finds gpulint where the tests do.
ENTRY = textwrap.dedent(
    f"""\
    import sys

    sys.path.insert(1, {str(ROOT)!r})
    from gpulint.cli import console

    if __name__ == "__main__":
    {{prepare}}
        sys.exit(console())
    """
)


def _entry(folder: Path, prepare: str = "") -> Path:
    """A stand-in for the installed `gpulint` command, in `folder` (`prepare`: code run first)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gpulint_entry.py"
    path.write_text(ENTRY.format(prepare=textwrap.indent(prepare, "    ")))
    return path


def _plant(folder: Path, marks: Path) -> list[Path]:
    """Modules in `folder` that leave a mark in `marks` when imported; the marks they would leave."""
    marks.mkdir(exist_ok=True)
    planted = {
        "struct.py": marks / "struct",
        "pickle.py": marks / "pickle",
        "threading.py": marks / "threading",
        "gpulint/__init__.py": marks / "gpulint",
        "gpulint/server/__init__.py": marks / "gpulint.server",
        "gpulint/server/worker.py": marks / "gpulint.server.worker",
        "libcst/__init__.py": marks / "libcst",
    }
    for relative, mark in planted.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"open({str(mark)!r}, 'w').close()\nraise ImportError('planted')\n")
    return list(planted.values())


def _run(entry: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    environment = {**os.environ, "NO_COLOR": "1"}
    environment.pop("PYTHONSAFEPATH", None)
    return subprocess.run(
        [sys.executable, str(entry), *args], cwd=cwd, capture_output=True, text=True, env=environment, timeout=BOUND_S
    )


# -- Python children -------------------------------------------------------------------------------
def test_the_language_servers_worker_imports_nothing_from_the_workspace(tmp_path):
    pytest.importorskip("pygls", reason="the language server needs the `lsp` extra (pygls)")
    from tests.lsp_client import LspClient

    workspace = tmp_path / "workspace"
    marks = _plant(workspace, tmp_path / "marks")
    (workspace / "pyproject.toml").write_text(SHOW_HINTS)  # (FIXABLE's findings are hints by default)
    client = LspClient(command=[sys.executable, str(_entry(tmp_path / "bin")), "server"], cwd=workspace)
    try:
        client.initialize(workspace)
        uri = client.open(workspace / "train.py", FIXABLE)
        diagnostics = client.diagnostics(uri, version=1, timeout=BOUND_S)
    finally:
        client.close()
    assert {d["code"] for d in diagnostics} >= {"GL101", "GL102"}, diagnostics  # the worker linted the file
    assert [mark for mark in marks if mark.exists()] == []


@pytest.mark.skipif(sys.version_info < (3, 11), reason="spawned workers can leave the folder out from Python 3.11")
def test_spawned_lint_workers_import_nothing_from_the_working_directory(tmp_path):
    # As on macOS and Windows: the pools start fresh interpreters (spawn) instead of forking.
    prepare = "import multiprocessing\n"
    prepare += "fresh = multiprocessing.get_context\n"
    prepare += "multiprocessing.get_context = lambda method=None: fresh('spawn')\n"
    project = tmp_path / "project"
    marks = _plant(project, tmp_path / "marks")
    for index in range(4):  # enough files for a pool (parallel.MIN_FILES_FOR_WORKERS)
        (project / f"train_{index}.py").write_text(FIXABLE)
    run = _run(
        _entry(tmp_path / "bin", prepare), "check", "--no-cache", "--jobs", "2", "--select", "GL102", ".", cwd=project
    )
    assert run.returncode == 1, run.stderr
    assert sorted(line.split(":")[0] for line in run.stdout.splitlines() if "GL102" in line) == [
        f"train_{index}.py" for index in range(4)
    ]
    assert "could not be analysed" not in run.stdout + run.stderr
    assert [mark for mark in marks if mark.exists()] == []


# -- git -------------------------------------------------------------------------------------------
def _arm(repo: Path, marks: Path) -> list[Path]:
    """Configure `repo` to run a command (each leaving its mark) wherever git lets a repository's
    configuration do so on status and diff; the marks they would leave."""
    marks.mkdir()
    fsmonitor, clean, process, hook = (marks / name for name in ("fsmonitor", "clean", "process", "hook"))
    git(repo, "config", "core.fsmonitor", f"touch {shlex.quote(str(fsmonitor))}; false")
    git(repo, "config", "filter.planted.clean", f"touch {shlex.quote(str(clean))}; cat")
    git(repo, "config", "filter.planted.process", f"touch {shlex.quote(str(process))}")
    git(repo, "config", "filter.planted.required", "true")
    hooks = repo / "planted-hooks"
    hooks.mkdir()
    (hooks / "post-index-change").write_text(f"#!/bin/sh\ntouch {shlex.quote(str(hook))}\n")
    (hooks / "post-index-change").chmod(0o755)
    git(repo, "config", "core.hooksPath", str(hooks))
    (repo / ".gitattributes").write_text("*.py filter=planted\n")
    # A change in the working tree, and stat data that no longer match the index: git must look
    # at the files' content (through the filter) to compare them.
    with open(repo / "train.py", "a") as handle:
        handle.write("print(loss.item())\n")
    return [fsmonitor, clean, process, hook]


def test_the_review_bot_runs_no_command_the_repositorys_git_config_names(review_repo, tmp_path):  # noqa: F811
    marks = _arm(review_repo, tmp_path / "marks")
    run = _run(_entry(tmp_path / "bin"), "review", "--base", "main", "--format", "json", cwd=review_repo)
    assert run.returncode == 1, run.stderr  # findings on the added lines
    assert "<!-- gpulint:GL" in run.stdout
    assert [mark for mark in marks if mark.exists()] == []
    # (the planted commands do run under plain git: the test would see them)
    subprocess.run(["git", "status", "--porcelain"], cwd=review_repo, capture_output=True, timeout=BOUND_S)
    assert [mark for mark in marks if mark.exists()] != []


def test_the_run_history_runs_no_command_the_repositorys_git_config_names(review_repo, tmp_path):  # noqa: F811
    from gpulint.runtime_check.history import git_commit_of, git_state

    marks = _arm(review_repo, tmp_path / "marks")
    commit, dirty = git_state(review_repo)
    assert commit == git(review_repo, "rev-parse", "HEAD").strip() and dirty is True
    assert git_commit_of("main", review_repo) == git(review_repo, "rev-parse", "main").strip()
    assert [mark for mark in marks if mark.exists()] == []
