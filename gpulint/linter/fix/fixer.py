"""Apply fixes to a parsed module: replace the nodes, add the imports they need, and turn the
result into text edits (writing a fixed file is `run.safe_files.write_atomic`'s job).

One pass applies every allowed fix whose target does not overlap another's (two fixes of the same
`DataLoader(...)` call go in consecutive passes: see passes.py, which re-lints between passes).
"""

from __future__ import annotations

import difflib
import sys

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.findings import Applicability, Edit, Fix, Location


class _Replacer(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, object]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node, updated_node):
        replacement = self.replacements.get(id(original_node))
        return updated_node if replacement is None else replacement


def _import_binding(statement: cst.SimpleStatementLine) -> set[str]:
    names: set[str] = set()
    for small in statement.body:
        if isinstance(small, cst.Import):
            for alias in small.names:
                if alias.asname is not None:
                    names.add(alias.asname.name.value)
                else:
                    names.add(cst.Module([]).code_for_node(alias.name).split(".")[0])
        elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            for alias in small.names:
                names.add(alias.asname.name.value if alias.asname else alias.name.value)
    return names


def _is_import_line(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
    )


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _imported_top(statement: cst.CSTNode) -> str | None:
    """`os` for `import os.path` / `from os import path`; None for anything else."""
    if not _is_import_line(statement):
        return None
    first = statement.body[0]
    if isinstance(first, cst.Import):
        node = first.names[0].name
    elif first.module is not None and not first.relative:
        node = first.module
    else:
        return None
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


# Notebook magics (`!pip install x`) stand in the joined module as imports of this prefix
# (gpulint.linter.run.notebook); an added import never goes above them.
NOTEBOOK_PLACEHOLDER_PREFIX = "_gpulint_ipython"


def _is_stdlib(name: str | None) -> bool:
    return name is not None and name != "__future__" and name in sys.stdlib_module_names


def add_imports(module: cst.Module, imports: list[str], bound: set[str]) -> cst.Module:
    """Add each import statement once, in the module's top import block: a standard-library import
    after the standard-library imports already there (before the others when there are none),
    anything else after the last import; never above a docstring or `from __future__`."""
    body = list(module.body)
    for text in dict.fromkeys(imports):
        line = cst.parse_statement(text)
        if _import_binding(line) <= bound:
            continue
        bound |= _import_binding(line)
        block_end, first_import, last_stdlib = 0, None, None
        for index, statement in enumerate(body):
            top = _imported_top(statement)
            if index == 0 and _is_docstring(statement) or top == "__future__":
                block_end = index + 1
            elif top is not None:
                block_end = index + 1
                if first_import is None and not top.startswith(NOTEBOOK_PLACEHOLDER_PREFIX):
                    first_import = index
                if _is_stdlib(top):
                    last_stdlib = index + 1
            elif index >= block_end:
                break
        if _is_stdlib(_imported_top(line)):
            insert_at = last_stdlib if last_stdlib is not None else (first_import if first_import is not None else block_end)
        else:
            insert_at = block_end
        if insert_at == first_import and last_stdlib is None:
            # Going first in the block: take over the block's leading blank lines and comments.
            line = line.with_changes(leading_lines=body[insert_at].leading_lines)
            body[insert_at] = body[insert_at].with_changes(leading_lines=())
        body.insert(insert_at, line)
    return module.with_changes(body=body)


def apply_fixes(ctx: FileContext, fixes: list[Fix]) -> cst.Module:
    replacements: dict[int, object] = {}
    imports: list[str] = []
    for fix in fixes:
        for original, replacement in fix.replacements.items():
            replacements[id(original)] = replacement
        imports.extend(fix.imports)
    module = ctx.module.visit(_Replacer(replacements))
    if imports:
        module = add_imports(module, imports, set(ctx.imports.bindings))
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
        for target, ids in zip(targets, lineage):
            taken.add(id(target))
            taken_with_ancestors.add(id(target))
            taken_with_ancestors |= ids
    return chosen


def edits_for(ctx: FileContext, fix: Fix) -> list[Edit]:
    return line_edits(ctx.source_text, apply_fixes(ctx, [fix]).code)


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
