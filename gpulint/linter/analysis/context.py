"""Everything a rule can ask about the file it is checking, computed once per file."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any, Iterable

import libcst as cst

from gpulint.linter.analysis.imports import ImportTable, dotted_name
from gpulint.linter.analysis.loops import LoopModel
from gpulint.linter.analysis.values import ValueOrigins
from gpulint.linter.analysis.walk import TreeIndex

# Node types the shared analyses need from the walk, whatever rules are enabled.
ANALYSIS_TYPES = frozenset(
    {
        "Import",
        "ImportFrom",
        "Assign",
        "AnnAssign",
        "AugAssign",
        "WithItem",
        "Param",
        "Call",
        "FunctionDef",
        "SimpleString",
    }
)

# Text every accelerated module contains (one of), by how `FileContext.accelerated` decides.
ACCELERATOR_TOKENS = (b"cuda", b"gpu", b"accelerat", b"fabric", b"deepspeed")
_CUDA_STRING = re.compile(r"""^[rbuRBU]*['"]{1,3}(cuda|gpu)\b""")
_ACCELERATOR_MODULES = ("accelerate", "lightning.fabric", "deepspeed")
_ACCELERATOR_CALL_PREFIXES = ("torch.cuda.", "torch.accelerator.", "torch.backends.cuda.", "torch.backends.cudnn.")

STATEMENT_TYPES = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


class FileContext:
    """A parsed module with its import table, value origins and training-loop model."""

    def __init__(
        self, module: cst.Module, path: str, options: dict[str, Any], wanted_types: frozenset[str], source: bytes | None = None
    ) -> None:
        self.module = module
        self.path = path
        self._source = source
        self.options = options
        self.index = TreeIndex(module, wanted_types | ANALYSIS_TYPES)
        self.imports = ImportTable()
        for node in self.index.nodes("Import"):
            self.imports.add_import(node)
        for node in self.index.nodes("ImportFrom"):
            self.imports.add_import_from(node)
        self.values = ValueOrigins(self.imports)
        for type_name in ("Assign", "AnnAssign", "WithItem", "Param"):
            for node in self.index.nodes(type_name):
                self.values.add(node)

    @cached_property
    def source_text(self) -> str:
        """The module's text.  Decoded from the bytes that were parsed when available: regenerating
        it (`module.code`) costs as much as a second parse on big files."""
        if self._source is not None:
            return self._source.decode(self.module.encoding)
        return self.module.code

    @cached_property
    def loops(self) -> LoopModel:
        return LoopModel(self.index, self.imports, self.values)

    # -- module-level facts ------------------------------------------------------------------
    def uses(self, *modules: str) -> bool:
        """Whether the module imports any of these (or anything under them)."""
        return any(self.imports.uses(m) for m in modules)

    @cached_property
    def uses_torch(self) -> bool:
        return self.uses("torch")

    @cached_property
    def uses_tensorflow(self) -> bool:
        return self.uses("tensorflow", "keras")

    @cached_property
    def accelerated(self) -> bool:
        """Whether the module moves models or tensors to an accelerator (DESIGN §2)."""
        if self.uses(*_ACCELERATOR_MODULES):
            return True
        for call in self.index.nodes("Call"):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
                return True
            qualified = self.imports.qualified_name(func)
            if qualified and qualified.startswith(_ACCELERATOR_CALL_PREFIXES):
                return True
        return any(_CUDA_STRING.match(s.value) for s in self.index.nodes("SimpleString"))

    # -- tree helpers ------------------------------------------------------------------------
    def qualified_name(self, expr: cst.BaseExpression) -> str | None:
        return self.imports.qualified_name(expr)

    def call_qualified_name(self, call: cst.Call) -> str | None:
        return self.imports.qualified_name(call.func)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.index.parent(node)

    def ancestors(self, node: cst.CSTNode) -> Iterable[cst.CSTNode]:
        return self.index.ancestors(node)

    def statement_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The innermost statement (simple line or compound statement) containing node."""
        if isinstance(node, STATEMENT_TYPES):
            return node
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, STATEMENT_TYPES):
                return ancestor
        return node

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def reference(self, qualified: str) -> tuple[str, tuple[str, ...]]:
        """Source text for `qualified` and the imports that text needs.

        Uses the module's own aliases (`tf.data.AUTOTUNE`); when nothing reaches the name, the
        full dotted path and an `import` of its top-level package.
        """
        text = self.imports.reference(qualified)
        if text is not None:
            return text, ()
        top = qualified.split(".", 1)[0]
        return qualified, (f"import {top}",)


def keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_star_kwargs(call: cst.Call) -> bool:
    """`f(**options)` may set any keyword: rules cannot know what it holds."""
    return any(arg.star == "**" for arg in call.args)


def method_name(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def is_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def is_zero(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer) and node.evaluated_value == 0


__all__ = [
    "FileContext",
    "keyword_arg",
    "has_star_kwargs",
    "method_name",
    "is_false",
    "is_true",
    "is_zero",
    "dotted_name",
]
