"""Everything a rule can ask about the file it is checking.

A FileContext is built once per parsed file from one walk of the tree (walk.py): the import table
and the value origins are filled from that walk at once, every other analysis -- the training-loop
model, what PyTorch and TensorFlow code does -- is a `cached_property`, computed the first
time a rule asks and shared by every rule after it.  That is the one way per-file analyses are
cached: on the FileContext, or on the analysis object it holds.  Positions, a code generation pass,
are computed only for the nodes the engine asks about (`positions`).
"""

from __future__ import annotations

import io
import re
import tokenize
from functools import cached_property
from typing import Any, Iterable, Mapping

import libcst as cst
from libcst.metadata import CodeRange

from gpulint.linter.analysis.imports import ImportTable
from gpulint.linter.analysis.loops import LoopModel, is_direct_step_call, lightning_training_steps, loop_around
from gpulint.linter.analysis.positions import positions_of
from gpulint.linter.analysis.pytorch import TorchAnalysis
from gpulint.linter.analysis.tensorflow import TfAnalysis
from gpulint.linter.analysis.values import ValueOrigins
from gpulint.linter.analysis.walk import TreeIndex
from gpulint.linter.analysis.workers import WorkerStart

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

_CUDA_STRING = re.compile(r"""^[rbuRBU]*['"]{1,3}(cuda|gpu)\b""")
_ACCELERATOR_MODULES = ("accelerate", "lightning.fabric", "deepspeed")
_ACCELERATOR_CALL_PREFIXES = ("torch.cuda.", "torch.accelerator.", "torch.backends.cuda.", "torch.backends.cudnn.")

STATEMENT_TYPES = (cst.SimpleStatementLine, cst.BaseCompoundStatement)

_TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)(test_[^/]*|[^/]*_test|conftest)\.py$")


def is_test_path(path: str) -> bool:
    """Whether `path` is test code by pytest's conventions: `test_*.py`, `*_test.py`,
    `conftest.py`, or anything under a `tests/` (`test/`, `testing/`) directory."""
    return bool(_TEST_PATH.search(path.replace("\\", "/")))


class FileContext:
    """A parsed module with its import table, value origins and the analyses built on them."""

    def __init__(
        self, module: cst.Module, path: str, options: Mapping[str, Any], wanted_types: frozenset[str], source: bytes | None = None
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

    # -- the text and positions ----------------------------------------------------------------
    @cached_property
    def source_text(self) -> str:
        """The module's text.  Decoded from the bytes that were parsed when available: regenerating
        it (`module.code`) costs as much as a second parse on big files."""
        if self._source is not None:
            return self._source.decode(self.module.encoding)
        return self.module.code

    @cached_property
    def code_without_comments(self) -> str:
        """The module's source with comments removed (strings kept: a `--amp` flag is real code).

        If the tokenizer disagrees with libcst about the source, the full text is used: the rules
        that read it look for mentions that make them quieter."""
        code = self.source_text
        try:
            kept = [tok.string for tok in tokenize.generate_tokens(io.StringIO(code).readline) if tok.type != tokenize.COMMENT]
            return " ".join(kept)
        except (tokenize.TokenError, SyntaxError, IndentationError):
            return code

    def positions(self, nodes: Iterable[cst.CSTNode]) -> Mapping[cst.CSTNode, CodeRange]:
        """The positions of `nodes`: one code generation pass that records only those
        (positions.py).  Ask once, for every node needed: each call is a pass over the file."""
        return positions_of(self.module, nodes)

    # -- analyses ----------------------------------------------------------------------------
    @cached_property
    def loops(self) -> LoopModel:
        return LoopModel(self.index, self.imports, self.values)

    @cached_property
    def torch(self) -> TorchAnalysis:
        return TorchAnalysis(self)

    @cached_property
    def tf(self) -> TfAnalysis:
        return TfAnalysis(self)

    @cached_property
    def workers(self) -> WorkerStart:
        return WorkerStart(self)

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
        """Whether the module moves models or tensors to an accelerator: it calls `.cuda()` or a
        `torch.cuda.*`-style function, names a "cuda"/"gpu" device in a string, or uses a library
        that places work on accelerators (Accelerate, Fabric, DeepSpeed)."""
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

    @cached_property
    def takes_steps(self) -> bool:
        """Whether anything in the module takes a training step (without building the loop model:
        a step function always holds a direct step call)."""
        calls = self.index.nodes("Call")
        if any(is_direct_step_call(call, self.values) for call in calls):
            return True
        return bool(lightning_training_steps(self.index, self.imports))

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

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The innermost function whose definition holds `node` (through lambdas and classes)."""
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return None

    def in_loop(self, node: cst.CSTNode) -> bool:
        """Whether a loop of the function holding `node` runs it again and again."""
        return loop_around(self.index, node)[0] is not None

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
