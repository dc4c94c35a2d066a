"""The engine's selective positions equal libcst's PositionProvider for every node asked for."""

from __future__ import annotations

import random

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from gpulint.linter.analysis.positions import positions_of
from tests.helpers import FIXTURES


class _AllNodes(cst.CSTVisitor):
    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.nodes.append(node)
        return True


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.py")), ids=lambda p: p.name)
def test_selected_positions_equal_the_providers(path):
    module = cst.parse_module(path.read_bytes())
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    collector = _AllNodes()
    module.visit(collector)
    every = positions_of(module, set(collector.nodes))
    assert all(every[node] == expected[node] for node in collector.nodes)
    few = random.Random(path.name).sample(collector.nodes, 25)  # as a file's findings ask for a few
    selected = positions_of(module, set(few))
    assert all(selected[node] == expected[node] for node in few)
    assert len(selected) < len(collector.nodes) / 4  # and only those (plus what their ranges derive from)


def test_the_pass_stops_once_every_wanted_node_is_recorded(monkeypatch):
    module = cst.parse_module("x = compute(1)\ny = x + 1\n" + "pass\n" * 50)
    first = module.body[0]
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    generated: list[cst.CSTNode] = []
    original = cst.Pass._codegen_impl

    def noting(self, state, *args, **kwargs):
        generated.append(self)
        return original(self, state, *args, **kwargs)

    monkeypatch.setattr(cst.Pass, "_codegen_impl", noting)
    selected = positions_of(module, {first})
    assert selected[first] == expected[first]
    assert generated == []  # (nothing after the first statement was generated)
    last = module.body[-1]
    assert positions_of(module, {first, last})[last] == expected[last]
    assert len(generated) == 50


@pytest.mark.parametrize(
    "source",
    [
        "x = 1\r\ny = f(\r\n    2,\r\n)\r\n",  # Windows newlines
        "x = 1\ny = '''a\r\nb'''\r\nz = g(x)  # done\n",  # mixed, and a newline inside a string
        "x = 1\ry = f(2)\r",  # old Mac newlines
        "def f():\n    if x:\n        return 1\n\n\n# the end",  # no trailing newline
    ],
    ids=["crlf", "mixed", "cr", "no-trailing-newline"],
)
def test_positions_over_every_kind_of_newline(source):
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    collector = _AllNodes()
    module.visit(collector)
    for node in collector.nodes:  # one at a time: each pass stops at its node
        assert positions_of(module, {node})[node] == expected[node]
    every = positions_of(module, set(collector.nodes))
    assert all(every[node] == expected[node] for node in collector.nodes)
