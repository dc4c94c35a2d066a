"""Everything a rule can ask about the file it is checking.

A FileContext is built once per parsed file from one walk of the tree (walk.py): the import table
and the value origins are filled from that walk at once, every other analysis -- the training-loop
model, what PyTorch and TensorFlow code does -- is a `cached_property`, computed the first
time a rule asks and shared by every rule after it.  That is the one way per-file analyses are
cached: on the FileContext, or on the analysis object it holds.  Positions, a code generation pass,
are computed only for the nodes the engine asks about (`positions`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

import libcst as cst
from libcst.metadata import CodeRange

from gpulint.linter.analysis.command_line import Option, declared_options, parsed_arguments
from gpulint.linter.analysis.imports import ImportTable
from gpulint.linter.analysis.item_cost import LoaderCosts
from gpulint.linter.analysis.loops import (
    LIGHTNING_MODULES,
    LoopModel,
    is_direct_step_call,
    is_method,
    lightning_training_steps,
    loop_around,
)
from gpulint.linter.analysis.nodes import dotted_name, keyword_arg, last_name, positional_args
from gpulint.linter.analysis.positions import positions_of
from gpulint.linter.analysis.project import EMPTY_VIEW, CalleeFacts, ModuleView
from gpulint.linter.analysis.pytorch import TorchAnalysis
from gpulint.linter.analysis.tensorflow import TfAnalysis
from gpulint.linter.analysis.test_files import is_test_path  # noqa: F401 - re-exported for the rules
from gpulint.linter.analysis.values import ValueOrigins, target_key
from gpulint.linter.analysis.vocabulary import ACCELERATOR_CALL_PREFIXES, ACCELERATOR_MODULES
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
        "ClassDef",
        "Return",
        "SimpleString",
        "Continue",  # (which loops a `continue` cuts short: loops.py)
    }
)

# Node types the analyses look up by type, which no rule needs dispatched in source order: each
# used to be found by a walk of its own over the whole tree, for every variable asked about.
LISTED_TYPES = frozenset({"Name", "For"})

_CUDA_STRING = re.compile(r"""^[rbuRBU]*['"]{1,3}(cuda|gpu)\b""")
# Names that hold a device: `device`, `self.dev`, `trainer.device`, `local_rank`, `gpu_id`.
_DEVICE_NAME = re.compile(r"(^|_)(device|dev|rank|local_rank|gpu|gpu_id)$", re.IGNORECASE)
_HOST_DEVICE_TEXT = re.compile(r"""^[rbuRBU]*['"](cpu|meta|mps)\b""")

STATEMENT_TYPES = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
_NOTHING = CalleeFacts()


class FileContext:
    """A parsed module with its import table, value origins and the analyses built on them."""

    def __init__(
        self,
        module: cst.Module,
        path: str,
        options: Mapping[str, Any],
        wanted_types: frozenset[str],
        source: bytes | None = None,
        project: ModuleView | None = None,
        target_tensorflow: tuple[int, int] | None = None,
        torch_floor: tuple[tuple[int, int], str] | None = None,
        tensorflow_floor: tuple[tuple[int, int], str] | None = None,
        target_lightning: tuple[int, int] | None = None,
    ) -> None:
        self.module = module
        self.path = path
        self._source = source
        self.options = options
        # The oldest TensorFlow the project runs on (its requirements, `target-tensorflow`); None: not known.
        self.target_tensorflow = target_tensorflow
        # The oldest PyTorch the project says it runs on, and where it says so ("its requirements",
        # "its README"); None: not known.
        self.torch_floor = torch_floor
        # The oldest TensorFlow the project says it runs on (its requirements, else its prose), and
        # where it says so; None: not known.  Fixes pick the spelling that version has.
        self.tensorflow_floor = tensorflow_floor
        # The oldest Lightning its requirements allow; None: not known.
        self.target_lightning = target_lightning
        # What the rest of the project says about this module (empty when linted alone).
        self.project = project if project is not None else EMPTY_VIEW
        self.index = TreeIndex(module, wanted_types | ANALYSIS_TYPES, LISTED_TYPES)
        self.imports = ImportTable()
        for import_ in self.index.nodes("Import"):
            self.imports.add_import(import_)
        for import_from in self.index.nodes("ImportFrom"):
            self.imports.add_import_from(import_from)
        self.values = ValueOrigins(self.imports)
        for type_name in ("Assign", "AnnAssign", "WithItem", "Param"):
            for node in self.index.nodes(type_name):
                self.values.add(node)
        self._add_functions_to_values()
        if self.project:
            view = self.project
            self.values.external_returns = lambda call, kind: (
                kind in (view.callee(dotted_name(call.func)) or _NOTHING).returns
            )

    def _add_functions_to_values(self) -> None:
        """What the module's functions return, what their parameters are called with here, and
        what goes into containers (value origins that need the whole module)."""
        functions: dict[str, list[cst.FunctionDef]] = {}
        for function in self.index.nodes("FunctionDef"):
            key = f"self.{function.name.value}" if is_method(self.index, function) else function.name.value
            functions.setdefault(key, []).append(function)
            self.values.add_function(key, [])
        for node in self.index.nodes("Return"):
            enclosing = self.enclosing_function(node)
            if enclosing is not None and node.value is not None:
                key = f"self.{enclosing.name.value}" if is_method(self.index, enclosing) else enclosing.name.value
                self.values.add_function(key, [node.value])
        for call in self.index.nodes("Call"):
            self.values.add_container_call(call)
            called = self.values.function_key(call)
            if called is None:
                continue
            for function in functions.get(called, ()):
                static = any(dotted_name(d.decorator) == "staticmethod" for d in function.decorators)
                self.values.bind_arguments(call, function.params, skip_first=called.startswith("self.") and not static)

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
        """The module's source with comments removed (strings kept: a `--amp` flag is real code)."""
        return without_comments(self.source_text)

    def positions(self, nodes: Iterable[cst.CSTNode]) -> Mapping[cst.CSTNode, CodeRange]:
        """The positions of `nodes`: a code generation pass over the innermost statements that
        hold them, recording only those (positions.py).  Ask once, for every node needed: each
        call is a pass of its own."""
        return positions_of(self.module, nodes, self.source_text, self.index.parent)

    @cached_property
    def names_by_identifier(self) -> Mapping[str, list[cst.Name]]:
        """Every `Name` of the module by its identifier, for the analyses that look for a
        variable's uses (each of them used to walk its scope for every variable it asked about)."""
        found: dict[str, list[cst.Name]] = {}
        for node in self.index.nodes("Name"):
            found.setdefault(node.value, []).append(node)
        return found

    def release(self) -> None:
        """Drop the analyses built on the module (its cached properties), once no one asks again.
        Each analysis holds this context, so until then the module's whole tree is in reference
        cycles only the cyclic collector frees -- in a corpus run, one collection of 180,000 objects
        in mid-run; without the cycles it is freed as soon as the lint lets go of it."""
        for name in _CACHED_PROPERTIES:
            self.__dict__.pop(name, None)

    # -- analyses ----------------------------------------------------------------------------
    @cached_property
    def loops(self) -> LoopModel:
        return LoopModel(
            self.index,
            self.imports,
            self.values,
            self.project,
            is_tensor=lambda expr: self.torch.tensors.is_tensor(expr),
            command_line=lambda: self.command_line,
        )

    @cached_property
    def command_line(self) -> tuple[Option, ...]:
        """The command-line options the module declares with argparse (command_line.py)."""
        return declared_options(self.index)

    @cached_property
    def parsed_arguments(self) -> tuple[tuple[cst.Assign, str], ...]:
        """Where the module binds its parsed command line, and the name (command_line.py)."""
        return parsed_arguments(self.index)

    @cached_property
    def torch(self) -> TorchAnalysis:
        return TorchAnalysis(self)

    @cached_property
    def tf(self) -> TfAnalysis:
        return TfAnalysis(self)

    @cached_property
    def workers(self) -> WorkerStart:
        return WorkerStart(self)

    @cached_property
    def loaders(self) -> LoaderCosts:
        """What an item of each DataLoader costs, and what the run looks like (item_cost.py)."""
        return LoaderCosts(self)

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
    def names_accelerator(self) -> bool:
        """Whether the module names an accelerator: it calls `.cuda()` or a `torch.cuda.*`-style
        function, names a "cuda"/"gpu" device in a string, or uses a library that places work on
        accelerators (Accelerate, Fabric, DeepSpeed)."""
        if self.uses(*ACCELERATOR_MODULES):
            return True
        for call in self.index.nodes("Call"):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
                return True
            qualified = self.imports.qualified_name(func)
            if qualified and qualified.startswith(ACCELERATOR_CALL_PREFIXES):
                return True
        return any(_CUDA_STRING.match(s.value) for s in self.index.nodes("SimpleString"))

    @cached_property
    def places_on_device(self) -> bool:
        """Whether the module moves work to a device it is handed rather than names: `.to(device)`
        with a `device` parameter or attribute (`trainer.device`, `accelerator.device`), a device a
        project helper returned, `.to(local_rank)`, DDP's `device_ids=[rank]`, an "nccl" process
        group.  A device every assignment of which is the host (`device = "cpu"`) is none."""
        for call in self.index.nodes("Call"):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "to":
                positional = positional_args(call)
                keyword = keyword_arg(call, "device")
                target = keyword.value if keyword is not None else positional[0].value if positional else None
                if target is not None and self._names_a_device(target):
                    return True
            devices = keyword_arg(call, "device_ids")
            if devices is not None and not (isinstance(devices.value, cst.Name) and devices.value.value == "None"):
                return True
        return any(s.value.strip("\"'") == "nccl" for s in self.index.nodes("SimpleString"))

    def _names_a_device(self, target: cst.BaseExpression) -> bool:
        name = last_name(target)
        if name is None or not _DEVICE_NAME.search(name):
            return False
        key = target_key(target)
        origins = self.values.assigned.get(key, ()) if key else ()
        return not origins or not all(_is_host_device(self, origin) for origin in origins)

    @cached_property
    def defines_lightning_module(self) -> bool:
        """Whether the module defines a LightningModule: Lightning runs its steps on the
        accelerator it finds."""
        return any(
            any(self.imports.qualified_name(base.value) in LIGHTNING_MODULES for base in cls.bases)
            for cls in self.index.nodes("ClassDef")
        )

    @cached_property
    def takes_steps(self) -> bool:
        """Whether anything in the module takes a training step (without building the loop model:
        a step function always holds a direct step call)."""
        calls = self.index.nodes("Call")
        if any(is_direct_step_call(call, self.values) for call in calls):
            return True
        if self.project.steps_elsewhere:
            return True  # a function run per step by another module, or a step function of another
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


_CACHED_PROPERTIES = tuple(name for name, value in vars(FileContext).items() if isinstance(value, cached_property))


def _is_host_device(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """`"cpu"`, `torch.device("cpu")`: a device that is the host."""
    if isinstance(expr, cst.SimpleString):
        return bool(_HOST_DEVICE_TEXT.match(expr.value))
    if isinstance(expr, cst.Call) and ctx.call_qualified_name(expr) == "torch.device" and expr.args:
        first = expr.args[0].value
        return isinstance(first, cst.SimpleString) and bool(_HOST_DEVICE_TEXT.match(first.value))
    return False


# A string literal, a comment or a line continuation, whichever starts first, so that each `#` and
# backslash found is outside every string.  A string's prefix (r, b, f...) does not change where
# it ends -- a backslash escapes the next character even in a raw string -- so the quotes alone
# delimit it.
_STRING_OR_COMMENT = re.compile(
    "(?P<string>"
    + r'"""(?:\\[\s\S]|[^\\])*?"""'
    + "|"
    + r"'''(?:\\[\s\S]|[^\\])*?'''"
    + "|"
    + r'"(?:\\[\s\S]|[^"\\\r\n])*"'
    + "|"
    + r"'(?:\\[\s\S]|[^'\\\r\n])*'"
    + r")|(?P<dropped>#[^\r\n]*|\\(?:\r\n|\r|\n))"
)


def without_comments(code: str) -> str:
    """`code` without its comments and line continuations (a backslash ending a line), everything
    else as written: its tokens' text, as Python's tokenize module would give them, but in one
    regular-expression pass instead of ten times slower pure Python.  (The rules search this text
    for mentions; they need no tokens.)  Python 3.12's f-strings may nest their own quote: one
    that holds a `#` inside such a nested string loses the rest of its line here."""
    return _STRING_OR_COMMENT.sub(_keep_strings, code)


def _keep_strings(match: re.Match[str]) -> str:
    return match.group(0) if match.group("dropped") is None else ""
