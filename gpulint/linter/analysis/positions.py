"""Line and column ranges of nodes, computed only for the nodes asked for.

libcst's `PositionProvider` is a code generation pass that records a range for every node of the
module; the recording, not the code generation, is most of its cost (measured: 49 ms for the
provider, 21 ms for the code generation alone, on a 281-line file), and a file's findings need a
handful.  So the same pass runs with libcst's own position-keeping state, told to record only those
nodes, and stops once it has recorded them all (the rest of the module is not generated).  Without
the libcst internals this uses, every node's range is computed the public way.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Mapping
from typing import cast

import libcst as cst
from libcst.metadata import CodeRange


def positions_of(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> Mapping[cst.CSTNode, CodeRange]:
    """libcst's `PositionProvider` ranges of `nodes` (and of the nodes their ranges derive from)."""
    state_class = _selective_position_state()
    if state_class is None:
        from libcst.metadata import MetadataWrapper, PositionProvider

        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    recorder = _PositionRecorder(nodes)
    state = state_class(default_indent=module.default_indent, default_newline=module.default_newline, provider=recorder)
    try:
        module._codegen(state)
    except _AllRecorded:
        pass
    return recorder._computed


class _PositionRecorder:
    """Stands in for the position provider: where the codegen state keeps the ranges it records."""

    def __init__(self, wanted: Iterable[cst.CSTNode]) -> None:
        self.wanted = set(wanted)
        self._computed: dict = {}


class _AllRecorded(Exception):
    """Every wanted node's range is recorded: the rest of the code generation is not needed."""


_NOT_RECORDED = contextlib.nullcontext()


@functools.lru_cache(maxsize=1)
def _selective_position_state():
    """libcst's position-providing codegen state, recording only the nodes its provider wants
    (None when this libcst has no such internal)."""
    try:
        from libcst.metadata.position_provider import PositionProvidingCodegenState
    except ImportError:
        return None

    # `provider` is a _PositionRecorder, passed where libcst expects its own provider: the casts
    # say so to the type checker.
    class SelectivePositionState(PositionProvidingCodegenState):
        def before_codegen(self, node) -> None:
            if node in cast(_PositionRecorder, self.provider).wanted:
                super().before_codegen(node)

        def after_codegen(self, node) -> None:
            recorder = cast(_PositionRecorder, self.provider)
            if node in recorder.wanted:
                super().after_codegen(node)
                # Only wanted nodes are recorded; a range is final when its node's generation
                # ends, and a wanted node enclosing this one would not be recorded yet.
                if len(recorder._computed) == len(recorder.wanted):
                    raise _AllRecorded

        def record_syntactic_position(self, node, *, start_node=None, end_node=None):
            wanted = cast(_PositionRecorder, self.provider).wanted
            if node not in wanted:
                return _NOT_RECORDED
            # A range may be hoisted from a child's (a compound statement ends where its body
            # does): the child is generated inside this block, so asking for it now is in time.
            wanted.update(n for n in (start_node, end_node) if n is not None)
            return super().record_syntactic_position(node, start_node=start_node, end_node=end_node)

    return SelectivePositionState
