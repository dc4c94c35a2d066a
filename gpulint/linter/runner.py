"""Run the linter over paths: discover, lint or fix each file, collect results in a stable order.

`process_file` is a pure function of (path, linter settings, options) returning a picklable result, so the
same code runs in-process or in worker processes.  With `--fix`, a file is written only inside the
paths the run was given (`RunOptions.write_scope`), and a write that does not happen leaves the
report describing the file as it is on disk.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from gpulint.linter.config import Settings
from gpulint.linter.engine import FileResult, Linter, SyntaxErrorInSource, UndecodableSource, syntax_error_finding
from gpulint.linter.files import PathError, discover, read_source
from gpulint.linter.fixer import fix_source
from gpulint.linter import parallel
from gpulint.linter.cache import ResultCache, content_hash
from gpulint.linter.parse_guard import UnanalysableSource
from gpulint.linter.printable import printable, quote_diff_path
from gpulint.linter.safe_files import NotLintable, WriteRefused, WriteScope, remove_stale_temporaries, write_atomic


@dataclass(frozen=True)
class RunOptions:
    fix: bool = False  # write fixed files
    diff: bool = False  # compute the diff fixes would make, write nothing
    unsafe_fixes: bool = False
    with_edits: bool = False  # attach text edits to fixable findings (json, sarif, review)
    # Where --fix may write (None: anywhere).  `run` sets it from the paths it is given; it decides
    # where results go, not what they are, so it is not part of the cache key.
    write_scope: WriteScope | None = field(default=None, metadata={"changes_results": False})


@dataclass
class FileOutcome:
    result: FileResult
    diff: str | None = None  # unified diff (with --diff), or None
    fixed: int = 0  # fixes applied (written with --fix, or shown with --diff)
    errors: list[str] = field(default_factory=list)  # one-line problems with this file


@dataclass
class RunResult:
    outcomes: list[FileOutcome] = field(default_factory=list)
    path_errors: list[PathError] = field(default_factory=list)
    # Lines about the run that do not make it fail (a cache folder refused, leftovers removed).
    warnings: list[str] = field(default_factory=list)

    @property
    def findings(self):
        return [f for o in self.outcomes for f in o.result.findings]

    @property
    def errors(self) -> list[str]:
        """One line per problem, safe to print (control characters in file names escaped)."""
        lines = [f"{e.path}: {e.reason}" for e in self.path_errors]
        for outcome in self.outcomes:
            lines.extend(outcome.errors)
        return [printable(line) for line in lines]


def display_path(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def unified_diff(before: bytes, after: bytes, name: str) -> str:
    """A unified diff of two versions of a file, computed on its bytes so it applies with `patch`
    and `git apply` whatever the file's encoding: undecodable bytes are carried as lone surrogates
    (`diff_output` turns them back into the same bytes).  A name with control characters is
    C-quoted in the headers, as git does."""
    lines = difflib.diff_bytes(
        difflib.unified_diff,
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=quote_diff_path(f"a/{name}").encode("utf-8", "surrogateescape"),
        tofile=quote_diff_path(f"b/{name}").encode("utf-8", "surrogateescape"),
    )
    return b"".join(lines).decode("utf-8", "surrogateescape")


def diff_output(result: "RunResult") -> bytes:
    """The `--diff` text of a run as the bytes to write to standard output."""
    return "".join(o.diff for o in result.outcomes if o.diff).encode("utf-8", "surrogateescape")


def process_source(linter: Linter, source: bytes, name: str, options: RunOptions) -> tuple[FileOutcome, bytes]:
    """Lint (and with fix/diff, fix) one source; returns the outcome and the final source."""
    outcome = FileOutcome(FileResult(name))
    final = source
    unsafe = options.unsafe_fixes or linter.settings.unsafe_fixes
    try:
        if options.fix or options.diff:
            fixed = fix_source(linter, source, name, unsafe)
            outcome.errors.extend(fixed.errors)
            if fixed.changed:
                final = fixed.source
                outcome.fixed = fixed.applied
                if options.diff:
                    outcome.diff = unified_diff(source, final, name)
        outcome.result = linter.lint_source(final, name, with_edits=options.with_edits)
    except SyntaxErrorInSource as exc:
        outcome.result.findings.append(syntax_error_finding(name, str(exc), exc.row, exc.column))
    except UndecodableSource as exc:
        outcome.errors.append(f"{name}: {exc}")
    except RecursionError:
        outcome.errors.append(f"{name}: too deeply nested to analyse; skipped")
    except UnanalysableSource as exc:
        outcome.errors.append(f"{name}: {exc}")
    return outcome, final


def process_file(path: Path, linter: Linter, options: RunOptions) -> FileOutcome:
    name = display_path(path)
    try:
        source = read_source(path, linter.settings.max_file_size)
    except OSError as exc:
        return _unreadable(name, exc)
    return process_read_file(path, name, source, linter, options)


def read_problem(name: str, exc: OSError) -> str:
    """The line for a file that was not read: why it was skipped, or the system's reason."""
    if isinstance(exc, NotLintable):
        return f"{name}: {exc}"
    return f"{name}: cannot read: {exc.strerror or exc}"


def write_problem(name: str, exc: OSError, what: str = "fixes") -> str:
    """The line for changes (`what`) that were not written: gpulint's refusal, or the system's reason."""
    if isinstance(exc, WriteRefused):
        return f"{name}: {what} {exc}"
    return f"{name}: cannot write {what}: {exc.strerror or exc}"


def _unreadable(name: str, exc: OSError) -> FileOutcome:
    return FileOutcome(FileResult(name), errors=[read_problem(name, exc)])


def process_read_file(path: Path, name: str, source: bytes, linter: Linter, options: RunOptions) -> FileOutcome:
    """`process_file` for a file already read (its bytes are what the cache key hashed)."""
    if path.suffix == ".ipynb":
        from gpulint.linter import notebook  # noqa: PLC0415 - only notebooks pay for nbformat

        return notebook.process_notebook(path, name, source, linter, options)
    outcome, final = process_source(linter, source, name, options)
    if options.fix and not options.diff and final != source:
        try:
            write_atomic(path, final, options.write_scope)
        except OSError as exc:
            # The file keeps its old content: report what is in it, not what the fixes would leave.
            unfixed, _ = process_source(linter, source, name, replace(options, fix=False))
            outcome.result = unfixed.result
            outcome.errors.append(write_problem(name, exc))
            outcome.fixed = 0
    return outcome


def cacheable(outcome: FileOutcome, options: RunOptions) -> bool:
    """Whether an outcome is a function of the hashed bytes alone: no problem reported, and no
    file rewritten (after a write the result belongs to the new content)."""
    if outcome.errors:
        return False
    return not options.fix or options.diff or outcome.fixed == 0


def process_file_cached(path: Path, linter: Linter, options: RunOptions, cache: ResultCache | None) -> FileOutcome:
    """`process_file` through the cache: a hit returns the stored outcome without parsing."""
    if cache is None:
        return process_file(path, linter, options)
    name = display_path(path)
    try:
        source = read_source(path, linter.settings.max_file_size)
    except OSError as exc:
        return _unreadable(name, exc)
    # The key hashes the bytes this call lints, so a file edited during the run is never stored
    # under its old content.
    key = cache.key(path, name, content_hash(source))
    outcome = cache.get(key, name)
    if outcome is None:
        outcome = process_read_file(path, name, source, linter, options)
        if cacheable(outcome, options):
            cache.put(key, outcome)
    return outcome


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _cached_outcome(path: Path, cache: ResultCache, max_bytes: int) -> FileOutcome | None:
    try:
        source = read_source(path, max_bytes)
    except OSError:
        return None  # reported when the file is processed
    name = display_path(path)
    return cache.get(cache.key(path, name, content_hash(source)), name)


def run(
    paths: list[Path],
    settings: Settings,
    options: RunOptions,
    jobs: int = 1,
    cache: ResultCache | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Lint (or fix) every file under `paths`; outcomes in the sorted order of the files.

    Cache hits are looked up here first, so a warm run over an unchanged tree starts no worker and
    parses nothing; the rest go to `jobs` worker processes (in this process when `jobs` is 1 or
    there are only a few files).  `progress(done, total)` is called as files finish."""
    files, path_errors = discover(paths, settings.exclude, settings.root)
    result = RunResult(path_errors=path_errors)
    if options.fix and not options.diff:
        options = replace(options, write_scope=WriteScope.of(paths))
        left = remove_stale_temporaries({path.parent for path in files}, options.write_scope)
        if left:
            result.warnings.append(f"removed {len(left)} temporary file(s) an interrupted --fix left behind")
    if cache is not None and (reason := cache.unusable_reason()) is not None:
        result.warnings.append(printable(f"{reason}; running without a cache"))
        cache = None
    outcomes: list[FileOutcome | None] = [None] * len(files)
    done = 0
    if cache is not None:
        for index, path in enumerate(files):
            outcomes[index] = _cached_outcome(path, cache, settings.max_file_size)
        done = sum(o is not None for o in outcomes)
    pending = [i for i, o in enumerate(outcomes) if o is None]
    if progress is not None and done:
        progress(done, len(files))
    if jobs > 1 and len(pending) >= parallel.MIN_FILES_FOR_WORKERS:
        # Largest files first, so a big file is not the last one left while the other workers idle
        # (results are placed by index: the order of the outcomes does not change).
        pending.sort(key=lambda i: -_size(files[i]))
        stream = parallel.map_files([files[i] for i in pending], settings, options, cache, jobs)
    else:
        linter = Linter(settings)
        stream = (process_file_cached(files[i], linter, options, cache) for i in pending)
    for index, outcome in zip(pending, stream):
        outcomes[index] = outcome
        done += 1
        if progress is not None:
            progress(done, len(files))
    stream.close()  # zip stops before the generator ends: close it so the pool shuts down now
    if cache is not None and pending:  # entries were written (by this process or its workers)
        cache.evict()
    result.outcomes = [o for o in outcomes if o is not None]
    return result
