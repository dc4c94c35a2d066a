"""The runtime checker's run history arrives with the repository (git stores symbolic links) or
from a CI cache another job wrote: `profile`, `history`, `compare`, `report` and the regression
gate may use it only where it is a real file of the project, read it without changing it, and
turn a database that is not gpulint's (or is damaged) into one sentence."""

from __future__ import annotations

import hashlib
import sqlite3
import stat
import time
from pathlib import Path

import pytest

from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.history import History, RunRecord, Series
from tests.hostile.conftest import Sandbox

# A training script that makes two optimizer steps: on a history it accepts, profile would run it
# (and record it); on a refused one it must stop before running anything.
TRAIN = """\
import torch

w = torch.zeros(2, requires_grad=True)
optimizer = torch.optim.SGD([w], lr=0.1)
for _ in range(3):
    (w - 1).pow(2).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
"""
PROFILE = ("profile", "--steps", "1", "--warmup", "1", "--", "train.py")
# The commands that record a run.
RECORDERS = {
    "profile": PROFILE,
    "verify": ("verify", "train.py", "--runs", "2", "--steps", "1", "--warmup", "1"),
    "scale": ("scale", "--nproc", "1,2", "--runs", "2", "--steps", "1", "--warmup", "1", "--", "train.py"),
}
# The commands that read the history, and the gate that reads it without recording.
READERS = {
    "history": ("history",),
    "compare": ("compare", "1", "2"),
    "report": ("report", "1", "--html", "run.html"),
    "gate": ("profile", "--no-history", "--baseline", "1", "--steps", "1", "--warmup", "1", "--", "train.py"),
}


def _run(step_time: float) -> RunRecord:
    return RunRecord(
        kind="profile",
        command="gpulint profile -- python train.py",
        command_key='["profile", "train.py"]',
        status="stopped",
        started_at=time.time(),
        script="train.py",
        figures=[Figure("step time (mean)", step_time, "s", better="lower", noise=0.001)],
        series=[Series("step_time", "step time", "step time", "s", "step", [1.0, 2.0], [step_time] * 2)],
    )


def _gpulint_history(path: Path, runs: int = 2) -> Path:
    """A history as gpulint writes it, holding `runs` runs."""
    with History.open(path) as history:
        for index in range(runs):
            history.record(_run(0.02 + index / 1000))
    return path


def _foreign_database(path: Path) -> Path:
    """Another program's SQLite database (rollback journal, user_version 0)."""
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE accounts (name TEXT, balance REAL)")
    connection.execute("INSERT INTO accounts VALUES ('alice', 10.0)")
    connection.commit()
    connection.close()
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _project(sandbox: Sandbox) -> Path:
    sandbox.write("pyproject.toml", "[project]\nname = 'victim'\n")
    sandbox.write("train.py", TRAIN)
    return sandbox.project


def _refused(result, text: str) -> str:
    """The run's one error line, which says `text`; exit 2 and nothing recorded or measured."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(result.error_lines) == 1 and text in result.error_lines[0], result.stderr
    assert "recorded as run" not in result.stdout and "step time" not in result.stdout
    return result.error_lines[0]


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_history_folder_linked_to_a_foreign_database_is_refused_and_left_as_it_was(sandbox, command):
    _project(sandbox)
    foreign = _foreign_database(sandbox.outside / "victims" / "history.db")
    (sandbox.project / ".gpulint").symlink_to(sandbox.outside / "victims")
    result = sandbox.run(*READERS[command])
    line = _refused(result, f"{sandbox.project / '.gpulint'} is a symbolic link (to {sandbox.outside / 'victims'})")
    assert "does not keep its run history through a link" in line
    # (the sandbox checks too: no WAL switch, no user_version, no table added, no file beside it)
    connection = sqlite3.connect(f"{foreign.as_uri()}?mode=ro", uri=True)
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert connection.execute("PRAGMA user_version").fetchone()[0] == 0
    assert [row[0] for row in connection.execute("SELECT name FROM sqlite_master")] == ["accounts"]


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_history_database_linked_out_of_the_project_is_refused(sandbox, command):
    _project(sandbox)
    theirs = _gpulint_history(sandbox.outside / "theirs.db")
    (sandbox.project / ".gpulint").mkdir()
    (sandbox.project / ".gpulint" / "history.db").symlink_to(theirs)
    result = sandbox.run(*READERS[command])
    _refused(result, f"{sandbox.project / '.gpulint' / 'history.db'} is a symbolic link (to {theirs})")
    assert not (sandbox.project / "run.html").exists()


@pytest.mark.parametrize("command", sorted(RECORDERS))
def test_recording_refuses_a_dangling_folder_link_before_running_the_script(sandbox, command):
    _project(sandbox)
    made = sandbox.outside / "made"
    (sandbox.project / ".gpulint").symlink_to(made)
    result = sandbox.run(*RECORDERS[command])
    _refused(result, f"{sandbox.project / '.gpulint'} is a symbolic link (to {made})")
    assert not made.exists()


@pytest.mark.parametrize("name", ["history.db", ".gitignore", "history.db-wal"])
def test_profile_refuses_a_dangling_link_in_the_history_folder(sandbox, name):
    _project(sandbox)
    (sandbox.project / ".gpulint").mkdir()
    target = sandbox.outside / f"planted-{name}"
    (sandbox.project / ".gpulint" / name).symlink_to(target)
    result = sandbox.run(*PROFILE)
    _refused(result, f"{sandbox.project / '.gpulint' / name} is a symbolic link (to {target})")
    assert not target.exists()
    assert sorted(p.name for p in (sandbox.project / ".gpulint").iterdir()) == [name]


def test_a_configured_history_outside_the_project_is_refused(sandbox):
    _project(sandbox)
    foreign = _foreign_database(sandbox.outside / "runs.db")
    sandbox.write("pyproject.toml", "[tool.gpulint]\nhistory = '../outside/runs.db'\n")
    for args in (PROFILE, READERS["history"]):
        result = sandbox.run(*args)
        _refused(result, f"the run history {foreign} is outside the project {sandbox.project}")
    # A folder of the project linked elsewhere is no way out either.
    sandbox.write("pyproject.toml", "[tool.gpulint]\nhistory = 'perf/runs.db'\n")
    (sandbox.project / "perf").symlink_to(sandbox.outside)
    _refused(sandbox.run(*PROFILE), f"{sandbox.project / 'perf'} is a symbolic link (to {sandbox.outside})")


@pytest.mark.parametrize("command", sorted(RECORDERS))
def test_a_read_only_history_is_not_written_even_by_root(sandbox, command):
    _project(sandbox)
    database = _gpulint_history(sandbox.project / ".gpulint" / "history.db")
    database.chmod(0o444)
    before = _digest(database)
    result = sandbox.run(*RECORDERS[command])
    _refused(result, f"{database} is read-only: gpulint does not record runs in a read-only history")
    assert _digest(database) == before and stat.S_IMODE(database.stat().st_mode) == 0o444
    # Reading it is fine: the listing opens it read-only.
    listed = sandbox.run("history", "--format", "json")
    assert listed.returncode == 0 and not listed.stderr and listed.stdout.count('"id"') == 2
    assert _digest(database) == before


def _damaged_pages(path: Path) -> None:
    data = bytearray(path.read_bytes())
    page = 4096  # SQLite's default page size; page 1 (the schema) stays readable
    data[page:] = b"\xff" * (len(data) - page)
    path.write_bytes(bytes(data))


def _set(column_sql: str):
    def damage(path: Path) -> None:
        connection = sqlite3.connect(path)
        connection.execute(column_sql)
        connection.commit()
        connection.close()

    return damage


DAMAGE = {
    "not a database": (lambda path: path.write_text("just text\n" * 100), "file is not a database"),
    "damaged pages": (_damaged_pages, "it is damaged or not a gpulint run history (database disk image is malformed)"),
    "metadata not JSON": (_set("UPDATE runs SET meta = 'not json'"), "it is damaged or not a gpulint run history"),
    "a figure of the wrong type": (_set("UPDATE figures SET value = 'fast'"), "figure value or noise holds str"),
    "a series cut short": (_set("UPDATE series SET y = x'00'"), "it is damaged or not a gpulint run history"),
    "schema without tables": (_set("DROP TABLE series"), "is not a gpulint run history (no table series)"),
}


@pytest.mark.parametrize(
    ("damage", "command"),
    [
        (damage, command)
        for damage in sorted(DAMAGE)
        for command in ("history", "compare", "report")
        if not (damage == "a series cut short" and command == "history")  # the listing reads no series
    ],
)
def test_a_damaged_history_is_one_sentence(sandbox, damage, command):
    _project(sandbox)
    database = _gpulint_history(sandbox.project / ".gpulint" / "history.db")
    change, said = DAMAGE[damage]
    change(database)
    before = _digest(database)
    result = sandbox.run(*READERS[command])  # the sandbox fails on a traceback or "internal error"
    line = _refused(result, said)
    assert str(database) in line
    assert _digest(database) == before


def test_a_foreign_database_in_the_history_s_place_is_neither_read_nor_changed(sandbox):
    _project(sandbox)
    (sandbox.project / ".gpulint").mkdir()
    foreign = _foreign_database(sandbox.project / ".gpulint" / "history.db")
    before = _digest(foreign)
    for args in (READERS["history"], PROFILE):
        _refused(sandbox.run(*args), f"{foreign} is not a gpulint run history (it holds tables gpulint did not create)")
    assert _digest(foreign) == before
    assert sorted(p.name for p in (sandbox.project / ".gpulint").iterdir()) == ["history.db"]


def test_reading_creates_nothing_and_names_the_real_path(sandbox):
    _project(sandbox)
    alias = sandbox.root / "alias"
    alias.symlink_to(sandbox.project)
    result = sandbox.run("history", "--history", str(alias / "runs.db"))
    _refused(result, f"no history at {sandbox.project / 'runs.db'} (profile or verify a script first)")
    result = sandbox.run("compare")
    _refused(result, f"no history at {sandbox.project / '.gpulint' / 'history.db'}")
    assert not (sandbox.project / ".gpulint").exists() and not (sandbox.project / "runs.db").exists()


def test_a_history_file_named_on_the_command_line_must_not_be_a_link(sandbox):
    _project(sandbox)
    theirs = _gpulint_history(sandbox.outside / "theirs.db")
    (sandbox.project / "runs.db").symlink_to(theirs)
    result = sandbox.run("history", "--history", "runs.db")
    _refused(result, f"{sandbox.project / 'runs.db'} is a symbolic link (to {theirs})")
