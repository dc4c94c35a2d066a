"""How gpulint starts its own processes (gpulint/child_processes.py): the import path a Python
child gets, the lint without workers where none can be started safely, and git runs that refuse a
configuration they cannot make harmless.  The hostile cases (planted modules, a repository whose
configuration names commands) are in tests/hostile/test_own_processes.py."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpulint
from gpulint import child_processes
from gpulint.child_processes import GitRefused, import_path, python_module_command, run_git
from gpulint.linter.config import Settings
from gpulint.linter.run import parallel
from gpulint.linter.run.outcome import RunOptions
from gpulint.linter.run.runner import run
from tests.hostile.conftest import FIXABLE

GPULINT_ROOT = str(Path(gpulint.__file__).resolve().parent.parent)


def test_the_import_path_leaves_out_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", str(tmp_path), str(tmp_path / "lib"), GPULINT_ROOT, *sys.path])
    assert import_path()[:2] == [str(tmp_path / "lib"), GPULINT_ROOT]


def test_the_working_directory_stays_when_gpulint_itself_comes_from_there(monkeypatch):
    # (gpulint run from its own checkout: the child must find the same gpulint)
    monkeypatch.chdir(GPULINT_ROOT)
    monkeypatch.setattr(sys, "path", ["", GPULINT_ROOT, *sys.path])
    assert import_path()[0] == GPULINT_ROOT and "" not in import_path()


def test_a_module_runs_as_with_dash_m_with_its_arguments_and_without_the_folder(tmp_path, monkeypatch):
    (tmp_path / "struct.py").write_text("raise SystemExit('the planted struct ran')\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "probe_module.py").write_text(
        "import json, struct, sys\nprint(json.dumps([__name__, sys.argv[1:], struct.__file__, sys.path]))\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "elsewhere"), *sys.path])
    completed = subprocess.run(python_module_command("probe_module", "a", "--b"), capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    name, arguments, struct_file, path = json.loads(completed.stdout)
    assert name == "__main__" and arguments == ["a", "--b"]
    assert Path(struct_file).parent != tmp_path and "" not in path and str(tmp_path) not in path


def test_without_a_safe_start_method_the_files_are_linted_in_this_process(tmp_path, monkeypatch):
    # Python 3.10 on macOS or Windows: spawned workers would import from the working directory.
    for index in range(parallel.MIN_FILES_FOR_WORKERS + 1):
        (tmp_path / f"train_{index}.py").write_text(FIXABLE)
    settings = Settings(select=["GL102"])
    serial = run([tmp_path], settings, RunOptions(), jobs=1)
    monkeypatch.setattr(parallel, "FORK_IS_SAFE", False)
    monkeypatch.setattr(parallel, "SPAWN_CAN_LEAVE_OUT_WORKING_DIRECTORY", False)

    def no_pool(*args, **kwargs):
        raise AssertionError("a worker pool was started")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    pooled = run([tmp_path], settings, RunOptions(), jobs=2)
    found = [[f.code for f in outcome.result.findings] for outcome in pooled.outcomes]
    assert found == [[f.code for f in outcome.result.findings] for outcome in serial.outcomes]
    assert found == [["GL102"]] * (parallel.MIN_FILES_FOR_WORKERS + 1)


def test_the_spawn_guard_sets_safe_path_while_it_runs_and_puts_back_what_was_there(monkeypatch):
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    with child_processes.spawned_without_working_directory("spawn"):
        with child_processes.spawned_without_working_directory("forkserver"):
            assert os.environ["PYTHONSAFEPATH"] == "1"
        assert os.environ["PYTHONSAFEPATH"] == "1"  # (the outer block still runs)
    assert "PYTHONSAFEPATH" not in os.environ
    monkeypatch.setenv("PYTHONSAFEPATH", "")
    with child_processes.spawned_without_working_directory("spawn"):
        assert os.environ["PYTHONSAFEPATH"] == "1"
    assert os.environ["PYTHONSAFEPATH"] == ""
    with child_processes.spawned_without_working_directory("fork"):
        assert os.environ["PYTHONSAFEPATH"] == ""  # (a forked worker starts no interpreter)


def test_a_filter_driver_that_cannot_be_switched_off_stops_git(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    with open(tmp_path / ".git" / "config", "a") as config:
        config.write('[filter "a=b"]\n\tclean = cat\n')
    with pytest.raises(GitRefused, match="'a=b'"):
        run_git(["status", "--porcelain"], tmp_path)
    from gpulint.review.diff import GitError, git

    with pytest.raises(GitError, match="filter driver"):
        git(["status", "--porcelain"], tmp_path)
