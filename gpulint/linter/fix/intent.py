"""Code its author keeps as it is on purpose: the fixes of every rule are withheld there (the
findings stay, saying why they have no fix).

* a block the author marks as slow on purpose or as a baseline -- between `# BEGIN_DEOPTIMIZE`
  and `# END_DEOPTIMIZE`, or under a comment or docstring that says "deliberately slow", "naive
  baseline", "unoptimized", "for comparison", "do not change": the comment above a statement, or
  above or at the head of a block (a function, a loop, a `with`) around it, or the module's own
  first comments and docstring.  A fix there would remove what the code is there to show or
  measure;
* a file under a folder whose README says the folder takes no changes (project.py
  `frozen_folder`, read through the settings): a project's frozen `deprecated/` code, where a
  maintainer closes any change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import libcst as cst

from gpulint.linter.analysis.context import FileContext

# What an author writes over code kept slow on purpose.
_DELIBERATE = re.compile(
    r"BEGIN_DEOPTIMI[SZ]E|deliberately\s+(slow|naive|unoptimi[sz]ed|inefficient)|intentionally\s+slow"
    r"|naive\s+baseline|\bun-?optimi[sz]ed\b|for\s+comparison|do\s+not\s+change|don'?t\s+change",
    re.IGNORECASE,
)
_BEGIN = re.compile(r"#\s*BEGIN_DEOPTIMI[SZ]E")
_END = re.compile(r"#\s*END_DEOPTIMI[SZ]E")


def deliberate_code(ctx: FileContext, node: cst.CSTNode) -> str | None:
    """Why the code at `node` is kept slow on purpose (the marking comment, quoted), or None."""
    if not _DELIBERATE.search(ctx.source_text):
        return None  # (most files: no walk)
    marked = _marked_range(ctx, node)
    if marked is not None:
        return marked
    for text in _comments_over(ctx, node):
        match = _DELIBERATE.search(text)
        if match is not None:
            return f"the author marks this code `{match.group(0)}`"
    return None


def _marked_range(ctx: FileContext, node: cst.CSTNode) -> str | None:
    lines = ctx.source_text.splitlines()
    if not any(_BEGIN.search(line) for line in lines):
        return None
    row = ctx.positions([node])[node].start.line
    inside = False
    for number, line in enumerate(lines, 1):
        if _BEGIN.search(line):
            inside = True
        elif _END.search(line):
            inside = False
        if number == row:
            return "it lies between the author's `BEGIN_DEOPTIMIZE` and `END_DEOPTIMIZE` marks" if inside else None
    return None


def _comments_over(ctx: FileContext, node: cst.CSTNode) -> Iterable[str]:
    """The comments and docstrings that speak for the code at `node`: those above the statements
    and blocks around it, at the head of those blocks, and the module's first ones."""
    for ancestor in (node, *ctx.ancestors(node)):
        if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            yield from _leading_comments(ancestor.leading_lines)
            if isinstance(ancestor, cst.SimpleStatementLine) and ancestor.trailing_whitespace.comment:
                yield ancestor.trailing_whitespace.comment.value
        if isinstance(ancestor, cst.IndentedBlock):
            if ancestor.header.comment is not None:
                yield ancestor.header.comment.value
            if ancestor.body:
                yield from _leading_comments(getattr(ancestor.body[0], "leading_lines", ()))
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Module)):
            docstring = ancestor.get_docstring()
            if docstring:
                yield docstring
        if isinstance(ancestor, cst.Module):
            yield from _leading_comments(ancestor.header)


def _leading_comments(lines: Iterable[cst.EmptyLine]) -> Iterable[str]:
    return (line.comment.value for line in lines if line.comment is not None)
