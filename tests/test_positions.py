"""The engine's selective positions equal libcst's PositionProvider for every node asked for."""

from __future__ import annotations

import random

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from gpulint.linter.analysis.positions import positions_of
from tests.helpers import FIXTURES


class _AllNodes(cst.CSTVisitor):
    """Every node of a module, and the statement of its body each one is in."""

    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []
        self.top: dict[cst.CSTNode, cst.CSTNode] = {}
        self._depth = 0
        self._current: cst.CSTNode | None = None

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.nodes.append(node)
        if self._depth == 1 and isinstance(node, cst.BaseStatement):
            self._current = node
        if self._current is not None:
            self.top[node] = self._current
        self._depth += 1
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._depth -= 1
        if self._depth == 1:
            self._current = None

    def top_level_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.top.get(node)


def _all_nodes(module: cst.Module) -> _AllNodes:
    collector = _AllNodes()
    module.visit(collector)
    return collector


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


@pytest.fixture
def generated_passes(monkeypatch) -> list[cst.CSTNode]:
    """The `pass` statements code generation goes through, as it goes."""
    generated: list[cst.CSTNode] = []
    original = cst.Pass._codegen_impl

    def noting(self, state, *args, **kwargs):
        generated.append(self)
        return original(self, state, *args, **kwargs)

    monkeypatch.setattr(cst.Pass, "_codegen_impl", noting)
    return generated


def test_the_pass_stops_once_every_wanted_node_is_recorded(generated_passes):
    module = cst.parse_module("x = compute(1)\ny = x + 1\n" + "pass\n" * 50)
    first = module.body[0]
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    generated = generated_passes
    generated.clear()  # (what computing `expected` generated)
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


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.py")), ids=lambda p: p.name)
def test_positions_by_statement_equal_the_providers(path, monkeypatch):
    text = path.read_bytes().decode("utf-8")
    module = cst.parse_module(text)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = _all_nodes(module)
    in_statements = [node for node in nodes.nodes if nodes.top_level_of(node) is not None]

    def one_pass(*args, **kwargs):
        raise AssertionError("the module was generated whole")

    monkeypatch.setattr(cst.Module, "_codegen_impl", one_pass)  # (each statement is generated alone)
    every = positions_of(module, set(in_statements), text, nodes.top_level_of)
    assert all(every[node] == expected[node] for node in in_statements)
    few = random.Random(path.name).sample(in_statements, 25)
    selected = positions_of(module, set(few), text, nodes.top_level_of)
    assert all(selected[node] == expected[node] for node in few)


def test_only_the_statements_holding_wanted_nodes_are_generated(generated_passes):
    text = "import torch\n" + "".join(f"def f{i}():\n    pass\n\n" for i in range(20)) + "x = compute(1)\n"
    module = cst.parse_module(text)
    nodes = _all_nodes(module)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    generated = generated_passes
    generated.clear()  # (what computing `expected` generated)
    call = cst.ensure_type(cst.ensure_type(module.body[-1], cst.SimpleStatementLine).body[0], cst.Assign).value
    assert positions_of(module, {call}, text, nodes.top_level_of)[call] == expected[call]
    assert generated == []  # (the twenty functions before its statement were not generated)
    positions_of(module, {call})  # (the one pass generates them: the test would see it)
    assert len(generated) == 20


@pytest.mark.parametrize(
    "source",
    [
        "import torch\nx = 1\nimport torch\ny = f(x)\n",  # a statement written twice
        "x = 1\r\ny = f(\r\n    2,\r\n)\r\n",  # Windows newlines
        "x = 1\ny = '''a\r\nb'''\r\nz = g(x)  # done\n",  # mixed, and a newline inside a string
        "x = 1\ry = f(2)\r",  # old Mac newlines
        "def f():\n    if x:\n        return 1\n\n\n# the end",  # no trailing newline
        "# header\n\nx = f(1)\n\n# before\ny = 2",  # comments above; the last without a newline
        "\ufeffx = 1\ny = f(x)\n",  # a byte order mark
    ],
    ids=["repeated", "crlf", "mixed", "cr", "no-trailing-newline", "comments", "bom"],
)
def test_positions_by_statement_over_every_layout(source):
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = _all_nodes(module)
    for node in nodes.nodes:
        assert positions_of(module, {node}, source, nodes.top_level_of)[node] == expected[node]
    every = positions_of(module, set(nodes.nodes), source, nodes.top_level_of)
    assert all(every[node] == expected[node] for node in nodes.nodes)
