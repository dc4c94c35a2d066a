"""The runtime checker's run history arrives with the repository (git stores symbolic links) or
from a CI cache another job wrote: `profile`, `history`, `compare`, `report` and the regression
gate may use it only where it is a real file of the project, read it without changing it, and
turn a database that is not gpulint's (or is damaged) into one sentence.  SQLite runs the SQL a
database stores (views, triggers, generated columns, defaults): a history holding any SQL but
gpulint's is refused before it is queried, and what it holds is printed escaped."""

from __future__ import annotations

import hashlib
import sqlite3
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.history import RUN_COLUMNS, History, RunRecord, Series
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
    # Python's JSON parser recurses once per level: 100,000 levels were a RecursionError.
    "metadata nested 100,000 deep": (
        _set(f"UPDATE runs SET meta = '{{\"a\": {'[' * 100_000}{']' * 100_000}}}'"),
        "it is damaged or not a gpulint run history (meta is JSON nested deeper than 32 levels)",
    ),
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


# -- SQL stored in the database --------------------------------------------------------------
def _execute(path: Path, *statements: str) -> None:
    connection = sqlite3.connect(path)
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()


ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)"
FIGURE_COLUMNS = "run_id, position, name, value, unit, note, better, noise"
# A table of gpulint's replaced by a view of the same columns over a query that never ends: any
# query of it (a listing sorts it, a run is looked up in it, the runs of a job are searched for in
# its metadata, which changes row by row so that SQLite cannot skip the search) hung the command,
# with no output.
ENDLESS_VIEWS = {
    "runs": f"CREATE VIEW runs ({RUN_COLUMNS}) AS {ENDLESS} SELECT x, 'profile', 'python train.py', '[]', NULL, NULL, "
    "'stopped', NULL, 0.0, NULL, NULL, NULL, NULL, '{}', '{\"n\": ' || x || '}' FROM c",
    "figures": f"CREATE VIEW figures ({FIGURE_COLUMNS}) AS {ENDLESS} SELECT 1 + x % 2, x, 'figure ' || x, 1.0, 's', "
    "'', NULL, NULL FROM c",
}


def _endless(path: Path, table: str) -> Path:
    _execute(path, f"DROP TABLE {table}", ENDLESS_VIEWS[table])
    return path


def _view_refused(table: str) -> str:
    return f"is not a gpulint run history (it holds a view {table}, which gpulint does not create)"


@pytest.mark.parametrize(("table", "command"), [(table, command) for table in ENDLESS_VIEWS for command in READERS])
def test_a_table_replaced_by_an_endless_view_is_refused_before_it_is_queried(sandbox, table, command):
    _project(sandbox)
    database = _endless(_gpulint_history(sandbox.project / ".gpulint" / "history.db"), table)
    before = _digest(database)
    result = sandbox.run(*READERS[command])  # the sandbox's time bound fails a hang
    _refused(result, f"{database} {_view_refused(table)}")
    assert _digest(database) == before and not (sandbox.project / "run.html").exists()


def _node_run(node: int) -> RunRecord:
    """A node's profile of a two-node job (meta as records.profile_record writes it)."""
    run = _run(0.1)
    run.meta = {
        "job": {"id": "job-1", "node": node, "nodes": 2, "host": f"host{node}", "note": ""},
        "ranks": [{"rank": node, "node": node, "step_time": 0.1, "collective_wait": 0.01, "data_wait": 0.001}],
    }
    return run


@pytest.mark.parametrize("table", sorted(ENDLESS_VIEWS))
def test_report_refuses_an_endless_view_in_a_history_to_merge_and_writes_nothing(sandbox, table):
    _project(sandbox)
    ours = sandbox.project / ".gpulint" / "history.db"
    theirs = sandbox.project / "node1.db"
    for path, node in ((ours, 0), (theirs, 1)):
        with History.open(path) as history:
            history.record(_node_run(node))
    _endless(theirs, table)
    before = _digest(ours), _digest(theirs)
    result = sandbox.run("report", "1", "--html", "run.html", "--merge", "node1.db")
    _refused(result, f"{theirs} {_view_refused(table)}")
    assert (_digest(ours), _digest(theirs)) == before and not (sandbox.project / "run.html").exists()


@pytest.mark.parametrize("command", ["history", "compare", "report"])
def test_a_view_that_computes_800_mb_a_row_is_refused_before_it_is_queried(sandbox, command):
    _project(sandbox)
    database = _gpulint_history(sandbox.project / ".gpulint" / "history.db")
    _execute(
        database,
        "DROP TABLE runs",
        f"CREATE VIEW runs ({RUN_COLUMNS}) AS SELECT x, 'profile', hex(zeroblob(400000000)), '[]', NULL, NULL, "
        "'stopped', NULL, 0.0, NULL, NULL, NULL, NULL, '{}', '{}' FROM (SELECT 1 AS x UNION ALL SELECT 2)",
    )
    _refused(sandbox.run(*READERS[command]), f"{database} {_view_refused('runs')}")


def _rebuild_runs(old: str, new: str, columns: str = RUN_COLUMNS) -> Callable[[Path], None]:
    """A change that makes `runs` again with `old` in its SQL replaced by `new`, keeping its rows
    (`columns` of them) and its index."""

    def rebuild(path: Path) -> None:
        connection = sqlite3.connect(path)
        table, index = (
            connection.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
            for name in ("runs", "runs_by_command")
        )
        assert old in table
        for statement in (
            "PRAGMA legacy_alter_table = ON",  # the other tables' references to runs stay as they are
            "ALTER TABLE runs RENAME TO stored",
            table.replace(old, new),
            f"INSERT INTO runs ({columns}) SELECT {columns} FROM stored",
            "DROP TABLE stored",
            index,
        ):
            connection.execute(statement)
        connection.commit()
        connection.close()

    return rebuild


# SQL that SQLite runs when gpulint reads or records: each in a history that is otherwise gpulint's.
PLANTED = {
    "a trigger": (
        _set("CREATE TRIGGER planted AFTER INSERT ON runs BEGIN UPDATE runs SET command = 'x' WHERE id = new.id; END"),
        "it holds a trigger planted, which gpulint does not create",
    ),
    "a generated column": (
        _rebuild_runs(
            "meta TEXT NOT NULL",
            "meta TEXT GENERATED ALWAYS AS (hex(zeroblob(100000000))) VIRTUAL",
            RUN_COLUMNS.removesuffix(", meta"),
        ),
        "table runs has a generated column meta",
    ),
    "a column default": (
        # (computed for each run recorded: a small one here, as creating the table computes it too)
        _rebuild_runs("meta TEXT NOT NULL", "meta TEXT NOT NULL, planted TEXT DEFAULT (hex(zeroblob(1000)))"),
        "table runs is not defined as gpulint defines it",
    ),
    "an index": (_set("CREATE INDEX planted ON runs (hex(zeroblob(1000)))"), "it holds an index planted"),
    "a table": (_set("CREATE TABLE planted (x)"), "it holds a table planted, which gpulint does not create"),
}


@pytest.mark.parametrize(
    ("plant", "command"), [(plant, command) for plant in PLANTED for command in ("history", "profile")]
)
def test_sql_planted_in_the_schema_is_refused_before_reading_or_recording(sandbox, plant, command):
    _project(sandbox)
    database = _gpulint_history(sandbox.project / ".gpulint" / "history.db")
    change, said = PLANTED[plant]
    change(database)
    before = _digest(database)
    result = sandbox.run(*(READERS["history"] if command == "history" else PROFILE))
    _refused(result, f"{database} is not a gpulint run history ({said}")
    assert _digest(database) == before


# -- what is printed of a stored run ---------------------------------------------------------
WORKFLOW_COMMAND = "python train.py\n::error title=PWNED::x \x1b[2J \u202e"


def test_stored_text_is_printed_escaped_and_cannot_start_a_workflow_command(sandbox):
    _project(sandbox)
    with History.open(sandbox.project / ".gpulint" / "history.db") as history:
        for index, host in enumerate(("a\n::warning::host", "b\x1b]0;title\x07")):
            run = _run(0.02 + index / 1000)
            run.command, run.host, run.git_commit, run.verdict = WORKFLOW_COMMAND, host, "\n::error::", "ok\u202eevil"
            run.figures.append(Figure("::error title=figure::x", 1.0, "count"))
            history.record(run)
    for args in (("history",), ("compare", "1", "2")):
        result = sandbox.run(*args)
        assert result.returncode == 0 and not result.stderr, result.stderr
        assert "python train.py\\n::error title=PWNED::x \\x1b[2J \\u202e" in result.stdout
        lines = result.stdout.split("\n")
        assert not [line for line in lines if line.lstrip().startswith("::")], result.stdout
        assert not any(char in result.stdout for char in "\x1b\x07\r\u202e"), result.stdout
    assert "./::error title=figure::x" in result.stdout  # compare's table starts with the name
