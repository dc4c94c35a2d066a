"""A cache of per-file results, so a run over an unchanged tree parses nothing.

An entry is keyed by everything that can change a file's result:

* the file's bytes (a hash of them) and its path (findings carry the path, per-file ignores match it);
* what the project index told the module about the rest of the project (the digest of its view:
  analysis/project.py), so editing a helper module re-lints the modules whose view it changes;
* the effective configuration (`Settings.fingerprint()`) and the run options that change results
  (fix, diff, unsafe fixes, edits attached);
* gpulint itself: its version and a fingerprint of its engine and rule modules (size and
  modification time of each), so an edited rule in a development checkout never serves stale results; and the libcst
  and Python versions, which decide what parses.

Each entry is one small file `<dir>/v1/<2 hex>/<38 hex>` holding JSON: a schema version, the full
key and the outcome (or a module's project-index summary, keyed by its bytes alone) as plain data
(`datajson`), never a pickle, so an entry written by someone else (a CI cache restored from a less
trusted job) can at worst be wrong, never run code.  An entry that
is truncated, corrupt, of the wrong shape, for another file, or not a regular file is a miss, never
an error.  Writes go to a temporary file in the same folder and are renamed into place, so two runs
sharing a cache never see half an entry.  The cache is bounded: after a run that wrote entries, the
oldest (by modification time; a hit refreshes it now and then) are deleted until the total is
under the cap.

The cache folder may arrive with the repository (git stores symbolic links), so the cache deletes
only what it could have written: regular files of its own name pattern, in real (not linked)
folders of its own layout, found and deleted without following a link.  A cache folder that is a
symbolic link or holds anything else (`--cache-dir .` in a project) is refused with a message and
the run goes on without a cache.  Outcomes that report a problem with the file (unreadable, a fix
that did not apply) are not cached; nor are results of `--fix` runs that changed a file, since the
result then belongs to the new content, not the hashed one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
import sys
import time
from pathlib import Path

from gpulint import __version__
from gpulint.linter.run.datajson import from_data, load_json, to_data
from gpulint.linter.run.outcome import FileOutcome
from gpulint.linter.run.safe_files import O_NOFOLLOW, create_new_file, make_real_dir

CACHE_DIR_NAME = ".gpulint_cache"
LAYOUT = "v1"
# The version of an entry's JSON; an entry of another version is a miss.
SCHEMA = 3
DEFAULT_MAX_BYTES = 64 * 2**20
# An entry larger than this was not written by gpulint (a finding is a few hundred bytes); it is a
# miss and is not read.
MAX_ENTRY_BYTES = 8 * 2**20
# A hit rewrites its entry's mtime (the eviction order) only when it is older than this, so a warm
# run does not turn every read into a metadata write.
_TOUCH_AFTER_S = 3600.0
# What the cache folder may hold, and the names of what the cache writes.
_MARKER_FILES = (".gitignore", "CACHEDIR.TAG")
_SHARD = re.compile(r"^[0-9a-f]{2}$")
_ENTRY = re.compile(r"^[0-9a-f]{38}$")
_TEMPORARY = re.compile(r"^\.tmp-[A-Za-z0-9_]+$")
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)

_code_fingerprint: str | None = None


def gpulint_fingerprint() -> str:
    """gpulint's version, the size and mtime of every module of its engine and rules, and the
    versions of what decides parsing (computed once per process: a few dozen stat calls)."""
    global _code_fingerprint
    if _code_fingerprint is None:
        package = Path(__file__).resolve().parents[2]
        digest = hashlib.sha256(f"{__version__}|{sys.version}|{installed_version('libcst')}".encode())
        # The code that decides a file's result: the engine and the rules (not the runtime checker
        # or the review bot, whose edits must not throw the cache away).
        sources = [*sorted((package / "linter").rglob("*.py")), *sorted((package / "rules").rglob("*.py"))]
        for path in sources:
            try:
                info = path.stat()
            except OSError:
                continue
            digest.update(f"{path.relative_to(package)}:{info.st_size}:{info.st_mtime_ns}\n".encode())
        _code_fingerprint = digest.hexdigest()
    return _code_fingerprint


def installed_version(package: str) -> str:
    """The version of an installed package, from the name of the `<name>-<version>.dist-info`
    folder its installer wrote beside it ("" when there is none), without importing it.  (Asking
    importlib.metadata costs every cached run its import and a scan of every distribution on
    the path: hundreds in an environment with torch and TensorFlow.)"""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return ""
    where = Path(spec.origin).parent.parent
    prefix = f"{package}-"
    try:
        names = os.listdir(where)
    except OSError:
        return ""
    found = sorted(
        n[len(prefix) : -len(".dist-info")] for n in names if n.startswith(prefix) and n.endswith(".dist-info")
    )
    return ",".join(found)


def _run_key(options_key: str, settings_fingerprint: str) -> str:
    return hashlib.sha256(f"{options_key}|{settings_fingerprint}".encode()).hexdigest()


def content_hash(source: bytes) -> str:
    return hashlib.blake2b(source, digest_size=20).hexdigest()


class ResultCache:
    """Per-file outcomes under `directory` for one (settings, options, gpulint) combination."""

    def __init__(
        self, directory: Path, run_key: str, max_bytes: int = DEFAULT_MAX_BYTES, options_key: str = ""
    ) -> None:
        self.directory = Path(directory)
        self.run_key = run_key
        self.max_bytes = max_bytes
        self.options_key = options_key  # gpulint and the run options, without the settings (for_settings)
        self.writes = 0  # entries written by this process (decides whether to check the size)
        self.hits = 0

    @classmethod
    def for_run(
        cls, directory: Path, settings_fingerprint: str, options, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> ResultCache:
        """A cache whose keys include the configuration, the result-changing run options and gpulint."""
        # Every field of the run options (fix, diff, unsafe fixes, edits, and any added later) but
        # those that declare they do not change results: a new option must not be served results
        # computed without it.
        fields = {
            f.name: getattr(options, f.name)
            for f in dataclasses.fields(options)
            if f.metadata.get("changes_results", True)
        }
        options_key = f"{gpulint_fingerprint()}|{sorted(fields.items())!r}"
        return cls(directory, _run_key(options_key, settings_fingerprint), max_bytes, options_key)

    def for_settings(self, settings_fingerprint: str) -> ResultCache:
        """The same cache folder for a run's files linted with other settings (another project's
        configuration): the same options, keys of those settings."""
        return ResultCache(
            self.directory, _run_key(self.options_key, settings_fingerprint), self.max_bytes, self.options_key
        )

    def unusable_reason(self) -> str | None:
        """Why the folder cannot serve as gpulint's cache (None: it can, or does not exist yet).
        Checks the folder, its markers and the layout's shard folders, without following links."""
        where = self.directory
        try:
            info = os.lstat(where)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"cache folder {where}: {exc.strerror or exc}"
        if stat.S_ISLNK(info.st_mode):
            return f"cache folder {where} is a symbolic link; not used"
        if not stat.S_ISDIR(info.st_mode):
            return f"cache folder {where} is not a folder; not used"
        try:
            entries = {entry.name: entry.stat(follow_symlinks=False).st_mode for entry in os.scandir(where)}
            layout = entries.get(LAYOUT)
            shards = list(os.scandir(where / LAYOUT)) if layout is not None and stat.S_ISDIR(layout) else []
            shard_modes = {entry.name: entry.stat(follow_symlinks=False).st_mode for entry in shards}
        except OSError as exc:
            return f"cache folder {where}: {exc.strerror or exc}"
        foreign = sorted(
            name
            for name, mode in entries.items()
            if not (name in _MARKER_FILES and stat.S_ISREG(mode) or name == LAYOUT and stat.S_ISDIR(mode))
        )
        foreign += sorted(
            f"{LAYOUT}/{name}" for name, mode in shard_modes.items() if not (_SHARD.match(name) and stat.S_ISDIR(mode))
        )
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            return f"cache folder {where} holds files gpulint did not write ({shown}); not used"
        return None

    # -- keys and entries ----------------------------------------------------------------------
    def key(self, path: Path, name: str, source_hash: str, project_digest: str = "") -> str:
        """The key of a file's outcome: its path, its bytes, and what the project index told it
        (`ModuleView.digest()`, "" when nothing), so a change elsewhere in the project that changes
        what a module is told is a miss for that module alone."""
        where = os.path.abspath(path)
        text = f"{self.run_key}|{where}|{name}|{source_hash}|{project_digest}"
        return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()  # names need not be UTF-8

    def summary_key(self, dotted: str, package: bool, source_hash: str, max_nodes: int | None = None) -> str:
        """The key of a module's project-index summary: its bytes, its dotted name (relative
        imports resolve from it) and the budget of syntax nodes it was summarized under (over it,
        it has none); no other settings, which do not change a summary."""
        text = f"summary|{gpulint_fingerprint()}|{dotted}|{package}|{source_hash}|{max_nodes}"
        return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()

    def _entry(self, key: str) -> Path:
        return self.directory / LAYOUT / key[:2] / key[2:40]

    def get(self, key: str, name: str | None = None):
        """The stored outcome, or None for a miss: absent, unreadable, not a regular file, too
        large, not JSON, another schema or key, a shape that does not rebuild, or (when `name` is
        given) findings about another file."""
        try:
            outcome = from_data(FileOutcome, self._load(key)["outcome"])
        except Exception:  # noqa: BLE001 - whatever an entry holds, a bad one is a miss
            return None
        if name is not None and not _about(outcome, name):
            return None
        self.hits += 1
        self._touch(self._entry(key))
        return outcome

    def put(self, key: str, outcome) -> None:
        """Store an outcome atomically; a cache that cannot be written is silently skipped (the
        run's results do not depend on it)."""
        self._store(key, "outcome", to_data(outcome))

    def get_summary(self, key: str):
        """(True, the stored project-index summary: analysis/project.py ModuleSummary, or None for
        a module that has none -- it does not parse, or is over its budget), or (False, None) for a
        miss (as for outcomes: whatever a bad entry holds, it is a miss)."""
        from gpulint.linter.analysis.project import ModuleSummary

        try:
            data = self._load(key)["summary"]
            summary = ModuleSummary.from_data(data) if data is not None else None
        except Exception:  # noqa: BLE001
            return False, None
        if summary is None and data is not None:
            return False, None
        self._touch(self._entry(key))
        return True, summary

    def put_summary(self, key: str, summary) -> None:
        """Store a module's summary, or None: that it has none (re-parsing a module over its budget
        on every run would cost what the budget saves)."""
        self._store(key, "summary", summary.to_data() if summary is not None else None)

    def index_key(self, max_nodes: int | None, paths: list[str], context: str = "") -> str:
        """The key of a run's project index: gpulint, the node budget, `context` (what else the
        views depend on), and the files it reads first (the run's own files and their projects'),
        by path: their bytes are checked against the entry's rows (run/stamps.py), not keyed, so
        an edited file finds the index it changes and the summaries it is compared with."""
        listing = "\n".join(paths)
        text = f"index|{gpulint_fingerprint()}|{max_nodes}|{context}|{listing}"
        return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()

    def get_index(self, key: str) -> dict | None:
        """A stored project index's result: {"views": {resolved path: ModuleView} of the run's own
        files (those with something to say), "rows": {path: [size, mtime_ns, inode, ctime_ns,
        content hash, summary key]} of every file the index read (run/stamps.py)}; None for a miss
        or a bad entry."""
        from gpulint.linter.analysis.project import ModuleView

        try:
            stored = self._load(key)["index"]
            views = {_string(path): ModuleView.from_data(data) for path, data in stored["views"].items()}
            rows = stored["rows"]
            shaped = all(isinstance(path, str) and _is_row(row) for path, row in rows.items())
        except Exception:  # noqa: BLE001 - whatever an entry holds, a bad one is a miss
            return None
        if not shaped:
            return None
        self._touch(self._entry(key))
        return {"views": views, "rows": rows}

    def put_index(self, key: str, views: dict, rows: dict[str, list]) -> None:
        """Store a run's project index: `views` {resolved path: ModuleView}, `rows` as above."""
        self._store(key, "index", {"views": {path: view.to_data() for path, view in views.items()}, "rows": rows})

    def _load(self, key: str) -> dict:
        """An entry's document (raises on anything that is not one of ours for `key`)."""
        document = load_json(_read_entry(self._entry(key)))
        if document.get("schema") != SCHEMA or document.get("key") != key:
            raise ValueError("another entry")
        return document

    def _store(self, key: str, part: str, value) -> None:
        import tempfile  # (here: a run with --no-cache never writes an entry)

        entry = self._entry(key)
        document = {"schema": SCHEMA, "key": key, part: value}
        data = json.dumps(document, separators=(",", ":")).encode("utf-8")
        try:
            self._prepare()
            make_real_dir(entry.parent)
            fd, temporary = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(temporary, entry)
            except BaseException:
                _unlink(Path(temporary))
                raise
        except OSError:
            return
        self.writes += 1

    def _prepare(self) -> None:
        """Create the cache folder and its layout folder, and a .gitignore and a CACHEDIR.TAG so
        neither git nor backup tools pick it up (also in a folder whose layout already exists)."""
        make_real_dir(self.directory)
        make_real_dir(self.directory / LAYOUT)
        for name, text in (
            (".gitignore", "# Created by gpulint: the whole folder is a cache.\n*\n"),
            ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# gpulint result cache\n"),
        ):
            try:
                create_new_file(self.directory / name, text.encode("utf-8"))
            except OSError:
                continue

    @staticmethod
    def _touch(entry: Path) -> None:
        try:
            if time.time() - os.lstat(entry).st_mtime > _TOUCH_AFTER_S:
                os.utime(entry, follow_symlinks=False)
        except (OSError, NotImplementedError):
            pass

    # -- size bound ----------------------------------------------------------------------------
    def size(self) -> tuple[int, list[tuple[float, int, Path]]]:
        """Total bytes of the entries, and (mtime, size, path) of each: regular files of the
        entry (or temporary) name pattern in real shard folders; nothing behind a link counts."""
        entries: list[tuple[float, int, Path]] = []
        total = 0
        layout = self.directory / LAYOUT
        if self.unusable_reason() is not None:
            return 0, entries
        try:
            shards = [s for s in os.scandir(layout) if _SHARD.match(s.name) and s.is_dir(follow_symlinks=False)]
        except OSError:
            return 0, entries
        now = time.time()
        for shard in shards:
            try:
                files = list(os.scandir(shard.path))
            except OSError:
                continue
            for item in files:
                temporary = _TEMPORARY.match(item.name)
                if not (temporary or _ENTRY.match(item.name)):
                    continue  # not ours: never counted, never deleted
                try:
                    info = item.stat(follow_symlinks=False)
                except OSError:
                    continue  # removed by a concurrent run
                if not stat.S_ISREG(info.st_mode):
                    continue
                if temporary and now - info.st_mtime < 600:
                    continue  # another run's write in progress
                entries.append((info.st_mtime, info.st_size, Path(item.path)))
                total += info.st_size
        return total, entries

    def evict(self) -> int:
        """Delete the oldest entries until the total is under 80% of the cap (so the scan is not
        repeated on every run near the limit).  Returns how many were deleted."""
        total, entries = self.size()
        if total <= self.max_bytes:
            return 0
        target = int(self.max_bytes * 0.8)
        removed = 0
        for _mtime, size, path in sorted(entries, key=lambda e: e[0]):
            if total <= target:
                break
            if _unlink_entry(self.directory / LAYOUT, path):
                total -= size
                removed += 1
        return removed


def _read_entry(entry: Path) -> bytes:
    """An entry's bytes: a regular file, not a link, at most MAX_ENTRY_BYTES (OSError otherwise)."""
    fd = os.open(entry, os.O_RDONLY | O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
            raise OSError("not a cache entry")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(MAX_ENTRY_BYTES + 1)
    finally:
        os.close(fd)


def _string(value) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def _is_row(row) -> bool:
    """A file's row in an index entry: four integers of stat data, then two strings."""
    return (
        isinstance(row, list)
        and len(row) == 6
        and all(type(value) is int for value in row[:4])
        and all(isinstance(value, str) for value in row[4:])
    )


def _about(outcome, name: str) -> bool:
    """Whether a stored outcome speaks of the file it is looked up for (a crafted entry must not
    make reporters read or name another file)."""
    result = outcome.result
    return result.path == name and all(f.path == name for f in result.findings)


def _unlink_entry(layout: Path, path: Path) -> bool:
    """Delete one entry found by `size()`: through a descriptor of its shard folder opened without
    following links, and only if it still is a regular file of our name pattern."""
    if not (_ENTRY.match(path.name) or _TEMPORARY.match(path.name)) or not _SHARD.match(path.parent.name):
        return False
    if os.unlink not in os.supports_dir_fd:  # no descriptor-relative calls here: check, then delete
        try:
            if stat.S_ISREG(os.lstat(path).st_mode) and not os.path.islink(path.parent):
                os.unlink(path)
                return True
        except OSError:
            pass
        return False
    try:
        layout_fd = os.open(layout, os.O_RDONLY | _DIRECTORY | O_NOFOLLOW)
    except OSError:
        return False
    try:
        shard_fd = os.open(path.parent.name, os.O_RDONLY | _DIRECTORY | O_NOFOLLOW, dir_fd=layout_fd)
        try:
            if not stat.S_ISREG(os.stat(path.name, dir_fd=shard_fd, follow_symlinks=False).st_mode):
                return False
            os.unlink(path.name, dir_fd=shard_fd)
            return True
        finally:
            os.close(shard_fd)
    except OSError:
        return False
    finally:
        os.close(layout_fd)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def default_cache_dir(root: Path) -> Path:
    """`.gpulint_cache/` in the project root: the config file's folder, or the working directory."""
    return Path(root) / CACHE_DIR_NAME
