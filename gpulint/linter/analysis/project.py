"""The project index: what the functions of a project do, across its modules.

A single-file linter cannot see that `train_one_epoch` in train.py calls `clip_gradients` from
utils.py on every step, that `PerformanceMeter.update` reads a clock, or that the loaders
`load_dataset()` returns are iterated every epoch by another module.  The index can:

1. each module is *summarized* on its own, cheaply (Python's `ast`, not libcst): its imports, its
   functions, and for each call in them the text of the callee, the loops around the call, and
   whether the call takes a training step by itself (loops.is_step_method), reads a clock or
   builds a loader; what each function returns; which names it iterates again and again.  A
   summary is plain data (`to_data`), cached by the module's content like a lint result;
2. the index resolves each call to a function of the project (through imports, `module.func`,
   instances of the project's classes: `meter = PerformanceMeter(); meter.update()` runs
   `PerformanceMeter.update`) and works out, to a fixpoint over the whole project, which functions
   take training steps (step functions), which run on every step (called from a step loop, or
   from a function that does), which read a clock, and what kinds of values they return;
3. each module gets a *view*: only the facts about it that come from elsewhere -- its functions
   that other modules run per step, the project functions it calls with what they do, the
   functions whose returned loaders another module iterates every epoch.  The engine hands the
   view to the module's analyses (FileContext.project); its digest is part of the module's cache
   key, so a change in one module re-lints exactly the modules whose view it changes.

Test code is not training code: a call from a test module (test_files.py) makes only test
modules' functions per step, and a loader a test iterates again and again says nothing about the
library that built it.  A loop in `tests/test_optim.py` that calls `optimizer.step()` must not make
the optimizer's own code "the training loop" when the tests are linted with the library.

Names are resolved the way Python would from a *source root*: the first folder above the module
without an `__init__.py`.  Modules are identified as `<root>|<dotted name>`, so two projects in one
run (`train.py` in each) never mix.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from gpulint.linter.analysis.ast_names import dotted_name, last_name
from gpulint.linter.analysis.intervals import AST_READER, is_interval_condition
from gpulint.linter.analysis.item_work import is_tokenizer_call, is_transform, reader_phrase
from gpulint.linter.analysis.parse_guard import index_tree
from gpulint.linter.analysis.vocabulary import (
    ACCELERATOR_CALL_PREFIXES,
    ACCELERATOR_MODULES,
    CLOCKS,
    CONVOLUTION_LAYER,
    EXIT_CALLS,
    KINDS,
    canonical,
    is_step_method,
)
from gpulint.linter.catalog import FACT_ELSEWHERE, FACT_THROUGH_CALLS
from gpulint.linter.findings import Location, RelatedLocation

# Builtins that take an iterable without iterating it again and again.
_NOT_ITERATING = frozenset({"print", "len", "isinstance", "type", "id", "repr", "str", "getattr", "hasattr", "setattr"})
# What a dataset class whose items cost real work "returns" to a module that builds one (item_cost.py).
WORKING_DATASET = "working dataset"
# Kinds of return values the index tracks (values.KINDS).
RETURN_KINDS = ("dataloader", "tfdata")
# The version of a summary's shape: a cached summary of another version is not used.
SUMMARY_VERSION = 10
# Constructors that give each rank's model its gradient all-reduce: a module calling one runs data
# parallel with one process per GPU (GL603 needs such a wrapper somewhere in the program).
RANK_WRAPPERS = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
        "accelerate.Accelerator",
        "accelerate.accelerator.Accelerator",
    }
)
# TensorFlow calls that run Python inside a graph (GL703 follows them into other modules).
TF_PYTHON_CALLS = frozenset(
    {
        "tensorflow.py_function",
        "tensorflow.numpy_function",
        "tensorflow.py_func",
        "tensorflow.compat.v1.py_func",
        "tensorflow.compat.v1.py_function",
        "tensorflow.compat.v1.numpy_function",
    }
)
# `torch.<factory>(...)`: a tensor built in memory (what an in-memory dataset class holds).
_TENSOR_FACTORIES = frozenset(
    "tensor as_tensor zeros ones full empty arange linspace eye rand randn randint randperm from_numpy stack "
    "cat".split()
)


# -- summaries ---------------------------------------------------------------------------------


# What stands between a call and its function, innermost first: a loop (`("loop", id)`), the
# body of an `if` (`("if", condition text)`), the body of an `if` that calls one of the module's
# interval helpers (`("interval", "")`: `if divisible_by(step, n):`), or a branch that handles an
# event (`("event", "")`: an `except` handler, or a branch that leaves the iteration).
Step = tuple[str, str]


@dataclass(slots=True)  # (slots: a large project has hundreds of thousands of call sites)
class CallSite:
    """A call in a function: the callee as written (`utils.clip`, `meter.update`, `self.step`),
    what encloses it in its function (innermost first), whether it takes a step by itself, and
    the class the function belongs to (for `self.x()`)."""

    text: str
    path: tuple[Step, ...]
    steps: bool
    cls: str | None = None
    line: int = 0  # where the call is (1-based), for the chain a cross-module finding shows
    column: int = 1

    @property
    def loops(self) -> tuple[int, ...]:
        return tuple(int(value) for kind, value in self.path if kind == "loop")


@dataclass(slots=True)
class FunctionSummary:
    calls: list[CallSite] = field(default_factory=list)
    reads_clock: bool = False
    # What it returns: (position in a returned tuple or None, callee text of a call that built it).
    returns: list[tuple[int | None, str]] = field(default_factory=list)
    wraps_ranks: bool = False  # it calls a RANK_WRAPPERS constructor
    runs_python: bool = False  # it calls one of TF_PYTHON_CALLS
    # The command-line options it declares with an integer default (`parser.add_argument("--epochs",
    # default=1)` -> `{"epochs": 1}`, by the attribute that holds the value): a module that builds
    # its parser by calling it (`parser = get_argument_parser()`) has `args.epochs` 1 by default.
    options: dict[str, int] = field(default_factory=dict)


@dataclass
class ModuleSummary:
    """One module, summarized on its own (see the module docstring)."""

    bindings: dict[str, str] = field(default_factory=dict)  # local name -> absolute dotted import
    functions: dict[str, FunctionSummary] = field(default_factory=dict)  # qualname -> summary
    instances: dict[str, str] = field(default_factory=dict)  # `meter` / `self.meter` -> constructor text
    # Names holding what a call returned (`train, valid = load(...)`): name -> [(callee text, position)].
    assigned_from: dict[str, list[tuple[str, int | None]]] = field(default_factory=dict)
    reiterated: set[str] = field(default_factory=set)  # names iterated again and again here
    loop_lines: dict[str, int] = field(default_factory=dict)  # loop id (a Step's value) -> its line
    # What a helper it runs per step inherits (see ModuleView): it imports torch; it names an
    # accelerator (`.cuda()`, a `torch.cuda.*` call, a "cuda"/"gpu" string, an accelerator library:
    # FileContext.names_accelerator on the module's `ast`).
    imports_torch: bool = False
    names_accelerator: bool = False
    # Dataset classes whose `__getitem__` indexes tensors they hold (`self.data = [(torch.rand(20),
    # torch.rand(1)) for _ in range(n)]`): a DataLoader over one, in any module, loads from memory.
    in_memory_datasets: set[str] = field(default_factory=set)
    # Dataset classes whose items cost real work: `__getitem__` (or `__iter__`, or a method of the
    # class they call) reads or decodes a file, transforms an image or tokenizes (item_work.py).
    working_datasets: set[str] = field(default_factory=set)
    # Classes with their own `to()` method that takes no `non_blocking` (DETR's `NestedTensor.to(self,
    # device)`): `.to(device, non_blocking=True)` on one of their objects raises TypeError.
    own_to_classes: set[str] = field(default_factory=set)
    # It decides TF32 for the programs that import it: a module of a package, not a script (no
    # main guard), that sets `torch.backends.*.allow_tf32` or an `fp32_precision`, or calls
    # `torch.set_float32_matmul_precision` (GL404 writes no second switch in the project).  A
    # script that sets it for itself decides nothing for the scripts beside it.
    sets_tf32: bool = False
    # Its network classes of one kind, by qualname (`NETWORK_KINDS`): "convolution" for a class that
    # builds convolutions and names no attention or transformer, "attention" for one that names
    # them.  A module that builds them from here is a convolutional network or not (GL404).
    network_kinds: dict[str, str] = field(default_factory=dict)

    def to_data(self) -> dict[str, Any]:
        return {
            "version": SUMMARY_VERSION,
            "bindings": self.bindings,
            "functions": {
                name: {
                    "calls": [
                        [c.text, [list(step) for step in c.path], c.steps, c.cls, c.line, c.column] for c in f.calls
                    ],
                    "clock": f.reads_clock,
                    "returns": [[i, t] for i, t in f.returns],
                    "wraps": f.wraps_ranks,
                    "python": f.runs_python,
                    "options": f.options,
                }
                for name, f in self.functions.items()
            },
            "instances": self.instances,
            "assigned_from": {k: [[t, i] for t, i in v] for k, v in self.assigned_from.items()},
            "reiterated": sorted(self.reiterated),
            "loop_lines": self.loop_lines,
            "torch": self.imports_torch,
            "accelerator": self.names_accelerator,
            "in_memory_datasets": sorted(self.in_memory_datasets),
            "working_datasets": sorted(self.working_datasets),
            "own_to": sorted(self.own_to_classes),
            "tf32": self.sets_tf32,
            "networks": self.network_kinds,
        }

    def moved_from(self, other: ModuleSummary) -> bool:
        """Whether this summary is `other` with its calls and loops on other lines or columns (an
        edit that added or removed lines around them): equal in all the index solves from."""
        return _positionless(self.to_data()) == _positionless(other.to_data())

    @classmethod
    def from_data(cls, data: Any) -> ModuleSummary | None:
        """A summary from `to_data`'s shape; None for anything else (a cache entry of another
        version or shape is a miss, never an error)."""
        try:
            if data["version"] != SUMMARY_VERSION:
                return None
            # The calls of one block share what encloses them: one tuple for all of them.
            paths: dict[tuple[Step, ...], tuple[Step, ...]] = {}
            functions = {
                str(name): FunctionSummary(
                    calls=[
                        CallSite(
                            str(t),
                            _shared(paths, tuple((str(k), str(v)) for k, v in path)),
                            bool(s),
                            None if c is None else str(c),
                            int(line),
                            int(column),
                        )
                        for t, path, s, c, line, column in f["calls"]
                    ],
                    reads_clock=bool(f["clock"]),
                    returns=[(None if i is None else int(i), str(t)) for i, t in f["returns"]],
                    wraps_ranks=bool(f["wraps"]),
                    runs_python=bool(f["python"]),
                    options={str(k): int(v) for k, v in f["options"].items()},
                )
                for name, f in data["functions"].items()
            }
            return cls(
                bindings={str(k): str(v) for k, v in data["bindings"].items()},
                functions=functions,
                instances={str(k): str(v) for k, v in data["instances"].items()},
                assigned_from={
                    str(k): [(str(t), None if i is None else int(i)) for t, i in v]
                    for k, v in data["assigned_from"].items()
                },
                reiterated={str(n) for n in data["reiterated"]},
                loop_lines={str(k): int(v) for k, v in data["loop_lines"].items()},
                imports_torch=bool(data["torch"]),
                names_accelerator=bool(data["accelerator"]),
                in_memory_datasets={str(q) for q in data["in_memory_datasets"]},
                working_datasets={str(q) for q in data["working_datasets"]},
                own_to_classes={str(q) for q in data["own_to"]},
                sets_tf32=bool(data["tf32"]),
                network_kinds={str(q): str(k) for q, k in data["networks"].items() if k in NETWORK_KINDS},
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


# The kinds of network class a summary records (ModuleSummary.network_kinds).
NETWORK_KINDS = ("convolution", "attention")
_ATTENTION_NAME = re.compile(r"attention|transformer", re.IGNORECASE)
# What a module's text holds where one of its classes may have a network kind: an attention name
# (_ATTENTION_NAME), or a convolution layer's own name (CONVOLUTION_LAYER's last part, which the
# code spells in the call or in the import that binds it).
_NETWORK_TEXT = re.compile(rb"attention|transformer|conv(?:_?transpose)?[123]d", re.IGNORECASE)
# What decides TF32: `torch.backends.cuda.matmul.allow_tf32 = ...`, `...conv.fp32_precision = "tf32"`.
_TF32_ATTRIBUTES = frozenset({"allow_tf32", "fp32_precision"})


def _positionless(data: dict[str, Any]) -> dict[str, Any]:
    """A summary's data (`to_data`) without where its calls and loops are."""
    return {
        **data,
        "functions": {
            name: {**function, "calls": [call[:4] for call in function["calls"]]}
            for name, function in data["functions"].items()
        },
        "loop_lines": sorted(data["loop_lines"]),
    }


def _shared(seen: dict[tuple[Step, ...], tuple[Step, ...]], path: tuple[Step, ...]) -> tuple[Step, ...]:
    return seen.setdefault(path, path)


def summarize(
    source: bytes, module: str, is_package: bool = False, max_nodes: int | None = None
) -> ModuleSummary | None:
    """The summary of one module (`module` is its dotted name, for relative imports); None when
    it does not parse, or has more than `max_nodes` syntax nodes (the lint skips it).  `max_nodes`
    None: a module the run only imports (parse_guard.index_tree measures nothing for it)."""
    tree = index_tree(source, max_nodes)  # (the parse the guard measures too: parse_guard.py)
    if tree is None:
        return None
    summarizer = _Summarizer(module, is_package, source)
    try:
        summarizer.visit(tree)
    except RecursionError:
        return None
    return summarizer.finish()


def _names_called_as_condition(test: ast.expr) -> frozenset[str]:
    """The functions an `if` condition calls by plain name, alone or as one side of an `and`
    (`divisible_by(step, n)`): if one of them is an interval helper, the `if` is an interval guard."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return frozenset().union(*(_names_called_as_condition(value) for value in test.values))
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name):
        return frozenset({test.func.id})
    return frozenset()


_MODULE_LEVEL = "<module>"
_CUDA_TEXT = re.compile(r"(cuda|gpu)\b")  # a device string: "cuda", "cuda:0", "gpu"


def _key(node: ast.AST) -> str | None:
    """`x`, or `self.x`: the names a summary tracks values under."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
        return f"self.{node.attr}"
    return None


def _handles_event(branch: list[ast.stmt]) -> bool:
    """A branch that leaves the iteration (`break`, `continue`, `return`, `raise`, `sys.exit()`):
    what it does runs on a rare event, not every step (loops.LoopModel.in_event_branch)."""
    for statement in branch:
        if isinstance(statement, (ast.Break, ast.Continue, ast.Return, ast.Raise)):
            return True
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            if dotted_name(statement.value.func) in EXIT_CALLS:
                return True
    return False


class _Summarizer(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, source: bytes = b"") -> None:
        self.source = source
        self._lines: list[bytes] | None = None
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.summary = ModuleSummary()
        self.scope: list[str] = []  # qualname parts of the enclosing classes and functions
        self.classes: list[str | None] = [None]  # the class a function's `self` is
        self.paths: list[list[Step]] = [[]]  # per function: what encloses the current node (outermost first)
        self.next_loop = 0
        self.function_names: list[str] = [_MODULE_LEVEL]
        self.iterated: list[tuple[str, str, bool]] = []  # (name, function, in a nested loop)
        self.in_loop_calls: set[str] = set()  # last names of functions called inside a loop
        self.local_calls: dict[tuple[str, str], list[str]] = {}  # (function, name) -> callee texts
        # Interval helpers: functions of the module that return a modulo interval condition
        # (`def divisible_by(a, b): return a % b == 0`); an `if` that calls one throttles what it
        # guards, as the loop model decides for its own module (loops.LoopModel._interval_helpers).
        # A helper may be defined below the `if` that calls it, so such an `if` is recorded as a
        # plain condition with the names it calls and made an interval guard in `finish`.
        self.interval_helpers: set[str] = set()
        self.defined_in: list[str] = []  # the names of the functions around the current node
        self.conditions_calling: dict[str, frozenset[str]] = {}  # `if` condition text -> names it calls
        self.class_nodes: list[tuple[str, ast.ClassDef]] = []  # (qualname, definition)
        self.shared_paths: dict[tuple[Step, ...], tuple[Step, ...]] = {}  # one tuple per enclosing block
        self.tf32_set = False  # it sets TF32 somewhere (ModuleSummary.sets_tf32 says whether for others)
        self.main_guard = False  # `if __name__ == "__main__":` at its top level
        self._visitors: dict[type, Callable[[Any], None]] = {}  # (visit)
        self.conflicting_options: set[tuple[str, str]] = set()  # (function, option) given two defaults

    # -- the walk -------------------------------------------------------------------------------
    # ast.NodeVisitor's, without its per-node overhead (a method looked up by name for every node,
    # a generator over every node's fields, a call for every `Load`/`Store` context, which no
    # method here visits): the same nodes in the same order, a third of a summary's time less.
    def visit(self, node: ast.AST) -> None:
        visitor = self._visitors.get(type(node))
        if visitor is None:
            visitor = self._visitors[type(node)] = getattr(self, f"visit_{type(node).__name__}", self.generic_visit)
        visitor(node)

    def generic_visit(self, node: ast.AST) -> None:
        visit = self.visit
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        visit(item)
            elif isinstance(value, ast.AST) and name != "ctx":
                visit(value)

    # -- scopes ---------------------------------------------------------------------------------
    @property
    def function(self) -> FunctionSummary:
        return self.summary.functions.setdefault(self.function_names[-1], FunctionSummary())

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.scope.append(node.name)
        self.classes.append(node.name)
        self.class_nodes.append((".".join(self.scope), node))
        for statement in node.body:
            self.visit(statement)
        self.classes.pop()
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.scope.append(node.name)
        self.defined_in.append(node.name)
        qualname = ".".join(self.scope)
        self.function_names.append(qualname)
        self.summary.functions.setdefault(qualname, FunctionSummary())
        self.paths.append([])
        # A nested function's `self` is its enclosing method's: the class stays.
        self.classes.append(self.classes[-1])
        for statement in node.body:
            self.visit(statement)
        self.classes.pop()
        self.paths.pop()
        self.function_names.pop()
        self.defined_in.pop()
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.body)

    # -- loops --------------------------------------------------------------------------------
    def _loop(self, node: ast.For | ast.AsyncFor | ast.While, header: Iterable[ast.AST]) -> None:
        for part in header:
            self.visit(part)
        if isinstance(node, (ast.For, ast.AsyncFor)):
            name = _key(node.iter) or (
                _key(node.iter.args[0]) if isinstance(node.iter, ast.Call) and node.iter.args else None
            )  # `for b in loader`, `for i, b in enumerate(loader)`
            if name is not None:
                self.iterated.append((name, self.function_names[-1], self._in_loop()))
        self.paths[-1].append(("loop", str(self.next_loop)))
        self.summary.loop_lines[str(self.next_loop)] = node.lineno
        self.next_loop += 1
        if isinstance(node, ast.While):
            self.visit(node.test)  # (the test runs on every iteration)
        for statement in node.body:
            self.visit(statement)
        self.paths[-1].pop()
        for statement in node.orelse:
            self.visit(statement)

    def _in_loop(self) -> bool:
        return any(kind == "loop" for kind, _ in self.paths[-1])

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        condition = ast.unparse(node.test)
        if not self.scope and "__name__" in condition and "__main__" in condition:
            self.main_guard = True
        called = _names_called_as_condition(node.test)
        if called:  # (an interval guard if one of them is an interval helper: `finish` decides)
            self.conditions_calling[condition] = called
        for branch, step in ((node.body, ("if", condition)), (node.orelse, ("else", ""))):
            if _handles_event(branch):
                step = ("event", "")
            self.paths[-1].append(step)
            for statement in branch:
                self.visit(statement)
            self.paths[-1].pop()

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        self.paths[-1].append(("event", ""))
        for statement in node.body:
            self.visit(statement)
        self.paths[-1].pop()

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._loop(node, [node.iter])

    visit_AsyncFor = visit_For

    def visit_While(self, node: ast.While) -> None:
        self._loop(node, [])

    # -- statements ---------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.summary.bindings[alias.asname] = alias.name
            else:
                top = alias.name.split(".", 1)[0]
                self.summary.bindings.setdefault(top, top)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            package = self.package.split(".") if self.package else []
            if node.level - 1 > len(package):
                return
            parent = package[: len(package) - (node.level - 1)]
            base = ".".join([*parent, *([base] if base else [])])
        for alias in node.names:
            if alias.name == "*":
                continue
            self.summary.bindings[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._bind(target, node.value)
            if isinstance(target, ast.Attribute) and target.attr in _TF32_ATTRIBUTES:
                self.tf32_set = True

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self._bind(node.target, node.value)

    def _bind(self, target: ast.AST, value: ast.AST) -> None:
        key = _key(target)
        if isinstance(value, ast.Call):
            callee = dotted_name(value.func)
            if callee is None:
                return
            if key is not None:
                self.summary.instances[key] = callee
                self.summary.assigned_from.setdefault(key, []).append((callee, None))
                self.local_calls.setdefault((self.function_names[-1], key), []).append(callee)
            elif isinstance(target, (ast.Tuple, ast.List)):
                for position, element in enumerate(target.elts):
                    element_key = _key(element)
                    if element_key is not None:
                        self.summary.assigned_from.setdefault(element_key, []).append((callee, position))

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is None:
            return
        if self.defined_in:
            text = ast.unparse(node.value)
            if "%" in text and _throttles(text):  # (a modulo helper: `return step % n == 0`)
                self.interval_helpers.update(self.defined_in)  # (a nested function's return too)
        self.visit(node.value)
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        for position, value in enumerate(values):
            index = position if isinstance(node.value, ast.Tuple) else None
            if isinstance(value, ast.Call) and (callee := dotted_name(value.func)) is not None:
                self.function.returns.append((index, callee))
            elif (key := _key(value)) is not None:
                for callee in self.local_calls.get((self.function_names[-1], key), ()):
                    self.function.returns.append((index, callee))

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        func = node.func
        text = dotted_name(func) or ""  # "": a callee no name reaches (`scaler.scale(loss).backward`)
        path = _shared(self.shared_paths, tuple(reversed(self.paths[-1])))
        steps = isinstance(func, ast.Attribute) and is_step_method(func.attr, last_name(func.value))
        if not text and not steps:
            return
        function = self.function
        function.calls.append(CallSite(text, path, steps, self.classes[-1], node.lineno, self._column(node)))
        head, _, rest = text.partition(".")
        target = self.summary.bindings.get(head)
        qualified = canonical(f"{target}.{rest}" if rest else target) if target is not None else None
        if qualified is not None and CLOCKS.match(qualified):
            function.reads_clock = True
        if qualified in RANK_WRAPPERS:
            function.wraps_ranks = True
        if qualified in TF_PYTHON_CALLS:
            function.runs_python = True
        if text.rpartition(".")[2] == "set_float32_matmul_precision":
            self.tf32_set = True
        if (isinstance(func, ast.Attribute) and func.attr == "cuda") or (
            target is not None and f"{target}.{rest}".startswith(ACCELERATOR_CALL_PREFIXES)
        ):
            self.summary.names_accelerator = True
        if isinstance(func, ast.Attribute) and func.attr == "add_argument":
            self._option(node)
        if self._in_loop():
            last = text.rpartition(".")[2]
            self.in_loop_calls.add(last)
            if last not in _NOT_ITERATING:
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    key = _key(arg)
                    if key is not None:
                        self.summary.reiterated.add(key)

    def _option(self, node: ast.Call) -> None:
        """An `add_argument` with an integer default, by the attribute that holds its value (the
        dest, else the first long flag, else the first name); one declared twice with two
        defaults is left out."""
        keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
        default = keywords.get("default")
        if not (isinstance(default, ast.Constant) and type(default.value) is int):
            return
        dest = keywords.get("dest")
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        flags = [n for n in names if n.startswith("--")]
        if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
            name = dest.value
        elif flags or names:
            name = (flags or names)[0].lstrip("-")
        else:
            return
        name = name.replace("-", "_")
        options = self.function.options
        key = (self.function_names[-1], name)
        if key in self.conflicting_options or options.get(name, default.value) != default.value:
            self.conflicting_options.add(key)
            options.pop(name, None)
            return
        options[name] = default.value

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _CUDA_TEXT.match(node.value):
            self.summary.names_accelerator = True

    def _column(self, node: ast.expr) -> int:
        """The node's 1-based column in code points, as findings count them (`ast` counts bytes)."""
        if self._lines is None:
            self._lines = self.source.splitlines()
        line = self._lines[node.lineno - 1] if 0 < node.lineno <= len(self._lines) else b""
        before = line[: node.col_offset]
        return (node.col_offset if before.isascii() else len(before.decode("utf-8", "replace"))) + 1

    def finish(self) -> ModuleSummary:
        self._mark_interval_guards()
        imported = set(self.summary.bindings.values())
        self.summary.imports_torch = any(m == "torch" or m.startswith("torch.") for m in imported)
        if any(m == a or m.startswith(f"{a}.") for m in imported for a in ACCELERATOR_MODULES):
            self.summary.names_accelerator = True
        for name, function, nested in self.iterated:
            if nested or function.rpartition(".")[2] in self.in_loop_calls:
                self.summary.reiterated.add(name)
        self.summary.in_memory_datasets = {q for q, node in self.class_nodes if self._in_memory_dataset(node)}
        self.summary.working_datasets = {q for q, node in self.class_nodes if self._items_work(node)}
        self.summary.own_to_classes = {q for q, node in self.class_nodes if _to_without_non_blocking(node)}
        self.summary.sets_tf32 = self.tf32_set and "." in self.module and not self.main_guard
        for qualname, node in self.class_nodes if _may_name_a_network(self.source) else ():
            kind = self._network_kind(node)
            if kind is not None:
                self.summary.network_kinds[qualname] = kind
        # (the visitors are bound methods: a cycle through the summarizer that would keep the
        # module's tree until the cyclic collector came by)
        self._visitors.clear()
        return self.summary

    def _network_kind(self, cls: ast.ClassDef) -> str | None:
        """ "attention" for a class that names attention or a transformer (its name, a name it
        uses, a layer it builds), else "convolution" for one that builds a convolution, else None."""
        convolution = False
        for node in ast.walk(cls):
            if isinstance(node, ast.ClassDef | ast.Name | ast.Attribute):
                name = (
                    node.name
                    if isinstance(node, ast.ClassDef)
                    else node.id
                    if isinstance(node, ast.Name)
                    else node.attr
                )
                if _ATTENTION_NAME.search(name):
                    return "attention"
            if isinstance(node, ast.Call) and not convolution:
                callee = dotted_name(node.func) or ""
                head, _, rest = callee.partition(".")
                target = self.summary.bindings.get(head)
                qualified = canonical(f"{target}.{rest}" if rest else target) if target is not None else ""
                convolution = bool(CONVOLUTION_LAYER.match(qualified))
        return "convolution" if convolution else None

    def _mark_interval_guards(self) -> None:
        """The `if`s whose condition calls an interval helper of the module, in every call's path:
        interval guards, not plain conditions (see `interval_helpers`)."""
        guards = {
            ("if", condition)
            for condition, called in self.conditions_calling.items()
            if not called.isdisjoint(self.interval_helpers)
        }
        if not guards:
            return
        shared: dict[tuple[Step, ...], tuple[Step, ...]] = {}
        for function in self.summary.functions.values():
            for site in function.calls:
                if not guards.isdisjoint(site.path):
                    marked = tuple(("interval", "") if step in guards else step for step in site.path)
                    site.path = _shared(shared, marked)

    def _in_memory_dataset(self, cls: ast.ClassDef) -> bool:
        """`__getitem__` returns only `self.<attr>[...]` (or tuples of them), and the class only
        ever assigns those attributes tensors, or lists or tuples of tensors (pytorch.py's
        in_memory_dataset, for a class of another module)."""
        getitem = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__getitem__"), None)
        if getitem is None:
            return False
        returned = [n.value for n in ast.walk(getitem) if isinstance(n, ast.Return) and n.value is not None]
        attributes: set[str] = set()
        for value in returned:
            for part in value.elts if isinstance(value, ast.Tuple) else [value]:
                holder = part.value if isinstance(part, ast.Subscript) else None
                if not (isinstance(holder, ast.Attribute) and _key(holder) == f"self.{holder.attr}"):
                    return False
                attributes.add(holder.attr)
        assigned: dict[str, list[ast.AST]] = {attribute: [] for attribute in attributes}
        for node in ast.walk(cls):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and target.attr in assigned and _key(target):
                        assigned[target.attr].append(node.value)
        return bool(attributes) and all(
            values and all(self._holds_tensors(value) for value in values) for values in assigned.values()
        )

    def _items_work(self, cls: ast.ClassDef) -> bool:
        """Whether an item of the dataset class costs real work: its `__getitem__` or `__iter__`,
        or a method of the class they call, reads or decodes a file, transforms an image or calls
        a tokenizer (item_cost.py's evidence, for a class of another module)."""
        methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
        pending = [m for name in ("__getitem__", "__iter__") if (m := methods.get(name)) is not None]
        seen: set[str] = set()
        while pending:
            method = pending.pop()
            if method.name in seen:
                continue
            seen.add(method.name)
            for node in ast.walk(method):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                callee = dotted_name(func) or ""
                head, _, rest = callee.partition(".")
                target = self.summary.bindings.get(head)
                if target is not None:
                    qualified = canonical(f"{target}.{rest}" if rest else target)
                elif callee == "open":
                    qualified = "open"
                else:
                    qualified = ""
                if reader_phrase(qualified) is not None or is_transform(qualified):
                    return True
                receiver = last_name(func.value) if isinstance(func, ast.Attribute) else None
                method_name = func.attr if isinstance(func, ast.Attribute) else None
                if is_tokenizer_call(last_name(func), method_name, receiver):
                    return True
                if head == "self" and rest in methods:
                    pending.append(methods[rest])
        return False

    def _holds_tensors(self, value: ast.AST) -> bool:
        """A `torch` tensor factory's result, or a list or tuple (or list comprehension) of them."""
        if isinstance(value, ast.ListComp):
            return self._holds_tensors(value.elt)
        if isinstance(value, (ast.List, ast.Tuple)):
            return bool(value.elts) and all(self._holds_tensors(element) for element in value.elts)
        if not isinstance(value, ast.Call) or (callee := dotted_name(value.func)) is None:
            return False
        head, _, rest = callee.partition(".")
        target = self.summary.bindings.get(head)
        qualified = canonical(f"{target}.{rest}" if rest else target) if target is not None else ""
        module, _, name = qualified.rpartition(".")
        return module == "torch" and name in _TENSOR_FACTORIES


def _to_without_non_blocking(cls: ast.ClassDef) -> bool:
    """Whether the class defines `to()` with no `non_blocking` parameter and no `**kwargs`, and
    may be a batch: not a dataset, sampler, loader or model (a PyG `InMemoryDataset.to(device)`
    moves a whole dataset, never what a loader yields)."""
    names = [
        cls.name,
        *(base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "") for base in cls.bases),
    ]
    if any(NOT_A_BATCH.search(name) for name in names):
        return False
    for statement in cls.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == "to":
            arguments = statement.args
            names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
            return arguments.kwarg is None and "non_blocking" not in names
    return False


# Class names (or their bases') that say their objects are not batches.
NOT_A_BATCH = re.compile(r"Dataset|Sampler|Loader|Module|Model")


def _guarded(site: CallSite) -> bool:
    """Whether an interval guard or an event branch stands between the call and its function."""
    return _guarded_path(site.path)


def _guarded_path(path: Iterable[Step]) -> bool:
    return any(kind in ("event", "interval") or (kind == "if" and _throttles(value)) for kind, value in path)


@lru_cache(maxsize=4096)
def _throttles(condition: str) -> bool:
    """Whether an `if` condition (its text, as the summary keeps it) is an interval guard: the
    decision the loop model makes for its own module (analysis/intervals.py), on CPython's tree."""
    try:
        test = ast.parse(condition, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # (ast.unparse's text: not expected)
        return False
    return is_interval_condition(AST_READER, test)


# -- the index ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CalleeFacts:
    """What a project function another module calls does."""

    steps: bool = False  # takes a training step (a step function)
    reads_clock: bool = False
    returns: tuple[str, ...] = ()  # kinds of what it returns (values.KINDS names)
    runs_python: bool = False  # calls `tf.py_function` or the like, itself or through project functions
    options: tuple[tuple[str, int], ...] = ()  # the options it declares with integer defaults (FunctionSummary)


@dataclass(frozen=True)
class ModuleView:
    """The facts about one module that come from the rest of the project (see the module
    docstring).  Empty for a module nothing elsewhere tells anything about."""

    per_step: frozenset[str] = frozenset()  # qualnames of its functions other modules run per step
    calls: tuple[tuple[str, CalleeFacts], ...] = ()  # callee text -> what it does
    reiterated: frozenset[tuple[str, int | None]] = frozenset()  # (qualname, position) iterated per epoch
    # For each qualname in `per_step`: the calls from another module's training loop to it
    # (ProjectIndex.chain), which its findings carry.
    chains: tuple[tuple[str, tuple[RelatedLocation, ...]], ...] = ()
    # A training loop that runs one of its functions per step is in a module that imports torch /
    # names an accelerator: a helper (`scalar(t)` returning `t.item()`) that spells neither
    # works on that loop's tensors (facts.TORCH, facts.ACCELERATOR).
    torch_loop_elsewhere: bool = False
    accelerator_loop_elsewhere: bool = False
    # Another module of the project wraps a model for data parallel training (RANK_WRAPPERS): the
    # program has a gradient all-reduce for this module's accumulation to repeat (GL603).
    ranks_wrapped_elsewhere: bool = False
    # Classes of other modules of the project whose own `to()` takes no `non_blocking` (by class
    # name): a batch copied here may be one of their objects (GL104).
    own_to_elsewhere: tuple[str, ...] = ()
    # Where another module of the project decides TF32 itself (ModuleSummary.sets_tf32), for a
    # module that trains with torch: its shown path; "" when none does.
    tf32_set_in: str = ""
    # The kinds of the network classes of other modules this module builds (NETWORK_KINDS): a
    # script that builds only convolutional ones is a convolutional network (GL404).
    networks_elsewhere: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        """Whether the view says anything (an empty one is not stored, and digests to "")."""
        return self.makes_rules_fire or bool(self.tf32_set_in or self.networks_elsewhere)

    @property
    def makes_rules_fire(self) -> bool:
        """Whether the view may make a rule report code that holds none of its triggers (the
        trigger filter asks: engine.told_anything).  What only withholds a fix does not: TF32 set
        in another module, the kinds of the networks built from other modules."""
        return bool(
            self.per_step or self.calls or self.reiterated or self.ranks_wrapped_elsewhere or self.own_to_elsewhere
        )

    @property
    def steps_elsewhere(self) -> bool:
        """Whether the module takes part in training steps because of other modules: one of its
        functions runs per step, or it calls a step function of another module (facts.STEPS)."""
        return bool(self.per_step) or any(facts.steps for _, facts in self.calls)

    def may_make_hold(self, fact: str, shapes: frozenset[str] | None = None) -> bool:
        """Whether the view may make `fact` (a fact's name, catalog.FACT_SHAPES) hold in a module
        whose code holds none of the fact's shapes: the view's property that makes it hold
        (catalog.FACT_ELSEWHERE), or a call of another module's function here -- what it returns
        is not in this module's code (an optimizer whose `.apply(` takes a step), where the
        module's code (`shapes`, when known) holds what that value can make the fact hold on
        (catalog.FACT_THROUGH_CALLS).  A function known only for the options it declares makes
        none hold."""
        through = FACT_THROUGH_CALLS.get(fact)
        if (through is None or shapes is None or not shapes.isdisjoint(through)) and any(
            replace(facts, options=()) != CalleeFacts() for _, facts in self.calls
        ):
            return True
        elsewhere = FACT_ELSEWHERE.get(fact)
        return elsewhere is not None and bool(getattr(self, elsewhere))

    @property
    def options_elsewhere(self) -> dict[str, int]:
        """The integer defaults of the command-line options that functions of other modules this
        module calls declare (`parser = get_argument_parser()`: `args.epochs` is its `--epochs`
        default unless the command line says otherwise); one given two defaults is left out."""
        found: dict[str, int] = {}
        conflicting: set[str] = set()
        for _, facts in self.calls:
            for name, value in facts.options:
                if found.get(name, value) != value:
                    conflicting.add(name)
                found[name] = value
        return {name: value for name, value in found.items() if name not in conflicting}

    def callee(self, text: str | None) -> CalleeFacts | None:
        if text is None:
            return None
        return self._calls.get(text)

    def chain(self, qualname: str) -> tuple[RelatedLocation, ...]:
        """How another module's training loop reaches function `qualname` of this module (() when
        nothing elsewhere runs it per step)."""
        for name, chain in self.chains:
            if name == qualname:
                return chain
        return ()

    @property
    def _calls(self) -> dict[str, CalleeFacts]:
        found = self.__dict__.get("_calls_map")
        if found is None:
            found = dict(self.calls)
            object.__setattr__(self, "_calls_map", found)
        return found

    def digest(self) -> str:
        """A stable digest of the view (part of the module's cache key; "" when empty)."""
        if not self:
            return ""
        return hashlib.sha256(json.dumps(self.to_data(), sort_keys=True).encode()).hexdigest()[:32]

    def to_data(self) -> dict[str, Any]:
        """The view as JSON-ready data (a run's cache entry keeps its files' views: run/runner.py)."""
        return {
            "per_step": sorted(self.per_step),
            "calls": [
                [
                    text,
                    facts.steps,
                    facts.reads_clock,
                    list(facts.returns),
                    facts.runs_python,
                    [[name, value] for name, value in facts.options],
                ]
                for text, facts in self.calls
            ],
            "reiterated": sorted([q, -1 if i is None else i] for q, i in self.reiterated),
            # (the findings carry the chain: a caller's lines moving must re-lint this module)
            "chains": [
                [q, [[r.path, r.location.row, r.location.column, r.message] for r in c]] for q, c in self.chains
            ],
            "loop_elsewhere": [self.torch_loop_elsewhere, self.accelerator_loop_elsewhere],
            "ranks_wrapped_elsewhere": self.ranks_wrapped_elsewhere,
            "own_to_elsewhere": list(self.own_to_elsewhere),
            "tf32_set_in": self.tf32_set_in,
            "networks_elsewhere": list(self.networks_elsewhere),
        }

    @classmethod
    def from_data(cls, data: Any) -> ModuleView:
        """A view from `to_data`'s shape; raises ValueError for anything else (a bad cache entry)."""
        try:
            torch_elsewhere, accelerator_elsewhere = data["loop_elsewhere"]
            view = cls(
                frozenset(_text(q) for q in data["per_step"]),
                tuple(
                    (
                        _text(text),
                        CalleeFacts(
                            _flag(steps),
                            _flag(clock),
                            tuple(_text(k) for k in kinds),
                            _flag(python),
                            tuple((_text(name), _number(value)) for name, value in options),
                        ),
                    )
                    for text, steps, clock, kinds, python, options in data["calls"]
                ),
                frozenset((_text(q), None if _number(i) == -1 else _number(i)) for q, i in data["reiterated"]),
                tuple(
                    (
                        _text(q),
                        tuple(
                            RelatedLocation(_text(path), Location(_number(row), _number(column)), _text(message))
                            for path, row, column, message in chain
                        ),
                    )
                    for q, chain in data["chains"]
                ),
                _flag(torch_elsewhere),
                _flag(accelerator_elsewhere),
                _flag(data["ranks_wrapped_elsewhere"]),
                tuple(_text(name) for name in data["own_to_elsewhere"]),
                _text(data["tf32_set_in"]),
                tuple(_text(kind) for kind in data["networks_elsewhere"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a project view: {exc}") from None
        if set(data) != set(view.to_data()):
            raise ValueError("not a project view: other fields")
        return view


EMPTY_VIEW = ModuleView()


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def _number(value: Any) -> int:
    if type(value) is not int:
        raise TypeError("expected an integer")
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError("expected true or false")
    return value


# A function of the project: (module id, qualname).
Function = tuple[str, str]


class ProjectIndex:
    """The summaries of a run's modules and what follows from them across modules.

    `summaries` maps a module id (`<source root>|<dotted name>`) to its summary; `test_modules`
    are the ids of those that are test code; `paths` maps a module id to the path its file is shown
    as (in the chains of cross-module findings)."""

    def __init__(
        self,
        summaries: dict[str, ModuleSummary],
        test_modules: frozenset[str] = frozenset(),
        paths: dict[str, str] | None = None,
    ) -> None:
        self.summaries = summaries
        self.test_modules = test_modules
        self.paths = paths or {}
        # Why a function is per step: the first call found that made it so (caller, call), and for
        # `per_step_elsewhere` whether the caller is per step for that reason too (else it is in
        # `per_step`, or the call is in a step loop).
        self._per_step_because: dict[Function, tuple[Function, CallSite]] = {}
        self._elsewhere_because: dict[Function, tuple[Function, CallSite, bool]] = {}
        self._step_loops: set[tuple[Function, int]] = set()
        self._resolved: dict[tuple[str, str, str | None], Function | None] = {}
        self.step_functions: set[Function] = set()
        self.per_step: set[Function] = set()
        self.per_step_elsewhere: set[Function] = set()  # per step because of another module
        self.clock_functions: set[Function] = set()
        self.python_functions: set[Function] = set()  # run Python in a TensorFlow graph (TF_PYTHON_CALLS)
        self.wrapping_modules: set[str] = set()  # ids of the modules that wrap a model (RANK_WRAPPERS)
        self.returns: dict[Function, set[str]] = {}
        self.reiterated: dict[str, set[tuple[str, int | None]]] = {}  # module id -> (qualname, position)
        self._solve()
        self._by_module = _ByModule(self)

    def moved(self, summaries: dict[str, ModuleSummary]) -> ProjectIndex | None:
        """This index for `summaries` that differ from its own only in where calls and loops are
        (ModuleSummary.moved_from: an editor's edit that added or removed lines): what it solved
        holds as it is, and the chains name the new lines.  None when they differ otherwise."""
        if summaries.keys() != self.summaries.keys():
            return None
        now: dict[int, CallSite] = {}  # id() of a call site of this index's summaries -> the same call now
        for module_id, summary in summaries.items():
            before = self.summaries[module_id]
            if summary is before or summary == before:
                continue
            if not summary.moved_from(before):
                return None
            for qualname, function in before.functions.items():
                for site, moved in zip(function.calls, summary.functions[qualname].calls, strict=True):
                    now[id(site)] = moved
        index = copy.copy(self)  # (the solved sets are shared: nothing changes them after the solve)
        index.summaries = summaries  # (the chains read the loops' lines from them)
        index._per_step_because = {
            function: (caller, now.get(id(site), site)) for function, (caller, site) in self._per_step_because.items()
        }
        index._elsewhere_because = {
            function: (caller, now.get(id(site), site), elsewhere)
            for function, (caller, site, elsewhere) in self._elsewhere_because.items()
        }
        return index

    # -- resolution -----------------------------------------------------------------------------
    def resolve(self, module_id: str, text: str, cls: str | None = None) -> Function | None:
        """The project function a call with callee `text` in `module_id` runs, if any."""
        key = (module_id, text, cls)
        if key not in self._resolved:
            self._resolved[key] = None  # (while resolving: `model = model(...)` refers to itself)
            self._resolved[key] = self._resolve(module_id, text, cls)
        return self._resolved[key]

    def _resolve(self, module_id: str, text: str, cls: str | None) -> Function | None:
        summary = self.summaries[module_id]
        root = module_id.partition("|")[0]
        head, _, rest = text.partition(".")
        if head in ("self", "cls") and cls is not None:
            if not rest:
                return self._function(module_id, f"{cls}.__call__")
            if "." not in rest:
                found = self._function(module_id, f"{cls}.{rest}")
                if found is not None:
                    return found
            head, _, rest = rest.partition(".")
            head = f"self.{head}"
        constructor = summary.instances.get(head)
        if constructor is not None and "." not in rest:  # `meter.update()` / `scaler(...)` of an instance
            cls_function = self.resolve(module_id, constructor)
            if cls_function is not None:
                return self._function(cls_function[0], f"{cls_function[1]}.{rest or '__call__'}")
            return None
        if head in summary.functions and not rest:
            return (module_id, head)
        if head in summary.bindings:
            dotted = summary.bindings[head] + (f".{rest}" if rest else "")
            return self._absolute(root, dotted)
        if text in summary.functions:  # `Class.method` written in full
            return (module_id, text)
        return None

    def _absolute(self, root: str, dotted: str) -> Function | None:
        """`pkg.utils.clip` -> the function `clip` of module `pkg.utils` under `root` (the longest
        module prefix wins); a class resolves as itself (its qualname)."""
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module_id = f"{root}|{'.'.join(parts[:cut])}"
            if module_id in self.summaries:
                qualname = ".".join(parts[cut:])
                return self._function(module_id, qualname) or self._class(module_id, qualname)
        return None

    def _function(self, module_id: str, qualname: str) -> Function | None:
        return (module_id, qualname) if qualname in self.summaries[module_id].functions else None

    def _class(self, module_id: str, qualname: str) -> Function | None:
        prefix = qualname + "."
        return (module_id, qualname) if any(q.startswith(prefix) for q in self.summaries[module_id].functions) else None

    # -- the fixpoint -----------------------------------------------------------------------------
    def _sites(self) -> Iterable[tuple[Function, CallSite, Function | None]]:
        for module_id, summary in self.summaries.items():
            for qualname, function in summary.functions.items():
                for site in function.calls:
                    yield (module_id, qualname), site, self.resolve(module_id, site.text, site.cls)

    def _reaches(self, caller_module: str, callee: Function) -> bool:
        """Whether what a call from `caller_module` does makes `callee` run per step: not when a
        test calls library code (test code is not training code)."""
        return caller_module not in self.test_modules or callee[0] in self.test_modules

    def _solve(self) -> None:
        sites = list(self._sites())
        # Step functions: step outside a loop of their own, by themselves or through a step function.
        step_sites: set[int] = set()
        changed = True
        while changed:
            changed = False
            for number, (caller, site, callee) in enumerate(sites):
                if number not in step_sites and (site.steps or callee in self.step_functions):
                    step_sites.add(number)
                    changed = True
                if (
                    number in step_sites
                    and not site.loops
                    and caller[1] != _MODULE_LEVEL
                    and caller not in self.step_functions
                ):
                    self.step_functions.add(caller)
                    changed = True
        self._step_loops = {
            (caller, site.loops[0])
            for number, (caller, site, _) in enumerate(sites)
            if number in step_sites and site.loops
        }
        # Functions run per step: called from a step loop (inside it, however deeply), or from one,
        # under no interval guard and not as the handling of an event.
        changed = True
        while changed:
            changed = False
            for caller, site, callee in sites:
                if callee is None or callee in self.per_step or callee[1] == _MODULE_LEVEL:
                    continue
                if not self._reaches(caller[0], callee):
                    continue
                if self._runs_per_step(caller, site):
                    self.per_step.add(callee)
                    self._per_step_because[callee] = (caller, site)
                    changed = True
        # What other modules make run per step: a call from another module, or from a function
        # made per step that way (a module's own step loops are its own analysis).
        changed = True
        while changed:
            changed = False
            for caller, site, callee in sites:
                if callee is None or callee in self.per_step_elsewhere or callee[1] == _MODULE_LEVEL:
                    continue
                if not self._reaches(caller[0], callee):
                    continue
                if callee[0] != caller[0] and self._runs_per_step(caller, site):
                    self.per_step_elsewhere.add(callee)
                    self._elsewhere_because[callee] = (caller, site, False)
                    changed = True
                elif caller in self.per_step_elsewhere and not _guarded(site):
                    self.per_step_elsewhere.add(callee)
                    self._elsewhere_because[callee] = (caller, site, True)
                    changed = True
        # Clocks and returned kinds, through calls; a dataset class that holds its tensors in
        # memory "returns" (builds) what a TensorDataset is to pytorch.in_memory_dataset.
        for module_id, summary in self.summaries.items():
            for qualname in summary.in_memory_datasets:
                self.returns.setdefault((module_id, qualname), set()).add("tensordataset")
            for qualname in summary.working_datasets:
                self.returns.setdefault((module_id, qualname), set()).add(WORKING_DATASET)
        for module_id, summary in self.summaries.items():
            for qualname, function in summary.functions.items():
                if function.reads_clock:
                    self.clock_functions.add((module_id, qualname))
                if function.runs_python:
                    self.python_functions.add((module_id, qualname))
                if function.wraps_ranks and module_id not in self.test_modules:
                    self.wrapping_modules.add(module_id)
        changed = True
        while changed:
            changed = False
            for caller, _site, callee in sites:
                if callee in self.clock_functions and caller not in self.clock_functions and caller[1] != _MODULE_LEVEL:
                    self.clock_functions.add(caller)
                    changed = True
                if (
                    callee in self.python_functions
                    and caller not in self.python_functions
                    and caller[1] != _MODULE_LEVEL
                ):
                    self.python_functions.add(caller)
                    changed = True
            for module_id, summary in self.summaries.items():
                for qualname, function in summary.functions.items():
                    kinds = self.returns.setdefault((module_id, qualname), set())
                    before = len(kinds)
                    for _, callee_text in function.returns:
                        kinds |= self._kinds_of(module_id, callee_text)
                    changed |= len(kinds) != before

        # What a module returns that another iterates every epoch.
        for other_id, other in self.summaries.items():
            if other_id in self.test_modules:
                continue  # (a test iterating a loader again says nothing about the library's loaders)
            for name in other.reiterated:
                for text, position in other.assigned_from.get(name, ()):
                    resolved = self.resolve(other_id, text)
                    if resolved is not None and resolved[0] != other_id:
                        self.reiterated.setdefault(resolved[0], set()).add((resolved[1], position))

    def _runs_per_step(self, caller: Function, site: CallSite) -> bool:
        """Whether the call runs every step: in a step loop of its function with no interval guard
        or event branch in between, or, outside one and unguarded, in a function run per step."""
        return self._step_loop_around(caller, site) is not None or (caller in self.per_step and not _guarded(site))

    def _step_loop_around(self, caller: Function, site: CallSite) -> str | None:
        """The id of the step loop of `caller` that runs `site` every step, if one does: the first
        loop out from the call that is a step loop, unless a guard or an event branch comes first."""
        # The guards between the call and the loop are read only once a step loop is found: reading
        # a condition parses it, and most calls of a large project are in none.
        for position, (kind, value) in enumerate(site.path):
            if kind == "loop" and (caller, int(value)) in self._step_loops:
                return None if _guarded_path(site.path[:position]) else value
        return None

    def chain(self, function: Function) -> tuple[RelatedLocation, ...]:
        """The calls by which another module's training loop runs `function` every step, from
        the loop inwards: "called from train.py:42 in the training loop at train.py:40", then
        "via utils.py:10 in `step()`" for each call on the way.  () for a function no other module
        runs per step."""
        found = self._path_from_loop(function)
        if found is None:
            return ()
        links, loop = found
        related = []
        for number, (caller, site) in enumerate(links):
            path = self._path(caller[0])
            where = f"{path}:{site.line}"
            if number == 0:
                loop_line = self.summaries[caller[0]].loop_lines.get(loop[1], site.line)
                message = f"called from {where} in the training loop at {path}:{loop_line}"
            else:
                message = f"via {where} in `{caller[1]}()`"
            related.append(RelatedLocation(path, Location(site.line, site.column), message))
        return tuple(related)

    def _path_from_loop(
        self, function: Function
    ) -> tuple[list[tuple[Function, CallSite]], tuple[Function, str]] | None:
        """The calls (caller, call site) from another module's step loop to `function`, loop
        first, and that loop (its function, its id); None when no other module runs it per step."""
        links: list[tuple[Function, CallSite]] = []
        found = self._elsewhere_because.get(function)
        if found is None:
            return None
        caller, site, elsewhere = found
        # Each reason was recorded after its caller's own, so following them ends at a step loop
        # (bounded all the same: a linter must never spin).
        for _ in range(len(self._per_step_because) + len(self._elsewhere_because) + 1):
            links.append((caller, site))
            loop = self._step_loop_around(caller, site)
            if loop is not None:
                return links[::-1], (caller, loop)
            if elsewhere:
                caller, site, elsewhere = self._elsewhere_because[caller]
            else:
                caller, site = self._per_step_because[caller]
        return None

    def _options_of(self, function: Function) -> dict[str, int]:
        summary = self.summaries.get(function[0])
        found = summary.functions.get(function[1]) if summary is not None else None
        return found.options if found is not None else {}

    def _path(self, module_id: str) -> str:
        root, _, dotted = module_id.partition("|")
        return self.paths.get(module_id) or f"{root}/{dotted.replace('.', '/')}.py"

    def _kinds_of(self, module_id: str, callee_text: str) -> set[str]:
        found = self.resolve(module_id, callee_text)
        if found is not None:
            return set(self.returns.get(found, ()))
        summary = self.summaries[module_id]
        head, _, rest = callee_text.partition(".")
        target = summary.bindings.get(head)
        if target is None:
            return set()
        qualified = canonical(f"{target}.{rest}" if rest else target)
        return {kind for kind in RETURN_KINDS if KINDS[kind].matches(qualified)}

    # -- views --------------------------------------------------------------------------------
    def view(self, module_id: str) -> ModuleView:
        """What the rest of the project says about `module_id`."""
        summary = self.summaries.get(module_id)
        if summary is None:
            return EMPTY_VIEW
        by_module = self._by_module
        root = module_id.partition("|")[0]
        per_step = by_module.per_step_elsewhere.get(module_id, frozenset())
        calls: dict[str, CalleeFacts] = {}
        networks: set[str] = set()
        for function in summary.functions.values():
            for site in function.calls:
                callee = self.resolve(module_id, site.text, site.cls)
                if callee is None or callee[0] == module_id or site.text in calls:
                    continue  # (calls within the module are the module's own analysis)
                kind = self.summaries[callee[0]].network_kinds.get(callee[1])
                if kind is not None:
                    networks.add(kind)
                facts = CalleeFacts(
                    callee in self.step_functions,
                    callee in self.clock_functions,
                    tuple(sorted(self.returns.get(callee, ()))),
                    callee in self.python_functions,
                    tuple(sorted(self._options_of(callee).items())),
                )
                if facts != CalleeFacts():
                    calls[site.text] = facts
        reiterated = frozenset(self.reiterated.get(module_id, ()))
        chains = tuple((q, chain) for q in sorted(per_step) if (chain := self.chain((module_id, q))))
        loop_modules = [
            self.summaries[found[1][0][0]]
            for q in per_step
            if (found := self._path_from_loop((module_id, q))) is not None
        ]
        return ModuleView(
            per_step,
            tuple(sorted(calls.items())),
            reiterated,
            chains,
            torch_loop_elsewhere=any(m.imports_torch for m in loop_modules),
            accelerator_loop_elsewhere=any(m.names_accelerator for m in loop_modules),
            ranks_wrapped_elsewhere=bool(by_module.wrapping.get(root, set()) - {module_id}),
            own_to_elsewhere=tuple(
                sorted(name for name, modules in by_module.own_to.get(root, {}).items() if modules - {module_id})
            ),
            tf32_set_in=self._tf32_set_in(module_id) if self._trains(summary) else "",
            networks_elsewhere=tuple(sorted(networks)),
        )

    @staticmethod
    def _trains(summary: ModuleSummary) -> bool:
        """A module that imports torch and takes training steps itself (where GL404 reports)."""
        return summary.imports_torch and any(site.steps for f in summary.functions.values() for site in f.calls)

    def _tf32_set_in(self, module_id: str) -> str:
        """The shown path of the first other module of the project (not test code) that decides
        TF32 itself; "" when none does."""
        return next((self._path(m) for m in self._by_module.tf32_modules if m != module_id), "")


class _ByModule:
    """What `ProjectIndex.view` reads of the whole index, grouped once by module or by source root:
    gathered per view, it made the views of a project's N modules cost N * N (a tenth of the index's
    time on a tree of 2,000 modules).  The solved sets do not change after the solve."""

    def __init__(self, index: ProjectIndex) -> None:
        per_step: dict[str, set[str]] = {}
        for module_id, qualname in index.per_step_elsewhere:
            per_step.setdefault(module_id, set()).add(qualname)
        self.per_step_elsewhere = {module_id: frozenset(names) for module_id, names in per_step.items()}
        self.wrapping: dict[str, set[str]] = {}  # source root -> ids of its modules that wrap a model
        for module_id in index.wrapping_modules:
            self.wrapping.setdefault(module_id.partition("|")[0], set()).add(module_id)
        # source root -> class name -> ids of the (non-test) modules with such a class of their own `.to`
        self.own_to: dict[str, dict[str, set[str]]] = {}
        self.tf32_modules: list[str] = []  # ids of the (non-test) modules that decide TF32 themselves, sorted
        for module_id, summary in sorted(index.summaries.items()):
            if module_id in index.test_modules:
                continue
            if summary.sets_tf32:
                self.tf32_modules.append(module_id)
            for qualname in summary.own_to_classes:
                by_name = self.own_to.setdefault(module_id.partition("|")[0], {})
                by_name.setdefault(qualname.rpartition(".")[2], set()).add(module_id)


def _may_name_a_network(source: bytes) -> bool:
    """Whether a class of the module may have a network kind (_network_kind): its text spells one
    of the names that decide it.  Walking every class again costs 5% of a library's run, and most
    modules of one spell none.  (Python reads identifiers in NFKC form, so a non-ASCII source may
    hold a name its bytes do not spell: there every class is walked.)"""
    return not source.isascii() or _NETWORK_TEXT.search(source) is not None
