"""Run the linter over paths: discover, lint or fix each file, collect results in a stable order.

`process_file` is a pure function of (path, linter settings, options) returning a picklable result, so the
same code runs in-process or in worker processes.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.linter.config import Settings
from gpulint.linter.engine import FileResult, Linter, SyntaxErrorInSource, UndecodableSource, syntax_error_finding
from gpulint.linter.files import PathError, discover, read_source
from gpulint.linter.fixer import fix_source, write_atomic


@dataclass(frozen=True)
class RunOptions:
    fix: bool = False  # write fixed files
    diff: bool = False  # compute the diff fixes would make, write nothing
    unsafe_fixes: bool = False
    with_edits: bool = False  # attach text edits to fixable findings (json, sarif, review)


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

    @property
    def findings(self):
        return [f for o in self.outcomes for f in o.result.findings]

    @property
    def errors(self) -> list[str]:
        lines = [f"{e.path}: {e.reason}" for e in self.path_errors]
        for outcome in self.outcomes:
            lines.extend(outcome.errors)
        return lines


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
    return outcome, final


def process_file(path: Path, linter: Linter, options: RunOptions) -> FileOutcome:
    name = display_path(path)
    try:
        source = read_source(path)
    except OSError as exc:
        return FileOutcome(FileResult(name), errors=[f"{name}: cannot read: {exc.strerror or exc}"])
    if path.suffix == ".ipynb":
        from gpulint.linter import notebook  # noqa: PLC0415 - only notebooks pay for nbformat

        return notebook.process_notebook(path, name, source, linter, options)
    outcome, final = process_source(linter, source, name, options)
    if options.fix and not options.diff and final != source:
        try:
            write_atomic(path, final)
        except OSError as exc:
            outcome.errors.append(f"{name}: cannot write fixes: {exc.strerror or exc}")
            outcome.fixed = 0
    return outcome


def run(paths: list[Path], settings: Settings, options: RunOptions) -> RunResult:
    files, path_errors = discover(paths, settings.exclude, settings.root)
    result = RunResult(path_errors=path_errors)
    linter = Linter(settings)
    for path in files:
        result.outcomes.append(process_file(path, linter, options))
    return result
