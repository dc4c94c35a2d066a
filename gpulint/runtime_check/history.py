"""The performance record: runs of `profile`, `verify` (and any later runtime command) kept in an
embedded SQLite database, so every change is measured against a baseline.

A run is stored generically: what ran (command, script checksum, git commit and dirty flag, host,
CPU/GPU model, driver and framework versions), figures (figures.Figure: a name, a value, a unit,
which way is better, the half-width of its noise), named series (x and y arrays: per step or
over time) and free metadata.  A new figure or series needs no schema change.

Public API (other runtime commands record through it):

    with History.open(path) as history:
        run_id = history.record(RunRecord(...))        # one transaction
        runs = history.runs(script="train.py", limit=20)  # newest first, without series
        run = history.load(run_id)                     # with series
        base = history.resolve("last", like=run)       # a run id, `last` or a git ref

Two processes may record at once: the database is in WAL mode with a busy timeout, and each
record is one `BEGIN IMMEDIATE` transaction.  `PRAGMA user_version` holds the schema version;
MIGRATIONS upgrade an older database in place, a newer one is refused.

The history may arrive with the repository (git stores symbolic links) or from a CI cache, so
before it is opened `check_location` makes sure the database is a regular file of the project: no
link on the way from the project root to it (the `.gpulint` folder, the database, its `.gitignore`
and SQLite's `-wal`/`-shm`/`-journal` files), and its real path inside the project; recording
also refuses a database whose mode bits say read-only.  Reading (`open(create=False)`) opens the
file read-only (SQLite's `mode=ro`): it never switches the journal mode or adds a table.  A
database that is not gpulint's (another schema, another `user_version`) or is damaged is a
HistoryError with one sentence, whichever query meets the damage.

What such a file holds is data from strangers, and SQLite runs the SQL a database stores: a view
can stand in for a table and compute an endless or gigabyte-sized answer, a trigger runs when a
run is recorded, a generated column or a default computes whatever it says.  So before any table
is queried `_check_schema` requires `sqlite_master` to hold exactly the tables and indexes SCHEMA
(and MIGRATIONS) create, each with the SQL they create it with (`trusted_schema` is off besides).
Every read is bounded too, for what a damaged file may still do: a deadline (QUERY_BUDGET_S,
through SQLite's progress handler), a cap on the rows one query returns and on the size of one
stored value, and a bound on how deeply stored JSON nests (datajson.load_json).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
import sqlite3
import stat
import subprocess
import sys
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from gpulint.linter.printable import printable
from gpulint.linter.run.datajson import ShapeError, load_json
from gpulint.linter.run.safe_files import create_new_file, is_read_only, kind_of, make_real_dir
from gpulint.runtime_check.figures import Figure

SCHEMA_VERSION = 1
# MIGRATIONS[v]: the SQL that upgrades a database of schema v to v + 1.  SCHEMA makes schema 1, and
# a new database is made by SCHEMA and then every migration: so every history of one version holds
# the same SQL in `sqlite_master`, which _check_schema compares with its own.
MIGRATIONS: dict[int, str] = {}
BUSY_TIMEOUT_S = 30.0
DEFAULT_FOLDER = ".gpulint"
DEFAULT_NAME = "history.db"
GITIGNORE = "# gpulint's local run history: not for version control\n*\n"
# The files SQLite keeps beside a database (write-ahead log, its index, the rollback journal).
SIDECARS = ("-wal", "-shm", "-journal")
# What one read of a history may cost, whoever wrote the file.  gpulint's own history answers in
# milliseconds; the bounds are for a crafted or damaged one.
QUERY_BUDGET_S = 20.0  # one read: a listing, a run, a check of the schema
PROGRESS_EVERY = 1000  # SQLite instructions between two looks at the clock
MAX_RUNS = 10_000  # runs one query returns (`history --limit` included)
MAX_PARTS = 10_000  # figures, or series, of one run (a profile stores tens; per-core series, hundreds)
MAX_VALUE_BYTES = 64 * 2**20  # one stored text or blob (a verify run's diff is the largest)

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    command TEXT NOT NULL,
    command_key TEXT NOT NULL,
    script TEXT,
    script_sha256 TEXT,
    status TEXT NOT NULL,
    verdict TEXT,
    started_at REAL NOT NULL,
    wall_seconds REAL,
    git_commit TEXT,
    git_dirty INTEGER,
    host TEXT,
    environment TEXT NOT NULL,
    meta TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_command ON runs (command_key, started_at);
CREATE TABLE IF NOT EXISTS figures (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    name TEXT NOT NULL,
    value REAL,
    unit TEXT NOT NULL,
    note TEXT NOT NULL,
    better TEXT,
    noise REAL,
    PRIMARY KEY (run_id, name)
);
CREATE TABLE IF NOT EXISTS series (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    name TEXT NOT NULL,
    label TEXT NOT NULL,
    chart TEXT NOT NULL,
    unit TEXT NOT NULL,
    x_unit TEXT NOT NULL,
    x BLOB NOT NULL,
    y BLOB NOT NULL,
    PRIMARY KEY (run_id, name)
);
"""


# What a run's row is read as (named: a migrated database may hold more columns).
RUN_COLUMNS = (
    "id, kind, command, command_key, script, script_sha256, status, verdict, started_at, wall_seconds, "
    "git_commit, git_dirty, host, environment, meta"
)


class HistoryError(Exception):
    """The history cannot be used as asked (a newer schema, an unknown run): one line for the user."""


class NoEarlierRun(HistoryError):
    """`last` asked for the run before this one, and this command has none: its first run."""


@dataclass
class Series:
    name: str  # stable key: "step_time", "gpu0_util"
    label: str
    chart: str  # series with the same chart are drawn together
    unit: str
    x_unit: str  # "step" or "s"
    x: list[float]
    y: list[float]


@dataclass
class RunRecord:
    kind: str  # "profile", "verify", ...
    command: str  # as the user typed it
    command_key: str  # runs with the same key are runs of the same command
    status: str
    started_at: float  # Unix time
    script: str | None = None  # relative to the project root where it is inside it
    script_sha256: str | None = None
    verdict: str | None = None
    wall_seconds: float | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    host: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    id: int | None = None  # set once the run is in the history

    @property
    def saved_id(self) -> int:
        """The id of a run read from (or written to) the history."""
        assert self.id is not None, "a run from the history has an id"
        return self.id

    def figure(self, name: str) -> Figure | None:
        return next((f for f in self.figures if f.name == name), None)

    def chart(self, name: str) -> list[Series]:
        return [s for s in self.series if s.chart == name]


def _pack(values: list[float]) -> bytes:
    packed = array("d", values)
    if sys.byteorder == "big":  # stored little-endian, whatever wrote it
        packed.byteswap()
    return packed.tobytes()


def _unpack(blob: bytes) -> list[float]:
    values = array("d")
    values.frombytes(blob)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()


def _switch_to_wal(connection: sqlite3.Connection) -> None:
    """Put the database in write-ahead-log mode (readers never block the writer).  The switch takes
    an exclusive lock, and SQLite answers "database is locked" at once, without waiting out the
    busy timeout, when another process is creating or switching the same file: so retry here."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    pause = 0.01
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


@contextlib.contextmanager
def _opening(real: Path) -> Iterator[None]:
    """SQLite's refusal to open a file (not a database, cannot be read) as one HistoryError."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"cannot use {real} as the run history: {exc}") from exc


P = ParamSpec("P")
T = TypeVar("T")


def _reading(method: Callable[P, T]) -> Callable[P, T]:
    """A query of the history, held to QUERY_BUDGET_S: whatever a damaged or foreign database makes
    it meet (SQLite's errors, rows that do not decode, the deadline) is one HistoryError naming
    the file, not a traceback."""

    @functools.wraps(method)
    def read(*args: P.args, **kwargs: P.kwargs) -> T:
        history = args[0]
        assert isinstance(history, History)
        with history._bounded():
            try:
                return method(*args, **kwargs)
            except (sqlite3.Error, ValueError, TypeError) as exc:
                if history._overran:
                    raise history._too_slow() from exc
                raise HistoryError(
                    f"cannot read {history.path}: it is damaged or not a gpulint run history ({exc})"
                ) from exc

    return read


class History:
    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self.connection, self.path = connection, path
        self._deadline: float | None = None  # of the read under way (None: no read is)
        self._overran = False  # the progress handler stopped a read at its deadline

    @classmethod
    def open(cls, path: Path, create: bool = True, within: Path | None = None) -> History:
        """Open the database at `path` to record runs (`create`: made if absent, with a .gitignore
        in a folder named `.gpulint` so that the history is never committed), or read-only.
        `within`: the project folder the database must lie in (None: a file the user named).
        HistoryError, with one line for the user, when the place or the file is refused."""
        real = check_location(path, within, writing=create)
        exists = os.path.lexists(real)
        if not exists and not create:
            raise HistoryError(f"no history at {real} (profile or verify a script first)")
        if create and not exists:
            try:
                _make_place(real, within)
            except OSError as exc:
                raise HistoryError(f"cannot create the run history {real}: {exc.strerror or exc}") from exc
        with _opening(real):
            history = cls._connect(real, read_only=not create)
            try:
                if create:
                    version = history._version()
                    if version:  # a database already there: checked before anything is written to it
                        history._check_schema(version)
                    _switch_to_wal(history.connection)
                    history.connection.execute("PRAGMA foreign_keys=ON")
                    history._migrate()
                else:
                    history._check_readable()
            except BaseException:
                history.close()
                raise
        return history

    @classmethod
    def check(cls, path: Path, within: Path | None, writing: bool) -> None:
        """Refuse (HistoryError) what `open` would refuse, changing nothing: for a command that
        runs for minutes before it records or reads.  The place, and a database already there
        (opened read-only: another program's, a newer schema, damaged)."""
        if not writing:
            cls.open(path, create=False, within=within).close()
            return
        real = check_location(path, within, writing=True)
        if not os.path.lexists(real):
            return
        with _opening(real), cls._connect(real, read_only=True) as history:
            version = history._version()
            if version:
                history._check_schema(version)

    @classmethod
    def _connect(cls, real: Path, read_only: bool) -> History:
        """A connection bounded for a file from anywhere.  Read-only is SQLite's `mode=ro`, not
        `immutable=1`: an immutable database is read without its write-ahead log, which would hide
        the latest runs (and a run recorded meanwhile would be read half-written), and the log's
        pages pass the same checks as the file's."""
        if read_only:  # SQLite's read-only mode: no journal switch, no table, whatever is asked
            connection = sqlite3.connect(
                real.as_uri() + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None
            )
        else:
            connection = sqlite3.connect(real, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        history = cls(connection, real)
        try:
            history._bound(read_only)
        except BaseException:
            connection.close()
            raise
        return history

    def _bound(self, read_only: bool) -> None:
        connection = self.connection
        connection.set_progress_handler(self._past_deadline, PROGRESS_EVERY)
        if sys.version_info >= (3, 11):  # a longer text or blob, stored or computed, is an error
            connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        # SQL stored in the file may call only functions without side effects (_check_schema
        # refuses any SQL but gpulint's; this still holds for whatever a check may miss).
        connection.execute("PRAGMA trusted_schema = OFF")
        connection.execute("PRAGMA cell_size_check = ON")  # a damaged page is an error, found early
        if read_only:
            connection.execute("PRAGMA query_only = ON")

    def _past_deadline(self) -> bool:
        """SQLite's progress handler: True stops the statement under way (`interrupted`)."""
        if self._deadline is not None and time.monotonic() > self._deadline:
            self._overran = True
            return True
        return False

    @contextlib.contextmanager
    def _bounded(self) -> Iterator[None]:
        """Hold the reads inside to QUERY_BUDGET_S together (a read within a read shares the outer
        one's deadline); the deadline's stop is a HistoryError.  Writing is not bounded: a record
        waits out another writer (BUSY_TIMEOUT_S), and runs only gpulint's SQL."""
        if self._deadline is not None:
            yield
            return
        self._deadline, self._overran = time.monotonic() + QUERY_BUDGET_S, False
        try:
            yield
        except sqlite3.Error as exc:
            if self._overran:
                raise self._too_slow() from exc
            raise
        finally:
            self._deadline = None

    def _too_slow(self) -> HistoryError:
        return HistoryError(
            f"cannot read {self.path}: a query ran past {QUERY_BUDGET_S:g} s (gpulint's own history answers "
            "in milliseconds)"
        )

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self.connection.close()

    def _migrate(self) -> None:
        """Bring the database to SCHEMA_VERSION (`open` checked the schema of the version it held)."""
        if self._version() == SCHEMA_VERSION:
            return
        with self._transaction():
            version = self._version()  # another writer may have won
            if version == 0:
                self._execute_script(SCHEMA)
                version = 1
            else:
                self._check_schema(version)  # as that writer left it
            while version < SCHEMA_VERSION:
                self._execute_script(MIGRATIONS[version])
                version += 1
            self.connection.execute(f"PRAGMA user_version = {version}")
        self._check_schema(SCHEMA_VERSION)

    def _check_readable(self) -> None:
        """A database opened read-only: gpulint's current schema (it cannot be upgraded here)."""
        version = self._version()
        if version == 0:
            raise HistoryError(f"no run recorded in {self.path} yet")
        if version < SCHEMA_VERSION:
            raise HistoryError(
                f"{self.path} holds an older schema ({version}): record a run with this gpulint to upgrade it"
            )
        self._check_schema(SCHEMA_VERSION)

    def _version(self) -> int:
        """The schema version; HistoryError for a newer one, or for a database of another program
        (version 0, the SQLite default, with tables in it)."""
        # One statement, so one snapshot: read apart, a writer creating the schema (tables and
        # version in one transaction) could commit between them -- version 0 with tables in it.
        with self._bounded():
            version, objects = self.connection.execute(
                "SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_master)"
            ).fetchone()
        anything = version == 0 and objects
        if version > SCHEMA_VERSION:
            raise HistoryError(
                f"{self.path} was written by a newer gpulint (schema {version}, this one knows "
                f"{SCHEMA_VERSION}): upgrade gpulint or use another --history file"
            )
        if anything:
            raise HistoryError(f"{self.path} is not a gpulint run history (it holds tables gpulint did not create)")
        if version < 0:
            raise HistoryError(f"{self.path} is not a gpulint run history (schema version {version})")
        return version

    def _check_schema(self, version: int) -> None:
        """The schema is gpulint's, exactly: every table and index SCHEMA creates, with the SQL it
        creates it with, and nothing else -- no view, trigger, other table or index (a database
        of the right version but another shape would fail at its first query, or run SQL gpulint
        did not write).  Read from `sqlite_master` before any table is queried.  `version`: the
        schema version the database says it holds."""
        expected = _schema(version)[0]
        with self._bounded():
            found = self.connection.execute(
                "SELECT type, name, sql FROM sqlite_master LIMIT ?", (len(expected) + 1,)
            ).fetchall()
        stored = {}
        for kind, name, sql in found:
            if (kind, name) not in expected:
                shown = printable(str(name))
                article = "an" if kind == "index" else "a"
                self._not_ours(
                    f"it holds {article} {printable(str(kind))[:20]} {shown[:60]}, which gpulint does not create"
                )
            stored[kind, name] = sql
        for (kind, name), sql in expected.items():  # in SCHEMA's order: a table before its indexes
            if (kind, name) not in stored:
                self._not_ours(f"no {kind} {name}")
            if stored[kind, name] != sql:
                self._not_ours(self._differs(kind, name, version))

    def _differs(self, kind: str, name: str, version: int) -> str:
        """How the table or index `name` differs from gpulint's, as far as a pragma tells it."""
        if kind == "table":
            with self._bounded():
                columns = self.connection.execute(f"PRAGMA table_xinfo({name})").fetchall()
            generated = [str(row[1]) for row in columns if row[6] in (2, 3)]  # hidden 2, 3: generated
            if generated:
                return f"table {name} has a generated column {printable(generated[0])[:60]}"
            missing = sorted(_schema(version)[1][name] - {row[1] for row in columns})
            if missing:
                return f"table {name} lacks {', '.join(missing)}"
        return f"{kind} {name} is not defined as gpulint defines it"

    def _not_ours(self, what: str) -> None:
        raise HistoryError(f"{self.path} is not a gpulint run history ({what})")

    def _execute_script(self, script: str) -> None:
        """Statement by statement: executescript would commit the transaction it runs in."""
        for statement in script.split(";"):
            if statement.strip():
                self.connection.execute(statement)

    def _transaction(self):
        connection = self.connection

        class Transaction:
            def __enter__(self):
                connection.execute("BEGIN IMMEDIATE")

            def __exit__(self, kind, value, traceback):
                connection.execute("COMMIT" if kind is None else "ROLLBACK")

        return Transaction()

    # -- writing ---------------------------------------------------------------------------
    def record(self, run: RunRecord) -> int:
        """Store a run (figures and series included) in one transaction; returns its id."""
        try:
            run.id = self._insert(run)
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot record the run in {self.path}: {exc}") from exc
        return run.id

    def _insert(self, run: RunRecord) -> int:
        with self._transaction():
            cursor = self.connection.execute(
                "INSERT INTO runs (kind, command, command_key, script, script_sha256, status, verdict, started_at, "
                "wall_seconds, git_commit, git_dirty, host, environment, meta) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run.kind,
                    run.command,
                    run.command_key,
                    run.script,
                    run.script_sha256,
                    run.status,
                    run.verdict,
                    run.started_at,
                    run.wall_seconds,
                    run.git_commit,
                    None if run.git_dirty is None else int(run.git_dirty),
                    run.host,
                    json.dumps(run.environment, default=str),
                    json.dumps(run.meta, default=str),
                ),
            )
            run_id = cursor.lastrowid
            assert run_id is not None, "an INSERT sets lastrowid"
            self.connection.executemany(
                "INSERT INTO figures VALUES (?,?,?,?,?,?,?,?)",
                [
                    (run_id, i, f.name, _finite(f.value), f.unit, f.note, f.better, _finite(f.noise))
                    for i, f in enumerate(run.figures)
                ],
            )
            self.connection.executemany(
                "INSERT INTO series VALUES (?,?,?,?,?,?,?,?,?)",
                [
                    (run_id, i, s.name, s.label, s.chart, s.unit, s.x_unit, _pack(s.x), _pack(s.y))
                    for i, s in enumerate(run.series)
                ],
            )
        return run_id

    # -- reading ---------------------------------------------------------------------------
    @_reading
    def runs(
        self,
        script: str | None = None,
        kind: str | None = None,
        command_key: str | None = None,
        since: float | None = None,
        limit: int | None = None,
        before: int | None = None,
    ) -> list[RunRecord]:
        """Runs newest first, with their figures but not their series; `before`: ids below it.
        At most MAX_RUNS of them, whatever `limit` asks (None or negative: as many as that)."""
        where: list[str] = []
        values: list[str | float | int] = []
        for column, value in (("script", script), ("kind", kind), ("command_key", command_key)):
            if value is not None:
                where.append(f"{column} = ?")
                values.append(value)
        if since is not None:
            where.append("started_at >= ?")
            values.append(since)
        if before is not None:
            where.append("id < ?")
            values.append(before)
        sql = (
            f"SELECT {RUN_COLUMNS} FROM runs"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY id DESC LIMIT ?"
        )
        count = MAX_RUNS if limit is None or limit < 0 else min(int(limit), MAX_RUNS)
        rows = self.connection.execute(sql, [*values, count]).fetchall()
        runs = [self._run(row) for row in rows]
        self._attach_figures(runs)
        return runs

    @_reading
    def job_runs(self, job_id: str) -> list[RunRecord]:
        """The profiles recorded for the nodes of the multi-node job `job_id` (meta's `job`, see
        nodes.py), oldest first, with their figures but not their series."""
        rows = self.connection.execute(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE kind = 'profile' AND instr(meta, ?) > 0 ORDER BY id LIMIT ?",
            (job_id, MAX_RUNS + 1),
        ).fetchall()
        if len(rows) > MAX_RUNS:
            raise ValueError(f"more than {MAX_RUNS} runs mention job {job_id}")
        runs = [
            run
            for run in map(self._run, rows)
            if isinstance(job := run.meta.get("job"), dict) and job.get("id") == job_id
        ]
        self._attach_figures(runs)
        return runs

    @_reading
    def load(self, run_id: int) -> RunRecord:
        row = self.connection.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise HistoryError(f"no run {run_id} in {self.path}")
        run = self._run(row)
        self._attach_figures([run])
        for count, row in enumerate(
            self.connection.execute(
                "SELECT name, label, chart, unit, x_unit, x, y FROM series WHERE run_id = ? ORDER BY position LIMIT ?",
                (run_id, MAX_PARTS + 1),
            )
        ):
            if count == MAX_PARTS:
                raise ValueError(f"run {run_id} has more than {MAX_PARTS} series")
            name, label, chart, unit, x_unit, x, y = row
            for text in (name, label, chart, unit, x_unit):
                _expect("series name, label or unit", text, str)
            series = Series(name, label, chart, unit, x_unit, _unpack(x), _unpack(y))
            if len(series.x) != len(series.y):
                raise ValueError(f"series {series.name} has {len(series.x)} x and {len(series.y)} y values")
            run.series.append(series)
        return run

    @_reading
    def resolve(self, ref: str, like: RunRecord | None = None, repository: Path | None = None) -> RunRecord:
        """The run `ref` names: a run id; `last`, the latest run of the same command as `like`
        (before it, when it is recorded); or a git ref of `repository` (default: the working
        folder's), the latest run of that command at that commit (a clean tree preferred)."""
        if ref.isdigit():
            return self.load(int(ref))
        if ref == "last":
            if like is None:
                latest = self.runs(limit=1)
                if not latest:
                    raise HistoryError(f"no run recorded in {self.path} yet")
                return self.load(latest[0].saved_id)
            found = self.runs(command_key=like.command_key, limit=1, before=like.id)
            if not found:
                raise NoEarlierRun(f"no earlier run of `{like.command}` in {self.path}")
            return self.load(found[0].saved_id)
        commit = git_commit_of(ref, repository or Path.cwd())
        if commit is None:
            raise HistoryError(f"{ref!r} is neither a run id, `last`, nor a git commit")
        sql = "SELECT id FROM runs WHERE git_commit = ?"
        values: list[Any] = [commit]
        if like is not None:
            sql += " AND command_key = ? AND id != ?"
            values += [like.command_key, like.id or -1]
        row = self.connection.execute(sql + " ORDER BY git_dirty ASC, id DESC LIMIT 1", values).fetchone()
        if row is None:
            what = f"of `{like.command}` " if like is not None else ""
            raise HistoryError(f"no run {what}recorded at {ref} ({commit[:12]}) in {self.path}")
        return self.load(row[0])

    def _run(self, row: tuple) -> RunRecord:
        """A row of `runs` (RUN_COLUMNS), its types checked: a crafted row must fail here, in the
        query, not later in a report."""
        (
            run_id,
            kind,
            command,
            command_key,
            script,
            sha,
            status,
            verdict,
            started_at,
            wall,
            commit,
            dirty,
            host,
            environment,
            meta,
        ) = row
        _expect("id", run_id, int)
        for text in (kind, command, command_key, status):
            _expect("kind, command or status", text, str)
        _expect("started_at", started_at, (int, float))
        for optional_text in (script, sha, verdict, commit, host):
            _expect("script, verdict, commit or host", optional_text, str, optional=True)
        _expect("wall_seconds", wall, (int, float), optional=True)
        _expect("git_dirty", dirty, int, optional=True)
        return RunRecord(
            kind,
            command,
            command_key,
            status,
            started_at,
            script,
            sha,
            verdict,
            wall,
            commit,
            None if dirty is None else bool(dirty),
            host,
            _json_object("environment", environment),
            meta=_json_object("meta", meta),
            id=run_id,
        )

    def _attach_figures(self, runs: list[RunRecord]) -> None:
        by_id = {run.id: run for run in runs}
        if not by_id:
            return
        marks = ",".join("?" * len(by_id))
        for run_id, name, value, unit, note, better, noise in self.connection.execute(
            f"SELECT run_id, name, value, unit, note, better, noise FROM figures WHERE run_id IN ({marks}) "
            "ORDER BY run_id, position",
            list(by_id),
        ):
            for text in (name, unit, note):
                _expect("figure name, unit or note", text, str)
            for number in (value, noise):
                _expect("figure value or noise", number, (int, float), optional=True)
            _expect("figure better", better, str, optional=True)
            figures = by_id[run_id].figures
            if len(figures) == MAX_PARTS:
                raise ValueError(f"run {run_id} has more than {MAX_PARTS} figures")
            figures.append(Figure(name, value, unit, note, better, noise))


def _expect(name: str, value: Any, kinds: type | tuple[type, ...], optional: bool = False) -> Any:
    """`value`, when it is of `kinds` (or None, when `optional`); else ValueError (a query reports
    it as a damaged history)."""
    if not (isinstance(value, kinds) or optional and value is None):
        raise ValueError(f"{name} holds {type(value).__name__}")
    return value


def _json_object(name: str, text: Any) -> dict[str, Any]:
    """A stored JSON object (ValueError for anything else, JSON nested deeper than gpulint writes
    included)."""
    _expect(name, text, str)
    try:
        return _expect(name, load_json(text), dict)
    except ShapeError as exc:
        raise ValueError(f"{name} is {exc}") from None


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


# -- where the history lives ----------------------------------------------------------------
def project_root(start: Path) -> Path:
    """The nearest folder from `start` up that holds pyproject.toml or .git; else `start`."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / "pyproject.toml").is_file() or (folder / ".git").exists():
            return folder
    return start


def history_path(start: Path, override: Path | None = None) -> Path | None:
    """The database for runs started from `start` (the script's folder, or the working folder):
    `override`; else `history` in the nearest [tool.gpulint] (a path relative to that file, or
    false for none); else .gpulint/history.db at the project root.  None: history is off."""
    location = history_location(start, override)
    return None if location is None else location[0]


def history_location(start: Path, override: Path | None = None) -> tuple[Path, Path | None] | None:
    """(the database, the project folder it must lie in) for runs started from `start`, as
    history_path chooses it; the folder is None for a file named with --history (the user's
    choice, as a folder named on the command line is followed).  None: history is off."""
    if override is not None:
        return override, None
    from gpulint.linter.config import find_config, load_settings

    config = find_config(start)
    if config is not None:
        setting = load_settings(config).history
        if setting is False:
            return None
        if isinstance(setting, str):
            return config.parent / setting, config.parent
    root = project_root(start)
    return root / DEFAULT_FOLDER / DEFAULT_NAME, root


def check_location(path: Path, within: Path | None, writing: bool) -> Path:
    """The real path of the database at `path`, when gpulint may use it; HistoryError otherwise.

    Refused: a symbolic link anywhere between `within` (the project) and the database, a path
    that leaves `within`, a database, .gitignore (in a `.gpulint` folder) or SQLite file beside
    it that is a link or not a regular file, and for `writing` a database marked read-only.
    Nothing is followed, created or opened; a few lstat calls."""
    if within is None:  # a file the user named: its folders are followed, the file itself is not
        named = Path(os.path.abspath(path))
        _refuse_link(named)
        real = Path(os.path.realpath(named.parent)) / named.name
    else:
        project = Path(os.path.realpath(within))
        real = Path(os.path.normpath(project / path))  # `project / path` is `path` when it is absolute
        relative = Path(os.path.relpath(real, project))
        if real == project or relative.parts[0] == os.pardir:
            raise HistoryError(
                f"the run history {real} is outside the project {project}: gpulint keeps it inside the "
                "project (name a file elsewhere with --history)"
            )
        folder = project
        for part in relative.parts[:-1]:
            folder = folder / part
            info = _refuse_link(folder)
            if info is None:
                break
            if not stat.S_ISDIR(info.st_mode):
                raise HistoryError(
                    f"{folder} is {kind_of(info.st_mode)}, not a folder: the run history cannot be kept in it"
                )
    beside = [real.with_name(real.name + suffix) for suffix in SIDECARS]
    if real.parent.name == DEFAULT_FOLDER:
        beside.append(real.parent / ".gitignore")
    for file in (real, *beside):
        info = _refuse_link(file)
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise HistoryError(f"{file} is {kind_of(info.st_mode)}, not a file of gpulint's run history")
    if writing:
        try:
            info = os.stat(real)
        except FileNotFoundError:
            return real
        except OSError as exc:
            raise HistoryError(f"cannot use {real} as the run history: {exc.strerror or exc}") from exc
        if is_read_only(real, info):
            raise HistoryError(f"{real} is read-only: gpulint does not record runs in a read-only history")
    return real


def _refuse_link(path: Path) -> os.stat_result | None:
    """lstat of `path` (None when absent); HistoryError when it is a symbolic link."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise HistoryError(f"cannot use {path} for the run history: {exc.strerror or exc}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise HistoryError(
            f"{path} is a symbolic link (to {os.path.realpath(path)}): gpulint does not keep its run "
            "history through a link"
        )
    return info


def _make_place(real: Path, within: Path | None) -> None:
    """Create the folders down to a new database (never through a link: check_location found
    none, make_real_dir refuses one that appeared since), a .gitignore in a `.gpulint` folder, and
    the empty database file itself, so that SQLite opens a file gpulint made instead of creating
    one where a link points."""
    if within is None:
        real.parent.mkdir(parents=True, exist_ok=True)
    else:
        project = Path(os.path.realpath(within))
        folder = project
        for part in real.parent.relative_to(project).parts:
            folder = folder / part
            make_real_dir(folder)
    if real.parent.name == DEFAULT_FOLDER:
        try:
            create_new_file(real.parent / ".gitignore", GITIGNORE.encode())
        except FileExistsError:
            pass
    try:
        create_new_file(real, b"")
    except FileExistsError:
        pass  # another process created it meanwhile (check_location found no link)


def _schema(version: int) -> tuple[dict[tuple[str, str], str | None], dict[str, frozenset[str]]]:
    """What a history of schema `version` must hold, as SQLite itself stores it: {(type, name):
    sql} of every object, in the order they are made (SQLite's own table of AUTOINCREMENT counters
    and the indexes of primary keys, which have no SQL, included), and {table: its columns}."""
    return _made_by((SCHEMA, *(MIGRATIONS[v] for v in range(1, version))))


@functools.cache
def _made_by(scripts: tuple[str, ...]) -> tuple[dict[tuple[str, str], str | None], dict[str, frozenset[str]]]:
    """The schema an in-memory database holds once `scripts` ran in it (see _schema)."""
    memory = sqlite3.connect(":memory:")
    try:
        for script in scripts:
            for statement in script.split(";"):
                if statement.strip():
                    memory.execute(statement)
        rows = memory.execute("SELECT type, name, sql FROM sqlite_master ORDER BY rowid").fetchall()
        objects = {(kind, name): sql for kind, name, sql in rows}
        columns = {
            name: frozenset(row[1] for row in memory.execute(f"PRAGMA table_info({name})"))
            for kind, name in objects
            if kind == "table"
        }
    finally:
        memory.close()
    return objects, columns


# -- git and times ---------------------------------------------------------------------------
def _git(folder: Path, *args: str) -> str | None:
    from gpulint.child_processes import GitRefused, run_git

    try:
        done = run_git(args, folder, timeout=10)
    except (OSError, subprocess.SubprocessError, GitRefused):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(folder: Path) -> tuple[str | None, bool | None]:
    """(HEAD commit, whether tracked files differ from it) of the repository holding `folder`."""
    commit = _git(folder, "rev-parse", "HEAD")
    if commit is None:
        return None, None
    status = _git(folder, "status", "--porcelain", "--untracked-files=no")
    return commit, None if status is None else bool(status)


def git_commit_of(ref: str, folder: Path) -> str | None:
    if ref.startswith("-"):
        return None
    return _git(folder, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")


def parse_since(text: str, now: float | None = None) -> float:
    """`7d`, `12h`, `30m` ago, or an ISO date/time (local time unless it says otherwise)."""
    now = time.time() if now is None else now
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([dhm])", text.strip())
    if match:
        unit = {"d": 86400, "h": 3600, "m": 60}[match.group(2)]
        return now - float(match.group(1)) * unit
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise HistoryError(f"--since wants 7d, 12h, 30m or a date like 2024-05-01, not {text!r}") from None
    return moment.timestamp() if moment.tzinfo else moment.astimezone().timestamp()


def when(started_at: float) -> str:
    """A run's start in local time, to the second."""
    return datetime.fromtimestamp(started_at).strftime("%Y-%m-%d %H:%M:%S")


def iso(started_at: float) -> str:
    return datetime.fromtimestamp(started_at, timezone.utc).isoformat(timespec="seconds")
