"""Apply fixes to a parsed module: replace the nodes, add the imports they need and drop those they
leave unused (imports.py), and turn the result into text edits (writing a fixed file is
`run.safe_files.write_atomic`'s job).

One pass applies every allowed fix whose target does not overlap another's (two fixes of the same
`DataLoader(...)` call go in consecutive passes: see passes.py, which re-lints between passes).
"""

from __future__ import annotations

import difflib

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.findings import Applicability, Edit, Fix, Location
from gpulint.linter.fix.guards import merge_adjacent_guards
from gpulint.linter.fix.imports import add_imports, remove_unused_imports
from gpulint.linter.fix.wrap import wrap_header, wrap_statement


class _Replacer(cst.CSTTransformer):
    """Puts each replacement in place.  Then, where a block has two guards with one condition side
    by side (one of them new), they become one (guards.py); and a statement or header a fix made
    longer than the line length is wrapped (wrap.py)."""

    def __init__(self, replacements: dict[int, object], default_indent: str, line_length: int) -> None:
        super().__init__()
        self.replacements = replacements
        self.new = {id(r) for r in replacements.values()}
        self.default_indent = default_indent
        self.line_length = line_length
        self.indents: list[str] = []
        self.touched: list[bool] = []  # per statement being visited: whether a fix changed part of it

    def on_visit(self, node) -> bool:
        if isinstance(node, _STATEMENTS):
            self.touched.append(False)
        elif isinstance(node, cst.IndentedBlock):
            self.indents.append(self.default_indent if node.indent is None else node.indent)
        return True

    def on_leave(self, original_node, updated_node):
        touched = self.touched.pop() if isinstance(original_node, _STATEMENTS) else False
        if isinstance(original_node, cst.IndentedBlock):
            self.indents.pop()
        replacement = self.replacements.get(id(original_node))
        if replacement is not None:
            if not isinstance(original_node, _STATEMENTS):
                if self.touched:
                    self.touched[-1] = True
                return replacement
            wrapped = self._wrapped(replacement, "".join(self.indents), moved=True)
            self.new.add(id(wrapped))  # still a guard a fix added, for merge_adjacent_guards
            return wrapped
        if touched:
            return self._wrapped(updated_node, "".join(self.indents), moved=False)
        if isinstance(updated_node, (cst.IndentedBlock, cst.Module)):
            merged = merge_adjacent_guards(updated_node.body, self.new)
            if merged is not None:
                return updated_node.with_changes(body=merged)
        return updated_node

    def _wrapped(self, statement, indent: str, moved: bool):
        """`statement` with the lines a fix made too long wrapped: a one-line statement, or a
        compound statement's header; when it is new or `moved` in, the statements in its body too
        (a guard moved them one level in)."""
        if isinstance(statement, cst.SimpleStatementLine):
            return wrap_statement(statement, indent, self.default_indent, self.line_length)
        if not isinstance(statement, cst.BaseCompoundStatement):
            return statement  # a removal
        statement = wrap_header(statement, indent, self.default_indent, self.line_length)
        if not moved or not isinstance(statement.body, cst.IndentedBlock):
            return statement
        inner = indent + (self.default_indent if statement.body.indent is None else statement.body.indent)
        body = [self._wrapped(child, inner, moved=True) for child in statement.body.body]
        if all(new is old for new, old in zip(body, statement.body.body, strict=True)):
            return statement
        return statement.with_changes(body=statement.body.with_changes(body=body))


_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


def apply_fixes(ctx: FileContext, fixes: list[Fix], line_length: int) -> cst.Module:
    replacements: dict[int, object] = {}
    imports: list[str] = []
    for fix in fixes:
        for original, replacement in fix.replacements.items():
            replacements[id(original)] = replacement
        imports.extend(fix.imports)
    module = ctx.module.visit(_Replacer(replacements, ctx.module.default_indent, line_length))
    if imports:
        module = add_imports(module, imports, set(ctx.imports.bindings))
    unbound = {name for fix in fixes for name in fix.unbinds}
    if unbound:
        module = remove_unused_imports(module, unbound)
    return module


def non_overlapping(ctx: FileContext, fixes: list[Fix]) -> list[Fix]:
    """Fixes whose targets neither contain nor sit inside an earlier chosen fix's targets."""
    chosen: list[Fix] = []
    taken: set[int] = set()
    taken_with_ancestors: set[int] = set()
    for fix in fixes:
        targets = list(fix.replacements)
        lineage = [{id(a) for a in ctx.ancestors(t)} for t in targets]
        clash = any(id(t) in taken_with_ancestors for t in targets) or any(ids & taken for ids in lineage)
        if clash:
            continue
        chosen.append(fix)
        for target, ids in zip(targets, lineage, strict=True):
            taken.add(id(target))
            taken_with_ancestors.add(id(target))
            taken_with_ancestors |= ids
    return chosen


def edits_for(ctx: FileContext, fix: Fix, line_length: int) -> list[Edit]:
    return line_edits(ctx.source_text, apply_fixes(ctx, [fix], line_length).code)


def line_edits(before: str, after: str) -> list[Edit]:
    """Whole-line edits turning `before` into `after` (what SARIF fixes and GitHub suggestions
    need: both work on lines)."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    edits = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        edits.append(Edit("".join(new[j1:j2]), Location(i1 + 1, 1), Location(i2 + 1, 1)))
    return edits


def allowed(fix: Fix, unsafe: bool) -> bool:
    return fix.applicability is Applicability.SAFE or unsafe
