"""Apply fixes to a parsed module: replace the nodes, add the imports they need and drop those they
leave unused (imports.py), and turn the result into text edits (writing a fixed file is
`run.safe_files.write_atomic`'s job).

One pass applies every allowed fix whose target does not overlap another's (two fixes of the same
`DataLoader(...)` call go in consecutive passes: see passes.py, which re-lints between passes).

The text edits of each finding's fix (`file_edits`, for json, SARIF, rdjson and the review bot)
are what that fix alone would change in the file.  Applying it to the whole module, generating the
whole module's code and diffing the whole file, once per fix, made them quadratic in the findings
of a file.  A fix changes a few statements of one block (and the guards it may join beside them),
so `file_edits` finds each fix's window of statements, records where every window starts and ends
in the file's text in one code generation pass, and transforms, generates and diffs only the
window.  A fix that adds or drops imports changes the module's top too: it takes the whole-module
way (`edits_for`).
"""

from __future__ import annotations

import bisect
import difflib
from dataclasses import dataclass, field
from typing import cast

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.findings import Applicability, Edit, Fix, Location
from gpulint.linter.fix.guards import merge_adjacent_guards
from gpulint.linter.fix.imports import add_imports, remove_unused_imports
from gpulint.linter.fix.wrap import BLACK, wrap_header, wrap_statement


class _Replacer(cst.CSTTransformer):
    """Puts each replacement in place.  Then, where a block has two guards with one condition side
    by side (one of them new), they become one (guards.py); and a statement or header a fix made
    longer than the line length is wrapped (wrap.py)."""

    def __init__(
        self, replacements: dict[int, object], default_indent: str, line_length: int, layout: str = BLACK
    ) -> None:
        super().__init__()
        self.replacements = replacements
        self.new = {id(r) for r in replacements.values()}
        self.default_indent = default_indent
        self.line_length = line_length
        self.layout = layout  # how a line too long is wrapped (wrap.py's layouts)
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

    def _wrapped(self, statement, indent: str, moved: bool, moved_from: str | None = None):
        """`statement` with the lines a fix made too long wrapped: a one-line statement, or a
        compound statement's header; when it is new or `moved` in, the statements in its body too
        (a guard moved them one level in, from the guard's own indentation: `moved_from`)."""
        if isinstance(statement, cst.SimpleStatementLine):
            return wrap_statement(statement, indent, self.default_indent, self.line_length, moved_from, self.layout)
        if not isinstance(statement, cst.BaseCompoundStatement):
            return statement  # a removal
        statement = wrap_header(statement, indent, self.default_indent, self.line_length, self.layout)
        if not moved or not isinstance(statement.body, cst.IndentedBlock):
            return statement
        inner = indent + (self.default_indent if statement.body.indent is None else statement.body.indent)
        body = [self._wrapped(child, inner, moved=True, moved_from=indent) for child in statement.body.body]
        if all(new is old for new, old in zip(body, statement.body.body, strict=True)):
            return statement
        return statement.with_changes(body=statement.body.with_changes(body=body))


_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


def apply_fixes(ctx: FileContext, fixes: list[Fix], line_length: int, layout: str = BLACK) -> cst.Module:
    replacements: dict[int, object] = {}
    imports: list[str] = []
    for fix in fixes:
        for original, replacement in fix.replacements.items():
            replacements[id(original)] = replacement
        imports.extend(fix.imports)
    module = ctx.module.visit(_Replacer(replacements, ctx.module.default_indent, line_length, layout))
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


def edits_for(ctx: FileContext, fix: Fix, line_length: int, layout: str = BLACK) -> list[Edit]:
    """The edits of one fix, from the whole module fixed and diffed (see `file_edits`)."""
    return line_edits(ctx.source_text, apply_fixes(ctx, [fix], line_length, layout).code)


def file_edits(ctx: FileContext, fixes: list[Fix], line_length: int, layout: str = BLACK) -> list[list[Edit]]:
    """The edits of each fix (as `edits_for` gives them), for all the fixes of one file: their
    windows are located in one code generation pass, and each is fixed and diffed on its own."""
    positions: dict[int, dict[int, int]] = {}  # per block (by id): where each of its statements is
    windows = [_window(ctx, fix, positions) for fix in fixes]
    spans = _Spans.of(ctx, [w for w in windows if w is not None])
    edits = []
    for fix, window in zip(fixes, windows, strict=True):
        local = None if window is None or spans is None else _window_edits(ctx, fix, window, spans, line_length, layout)
        edits.append(edits_for(ctx, fix, line_length, layout) if local is None else local)
    return edits


@dataclass(frozen=True)
class _Window:
    """The statements `body[start:end]` of a block (`owner`: an indented block or the module)
    that hold every change a fix makes: the statements it changes, and where it replaces a
    statement of this block (a new guard), the `if` statements next to them, which the guard may
    join (merge_adjacent_guards)."""

    owner: cst.Module | cst.IndentedBlock
    start: int
    end: int

    @property
    def first(self) -> cst.CSTNode:
        return self.owner.body[self.start]

    @property
    def last(self) -> cst.CSTNode:
        return self.owner.body[self.end - 1]


def _window(ctx: FileContext, fix: Fix, positions: dict[int, dict[int, int]]) -> _Window | None:
    """The window of a fix; None for a fix that changes the module's imports, or statements of
    more than one block (those take the whole-module way)."""
    if fix.imports or fix.unbinds:
        return None
    targets = {id(node) for node in fix.replacements}
    statements = {id(s): s for s in map(ctx.statement_of, fix.replacements)}
    if not all(isinstance(s, _STATEMENTS) for s in statements.values()):
        return None  # a target outside any statement
    # A statement inside another changed one is transformed with it.
    roots = [s for s in statements.values() if not any(id(a) in statements for a in ctx.ancestors(s))]
    owner = ctx.parent(roots[0]) if roots else None
    if not isinstance(owner, (cst.Module, cst.IndentedBlock)) or any(ctx.parent(r) is not owner for r in roots):
        return None
    where = positions.get(id(owner))
    if where is None:  # (once per block: a body's index() per fix would be quadratic again)
        where = positions[id(owner)] = {id(statement): index for index, statement in enumerate(owner.body)}
    indices = [where[id(r)] for r in roots]
    start, end = min(indices), max(indices) + 1
    if any(id(r) in targets for r in roots):  # a replaced statement may join the guards beside it
        body = owner.body
        while start > 0 and isinstance(body[start - 1], cst.If):
            start -= 1
        while end < len(body) and isinstance(body[end], cst.If):
            end += 1
    return _Window(owner, start, end)


@dataclass
class _Spans:
    """Where the windows' first and last statements start and end in the file's text (offsets,
    from one code generation pass), and where its lines start."""

    text: str
    offsets: dict[int, tuple[int, int]]
    line_starts: list[int]

    @classmethod
    def of(cls, ctx: FileContext, windows: list[_Window]) -> _Spans | None:
        """None when there is no window, or this libcst has no codegen state to record with."""
        if not windows:
            return None
        try:
            from libcst._nodes.internal import CodegenState
        except ImportError:
            return None
        module = ctx.module
        wanted = {id(node) for w in windows for node in (w.first, w.last)}
        recorder = _recording_state(CodegenState)(module.default_indent, module.default_newline, wanted=wanted)
        module._codegen(recorder)
        text = ctx.source_text
        if "".join(recorder.tokens) != text:  # (a decoding libcst does differently: not worth guessing)
            return None
        line_starts = [0]
        for line in text.splitlines(keepends=True):
            line_starts.append(line_starts[-1] + len(line))
        return cls(text, recorder.offsets, line_starts)

    def rows(self, window: _Window) -> tuple[int, int, int] | None:
        """(start offset, end offset, lines before the window), or None when the window does not
        cover whole lines (then its edits cannot be spliced in)."""
        start = self.offsets[id(window.first)][0]
        end = min(self.offsets[id(window.last)][1], len(self.text))  # the module may drop its last newline
        row = bisect.bisect_left(self.line_starts, start)
        if row >= len(self.line_starts) or self.line_starts[row] != start:
            return None
        at_end = bisect.bisect_left(self.line_starts, end)
        if at_end >= len(self.line_starts) or self.line_starts[at_end] != end:
            return None
        return start, end, row


def _recording_state(base: type) -> type:
    """libcst's codegen state, also counting the characters generated and recording the offsets
    where the `wanted` nodes (by id) start and end."""

    @dataclass
    class RecordingState(base):  # type: ignore[valid-type, misc]
        wanted: set[int] = field(default_factory=set)
        offsets: dict[int, tuple[int, int]] = field(default_factory=dict)
        length: int = 0
        _starts: dict[int, int] = field(default_factory=dict)

        def add_token(self, value: str) -> None:
            self.tokens.append(value)
            self.length += len(value)

        def add_indent_tokens(self) -> None:
            self.tokens.extend(self.indent_tokens)
            self.length += sum(map(len, self.indent_tokens))

        def pop_trailing_newline(self) -> None:
            if self.tokens:
                self.length -= len(self.tokens.pop())

        def before_codegen(self, node: cst.CSTNode) -> None:
            if id(node) in self.wanted:
                self._starts[id(node)] = self.length

        def after_codegen(self, node: cst.CSTNode) -> None:
            if id(node) in self.wanted:
                self.offsets[id(node)] = (self._starts[id(node)], self.length)

    return RecordingState


def _window_edits(
    ctx: FileContext, fix: Fix, window: _Window, spans: _Spans, line_length: int, layout: str
) -> list[Edit] | None:
    """The fix's edits from its window alone: the window's statements transformed as the whole
    module's transform would (same indentation, same guards beside them), generated at their
    indentation, and diffed with the lines they replace."""
    from libcst._nodes.internal import CodegenState  # (_Spans found it)

    located = spans.rows(window)
    if located is None:
        return None
    start, end, row = located
    module, owner = ctx.module, window.owner
    indents = _block_indents(ctx, owner)
    replacer = _Replacer({id(o): r for o, r in fix.replacements.items()}, module.default_indent, line_length, layout)
    container: cst.Module | cst.IndentedBlock  # the window as a block of its own, transformed alone
    if isinstance(owner, cst.IndentedBlock):
        replacer.indents = indents[:-1]  # the block pushes its own
        container = owner.with_changes(body=owner.body[window.start : window.end])
    else:
        container = owner.with_changes(body=owner.body[window.start : window.end], header=(), footer=())
    new_body = cast(cst.Module | cst.IndentedBlock, container.visit(replacer)).body
    state = CodegenState(module.default_indent, module.default_newline, indent_tokens=list(indents))
    for statement in new_body:
        statement._codegen(state)
    if end == len(spans.text) and not module.has_trailing_newline and not module.footer:
        state.pop_trailing_newline()
    return [
        Edit(edit.content, Location(edit.location.row + row, 1), Location(edit.end_location.row + row, 1))
        for edit in line_edits(spans.text[start:end], "".join(state.tokens))
    ]


def _block_indents(ctx: FileContext, owner: cst.CSTNode) -> list[str]:
    """The indentation of each indented block from the module down to `owner` (included), as
    code generation stacks them."""
    blocks = [owner, *ctx.ancestors(owner)]
    default = ctx.module.default_indent
    return [
        default if block.indent is None else block.indent
        for block in reversed(blocks)
        if isinstance(block, cst.IndentedBlock)
    ]


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
