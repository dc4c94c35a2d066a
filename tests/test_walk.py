"""The fast walk must see every semantic node libcst's own visitor sees (only formatting skipped)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from gpulint.linter.analysis.walk import TreeIndex
from tests.helpers import FIXTURES

SEMANTIC = (
    "Call",
    "Name",
    "Attribute",
    "For",
    "While",
    "If",
    "FunctionDef",
    "ClassDef",
    "Assign",
    "SimpleString",
    "FormattedString",
    "BinaryOperation",
    "Comparison",
    "Lambda",
    "WithItem",
    "Decorator",
    "Arg",
    "Param",
    "Subscript",
    "Import",
    "ImportFrom",
    "AugAssign",
    "AnnAssign",
)


class _Counter(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        name = type(node).__name__
        self.counts[name] = self.counts.get(name, 0) + 1
        return True


def _sources() -> list[Path]:
    import libcst

    library = sorted(Path(libcst.__file__).parent.glob("_nodes/*.py"))[:6]
    return sorted(FIXTURES.glob("*.py")) + library


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.name)
def test_walk_sees_every_semantic_node(path):
    module = cst.parse_module(path.read_bytes())
    counter = _Counter()
    module.visit(counter)
    index = TreeIndex(module, frozenset(SEMANTIC))
    for name in SEMANTIC:
        assert len(index.nodes(name)) == counter.counts.get(name, 0), name


def test_parents_and_source_order():
    module = cst.parse_module("def f():\n    for x in y:\n        g(x)\nh()\n")
    index = TreeIndex(module, frozenset({"Call", "For"}))
    call_g = index.nodes("Call")[0]
    assert [type(n).__name__ for n in index.ordered] == ["For", "Call", "Call"]
    kinds = [type(a).__name__ for a in index.ancestors(call_g)]
    assert kinds[:3] == ["Expr", "SimpleStatementLine", "IndentedBlock"]
    assert "For" in kinds and kinds[-1] == "Module"


def test_deep_expressions_do_not_hit_the_recursion_limit():
    source = "x = " + " + ".join(["a"] * 3000) + "\n"
    module = cst.parse_module(source)
    index = TreeIndex(module, frozenset({"Name"}))
    assert len(index.nodes("Name")) == 3001
