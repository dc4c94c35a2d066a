"""Lint and fix Jupyter notebooks (`.ipynb`) cell by cell, as one module.

How a notebook becomes a module
-------------------------------
The code cells, in order, are joined into one module: a notebook shares one namespace, so a
`DataLoader` built in cell 2 and iterated in cell 5 is one training script.  IPython syntax that
is not Python (`%timeit`, `!pip install`, `x = !ls`, `obj?`) is replaced line for line by a
placeholder statement (an import of a made-up name) at the same indentation, so line numbers and
columns of every other line are unchanged and positions map straight back.  Code inside a line
magic (`%time train()`) is not linted.  A cell magic whose body is Python (`%%time`,
`%%timeit`, `%%capture`, `%%prun`, `%%debug`) keeps its body; any other cell magic (`%%bash`,
`%%writefile`, `%%html`) makes the cell opaque.  A cell that does not parse on its own (IPython
would not run it either) is reported as GL000 at its own coordinates and left out, so one broken
cell never hides the findings of the others.  Non-Python notebooks (an R kernel) are skipped.

Locations
---------
`Finding.location`, `end_location` and `statement_row` are relative to the cell (row 1 is the
cell's first line), as ruff reports notebooks; the cell is in `extra["cell"]` (1-based position
among all cells, markdown included, so "cell 3" is the third cell a person scrolls past) and the
text reporter prints `display_location`, `cell N:row:col`.  Suppression comments work per line
because they are ordinary comments of the joined module.

Fixes
-----
Fixes run on the joined module with the normal fixer; the fixed lines are mapped back to their
cells with a line diff, and a fix that would touch a magic line (or span two cells) leaves the
notebook unchanged with one error line.  Only the `source` of changed cells is replaced; the file
is written with the JSON layout it had (indent, key order, escaping, final newline are detected by
reproducing the original bytes exactly), so outputs, execution counts and metadata stay
byte-for-byte.  A layout that cannot be reproduced is reported instead of reformatting the file.

nbformat
--------
The JSON is read with the standard library, so notebooks are linted without the `notebooks`
extra: the linter only needs `cells[].cell_type` and `source`, and a linter should not refuse a
notebook over a schema detail Jupyter itself tolerates.  When nbformat is installed, a fixed
notebook is validated before it is written (if the original validated), as a second guard.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import difflib
import io
import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gpulint.linter.analysis.parse import SyntaxErrorInSource, UndecodableSource, parse
from gpulint.linter.engine import FileResult, Linter, syntax_error_finding
from gpulint.linter.findings import SYNTAX_ERROR_CODE, Edit, Finding, FixInfo, Location
from gpulint.linter.fix.fixer import NOTEBOOK_PLACEHOLDER_PREFIX, write_atomic
from gpulint.linter.fix.passes import FixOutcome, fix_source
from gpulint.linter.run.outcome import FileOutcome, RunOptions

# Line 1 of every joined module: pins the encoding, so a `# coding: latin-1` comment in a cell
# cannot make the parser decode the (UTF-8) joined text differently.
HEADER = "# -*- coding: utf-8 -*-\n"

PLACEHOLDER = NOTEBOOK_PLACEHOLDER_PREFIX + "_line_"  # the fixer keeps added imports below these

# Cell magics whose body IPython runs as Python: the body is linted, the `%%` line is not.
PYTHON_BODY_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})

# `x = !ls`, `files = %sx ls`: IPython's assignment from a shell command or a magic.
_ASSIGN_MAGIC = re.compile(r"^[ \t]*[A-Za-z_][\w.\[\]'\", ]*=[ \t]*[!%]")
_CELL_MAGIC = re.compile(r"^%%(\w+)")


class NotebookError(Exception):
    """A notebook that cannot be linted or fixed, said in one line."""


# -- splitting a cell into Python lines and IPython lines -----------------------------------------


def split_lines(text: str) -> list[str]:
    """Physical lines with their endings, split where Python splits them (\\n, \\r\\n, \\r)."""
    return io.StringIO(text, newline="").readlines()


class _LineScanner:
    """Tracks brackets, triple-quoted strings and backslash continuations across lines, so that
    only a line that starts a new statement can be taken for IPython syntax (a `% x` line
    inside parentheses is Python's modulo)."""

    def __init__(self) -> None:
        self.depth = 0
        self.triple: str | None = None
        self.continued = False

    @property
    def at_statement_start(self) -> bool:
        return self.depth == 0 and self.triple is None and not self.continued

    def feed(self, line: str) -> None:
        body = line.rstrip("\r\n")
        i, n = 0, len(body)
        self.continued = False
        while i < n:
            if self.triple is not None:
                if body[i] == "\\":
                    i += 2
                elif body.startswith(self.triple, i):
                    self.triple = None
                    i += 3
                else:
                    i += 1
                continue
            char = body[i]
            if char == "#":
                return
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char in "\"'":
                if body.startswith(char * 3, i):
                    self.triple = char * 3
                    i += 3
                    continue
                j = i + 1
                while j < n and body[j] != char:
                    j += 2 if body[j] == "\\" else 1
                if j >= n:  # unterminated on this line: only a trailing backslash continues it
                    self.continued = body.endswith("\\")
                    return
                i = j + 1
                continue
            i += 1
        self.continued = self.triple is None and body.endswith("\\")


def _is_ipython_line(line: str) -> bool:
    stripped = line.strip()
    if stripped[:1] in ("%", "!", "?"):
        return True
    if _ASSIGN_MAGIC.match(line):
        return True
    # `obj?` / `obj??` help; a `?` at the end of a comment is not (a `#` rules it out).
    return stripped.endswith("?") and "#" not in stripped


def classify(lines: list[str]) -> tuple[list[bool], bool]:
    """(per line: is it IPython syntax, is the cell Python at all)."""
    magic = [False] * len(lines)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None:
        cell_magic = _CELL_MAGIC.match(lines[first].lstrip())
        if cell_magic:
            if cell_magic.group(1) not in PYTHON_BODY_CELL_MAGICS:
                return [True] * len(lines), False
            magic[first] = True
            first += 1
    scanner = _LineScanner()
    index = first if first is not None else len(lines)
    while index < len(lines):
        line = lines[index]
        if scanner.at_statement_start and line.strip() and _is_ipython_line(line):
            magic[index] = True
            # A line magic continues over lines that end with a backslash.
            while lines[index].rstrip("\r\n").endswith("\\") and index + 1 < len(lines):
                index += 1
                magic[index] = True
        else:
            scanner.feed(line)
        index += 1
    return magic, True


# -- the notebook, its cells and the joined module -------------------------------------------------


@dataclass
class Cell:
    number: int  # 1-based position among all cells
    lines: list[str]
    magic: list[bool]
    python: bool  # False: a non-Python cell magic; the cell is left out
    error: tuple[str, int, int] | None = None  # (message, row, column) when it does not parse alone

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def python_lines(self) -> list[str]:
        """The cell's lines with IPython lines replaced by placeholders (same count, same indent)."""
        result = []
        indent = ""
        for index, (line, is_magic) in enumerate(zip(self.lines, self.magic)):
            if is_magic:
                if index == 0 or not self.magic[index - 1]:
                    indent = line[: len(line) - len(line.lstrip(" \t"))]
                # An import of a made-up name: unique, so the line diff that maps fixed lines
                # back to cells never pairs one magic with another; and an import, so an import
                # a fix adds goes after `!pip install` / `%load_ext` lines, not before them.
                result.append(f"{indent}import {PLACEHOLDER}{self.number}_{index + 1}\n")
            else:
                result.append(line)
        if result and not result[-1].endswith(("\n", "\r")):
            result[-1] += "\n"
        return result


def make_cell(number: int, text: str) -> Cell:
    lines = split_lines(text)
    magic, python = classify(lines)
    cell = Cell(number, lines, magic, python)
    if python:
        cell.error = _cell_syntax_error("".join(cell.python_lines()))
    return cell


def _cell_syntax_error(code: str) -> tuple[str, int, int] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings of the user's code are not ours
            ast.parse(code)
    except SyntaxError as exc:
        return (exc.msg or "invalid syntax", exc.lineno or 1, exc.offset or 1)
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return (f"cannot parse: {exc.__class__.__name__}", 1, 1)
    return None


@dataclass
class Joined:
    """The module made of the Python cells: its text and, per line, where it came from."""

    text: str
    owners: list[tuple[Cell, int] | None]  # per 0-based line: (cell, 0-based line in cell); None: header

    def where(self, row: int) -> tuple[Cell, int] | None:
        """(cell, 1-based row in the cell) for a 1-based row of the joined module."""
        if 1 <= row <= len(self.owners) and self.owners[row - 1] is not None:
            cell, line = self.owners[row - 1]
            return cell, line + 1
        # Past the end (an end position after the last newline): the last line of the last cell.
        last = next((o for o in reversed(self.owners) if o is not None), None)
        if last is not None and row > len(self.owners):
            return last[0], last[1] + 1 + (row - len(self.owners))
        first = next((o for o in self.owners if o is not None), None)
        return (first[0], 1) if first is not None else None


def join(cells: list[Cell]) -> Joined:
    parts = [HEADER]
    owners: list[tuple[Cell, int] | None] = [None]
    for cell in cells:
        if not cell.python or cell.error is not None:
            continue
        for index, line in enumerate(cell.python_lines()):
            parts.append(line)
            owners.append((cell, index))
    return Joined("".join(parts), owners)


@dataclass
class Notebook:
    raw: dict
    cells: list[Cell]  # code cells only
    source_kinds: dict[int, type]  # cell number -> type of its `source` field (list or str)
    text: str  # the file as decoded text (for the layout check)
    bom: bool


def _source_text(cell: dict, number: int) -> tuple[str, type]:
    source = cell.get("source", "")
    if isinstance(source, str):
        return source, str
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        return "".join(source), list
    raise NotebookError(f"cell {number}: `source` is not text")


def _is_python(raw: dict) -> bool:
    metadata = raw.get("metadata")
    if not isinstance(metadata, dict):
        return True
    for section, key in (("language_info", "name"), ("kernelspec", "language")):
        value = metadata.get(section, {}).get(key) if isinstance(metadata.get(section), dict) else None
        if isinstance(value, str) and value:
            return value.lower() in ("python", "python3", "ipython")
    return True


def read_notebook(data: bytes) -> Notebook | None:
    """The notebook's code cells (None: not a Python notebook).  Raises NotebookError."""
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not a valid notebook: not UTF-8 text (byte {exc.start})") from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"not a valid notebook: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    except RecursionError as exc:
        raise NotebookError("not a valid notebook: JSON nested too deeply") from exc
    if not isinstance(raw, dict):
        raise NotebookError("not a valid notebook: the top level is not a JSON object")
    major = raw.get("nbformat")
    if isinstance(major, int) and major < 4:
        raise NotebookError(f"nbformat {major} notebooks are not supported; convert with `jupyter nbconvert --to notebook --nbformat 4`")
    cells = raw.get("cells")
    if not isinstance(cells, list):
        raise NotebookError("not a valid notebook: no `cells` list")
    if not _is_python(raw):
        return None
    code_cells = []
    kinds: dict[int, type] = {}
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            raise NotebookError(f"not a valid notebook: cell {number} is not a JSON object")
        if cell.get("cell_type") != "code":
            continue
        source, kind = _source_text(cell, number)
        kinds[number] = kind
        code_cells.append(make_cell(number, source))
    return Notebook(raw, code_cells, kinds, text, bom)


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
        owners = [joined.owners[i] if 0 <= i < len(joined.owners) else None for i in covered]
        if any(o is None or o[0] is not cell or o[0].magic[o[1]] for o in owners):
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
    message, row, column = cell.error
    finding = syntax_error_finding(name, message, row, column)
    return dataclasses.replace(finding, display_location=f"cell {cell.number}:{row}:{column}", extra={"cell": cell.number})


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
        result = linter.lint_source(joined.text.encode("utf-8", "surrogatepass"), name, with_edits=with_edits)
        failure = next((f for f in result.findings if f.code == SYNTAX_ERROR_CODE), None) if not result.parsed else None
        found = joined.where(failure.location.row) if failure is not None else None
        if found is None or found[0].error is not None:
            break
        found[0].error = (failure.message.removeprefix("SyntaxError: "), found[1], failure.location.column)
    findings = [_to_cell(f, joined) for f in result.findings]
    if result.parsed:
        findings.extend(_cell_error_finding(name, c) for c in cells if c.python and c.error is not None)
    findings.sort(key=lambda f: (f.extra.get("cell", 0), f.location.row, f.location.column, f.code))
    # Unused suppressions are only known by joined row; GL900 findings (mapped above) carry them.
    return FileResult(name, findings, result.parsed), joined


# -- fixing ------------------------------------------------------------------------------------


def map_back(joined: Joined, fixed_text: str) -> dict[int, str]:
    """The new text of each Python cell (by number) after fixes turned `joined` into `fixed_text`.
    Raises NotebookError when a fix touched a magic line or spans cells."""
    old = split_lines(joined.text)
    new = split_lines(fixed_text)
    pieces: dict[int, list[str]] = {}
    cells: dict[int, Cell] = {}

    def add(cell: Cell, lines: list[str]) -> None:
        cells[cell.number] = cell
        pieces.setdefault(cell.number, []).extend(lines)

    for owner in joined.owners:
        if owner is not None:
            pieces.setdefault(owner[0].number, [])
            cells[owner[0].number] = owner[0]
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                owner = joined.owners[i1 + offset]
                if owner is not None:
                    cell, line = owner
                    # A magic goes back as it was; a Python line as the fixed text has it.
                    add(cell, [cell.lines[line] if cell.magic[line] else new[j1 + offset]])
            continue
        owners = joined.owners[i1:i2]
        if any(o is None for o in owners):
            raise NotebookError("a fix changed the notebook's header line")
        touched = {o[0].number: o[0] for o in owners}
        magic = [o for o in owners if o[0].magic[o[1]]]
        if magic:
            raise NotebookError(f"a fix would change the IPython line at cell {magic[0][0].number}:{magic[0][1] + 1}")
        if len(touched) > 1:
            raise NotebookError(f"a fix spans cells {', '.join(str(n) for n in sorted(touched))}")
        if touched:
            (target,) = touched.values()
        else:  # a pure insertion goes to the cell of the line above it (imports join the imports)
            above = joined.owners[i1 - 1] if i1 >= 1 else None
            below = joined.owners[i1] if i1 < len(joined.owners) else None
            owner = above or below
            if owner is None:
                raise NotebookError("a fix added code outside every cell")
            target = owner[0]
        add(target, new[j1:j2])
    texts = {}
    for number, lines in pieces.items():
        text = "".join(lines)
        original = cells[number].text
        if not original.endswith(("\n", "\r")):  # the joined module added the last newline
            text = re.sub(r"(\r\n|\n|\r)\Z", "", text)
        texts[number] = text
    return texts


def _layout(text: str) -> Callable[[object], str] | None:
    """A function that writes the notebook's JSON exactly as the original file is laid out, found
    by reproducing the original text; None when no tried layout reproduces it."""
    raw = json.loads(text)
    second = text.split("\n", 2)[1] if text.count("\n") >= 2 else None
    indents: list[int | str | None] = []
    if second is not None:
        leading = second[: len(second) - len(second.lstrip(" \t"))]
        indents.append("\t" * len(leading) if leading.startswith("\t") else len(leading))
    indents += [1, 2, 4, None]
    tried = set()
    for indent in indents:
        separator_options = [(",", ": ")] if indent is not None else [(", ", ": "), (",", ":")]
        for separators in separator_options:
            for ensure_ascii in (False, True):
                key = (indent, separators, ensure_ascii)
                if key in tried:
                    continue
                tried.add(key)
                dumped = json.dumps(raw, indent=indent, separators=separators, ensure_ascii=ensure_ascii)
                for newline in ("\n", "\r\n"):
                    body = dumped.replace("\n", newline) if newline != "\n" else dumped
                    for tail in ("", newline):
                        if body + tail == text:

                            def write(obj, *, _key=key, _newline=newline, _tail=tail) -> str:
                                out = json.dumps(obj, indent=_key[0], separators=_key[1], ensure_ascii=_key[2])
                                return (out.replace("\n", _newline) if _newline != "\n" else out) + _tail

                            return write
    return None


def _new_source(old_kind: type, text: str) -> str | list[str]:
    """The `source` field in the form the cell had: one string, or lines as Jupyter writes them."""
    if old_kind is str:
        return text
    parts = re.split(r"(?<=\n)", text)
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def _nbformat_valid(raw: dict) -> bool | None:
    """Whether nbformat accepts the notebook (None: nbformat is not installed)."""
    try:
        import nbformat  # noqa: PLC0415 - optional dependency, only for fixes
    except ImportError:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nbformat.validate(copy.deepcopy(raw))
    except Exception:  # nbformat raises ValidationError and, for odd input, other errors
        return False
    return True


def _ipython_lines(cell: Cell) -> list[str]:
    return [line for line, is_magic in zip(cell.lines, cell.magic) if is_magic]


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
            raw["cells"][cell.number - 1]["source"] = _new_source(notebook.source_kinds[cell.number], text)
        new_cells.append(new_cell)
    parse(join(new_cells).text)  # the fixed cells, joined, still parse (raises SyntaxErrorInSource)
    write = _layout(notebook.text)
    if write is None:
        raise NotebookError("cannot write fixes without reformatting the file's JSON (unusual layout); fix by hand or re-save it from Jupyter")
    if _nbformat_valid(notebook.raw) and not _nbformat_valid(raw):
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
                    fromfile=f"a/{name}:cell {cell.number}",
                    tofile=f"b/{name}:cell {cell.number}",
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
    unsafe = options.unsafe_fixes or linter.settings.unsafe_fixes
    try:
        final = notebook
        if options.fix or options.diff:
            try:
                fixed, final = fix_notebook(linter, notebook, name, unsafe)
            except NotebookError as exc:
                outcome.errors.append(f"{name}: {exc}; notebook left unchanged")
                fixed = None
            except SyntaxErrorInSource as exc:
                outcome.errors.append(f"{name}: fixes produced code that does not parse ({exc}); notebook left unchanged")
                fixed = None
            if fixed is not None:
                outcome.errors.extend(fixed.errors)
                if fixed.changed:
                    outcome.fixed = fixed.applied
                    if options.diff:
                        outcome.diff = cell_diff(notebook, final, name)
                    else:
                        try:
                            write_atomic(path, fixed.source)
                        except OSError as exc:
                            outcome.errors.append(f"{name}: cannot write fixes: {exc.strerror or exc}")
                            outcome.fixed = 0
                            final = notebook
        outcome.result, _ = lint_cells(linter, final.cells, name, options.with_edits)
    except UndecodableSource as exc:
        outcome.errors.append(f"{name}: {exc}")
    except SyntaxErrorInSource as exc:  # only when the joined module fails where no cell does
        outcome.result.findings.append(syntax_error_finding(name, str(exc), exc.row, exc.column))
    except RecursionError:
        outcome.errors.append(f"{name}: too deeply nested to analyse; skipped")
    return outcome


__all__ = ["process_notebook", "read_notebook", "lint_cells", "fix_notebook", "classify", "NotebookError", "SYNTAX_ERROR_CODE"]
