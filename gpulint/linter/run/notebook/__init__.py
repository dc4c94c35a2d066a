"""Lint and fix Jupyter notebooks (`.ipynb`) cell by cell, as one module: what `process_file`
does for a `.py` file.

The code cells are joined into one module (cells.py) read from and written back to the file's
JSON (ipynb.py).  A cell that does not parse on its own is reported as GL000 at its own
coordinates, so one broken cell never hides the findings of the others.  Non-Python notebooks (an R
kernel) are skipped.

Locations
---------
`Finding.location`, `end_location` and `statement_row` are relative to the cell (row 1 is the
cell's first line), as ruff reports notebooks; the cell is in `extra["cell"]` (1-based position
among all cells, markdown included, so "cell 3" is the third cell a person scrolls past) and the
text reporter prints `display_location`, `cell N:row:col`.  Suppression comments work per line
because they are ordinary comments of the joined module.

Fixes
-----
Fixes run on the joined module with the normal fixer; the fixed lines go back to their cells, and
a fix that would touch a magic line (or span two cells) leaves the notebook unchanged with one
error line.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
from pathlib import Path

from gpulint.linter.analysis.parse import SyntaxErrorInSource, UndecodableSource, parse
from gpulint.linter.analysis.parse_guard import UnanalysableSource
from gpulint.linter.engine import FileResult, Linter, syntax_error_finding, with_source_lines
from gpulint.linter.findings import SYNTAX_ERROR_CODE, Edit, Finding, FixInfo, Location
from gpulint.linter.fix.passes import FixOutcome, fix_source
from gpulint.linter.printable import quote_diff_path
from gpulint.linter.run.notebook.cells import Cell, Joined, NotebookError, join, make_cell, map_back, split_lines
from gpulint.linter.run.notebook.ipynb import Notebook, layout_writer, nbformat_valid, new_source, read_notebook
from gpulint.linter.run.outcome import FileOutcome, RunOptions, write_problem
from gpulint.linter.run.safe_files import write_atomic

# -- linting -----------------------------------------------------------------------------------


def _map_location(joined: Joined, location: Location) -> tuple[Cell, Location] | None:
    found = joined.where(location.row)
    if found is None:
        return None
    cell, row = found
    return cell, Location(row, location.column)


def _map_edits(joined: Joined, cell: Cell, edits: tuple[Edit, ...]) -> tuple[Edit, ...]:
    """Line edits moved into the finding's cell; () when one touches another cell or a magic
    line (a consumer applying half a fix would break the code)."""
    mapped = []
    for edit in edits:
        start, end = edit.location.row, edit.end_location.row  # 1-based, end exclusive
        covered = range(start - 1, end - 1)
        found = [joined.owners[i] if 0 <= i < len(joined.owners) else None for i in covered]
        owners = [o for o in found if o is not None]
        if len(owners) != len(found) or any(o[0] is not cell or o[0].magic[o[1]] for o in owners):
            return ()
        if owners:
            first_row, end_row = owners[0][1] + 1, owners[-1][1] + 2
        else:  # an insertion before joined line `start`: after the line above it, in its cell
            above = joined.owners[start - 2] if 2 <= start <= len(joined.owners) + 1 else None
            if above is None or above[0] is not cell:
                return ()
            first_row = end_row = above[1] + 2
        mapped.append(Edit(edit.content, Location(first_row, 1), Location(end_row, 1)))
    return tuple(mapped)


def _to_cell(finding: Finding, joined: Joined) -> Finding:
    start = _map_location(joined, finding.location)
    if start is None:
        return finding
    cell, location = start
    end = _map_location(joined, finding.end_location)
    end_location = end[1] if end is not None and end[0] is cell else location
    statement = joined.where(finding.statement_row) if finding.statement_row else None
    statement_row = statement[1] if statement is not None and statement[0] is cell else location.row
    fix = finding.fix
    if fix is not None and fix.edits:
        fix = FixInfo(fix.applicability, fix.message, _map_edits(joined, cell, fix.edits))
    return dataclasses.replace(
        finding,
        location=location,
        end_location=end_location,
        statement_row=statement_row,
        fix=fix,
        display_location=f"cell {cell.number}:{location.row}:{location.column}",
        extra={**finding.extra, "cell": cell.number},
    )


def _cell_error_finding(name: str, cell: Cell) -> Finding:
    assert cell.error is not None  # called for cells with an error
    message, row, column = cell.error
    (finding,) = with_source_lines([syntax_error_finding(name, message, row, column)], cell.text)
    return dataclasses.replace(
        finding, display_location=f"cell {cell.number}:{row}:{column}", extra={"cell": cell.number}
    )


def _settle(linter: Linter, cells: list[Cell], name: str) -> Joined:
    """The joined module, after leaving out cells that only fail to parse once joined (libcst's
    grammar differs from CPython's in corners): each is marked with its error and dropped."""
    for _ in range(len(cells) + 1):
        joined = join(cells)
        try:
            linter.analyze(joined.text.encode("utf-8", "surrogatepass"), name)
        except SyntaxErrorInSource as exc:
            found = joined.where(exc.row)
            if found is None or found[0].error is not None:
                raise
            cell, row = found
            cell.error = (str(exc), row, exc.column)
            continue
        return joined
    return join(cells)


def lint_cells(linter: Linter, cells: list[Cell], name: str, with_edits: bool) -> tuple[FileResult, Joined]:
    # One parse in the usual case; a cell that only fails once joined is dropped and we retry.
    for _ in range(len(cells) + 1):
        joined = join(cells)
        text = joined.text.encode("utf-8", "surrogatepass")
        result = linter.lint_source(text, name, with_edits=with_edits, keep_syntax_error=True)
        failure = next((f for f in result.findings if f.code == SYNTAX_ERROR_CODE), None) if not result.parsed else None
        if failure is None:
            break
        found = joined.where(failure.location.row)
        if found is None or found[0].error is not None:
            break
        found[0].error = (failure.message.removeprefix("SyntaxError: "), found[1], failure.location.column)
    findings = [_to_cell(f, joined) for f in result.findings]
    if result.parsed:
        findings.extend(_cell_error_finding(name, c) for c in cells if c.python and c.error is not None)
    if not linter.reports_syntax_errors(name):
        findings = [f for f in findings if f.code != SYNTAX_ERROR_CODE]
    findings.sort(key=lambda f: (f.extra.get("cell", 0), f.location.row, f.location.column, f.code))
    # Unused suppressions are only known by joined row; GL900 findings (mapped above) carry them.
    return FileResult(name, findings, result.parsed, result.skipped_as_test, result.held_back), joined


def _ipython_lines(cell: Cell) -> list[str]:
    # Without line endings: a line that ended the cell gets one when a fix adds a line after it.
    return [line.rstrip("\r\n") for line, is_magic in zip(cell.lines, cell.magic, strict=True) if is_magic]


def fix_notebook(linter: Linter, notebook: Notebook, name: str, unsafe: bool) -> tuple[FixOutcome, Notebook]:
    """Fix the notebook's cells; returns the fixer's outcome (source: the new file bytes) and the
    fixed notebook.  Raises NotebookError when the fixes cannot be written back faithfully."""
    joined = _settle(linter, notebook.cells, name)
    outcome = fix_source(linter, joined.text.encode("utf-8", "surrogatepass"), name, unsafe)
    if not outcome.changed:
        return outcome, notebook
    texts = map_back(joined, outcome.source.decode("utf-8", "surrogatepass"))
    raw = copy.deepcopy(notebook.raw)
    new_cells = []
    for cell in notebook.cells:
        text = texts.get(cell.number, cell.text)
        new_cell = make_cell(cell.number, text)
        if _ipython_lines(new_cell) != _ipython_lines(cell):
            raise NotebookError(f"a fix would change the IPython lines of cell {cell.number}")
        if cell.error is None and new_cell.error is not None:
            raise NotebookError(f"a fix left cell {cell.number} unparsable ({new_cell.error[0]})")
        if text != cell.text:
            raw["cells"][cell.number - 1]["source"] = new_source(notebook.source_kinds[cell.number], text)
        new_cells.append(new_cell)
    parse(join(new_cells).text)  # the fixed cells, joined, still parse (raises SyntaxErrorInSource)
    write = layout_writer(notebook.text)
    if write is None:
        raise NotebookError(
            "cannot write fixes without reformatting the file's JSON (unusual layout); "
            "fix by hand or re-save it from Jupyter"
        )
    if nbformat_valid(notebook.raw) and not nbformat_valid(raw):
        raise NotebookError("the fixed notebook would not validate with nbformat")
    new_text = write(raw)
    data = ("\ufeff" if notebook.bom else "") + new_text
    outcome.source = data.encode("utf-8", "surrogatepass")
    return outcome, Notebook(raw, new_cells, notebook.source_kinds, new_text, notebook.bom)


def cell_diff(before: Notebook, after: Notebook, name: str) -> str:
    """Unified diffs of the changed cells' sources, headed `a/nb.ipynb:cell N` (as ruff shows
    notebook diffs: the JSON around them does not change)."""
    old = {c.number: c.text for c in before.cells}
    parts = []
    for cell in after.cells:
        if old.get(cell.number) == cell.text:
            continue

        def lines(text: str) -> list[str]:
            result = split_lines(text)
            if result and not result[-1].endswith(("\n", "\r")):
                result[-1] += "\n"
            return result

        parts.append(
            "".join(
                difflib.unified_diff(
                    lines(old.get(cell.number, "")),
                    lines(cell.text),
                    fromfile=quote_diff_path(f"a/{name}:cell {cell.number}"),
                    tofile=quote_diff_path(f"b/{name}:cell {cell.number}"),
                )
            )
        )
    return "".join(parts)


# -- the runner's entry point --------------------------------------------------------------------


def process_notebook(path: Path, name: str, source: bytes, linter: Linter, options: RunOptions) -> FileOutcome:
    """Lint (and with options.fix / options.diff, fix) one notebook: what `process_file` does for
    a `.py` file."""
    outcome = FileOutcome(FileResult(name))
    try:
        notebook = read_notebook(source)
    except NotebookError as exc:
        outcome.errors.append(f"{name}: {exc}")
        return outcome
    if notebook is None:  # another kernel's language
        return outcome
    try:
        final = notebook
        if options.fix or options.diff:
            try:
                fixed, final = fix_notebook(linter, notebook, name, linter.settings.unsafe_fixes)
            except NotebookError as exc:
                outcome.errors.append(f"{name}: {exc}; notebook left unchanged")
                fixed = None
            except SyntaxErrorInSource as exc:
                outcome.errors.append(
                    f"{name}: fixes produced code that does not parse ({exc}); notebook left unchanged"
                )
                fixed = None
            if fixed is not None:
                outcome.errors.extend(fixed.errors)
                if fixed.changed:
                    outcome.fixed, outcome.fixed_codes = fixed.applied, fixed.fixed_codes
                    if options.diff:
                        outcome.diff = cell_diff(notebook, final, name)
                    else:
                        try:
                            write_atomic(path, fixed.source, options.write_scope)
                        except OSError as exc:
                            outcome.errors.append(write_problem(name, exc))
                            outcome.fixed, outcome.fixed_codes = 0, []
                            final = notebook
        outcome.result, _ = lint_cells(linter, final.cells, name, options.with_edits)
    except UndecodableSource as exc:
        outcome.errors.append(f"{name}: {exc}")
    except SyntaxErrorInSource as exc:  # only when the joined module fails where no cell does
        if linter.reports_syntax_errors(name):
            outcome.result.findings.append(syntax_error_finding(name, str(exc), exc.row, exc.column))
    except RecursionError:
        outcome.errors.append(f"{name}: too deeply nested to analyse; skipped")
    except UnanalysableSource as exc:
        outcome.errors.append(f"{name}: {exc}")
    return outcome
