"""Process one file: read it, lint it (and with fix/diff, fix it), through the cache.

`process_file` is a pure function of (path, linter settings, options) returning a picklable
outcome, so the same code runs in-process or in worker processes.  Notebooks go to
gpulint.linter.run.notebook, which does the same for `.ipynb` files.  With `--fix`, a file is
written only inside the paths the run was given (`RunOptions.write_scope`), and a write that does
not happen leaves the report describing the file as it is on disk.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpulint.linter.analysis.parse import SyntaxErrorInSource, UndecodableSource
from gpulint.linter.analysis.parse_guard import UnanalysableSource
from gpulint.linter.engine import FileResult, Linter, syntax_error_finding
from gpulint.linter.printable import quote_diff_path
from gpulint.linter.run.cache import ResultCache, content_hash
from gpulint.linter.run.files import read_source
from gpulint.linter.run.outcome import FileOutcome, RunOptions, read_problem, write_problem
from gpulint.linter.run.safe_files import write_atomic

if TYPE_CHECKING:
    from gpulint.linter.analysis.project import ModuleView


def display_path(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def unified_diff(before: bytes, after: bytes, name: str) -> str:
    """A unified diff of two versions of a file, computed on its bytes so it applies with `patch`
    and `git apply` whatever the file's encoding: undecodable bytes are carried as lone surrogates
    (`outcome.diff_output` turns them back into the same bytes).  A name with control characters
    is C-quoted in the headers, as git does."""
    import difflib  # (--diff only)

    lines = difflib.diff_bytes(
        difflib.unified_diff,
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=quote_diff_path(f"a/{name}").encode("utf-8", "surrogateescape"),
        tofile=quote_diff_path(f"b/{name}").encode("utf-8", "surrogateescape"),
    )
    return b"".join(lines).decode("utf-8", "surrogateescape")


def process_source(
    linter: Linter, source: bytes, name: str, options: RunOptions, project: ModuleView | None = None
) -> tuple[FileOutcome, bytes]:
    """Lint (and with fix/diff, fix) one source, with what the project index says about it;
    returns the outcome and the final source."""
    outcome = FileOutcome(FileResult(name))
    final = source
    try:
        if options.fix or options.diff:
            from gpulint.linter.fix.passes import fix_source  # libcst: only runs that may fix pay for it

            fixed = fix_source(linter, source, name, linter.settings.unsafe_fixes, project)
            outcome.errors.extend(fixed.errors)
            if fixed.changed:
                final = fixed.source
                outcome.fixed, outcome.fixed_codes = fixed.applied, fixed.fixed_codes
                if options.diff:
                    outcome.diff = unified_diff(source, final, name)
        outcome.result = linter.lint_source(final, name, with_edits=options.with_edits, project=project)
    except SyntaxErrorInSource as exc:
        if linter.reports_syntax_errors(name):
            outcome.result.findings.append(syntax_error_finding(name, str(exc), exc.row, exc.column))
    except UndecodableSource as exc:
        outcome.errors.append(f"{name}: {exc}")
    except RecursionError:
        outcome.errors.append(f"{name}: too deeply nested to analyse; skipped")
    except UnanalysableSource as exc:
        outcome.errors.append(f"{name}: {exc}")
    except Exception as exc:
        # A project's own rule that fails is the project's to fix: say which rule, where, and go on.
        from gpulint.linter.local_rules import failure_in_local_rule

        failure = failure_in_local_rule(exc)
        if failure is None:
            raise
        outcome.errors.append(f"{name}: {failure}")
    return outcome, final


def process_file(path: Path, linter: Linter, options: RunOptions, project: ModuleView | None = None) -> FileOutcome:
    name = display_path(path)
    try:
        source = read_source(path, linter.settings.size_limit(path))
    except OSError as exc:
        return _unreadable(name, exc)
    return process_read_file(path, name, source, linter, options, project)


def _unreadable(name: str, exc: OSError) -> FileOutcome:
    return FileOutcome(FileResult(name), errors=[read_problem(name, exc)])


def process_read_file(
    path: Path, name: str, source: bytes, linter: Linter, options: RunOptions, project: ModuleView | None = None
) -> FileOutcome:
    """`process_file` for a file already read (its bytes are what the cache key hashed)."""
    if path.suffix == ".ipynb":
        from gpulint.linter.run import notebook  # only notebooks pay for their module

        return notebook.process_notebook(path, name, source, linter, options)
    outcome, final = process_source(linter, source, name, options, project)
    if options.fix and not options.diff and final != source:
        try:
            write_atomic(path, final, options.write_scope)
        except OSError as exc:
            # The file keeps its old content: report what is in it, not what the fixes would leave.
            unfixed, _ = process_source(linter, source, name, replace(options, fix=False), project)
            outcome.result = unfixed.result
            outcome.errors.append(write_problem(name, exc))
            outcome.fixed, outcome.fixed_codes = 0, []
    return outcome


def cacheable(outcome: FileOutcome, options: RunOptions) -> bool:
    """Whether an outcome is a function of the hashed bytes alone: no problem reported, and no
    file rewritten (after a write the result belongs to the new content)."""
    if outcome.errors:
        return False
    return not options.fix or options.diff or outcome.fixed == 0


def process_file_cached(
    path: Path, linter: Linter, options: RunOptions, cache: ResultCache | None, project: ModuleView | None = None
) -> FileOutcome:
    """`process_file` through the cache: a hit returns the stored outcome without parsing."""
    if cache is None:
        return process_file(path, linter, options, project)
    name = display_path(path)
    try:
        source = read_source(path, linter.settings.size_limit(path))
    except OSError as exc:
        return _unreadable(name, exc)
    # The key hashes the bytes this call lints, so a file edited during the run is never stored
    # under its old content; and what the project index told it, so a change in another module
    # that changes what this one is told is a miss.
    key = cache.key(path, name, content_hash(source), project.digest() if project is not None else "")
    outcome = cache.get(key, name)
    if outcome is None:
        outcome = process_read_file(path, name, source, linter, options, project)
        if cacheable(outcome, options):
            cache.put(key, outcome)
    return outcome
