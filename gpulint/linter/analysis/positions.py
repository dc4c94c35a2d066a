"""Line and column ranges of nodes, computed only for the nodes asked for.

libcst's `PositionProvider` is a code generation pass that records a range for every node of the
module; the recording, not the code generation, is most of its cost (measured: 49 ms for the
provider, 21 ms for the code generation alone, on a 281-line file), and a file's findings need a
handful.  So the same pass runs with libcst's own position-keeping state, told to record only those
nodes, and stops once it has recorded them all (the rest of the module is not generated).  Without
the libcst internals this uses, every node's range is computed the public way.

Given the module's text and each node's parent, only the innermost statements that hold wanted
nodes are generated, each on its own from line 1 at the indentation of the blocks around it (the
tokens libcst's state holds there); the text generated is then looked for in the module's text,
and where it occurs exactly once that occurrence is the statement (a module's text is its
statements' texts in order, a block's likewise, so the statement's own text is one occurrence),
and the ranges move down by its line.  A statement whose text occurs more than once
(`optimizer.zero_grad()` in two loops at the same depth) hands its nodes to the statement around
it; a statement of the module's body written twice (an `import torch`) sends the whole file back
to the one pass.  A training loop's finding thus costs the generation of its line, not of the
whole `train()` around it.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import cast

import libcst as cst
from libcst.metadata import CodePosition, CodeRange


def positions_of(
    module: cst.Module,
    nodes: Iterable[cst.CSTNode],
    text: str | None = None,
    parent_of: Callable[[cst.CSTNode], cst.CSTNode | None] | None = None,
) -> Mapping[cst.CSTNode, CodeRange]:
    """libcst's `PositionProvider` ranges of `nodes` (and of the nodes their ranges derive from).
    With the module's `text` (what `module.code` gives) and `parent_of(node)` (its parent in the
    module's tree, None for the module), only the innermost statements holding them are
    generated, where their text places them for certain (see the module docstring)."""
    state_class = _selective_position_state()
    if state_class is None:
        from libcst.metadata import MetadataWrapper, PositionProvider

        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    if text is not None and parent_of is not None:
        placed = _by_statement(state_class, module, set(nodes), text, parent_of)
        if placed is not None:
            return placed
    recorder = _PositionRecorder(nodes)
    state = state_class(default_indent=module.default_indent, default_newline=module.default_newline, provider=recorder)
    try:
        module._codegen(state)
    except _AllRecorded:
        pass
    return recorder._computed


# The newlines libcst counts lines by (its position provider's NEWLINE_RE, checked equal below).
_NEWLINES = re.compile(r"\r\n?|\n")

# A statement, with the indentation its block generates it at (the tokens libcst's state holds).
_Placement = tuple[cst.BaseStatement, tuple[str, ...]]


def _statements_holding(
    node: cst.CSTNode, module: cst.Module, parent_of: Callable[[cst.CSTNode], cst.CSTNode | None]
) -> list[_Placement] | None:
    """The statements that hold `node` (itself included), innermost first, each with its
    indentation; None when no statement of the module's body holds it."""
    chain = [node]
    parent = parent_of(node)
    while parent is not None:
        chain.append(parent)
        parent = parent_of(parent)
    if chain[-1] is not module or len(chain) < 2 or not isinstance(chain[-2], cst.BaseStatement):
        return None  # (the module itself, its header or footer)
    holding: list[_Placement] = []
    indents: list[str] = []
    # From the module down: a statement is in a module's or an indented block's body (the only
    # bodies of statements), and generated at the indentation of the blocks around it.
    for outer, inner in itertools.pairwise(reversed(chain)):
        if isinstance(outer, cst.Match):
            break  # (its cases are indented by the match itself: placed by the statement around)
        if isinstance(outer, cst.IndentedBlock):
            indents.append(module.default_indent if outer.indent is None else outer.indent)
        if isinstance(inner, cst.BaseStatement) and isinstance(outer, (cst.Module, cst.IndentedBlock)):
            holding.append((inner, tuple(indents)))
    holding.reverse()
    return holding


def _by_statement(state_class, module, nodes, text, parent_of) -> dict | None:
    """The ranges of `nodes`, generating only the innermost statements that hold them; None when a
    node is in no statement of the body or no statement around it has a text found exactly once
    in `text`.  A statement whose text is found more than once (`optimizer.zero_grad()` in two
    loops at the same depth) hands its nodes to the statement around it."""
    pending: dict[int, tuple[_Placement, list[cst.CSTNode], list[_Placement]]] = {}
    for node in nodes:
        holding = _statements_holding(node, module, parent_of)
        if holding is None:
            return None
        innermost, *around = holding
        pending.setdefault(id(innermost[0]), (innermost, [], around))[1].append(node)
    computed: dict = {}
    plain_newlines = "\r" not in text
    while pending:
        (statement, indents), wanted, around = pending.pop(next(iter(pending)))
        placed = _place(state_class, module, statement, indents, wanted, text, plain_newlines)
        if placed is not None:
            computed.update(placed)
            continue
        if not around:
            return None
        outer, *further = around
        pending.setdefault(id(outer[0]), (outer, [], further))[1].extend(wanted)
    return computed


def _place(state_class, module, statement, indents, wanted, text, plain_newlines) -> dict | None:
    """`wanted`'s ranges, generating `statement` alone at its indentation and finding its text
    in the module's; None when that text is not found exactly once at the start of a line."""
    recorder = _PositionRecorder(wanted, stop_when_recorded=False)  # (the whole text is looked for)
    state = state_class(default_indent=module.default_indent, default_newline=module.default_newline, provider=recorder)
    state.indent_tokens.extend(indents)
    statement._codegen(state)
    state._catch_up()
    generated = "".join(state.tokens)
    start = text.find(generated)
    if start < 0 or text.find(generated, start + 1) >= 0:
        return None
    # A statement starts a line (its indentation is generated with it).
    if start and text[start - 1] not in "\r\n":
        return None
    before = text.count("\n", 0, start) if plain_newlines else len(_NEWLINES.findall(text, 0, start))
    return {
        node: CodeRange(
            CodePosition(found.start.line + before, found.start.column),
            CodePosition(found.end.line + before, found.end.column),
        )
        for node, found in recorder._computed.items()
    }


class _PositionRecorder:
    """Stands in for the position provider: where the codegen state keeps the ranges it records."""

    def __init__(self, wanted: Iterable[cst.CSTNode], stop_when_recorded: bool = True) -> None:
        self.wanted = set(wanted)
        self.stop_when_recorded = stop_when_recorded
        # Asked for every node generated: by id(), an int's hash (a node's own __hash__ is Python).
        self.wanted_ids = {id(node) for node in self.wanted}
        self._computed: dict = {}

    def want(self, node: cst.CSTNode) -> None:
        self.wanted.add(node)
        self.wanted_ids.add(id(node))


class _AllRecorded(Exception):
    """Every wanted node's range is recorded: the rest of the code generation is not needed."""


_NOT_RECORDED = contextlib.nullcontext()


@functools.lru_cache(maxsize=1)
def _selective_position_state():
    """libcst's position-providing codegen state, recording only the nodes its provider wants
    (None when this libcst has no such internal)."""
    try:
        from libcst.metadata.position_provider import NEWLINE_RE, PositionProvidingCodegenState
    except ImportError:
        return None

    # `provider` is a _PositionRecorder, passed where libcst expects its own provider: the casts
    # say so to the type checker.
    class SelectivePositionState(PositionProvidingCodegenState):
        """libcst's state moves its line and column on every token; this one only appends the
        tokens, and moves the position over those appended since it last did when a wanted node
        needs it (`_catch_up`): the same positions, without the work per token in between."""

        _caught_up = 0  # the tokens the line and column count

        def add_token(self, value: str) -> None:
            self.tokens.append(value)

        def add_indent_tokens(self) -> None:
            self.tokens.extend(self.indent_tokens)

        def pop_trailing_newline(self) -> None:
            self._catch_up()  # (libcst's position counts the token it pops)
            super().pop_trailing_newline()

        def _catch_up(self) -> None:
            tokens = self.tokens
            if self._caught_up == len(tokens):
                return
            text = "".join(tokens[self._caught_up :])
            if "\r" in text:  # token by token, as libcst counts them ("\r" + "\n" in two tokens is two lines)
                for token in tokens[self._caught_up :]:
                    self._update_position(token)
            else:
                newlines = text.count("\n")
                if newlines:
                    self.line += newlines
                    self.column = len(text) - text.rfind("\n") - 1
                else:
                    self.column += len(text)
            self._caught_up = len(tokens)

        def before_codegen(self, node) -> None:
            if id(node) in cast(_PositionRecorder, self.provider).wanted_ids:
                self._catch_up()
                super().before_codegen(node)

        def after_codegen(self, node) -> None:
            recorder = cast(_PositionRecorder, self.provider)
            if id(node) in recorder.wanted_ids:
                self._catch_up()
                super().after_codegen(node)
                # Only wanted nodes are recorded; a range is final when its node's generation
                # ends, and a wanted node enclosing this one would not be recorded yet.
                if recorder.stop_when_recorded and len(recorder._computed) == len(recorder.wanted):
                    raise _AllRecorded

        def record_syntactic_position(self, node, *, start_node=None, end_node=None):
            recorder = cast(_PositionRecorder, self.provider)
            if id(node) not in recorder.wanted_ids:
                return _NOT_RECORDED
            # A range may be hoisted from a child's (a compound statement ends where its body
            # does): the child is generated inside this block, so asking for it now is in time.
            for hoisted in (start_node, end_node):
                if hoisted is not None:
                    recorder.want(hoisted)
            self._catch_up()
            return self._caught_up_at_exit(
                super().record_syntactic_position(node, start_node=start_node, end_node=end_node)
            )

        @contextlib.contextmanager
        def _caught_up_at_exit(self, recording):
            with recording:  # (which reads the position where it starts, and again where it ends)
                try:
                    yield
                finally:
                    self._catch_up()

    if NEWLINE_RE.pattern != r"\r\n?|\n":  # (what `_catch_up` counts, as libcst does)
        return None
    return SelectivePositionState
