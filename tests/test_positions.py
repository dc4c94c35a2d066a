"""The engine's selective positions equal libcst's PositionProvider for every node asked for."""

from __future__ import annotations

import random

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from gpulint.linter.analysis.positions import positions_of
from tests.helpers import FIXTURES


class _AllNodes(cst.CSTVisitor):
    """Every node of a module, with its parent (the tree the engine's walk records)."""

    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self._stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.nodes.append(node)
        if self._stack:
            self.parents[node] = self._stack[-1]
        self._stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._stack.pop()

    def parent_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def in_statements(self, module: cst.Module) -> list[cst.CSTNode]:
        """The nodes some statement of the module's body holds (not its header or footer)."""
        held = []
        for node in self.nodes:
            top = node
            while self.parents.get(top) not in (module, None):
                top = self.parents[top]
            if self.parents.get(top) is module and isinstance(top, cst.BaseStatement):
                held.append(node)
        return held


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
    in_statements = nodes.in_statements(module)

    def one_pass(*args, **kwargs):
        raise AssertionError("the module was generated whole")

    monkeypatch.setattr(cst.Module, "_codegen_impl", one_pass)  # (each statement is generated alone)
    every = positions_of(module, set(in_statements), text, nodes.parent_of)
    assert all(every[node] == expected[node] for node in in_statements)
    few = random.Random(path.name).sample(in_statements, 25)
    selected = positions_of(module, set(few), text, nodes.parent_of)
    assert all(selected[node] == expected[node] for node in few)


_NESTED = """import torch


def train(model, loader, opt):
    for epoch in range(3):
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            # a comment
            opt.step()
            print(loss.item())
        validate(model)
"""


def test_a_nested_statement_is_generated_without_the_function_around_it(monkeypatch):
    module = cst.parse_module(_NESTED)
    nodes = _all_nodes(module)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    calls = [n for n in nodes.nodes if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)]
    item = next(c for c in calls if cst.ensure_type(c.func, cst.Attribute).attr.value == "item")

    def whole(*args, **kwargs):
        raise AssertionError("a statement around the finding's was generated")

    monkeypatch.setattr(cst.FunctionDef, "_codegen_impl", whole)
    monkeypatch.setattr(cst.For, "_codegen_impl", whole)
    assert positions_of(module, {item}, _NESTED, nodes.parent_of)[item] == expected[item]


def test_a_line_written_twice_is_placed_by_the_statement_around_it(monkeypatch):
    text = "def f():\n    for a in b:\n        opt.step()\n    for c in d:\n        opt.step()\n"
    module = cst.parse_module(text)
    nodes = _all_nodes(module)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    steps = [n for n in nodes.nodes if isinstance(n, cst.Call)]

    def whole(*args, **kwargs):
        raise AssertionError("the function around the loops was generated")

    monkeypatch.setattr(cst.FunctionDef, "_codegen_impl", whole)  # (each loop's text is found once)
    placed = positions_of(module, set(steps), text, nodes.parent_of)
    assert [placed[s] for s in steps] == [expected[s] for s in steps]
    assert placed[steps[0]].start.line == 3 and placed[steps[1]].start.line == 5


def test_only_the_statements_holding_wanted_nodes_are_generated(generated_passes):
    text = "import torch\n" + "".join(f"def f{i}():\n    pass\n\n" for i in range(20)) + "x = compute(1)\n"
    module = cst.parse_module(text)
    nodes = _all_nodes(module)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    generated = generated_passes
    generated.clear()  # (what computing `expected` generated)
    call = cst.ensure_type(cst.ensure_type(module.body[-1], cst.SimpleStatementLine).body[0], cst.Assign).value
    assert positions_of(module, {call}, text, nodes.parent_of)[call] == expected[call]
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
        _NESTED,
        "def f():\n\tfor b in d:\n\t\ty = g(b)\n\t\tif y:\n\t\t\tbreak\n",  # tabs
        "class A:\n  def f(self):\n        x = 1\n        return x\n",  # each block its own indent
        "def f():\n    x = 1\n# at column 0, in the block\n    y = g(x)\n      # deeper\n    return y\n",
        "def f(x):\n    match x:\n        case 1:\n            y = g(x)\n        case _:\n            pass\n",
        "for a in b:\n    opt.step()\nfor c in d:\n    opt.step()\n",  # a line in two loops
        "def f():\n    opt.step()\ndef f():\n    opt.step()\n",  # and in two functions written alike
        "if a:\n    x = 1\nelif b:\n    x = 2\nelse:\n    x = 3\n",
        "try:\n    x = f()\nexcept E as e:\n    x = 2\nelse:\n    y = 1\nfinally:\n    z = 0\n",
        "async def f():\n    async with a as b:\n        await b.g()\n"
        "    while x:\n        x -= 1\n    else:\n        y = 1\n",
        "@dec\ndef f():\n    @inner\n    def g():\n        return 1\n    return g\n",
        "def f():\r\n    if x:\r\n        y = g(\r\n            1)\r\n    return y\r\n",  # Windows newlines
        "def f():\n    if x: y = 1; z = 2\n    return y\n",  # a one-line block
    ],
    ids=[
        "repeated",
        "crlf",
        "mixed",
        "cr",
        "no-trailing-newline",
        "comments",
        "bom",
        "nested",
        "tabs",
        "block-indents",
        "comments-in-blocks",
        "match",
        "repeated-in-loops",
        "repeated-in-functions",
        "elif-else",
        "try",
        "async-while-else",
        "decorators",
        "crlf-nested",
        "simple-suite",
    ],
)
def test_positions_by_statement_over_every_layout(source):
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = _all_nodes(module)
    for node in nodes.nodes:
        assert positions_of(module, {node}, source, nodes.parent_of)[node] == expected[node]
    every = positions_of(module, set(nodes.nodes), source, nodes.parent_of)
    assert all(every[node] == expected[node] for node in nodes.nodes)
