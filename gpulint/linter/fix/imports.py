"""The imports around a fix: adding those the new code needs where isort (and ruff's `I` rules)
would put them, and removing those a fix leaves unused.

Where an added import goes, so the project's formatter has nothing to move:

* into the module's top import block (after a docstring and `from __future__` imports);
* in its section -- the standard library, then everything else absolute, then relative imports --
  sorted as isort's default profile sorts: `import x` lines before `from x import y` lines, by
  module name, case-insensitively;
* a section of its own, set off by a blank line, when the block has none of that kind yet.

Notebook magics (`!pip install x`) stand in the joined module as imports of a made-up name
(gpulint.linter.run.notebook); an added import never goes above them.
"""

from __future__ import annotations

import re
import sys
from typing import TypeGuard

import libcst as cst

NOTEBOOK_PLACEHOLDER_PREFIX = "_gpulint_ipython"

_STDLIB, _ABSOLUTE, _RELATIVE = 1, 2, 3

# What a module's body holds.
Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


def import_binding(statement: cst.SimpleStatementLine) -> set[str]:
    """The names an import line binds (`os` for `import os.path`, `np` for `import numpy as np`)."""
    names: set[str] = set()
    for small in statement.body:
        if isinstance(small, cst.Import):
            names.update(_alias_binding(alias, in_from=False) for alias in small.names)
        elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            names.update(_alias_binding(alias, in_from=True) for alias in small.names)
    return names


def _is_import_line(statement: cst.CSTNode | None) -> TypeGuard[cst.SimpleStatementLine]:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
    )


def _import_line(statement: cst.CSTNode) -> cst.SimpleStatementLine:
    """`statement`, which the caller knows is an import line (see _is_import_line)."""
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _module_name(statement: cst.CSTNode) -> str:
    first = _import_line(statement).body[0]
    if isinstance(first, cst.Import):
        return cst.Module([]).code_for_node(first.names[0].name)
    assert isinstance(first, cst.ImportFrom)  # an import line holds only imports
    module = cst.Module([]).code_for_node(first.module) if first.module is not None else ""
    return "." * len(first.relative) + module


def _section(statement: cst.CSTNode) -> int:
    name = _module_name(statement)
    if name.startswith("."):
        return _RELATIVE
    return _STDLIB if name.split(".")[0] in sys.stdlib_module_names else _ABSOLUTE


def _sort_key(statement: cst.CSTNode) -> tuple[int, str]:
    return (0 if isinstance(_import_line(statement).body[0], cst.Import) else 1, _module_name(statement).lower())


def _top_block(body: list[Statement]) -> tuple[int, list[int]]:
    """(where the block starts: after a docstring and `from __future__`, the indices of its
    import lines)."""
    start, lines = 0, []
    for index, statement in enumerate(body):
        if (
            index == 0
            and _is_docstring(statement)
            or (_is_import_line(statement) and _module_name(statement) == "__future__")
        ):
            start = index + 1
        elif _is_import_line(statement):
            lines.append(index)
        else:
            break
    return start, lines


def _is_placeholder(statement: cst.CSTNode) -> bool:
    return _module_name(statement).startswith(NOTEBOOK_PLACEHOLDER_PREFIX)


def _insert(body: list[Statement], line: cst.SimpleStatementLine) -> None:
    start, block = _top_block(body)
    pinned = [i for i in block if _is_placeholder(body[i])]
    floor = pinned[-1] + 1 if pinned else start  # never above a magic
    block = [i for i in block if i >= floor]
    section, key = _section(line), _sort_key(line)
    same = [i for i in block if _section(body[i]) == section]
    if same:
        after = [i for i in same if _sort_key(body[i]) > key]
        if after and after[0] == same[0]:  # first of its section: take over the section's lead
            at = after[0]
            line = line.with_changes(leading_lines=body[at].leading_lines)
            body[at] = body[at].with_changes(leading_lines=())
        else:
            at = after[0] if after else same[-1] + 1
        body.insert(at, line)
        return
    later = [i for i in block if _section(body[i]) > section]
    if later:  # a new section above the next one, a blank line between them
        at = later[0]
        line = line.with_changes(leading_lines=body[at].leading_lines)
        body[at] = body[at].with_changes(leading_lines=[cst.EmptyLine()])
    elif block:  # a new section below the others
        at = block[-1] + 1
        line = line.with_changes(leading_lines=[cst.EmptyLine()])
    else:  # the first import of the module
        at = floor
        if at < len(body) and not body[at].leading_lines:
            body[at] = body[at].with_changes(leading_lines=[cst.EmptyLine()])
    body.insert(at, line)


def add_imports(module: cst.Module, imports: list[str], bound: set[str]) -> cst.Module:
    """Add each import statement once, unless the module already binds its names."""
    body = list(module.body)
    for text in dict.fromkeys(imports):
        line = _import_line(cst.parse_statement(text))
        if import_binding(line) <= bound:
            continue
        bound |= import_binding(line)
        _insert(body, line)
    return module.with_changes(body=body)


def remove_unused_imports(module: cst.Module, names: set[str]) -> cst.Module:
    """Drop the module-level imports of `names` that nothing else in the module mentions (a word
    in a string or a comment counts as a use: keeping an import is the safe mistake)."""
    code = module.code
    body: list[Statement | None] = list(module.body)
    changed = False
    for index, statement in enumerate(body):
        if not _is_import_line(statement) or not import_binding(statement) & names:
            continue
        own = module.code_for_node(statement)
        unused = {name for name in import_binding(statement) & names if _mentions(code, name) == _mentions(own, name)}
        if unused:
            body[index] = _without_names(statement, unused)
            changed = True
    if not changed:
        return module
    kept: list[Statement] = []
    for index, statement in enumerate(body):
        following = body[index + 1] if index + 1 < len(body) else None
        if statement is not None:
            kept.append(statement)
        elif following is not None and not following.leading_lines:
            # The next line keeps the blank lines (not the comments) that set the removed one off.
            blank = [line for line in module.body[index].leading_lines if line.comment is None]
            body[index + 1] = following.with_changes(leading_lines=blank)
    return module.with_changes(body=kept)


def _mentions(text: str, name: str) -> int:
    return len(re.findall(rf"(?<![\w.]){re.escape(name)}(?!\w)", text))


def _alias_binding(alias: cst.ImportAlias, in_from: bool) -> str:
    if alias.asname is not None:
        name = alias.asname.name
        assert isinstance(name, cst.Name)  # `import x as y` binds a plain name
        return name.value
    if in_from:
        assert isinstance(alias.name, cst.Name)  # `from m import name`: a plain name
        return alias.name.value
    return cst.Module([]).code_for_node(alias.name).split(".")[0]


def _without_names(statement: cst.SimpleStatementLine, names: set[str]) -> cst.SimpleStatementLine | None:
    """The import line without the aliases binding `names`; None when nothing is left."""
    kept_smalls: list[cst.BaseSmallStatement] = []
    for small in statement.body:
        assert isinstance(small, (cst.Import, cst.ImportFrom))  # an import line holds only imports
        if isinstance(small.names, cst.ImportStar):
            kept_smalls.append(small)
            continue
        in_from = isinstance(small, cst.ImportFrom)
        aliases = list(small.names)
        remaining = [a for a in aliases if _alias_binding(a, in_from) not in names]
        if not remaining:
            continue
        if remaining[-1] is not aliases[-1]:
            # The last alias went: the one now last takes over its (absent or trailing) comma.
            remaining[-1] = remaining[-1].with_changes(comma=aliases[-1].comma)
        kept_smalls.append(small.with_changes(names=remaining))
    if not kept_smalls:
        return None
    return statement.with_changes(body=kept_smalls)
