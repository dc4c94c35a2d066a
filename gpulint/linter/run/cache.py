"""A cache of per-file results, so a run over an unchanged tree parses nothing.

An entry is keyed by everything that can change a file's result:

* the file's bytes (a hash of them) and its path (findings carry the path, per-file ignores match it);
* the effective configuration (`Settings.fingerprint()`) and the run options that change results
  (fix, diff, unsafe fixes, edits attached);
* gpulint itself: its version and a fingerprint of its engine and rule modules (size and
  modification time of each), so an edited rule in a development checkout never serves stale results; and the libcst
  and Python versions, which decide what parses.

Each entry is one small file `<dir>/v1/<2 hex>/<38 hex>` holding a magic header, a SHA-256 of the
payload and the pickled outcome.  Writes go to a temporary file in the same folder and are renamed
into place, so two runs sharing a cache never see half an entry; an entry that is truncated,
corrupt or unreadable is a miss, never an error.  The cache is bounded: after a run that wrote
entries, the oldest (by modification time; a hit refreshes it now and then) are deleted until the
total is under the cap.

The cache holds pickles, so it must be trusted like the source tree it sits in (it lives in the
project folder and is written by the user's own runs).  Outcomes that report a problem with the file
(unreadable, a fix that did not apply) are not cached; nor are results of `--fix` runs that
changed a file, since the result then belongs to the new content, not the hashed one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

from gpulint import __version__

CACHE_DIR_NAME = ".gpulint_cache"
LAYOUT = "v1"
MAGIC = b"GLC1"
DEFAULT_MAX_BYTES = 64 * 2**20
# A hit rewrites its entry's mtime (the eviction order) only when it is older than this, so a warm
# run does not turn every read into a metadata write.
_TOUCH_AFTER_S = 3600.0

_code_fingerprint: str | None = None


def gpulint_fingerprint() -> str:
    """gpulint's version, the size and mtime of every module of its engine and rules, and the
    versions of what decides parsing (computed once per process: a few dozen stat calls)."""
    global _code_fingerprint
    if _code_fingerprint is None:
        import libcst

        package = Path(__file__).resolve().parents[2]
        digest = hashlib.sha256(f"{__version__}|{sys.version}|{getattr(libcst, '__version__', '')}".encode())
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


def content_hash(source: bytes) -> str:
    return hashlib.blake2b(source, digest_size=20).hexdigest()


class ResultCache:
    """Per-file outcomes under `directory` for one (settings, options, gpulint) combination."""

    def __init__(self, directory: Path, run_key: str, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.directory = Path(directory)
        self.run_key = run_key
        self.max_bytes = max_bytes
        self.writes = 0  # entries written by this process (decides whether to check the size)
        self.hits = 0

    @classmethod
    def for_run(cls, directory: Path, settings_fingerprint: str, options, max_bytes: int = DEFAULT_MAX_BYTES) -> "ResultCache":
        """A cache whose keys include the configuration, the result-changing run options and gpulint."""
        # Every field of the run options (fix, diff, unsafe fixes, edits, and any added later):
        # a new option must not be served results computed without it.
        parts = [gpulint_fingerprint(), settings_fingerprint, repr(sorted(dataclasses.asdict(options).items()))]
        return cls(directory, hashlib.sha256("|".join(parts).encode()).hexdigest(), max_bytes)

    # -- keys and entries ----------------------------------------------------------------------
    def key(self, path: Path, name: str, source_hash: str) -> str:
        where = os.path.abspath(path)
        return hashlib.sha256(f"{self.run_key}|{where}|{name}|{source_hash}".encode()).hexdigest()

    def _entry(self, key: str) -> Path:
        return self.directory / LAYOUT / key[:2] / key[2:40]

    def get(self, key: str):
        """The stored outcome, or None for a miss (absent, truncated, corrupt or unreadable)."""
        entry = self._entry(key)
        try:
            with open(entry, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        if len(data) < len(MAGIC) + 32 or not data.startswith(MAGIC):
            return None
        digest, payload = data[len(MAGIC) : len(MAGIC) + 32], data[len(MAGIC) + 32 :]
        if hashlib.sha256(payload).digest() != digest:
            return None
        try:
            outcome = pickle.loads(payload)
        except Exception:  # noqa: BLE001 - an entry from an incompatible build is just a miss
            return None
        self.hits += 1
        self._touch(entry)
        return outcome

    def put(self, key: str, outcome) -> None:
        """Store an outcome atomically; a cache that cannot be written is silently skipped (the
        run's results do not depend on it)."""
        entry = self._entry(key)
        payload = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        data = MAGIC + hashlib.sha256(payload).digest() + payload
        try:
            self._prepare()
            entry.parent.mkdir(exist_ok=True)
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
        """Create the cache folder, with a .gitignore and a CACHEDIR.TAG so neither git nor backup
        tools pick it up."""
        layout = self.directory / LAYOUT
        if layout.is_dir():
            return
        layout.mkdir(parents=True, exist_ok=True)
        for name, text in (
            (".gitignore", "# Created by gpulint: the whole folder is a cache.\n*\n"),
            ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# gpulint result cache\n"),
        ):
            target = self.directory / name
            if not target.exists():
                try:
                    target.write_text(text, encoding="utf-8")
                except OSError:
                    pass

    @staticmethod
    def _touch(entry: Path) -> None:
        try:
            if time.time() - entry.stat().st_mtime > _TOUCH_AFTER_S:
                os.utime(entry)
        except OSError:
            pass

    # -- size bound ----------------------------------------------------------------------------
    def size(self) -> tuple[int, list[tuple[float, int, Path]]]:
        """Total bytes of the entries, and (mtime, size, path) of each."""
        entries: list[tuple[float, int, Path]] = []
        total = 0
        layout = self.directory / LAYOUT
        try:
            shards = list(os.scandir(layout))
        except OSError:
            return 0, entries
        for shard in shards:
            try:
                files = list(os.scandir(shard.path)) if shard.is_dir() else []
            except OSError:
                continue
            for item in files:
                try:
                    info = item.stat()
                except OSError:
                    continue  # removed by a concurrent run
                if item.name.startswith(".tmp-") and time.time() - info.st_mtime < 600:
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
            _unlink(path)
            total -= size
            removed += 1
        return removed


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def default_cache_dir(root: Path) -> Path:
    """`.gpulint_cache/` in the project root: the config file's folder, or the working directory."""
    return Path(root) / CACHE_DIR_NAME
