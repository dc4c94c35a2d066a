"""Process one file: read it, lint it (and with fix/diff, fix it), through the cache.

`process_file` is a pure function of (path, linter settings, options) returning a picklable
outcome, so the same code runs in-process or in worker processes.  Notebooks go to
gpulint.linter.run.notebook, which does the same for `.ipynb` files.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from gpulint.linter.analysis.parse import SyntaxErrorInSource, UndecodableSource
from gpulint.linter.engine import FileResult, Linter, syntax_error_finding
from gpulint.linter.fix.fixer import write_atomic
from gpulint.linter.fix.passes import fix_source
from gpulint.linter.run.cache import ResultCache, content_hash
from gpulint.linter.run import notebook
from gpulint.linter.run.files import read_source
from gpulint.linter.run.outcome import FileOutcome, RunOptions


def display_path(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def unified_diff(before: bytes, after: bytes, name: str) -> str:
    old = before.decode("utf-8", errors="replace").splitlines(keepends=True)
    new = after.decode("utf-8", errors="replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(old, new, fromfile=f"a/{name}", tofile=f"b/{name}"))


def process_source(linter: Linter, source: bytes, name: str, options: RunOptions) -> tuple[FileOutcome, bytes]:
    """Lint (and with fix/diff, fix) one source; returns the outcome and the final source."""
    outcome = FileOutcome(FileResult(name))
    final = source
    try:
        if options.fix or options.diff:
            fixed = fix_source(linter, source, name, linter.settings.unsafe_fixes)
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
    return outcome, final


def process_file(path: Path, linter: Linter, options: RunOptions) -> FileOutcome:
    name = display_path(path)
    try:
        source = read_source(path)
    except OSError as exc:
        return _unreadable(name, exc)
    return process_read_file(path, name, source, linter, options)


def _unreadable(name: str, exc: OSError) -> FileOutcome:
    return FileOutcome(FileResult(name), errors=[f"{name}: cannot read: {exc.strerror or exc}"])


def process_read_file(path: Path, name: str, source: bytes, linter: Linter, options: RunOptions) -> FileOutcome:
    """`process_file` for a file already read (its bytes are what the cache key hashed)."""
    if path.suffix == ".ipynb":
        return notebook.process_notebook(path, name, source, linter, options)
    outcome, final = process_source(linter, source, name, options)
    if options.fix and not options.diff and final != source:
        try:
            write_atomic(path, final)
        except OSError as exc:
            outcome.errors.append(f"{name}: cannot write fixes: {exc.strerror or exc}")
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
        source = read_source(path)
    except OSError as exc:
        return _unreadable(name, exc)
    # The key hashes the bytes this call lints, so a file edited during the run is never stored
    # under its old content.
    key = cache.key(path, name, content_hash(source))
    outcome = cache.get(key)
    if outcome is None:
        outcome = process_read_file(path, name, source, linter, options)
        if cacheable(outcome, options):
            cache.put(key, outcome)
    return outcome
