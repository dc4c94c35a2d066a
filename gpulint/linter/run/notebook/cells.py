"""How a notebook's code cells become one Python module, and how its lines map back.

The code cells, in order, are joined into one module: a notebook shares one namespace, so a
`DataLoader` built in cell 2 and iterated in cell 5 is one training script.  IPython syntax that
is not Python (`%timeit`, `!pip install`, `x = !ls`, `obj?`) is replaced line for line by a
placeholder statement (an import of a made-up name) at the same indentation, so line numbers and
columns of every other line are unchanged and positions map straight back.  Code inside a line
magic (`%time train()`) is not linted.  A cell magic whose body is Python (`%%time`,
`%%timeit`, `%%capture`, `%%prun`, `%%debug`) keeps its body; any other cell magic (`%%bash`,
`%%writefile`, `%%html`) makes the cell opaque.  Two more shapes IPython runs are recognised: a
cell of one line that calls an automagic without its `%` (`ls ./data`, `cd ..`: IPython's
prefilter applies automagic to single-line cells only), and a cell indented as a whole (IPython's
`leading_indent` strips the first line's indent from every line); an indented cell that parses
once dedented is opaque (its columns would not map back).  A cell that does not parse on its own
(IPython would not run it either) is marked with its error and left out of the module.

After fixes, the fixed module's lines are mapped back to their cells with a line diff (`map_back`);
a fix that would touch a magic line or span two cells is refused.
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import warnings
from dataclasses import dataclass

from gpulint.linter.fix.imports import NOTEBOOK_PLACEHOLDER_PREFIX

# Line 1 of every joined module: pins the encoding, so a `# coding: latin-1` comment in a cell
# cannot make the parser decode the (UTF-8) joined text differently.
HEADER = "# -*- coding: utf-8 -*-\n"

PLACEHOLDER = NOTEBOOK_PLACEHOLDER_PREFIX + "_line_"  # the fixer keeps added imports below these

# Cell magics whose body IPython runs as Python: the body is linted, the `%%` line is not.
PYTHON_BODY_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})

# `x = !ls`, `files = %sx ls`: IPython's assignment from a shell command or a magic.
_ASSIGN_MAGIC = re.compile(r"^[ \t]*[A-Za-z_][\w.\[\]'\", ]*=[ \t]*[!%]")
_CELL_MAGIC = re.compile(r"^%%(\w+)")
# IPython's default aliases (POSIX) and the line magics a notebook calls without `%`: with
# automagic on (the default) a one-line cell `ls ./data/train/` runs `%ls`.
_AUTOMAGICS = frozenset(
    {"ls", "ll", "lf", "lk", "ldir", "lx", "cat", "cp", "mv", "rm", "rmdir", "mkdir", "cd", "pwd", "pip", "conda"}
    | {"env", "set_env", "load_ext", "matplotlib", "run", "time", "timeit", "who", "whos", "history", "pylab"}
)
# `name rest` on a line that is not Python: IPython calls the magic unless the rest starts with
# `=` or `,` (its AssignmentChecker: an assignment to a variable of that name).
_AUTOMAGIC_CALL = re.compile(r"^(\w+)(?:[ \t]+(?![=,]).*)?$")
_LEADING_INDENT = re.compile(r"^[ \t]+")


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
    python: bool  # False: a non-Python cell magic or a cell IPython dedents; the cell is left out
    error: tuple[str, int, int] | None = None  # (message, row, column) when it does not parse alone

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def python_lines(self) -> list[str]:
        """The cell's lines with IPython lines replaced by placeholders (same count, same indent)."""
        result = []
        indent = ""
        for index, (line, is_magic) in enumerate(zip(self.lines, self.magic, strict=True)):
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
    if cell.error is not None and _one_line_automagic(lines):
        cell.magic = [bool(line.strip()) for line in lines]
        cell.error = None
    if cell.error is not None and _runs_dedented(lines):
        cell.python, cell.error = False, None
    return cell


def _one_line_automagic(lines: list[str]) -> bool:
    """A cell of one line (blank lines aside) that IPython runs as an automagic (`ls ./data`)."""
    code = [line.strip() for line in lines if line.strip()]
    if len(code) != 1:
        return False
    match = _AUTOMAGIC_CALL.match(code[0])
    return match is not None and match.group(1) in _AUTOMAGICS


def _runs_dedented(lines: list[str]) -> bool:
    """A cell indented as a whole that parses once IPython's `leading_indent` strips the first
    code line's indent from every line that starts with it."""
    first = next((line for line in lines if line.strip()), "")
    indent = _LEADING_INDENT.match(first)
    if indent is None:
        return False
    prefix = indent.group(0)
    start = lines.index(first)
    dedented = [line[len(prefix) :] if line.startswith(prefix) else line for line in lines[start:]]
    magic, python = classify(dedented)
    return python and _cell_syntax_error("".join(Cell(0, dedented, magic, python).python_lines())) is None


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
        owner = self.owners[row - 1] if 1 <= row <= len(self.owners) else None
        if owner is not None:
            cell, line = owner
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
    boundaries: set[int] | None = None  # where a cell may end in the fixed text (worked out when needed)
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
        span = joined.owners[i1:i2]
        owners = [o for o in span if o is not None]
        if len(owners) != len(span):
            raise NotebookError("a fix changed the notebook's header line")
        touched = {o[0].number: o[0] for o in owners}
        magic = [o for o in owners if o[0].magic[o[1]]]
        if magic:
            raise NotebookError(f"a fix would change the IPython line at cell {magic[0][0].number}:{magic[0][1] + 1}")
        if len(touched) > 1:
            # Changes in neighbouring lines of two cells (two fixes) that the line diff took as
            # one: each cell gets the new lines most like its old ones.
            rows: dict[int, list[int]] = {}  # old rows by cell, in order
            for row, (owner_cell, _) in enumerate(owners, start=i1):
                rows.setdefault(owner_cell.number, []).append(row)
            if boundaries is None:
                boundaries = _statement_boundaries(fixed_text)
            cuts = [c - j1 for c in range(j1, j2 + 1) if c in boundaries or c == j2]
            parts = _share_out([[old[row] for row in group] for group in rows.values()], new[j1:j2], cuts)
            for number, lines in zip(rows, parts, strict=True):
                add(touched[number], lines)
            continue
        if touched:
            (target,) = touched.values()
        else:
            above = joined.owners[i1 - 1] if i1 >= 1 else None
            below = joined.owners[i1] if i1 < len(joined.owners) else None
            if above is None and below is None:
                raise NotebookError("a fix added code outside every cell")
            if below is None:  # after the last line of the last cell: before the expression it shows
                assert above is not None  # not both (see above)
                target = above[0]
                keep = _final_expression_lines(fixed_text, j1, len(pieces[target.number]))
                shown = pieces[target.number][len(pieces[target.number]) - keep :] if keep else []
                del pieces[target.number][len(pieces[target.number]) - keep :]
                add(target, new[j1:j2] + shown)
                continue
            # Between two cells: an import joins the imports above it; anything else opens the cell
            # below (appended to the cell above, it would hide that cell's displayed value).
            imports_above = above is not None and not above[0].magic[above[1]] and _is_import_text(old[i1 - 1])
            imports = all(_is_import_text(line) for line in new[j1:j2] if line.strip())
            target = above[0] if above is not None and imports_above and imports else below[0]
        add(target, new[j1:j2])
    texts = {}
    for number, lines in pieces.items():
        text = "".join(lines)
        original = cells[number].text
        if not original.endswith(("\n", "\r")):  # the joined module added the last newline
            text = re.sub(r"(\r\n|\n|\r)\Z", "", text)
        texts[number] = text
    return texts


def _is_import_text(line: str) -> bool:
    return line.lstrip().startswith(("import ", "from "))


def _final_expression_lines(fixed_text: str, row: int, available: int) -> int:
    """How many of the lines before 0-based line `row` of the fixed module hold an expression
    statement that ends right there (a notebook shows its value): 0 when the statement before
    is not one."""
    try:
        statements = ast.parse(fixed_text).body
    except SyntaxError:
        return 0
    before = [s for s in statements if s.end_lineno is not None and s.end_lineno <= row]
    if not before or not isinstance(before[-1], ast.Expr):
        return 0
    return min(row - (before[-1].lineno - 1), available)


def _share_out(groups: list[list[str]], new: list[str], cuts: list[int]) -> list[list[str]]:
    """`new` cut into len(groups) consecutive parts, each as like its group of old lines as the
    allowed `cuts` (offsets into `new`) let it be; chosen one cut at a time, the earliest of equals
    (a line added between two cells opens the second)."""
    parts, start = [], 0
    for index, group in enumerate(groups[:-1]):
        rest = "".join(line for later in groups[index + 1 :] for line in later)
        candidates = [cut for cut in cuts if cut >= start] or [len(new)]
        scores = [_likeness(group, rest, new, start, cut) for cut in candidates]
        cut = candidates[scores.index(max(scores))]  # the earliest of equals
        parts.append(new[start:cut])
        start = cut
    parts.append(new[start:])
    return parts


def _likeness(group: list[str], rest: str, new: list[str], start: int, cut: int) -> float:
    """How alike `group` is to new[start:cut] plus how alike `rest` is to new[cut:]."""
    here = difflib.SequenceMatcher(a="".join(group), b="".join(new[start:cut]), autojunk=False).ratio()
    there = difflib.SequenceMatcher(a=rest, b="".join(new[cut:]), autojunk=False).ratio()
    return here + there


def _statement_boundaries(text: str) -> set[int]:
    """0-based lines of `text` that no top-level statement runs across: where one cell can end and
    the next begin."""
    lines = len(split_lines(text))
    inside: set[int] = set()
    try:
        statements = ast.parse(text).body
    except SyntaxError:
        return set(range(lines + 1))
    for statement in statements:
        decorators = getattr(statement, "decorator_list", [])
        first = min([statement.lineno, *(d.lineno for d in decorators)])
        inside.update(range(first, statement.end_lineno or first))  # 0-based rows after the first line
    return {row for row in range(lines + 1) if row not in inside}
