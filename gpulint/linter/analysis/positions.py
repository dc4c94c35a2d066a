"""Line and column ranges of nodes, computed only for the nodes asked for.

libcst's `PositionProvider` is a code generation pass that records a range for every node of the
module; the recording, not the code generation, is most of its cost (measured: 49 ms for the
provider, 21 ms for the code generation alone, on a 281-line file), and a file's findings need a
handful.  So the same pass runs with libcst's own position-keeping state, told to record only those
nodes, and stops once it has recorded them all (the rest of the module is not generated).  Without
the libcst internals this uses, every node's range is computed the public way.

Given the module's text and each node's top-level statement, only the statements that hold wanted
nodes are generated, each on its own from line 1; the text generated is then looked for in the
module's text, and where it occurs exactly once that occurrence is the statement (a module's text
is its statements' texts in order, so the statement's own text is one occurrence), and the ranges
move down by its line.  A statement whose text occurs more than once (an `import torch` written
twice) sends the whole file back to the one pass.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import cast

import libcst as cst
from libcst.metadata import CodePosition, CodeRange


def positions_of(
    module: cst.Module,
    nodes: Iterable[cst.CSTNode],
    text: str | None = None,
    top_level_of: Callable[[cst.CSTNode], cst.CSTNode | None] | None = None,
) -> Mapping[cst.CSTNode, CodeRange]:
    """libcst's `PositionProvider` ranges of `nodes` (and of the nodes their ranges derive from).
    With the module's `text` (what `module.code` gives) and `top_level_of(node)` (the statement of
    `module.body` holding it, None when none does), only the statements holding them are
    generated, where their text places them for certain (see the module docstring)."""
    state_class = _selective_position_state()
    if state_class is None:
        from libcst.metadata import MetadataWrapper, PositionProvider

        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    if text is not None and top_level_of is not None:
        placed = _by_statement(state_class, module, set(nodes), text, top_level_of)
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


def _by_statement(state_class, module, nodes, text, top_level_of) -> dict | None:
    """The ranges of `nodes`, generating only their top-level statements; None when a node is in
    no statement of the body or a statement's text is not found exactly once in `text`."""
    statements: dict[int, tuple[cst.CSTNode, list[cst.CSTNode]]] = {}
    for node in nodes:
        statement = top_level_of(node)
        if statement is None:
            return None
        statements.setdefault(id(statement), (statement, []))[1].append(node)
    computed: dict = {}
    plain_newlines = "\r" not in text
    for statement, wanted in statements.values():
        recorder = _PositionRecorder(wanted, stop_when_recorded=False)  # (the whole text is looked for)
        state = state_class(
            default_indent=module.default_indent, default_newline=module.default_newline, provider=recorder
        )
        statement._codegen(state)
        state._catch_up()
        generated = "".join(state.tokens)
        start = text.find(generated)
        if start < 0 or text.find(generated, start + 1) >= 0:
            return None
        # A top-level statement starts a line; its lines before it are counted as libcst counts.
        if start and text[start - 1] not in "\r\n":
            return None
        before = text.count("\n", 0, start) if plain_newlines else len(_NEWLINES.findall(text, 0, start))
        for node, found in recorder._computed.items():
            computed[node] = CodeRange(
                CodePosition(found.start.line + before, found.start.column),
                CodePosition(found.end.line + before, found.end.column),
            )
    return computed


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
