"""The run history: storage round trip, queries, references (id, `last`, git ref), schema
versions, where the database lives, and two processes writing at once."""

import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpulint.linter.config import ConfigError
from gpulint.runtime_check import history as history_mod
from gpulint.runtime_check.compare import STEP_TIME
from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.history import History, HistoryError, RunRecord, Series

ROOT = Path(__file__).resolve().parent.parent.parent


def run_record(step_time: float = 0.02, command_key: str = '["profile", "train.py"]', **fields) -> RunRecord:
    defaults = dict(
        kind="profile",
        command="gpulint profile -- python train.py",
        command_key=command_key,
        status="stopped",
        started_at=time.time(),
        script="train.py",
        script_sha256="abc",
    )
    defaults.update(fields)
    record = RunRecord(**defaults)
    record.figures = [
        Figure(STEP_TIME, step_time, "s", better="lower", noise=0.001),
        Figure("GPU utilization (mean)", None, "%", "NVML unavailable", "higher"),
    ]
    record.series = [Series("step_time", "step time", "step time", "s", "step", [1.0, 2.0, 3.0], [step_time] * 3)]
    return record


def test_a_run_comes_back_as_it_was_stored(tmp_path):
    record = run_record(
        environment={"cpu": "x", "frameworks": {"torch": "2.1"}},
        meta={"lint": [{"code": "GL101"}]},
        git_commit="f" * 40,
        git_dirty=True,
        wall_seconds=3.5,
        verdict="input-bound (high)",
    )
    with History.open(tmp_path / "h.db") as history:
        run_id = history.record(record)
        loaded = history.load(run_id)
    assert loaded == record  # every field, figures and series included (record.id was set)
    gpu = loaded.figure("GPU utilization (mean)")
    assert gpu.value is None and gpu.note == "NVML unavailable"


def test_queries_filter_and_order_newest_first(tmp_path):
    with History.open(tmp_path / "h.db") as history:
        history.record(run_record(started_at=time.time() - 3 * 86400))
        history.record(run_record(script="other.py", command_key='["profile", "other.py"]'))
        history.record(run_record(0.03))
        assert [r.script for r in history.runs()] == ["train.py", "other.py", "train.py"]
        assert len(history.runs(script="train.py")) == 2
        assert len(history.runs(since=history_mod.parse_since("1d"))) == 2
        assert len(history.runs(limit=1)) == 1 and history.runs(limit=1)[0].series == []  # no series in listings
        latest = history.resolve("last")
        assert latest.figure(STEP_TIME).value == 0.03
        assert history.resolve("last", like=latest).id == 1  # the previous run of the same command
        with pytest.raises(HistoryError, match="no run 9"):
            history.resolve("9")
        with pytest.raises(HistoryError, match="neither a run id"):
            history.resolve("no-such-ref")


def test_a_git_ref_names_the_run_recorded_at_that_commit(tmp_path):
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "train.py").write_text("print(1)\n")
    subprocess.run([*git, "add", "train.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    commit, dirty = history_mod.git_state(tmp_path)
    assert len(commit) == 40 and dirty is False
    (tmp_path / "train.py").write_text("print(2)\n")
    assert history_mod.git_state(tmp_path) == (commit, True)
    with History.open(tmp_path / ".gpulint" / "history.db") as history:
        at_commit = history.record(run_record(git_commit=commit, git_dirty=False))
        later = run_record(git_commit="0" * 40)
        history.record(later)
        assert history.resolve("HEAD", like=later, repository=tmp_path).id == at_commit
        assert history.resolve("HEAD", repository=tmp_path).id == at_commit


def test_the_history_folder_is_ignored_by_git(tmp_path):
    History.open(tmp_path / ".gpulint" / "history.db").close()
    assert (tmp_path / ".gpulint" / ".gitignore").read_text().splitlines()[-1] == "*"
    with pytest.raises(HistoryError, match="no history"):
        History.open(tmp_path / "elsewhere.db", create=False)


def test_a_newer_schema_is_refused_and_an_older_one_migrated(tmp_path, monkeypatch):
    path = tmp_path / "h.db"
    with History.open(path) as history:
        history.record(run_record())
    monkeypatch.setattr(history_mod, "SCHEMA_VERSION", 2)
    monkeypatch.setattr(history_mod, "MIGRATIONS", {1: "ALTER TABLE runs ADD COLUMN tag TEXT"})
    with History.open(path) as history:
        assert history.connection.execute("PRAGMA user_version").fetchone()[0] == 2
        assert "tag" in [row[1] for row in history.connection.execute("PRAGMA table_info(runs)")]
    # A new database is made by SCHEMA and the migrations, so it holds the SQL a migrated one does:
    # both pass the schema check, for reading and recording.
    with History.open(tmp_path / "new.db") as history:
        history.record(run_record())
    for database in (path, tmp_path / "new.db"):
        with History.open(database, create=False) as history:
            assert len(history.runs()) == 1
    monkeypatch.setattr(history_mod, "SCHEMA_VERSION", 1)
    with pytest.raises(HistoryError, match="newer gpulint"):
        History.open(path)


def test_reads_are_bounded_in_rows_value_size_and_time(tmp_path, monkeypatch):
    path = tmp_path / "h.db"
    with History.open(path) as history:
        for _ in range(3):
            history.record(run_record(command="x" * 1000))  # two figures each
    monkeypatch.setattr(history_mod, "MAX_RUNS", 2)
    with History.open(path, create=False) as history:
        assert [len(history.runs(limit=limit)) for limit in (None, -1, 5, 1)] == [2, 2, 2, 1]
    monkeypatch.setattr(history_mod, "MAX_PARTS", 1)
    with History.open(path, create=False) as history, pytest.raises(HistoryError, match="more than 1 figures"):
        history.runs()
    monkeypatch.setattr(history_mod, "MAX_PARTS", 2)
    if sys.version_info >= (3, 11):  # Connection.setlimit
        monkeypatch.setattr(history_mod, "MAX_VALUE_BYTES", 500)
        with History.open(path, create=False) as history, pytest.raises(HistoryError, match="string or blob too big"):
            history.runs()
        monkeypatch.setattr(history_mod, "MAX_VALUE_BYTES", 2**20)
    # Every read past its deadline, the clock looked at after each SQLite instruction: the check
    # of the schema when the file is opened, and any query of an open history.
    monkeypatch.setattr(history_mod, "PROGRESS_EVERY", 1)
    with History.open(path, create=False) as history:
        monkeypatch.setattr(history_mod, "QUERY_BUDGET_S", -1.0)
        with pytest.raises(HistoryError, match=f"cannot read {path}: a query ran past -1 s"):
            history.runs()
        with pytest.raises(HistoryError, match="a query ran past"):
            History.open(path, create=False)


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path):
    path = tmp_path / "h.db"
    path.write_text("not sqlite" * 100)
    with pytest.raises(HistoryError, match="cannot use"):
        History.open(path)


def test_where_the_history_lives(tmp_path):
    project = tmp_path / "project"
    (project / "src" / "deep").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert history_mod.history_path(project / "src" / "deep") == project / ".gpulint" / "history.db"
    assert history_mod.history_path(tmp_path / "project" / "src", tmp_path / "mine.db") == tmp_path / "mine.db"
    (project / "pyproject.toml").write_text("[tool.gpulint]\nhistory = 'perf/runs.db'\n")
    assert history_mod.history_path(project / "src") == project / "perf" / "runs.db"
    (project / "pyproject.toml").write_text("[tool.gpulint]\nhistory = false\n")
    assert history_mod.history_path(project / "src") is None
    (project / "pyproject.toml").write_text("[tool.gpulint]\nhistory = 3\n")
    with pytest.raises(ConfigError, match="`history` must be"):
        history_mod.history_path(project / "src")
    alone = tmp_path / "alone"
    alone.mkdir()
    assert history_mod.project_root(alone) == alone


WRITER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[3])
    from tests.runtime.test_history import run_record
    from gpulint.runtime_check.history import History
    for i in range(int(sys.argv[2])):
        with History.open(__import__("pathlib").Path(sys.argv[1])) as history:
            history.record(run_record(0.01 * (i + 1)))
""")


def test_two_processes_recording_at_once_lose_nothing(tmp_path):
    path = tmp_path / ".gpulint" / "history.db"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), "40", str(ROOT)]) for _ in range(2)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    connection = sqlite3.connect(path)
    assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 80
    assert connection.execute("SELECT COUNT(*) FROM figures").fetchone()[0] == 160
    assert connection.execute("SELECT COUNT(*) FROM series").fetchone()[0] == 80


def test_since_accepts_durations_and_dates():
    now = 1_700_000_000.0
    assert history_mod.parse_since("2d", now) == now - 2 * 86400
    assert history_mod.parse_since("90m", now) == now - 5400
    assert history_mod.parse_since("2024-05-01T00:00:00+00:00") == 1714521600.0
    with pytest.raises(HistoryError, match="--since"):
        history_mod.parse_since("yesterday")
