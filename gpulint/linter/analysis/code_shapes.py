"""The shapes of code a rule's `triggers` name, read from a module's CPython tree.

The byte prefilter (engine.py) asks whether a file *spells* a rule's tokens; most files of a
torch library do, in docstrings, comments and longer names.  The trigger filter asks, before libcst
is paid for, whether the *code* holds one of them: one walk of the `ast` tree the parse guard
builds anyway (parse_guard.py) collects the module's shapes, and a rule whose triggers none of them
meet is not run on the file -- a file no selected rule may fire on is not parsed by libcst at all.

A shape is written as the code it stands for:

    "DataLoader"   the identifier anywhere in code: a name, an attribute, a name an import binds
                   or imports (`from torch.utils.data import DataLoader as DL` has `DataLoader`,
                   `DL`, `torch`, `utils` and `data`), a keyword argument, a function, class or
                   parameter name
    ".item("       a method of that name called (`loss.item()`, `torch.cuda.synchronize()`)
    "float("       a plain name called (`float(loss)`)
    "next(iter("   a plain name called on a plain name's call (its first argument: `next(iter(loader))`)
    "sync="        a keyword argument of that name in a call (`f(loss, sync=...)`)
    "for"          a `for` statement (or `async for`; not a comprehension's `for`)
    "while"        a `while` statement

and one shape stands for a call that may take a training step by the loop model's reading
(loops.is_direct_step_call), where the method's name alone says too little:

    "optimizer.apply("   `.apply(` called on a receiver named like an optimizer (`opt.apply(grads)`,
                   Keras 3's step: vocabulary.is_step_method), or on any receiver in a module whose
                   code names an optimizer's module or class (`optim`, `optimizers`, `AdamW`...: the
                   receiver may hold one).  `model.apply(init_weights)` and `Function.apply(x)`
                   in a torch module that names no optimizer are not steps.

and one for a tensor built on the host and copied to a device, where names alone would take every
`x.to(device)` in a module that also calls `torch.zeros`:

    "torch.zeros(...).to("   `.to(`, `.cuda(` or `.type_as(` called on the result of a host builder
                   (vocabulary.HOST_BUILDERS: `torch.arange(n)`, `torch.LongTensor(x)`, also under
                   an alias an import or an assignment gives it), through subscripts and host-side
                   methods (`torch.arange(n)[None].float().cuda()`), or on a name some assignment of
                   the module gives such a value (`pos = torch.arange(n)` ... `pos.to(device)`).

and that copy where it may run again and again -- anywhere but straight-line code of the module,
or of a test function nothing in the module names (what LoopModel.runs_repeatedly can tell apart):

    "for ...: torch.zeros(...).to("

and one for a DataLoader built, where the name alone would take every annotation `-> DataLoader`
of a module whose loaders are other classes:

    "DataLoader(...)"   a call of `DataLoader` (`DataLoader(ds)`, `data.DataLoader(ds)`), or of a name
                   an import binds to one (`from torch.utils.data import DataLoader as DL` ... `DL(ds)`):
                   how pytorch.is_dataloader can tell a construction (through the module's imports)

and one for code that may run on every training step by the loop model's reading (loops.py),
whose shapes a module without a training loop holds too (a test's single `loss.backward()`):

    "for ...: loss.backward()"   a call shaped like a step (`x.backward(`, `.step(`, `.gradient(`,
                   `.apply_gradients(`, `.train_on_batch(`, `.manual_backward(`, `.apply(`:
                   vocabulary.STEP_METHODS) anywhere but in straight-line code -- outside every loop --
                   of the module or of a test function (`test*`: it checks behaviour once), or a
                   `training_step` defined.  A module without one has no step loop, step function or
                   Lightning step of its own (loops.LoopModel), so nothing in it runs per step unless
                   another module runs it (the project's view of it: see Rule.site_triggers).

and three for what a per-step rule reports, its site triggers (Rule.site_triggers):

    "logger.info(...)"   a call logging_calls.logging_call_kind may name: `print(...)`, a method
                   `.info(`, `.log(` or `.add_*(` on any receiver, or a callee an import binds into a
                   logging library (`from wandb import log`, `mlflow.log_metric`)
    "evaluate(...)"  a call of a name that names an evaluation (vocabulary.EVALUATION_NAME:
                   `evaluate(model)`, `self.validate()`, `model.eval()`; not the builtin `eval(`)
    "loss.item()"  a value GL201 may read back to the host: decided only on the code another module
                   runs per step (step_region.py), which reads the module's tensors first; the
                   module-wide walk takes it to hold

Strings and comments hold none (an f-string's expressions are code and do).  The walk keeps only
the shapes some trigger names (`wanted`): a module's set stays small, so the project index can keep
it for every module between its parse and the module's lint.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gpulint.linter.analysis.ast_names import dotted_name, last_name
from gpulint.linter.analysis.vocabulary import (
    DEVICE_COPY_METHODS,
    EVALUATION_NAME,
    HOST_BUILDERS,
    HOST_TENSOR_METHODS,
    KINDS,
    LOG_METHODS,
    LOGGING_LIBRARIES,
    PASS_THROUGH_ITERATORS,
    PER_CALL_METHODS,
    RANGES,
    SHORT_LOOP_STEPS,
    STEP_METHODS,
    is_step_method,
)

# (see the module docstring)
OPTIMIZER_APPLY = "optimizer.apply("
FACTORY_COPY = "torch.zeros(...).to("
STEP_LOOP = "for ...: loss.backward()"
LOADER_BUILT = "DataLoader(...)"
REPEATED_COPY = "for ...: torch.zeros(...).to("
LOGGED = "logger.info(...)"
EVALUATED = "evaluate(...)"
HOST_READ = "loss.item()"
# The identifiers a module's code holds wherever a value of it may be an optimizer: the last name
# of each optimizer constructor (or module of them) the value analysis recognises -- its qualified
# name is made of the code's own identifiers (`torch.optim.Adam`, `from torch import optim`).
_OPTIMIZER_IDENTIFIERS = frozenset(
    constructor.rstrip(".").rsplit(".", 1)[-1] for constructor in KINDS["optimizer"].constructors
)


def code_shapes(tree: ast.AST, wanted: frozenset[str], source: bytes | str | None = None) -> frozenset[str]:
    """The shapes of `wanted` that the module's code holds (see the module docstring); `source`,
    the text `tree` was parsed from, as for ShapeCollector."""
    collector = ShapeCollector(wanted, source)
    handlers = collector.handlers
    for node in ast.walk(tree):
        handler = handlers.get(type(node))
        if handler is not None:
            handler(node)
    return collector.found()


class ShapeCollector:
    """`code_shapes` node by node, for a walk that does more than collect them (the parse
    guard's, which measures the tree on the same walk: parse_guard.walk_tree).  The walk calls
    `handlers[type(node)]` on the nodes of the types that can hold a shape: the walk visits every
    node, and a call on each of them cost as much as CPython's parse (measured)."""

    def __init__(self, wanted: frozenset[str], source: bytes | str | None = None) -> None:
        """`source`: the bytes the tree was parsed from, if known (STEP_LOOP can then tell a test
        function nothing in the module calls)."""
        self._wanted = wanted
        self._found: set[str] = set()
        # For OPTIMIZER_APPLY: an `.apply(` call on a receiver not named like an optimizer, and an
        # identifier of an optimizer's module or class.
        self._looks_for_apply = OPTIMIZER_APPLY in wanted
        self._other_apply = self._names_optimizer = False
        # For FACTORY_COPY (decided at the end: an alias may be bound below its use): the callee
        # names of the host tensors copied, the names copied, what each name is assigned from,
        # and the names bound to a host builder.
        self._looks_for_copies = FACTORY_COPY in wanted or REPEATED_COPY in wanted
        self._copied_calls: dict[str, list[Span]] = {}  # callee name -> where its result is copied
        self._copied_names: dict[str, list[Span]] = {}  # name -> where it is copied
        self._assigned_calls: dict[str, set[str]] = {}
        self._builder_aliases: set[str] = set()
        # For LOADER_BUILT (decided at the end: an alias may be imported below its call): the plain
        # names called, and those imports bind to a DataLoader.
        self._looks_for_loaders = LOADER_BUILT in wanted
        self._called_names: set[str] = set()
        self._loader_aliases: set[str] = set()
        # For STEP_LOOP and REPEATED_COPY (decided at the end: a step function may be defined below
        # its loop, a test function named below it).
        self._places = _Places(source) if STEP_LOOP in wanted or REPEATED_COPY in wanted else None
        # For LOGGED (decided at the end: an import may bind below its call): the names called (a
        # plain name, or the first of a dotted callee's), and those imports bind into a logging library.
        self._looks_for_logging = LOGGED in wanted
        self._called_heads: set[str] = set()
        self._logging_names: set[str] = set()
        self._looks_for_evaluation = EVALUATED in wanted
        # The shapes worth a look: those wanted, and what OPTIMIZER_APPLY is decided from.
        watched = set(wanted)
        if self._looks_for_apply:
            watched.add(".apply(")
        if self._looks_for_apply or self._places is not None:
            watched |= _OPTIMIZER_IDENTIFIERS
        self._watched = frozenset(watched)
        # Calls by the name called: `.item(` -> "item" among the methods, `float(` -> "float".
        self._methods = frozenset(shape[1:-1] for shape in watched if shape.startswith(".") and shape.endswith("("))
        self._functions = frozenset(
            shape[:-1] for shape in watched if shape.endswith("(") and shape[:-1].isidentifier()
        )
        # `next(iter(` -> "next": the calls whose first argument's callee names the shape.
        self._outer_functions = frozenset(
            shape.partition("(")[0] for shape in watched if shape.endswith("(") and shape.count("(") == 2
        )
        self.handlers: dict[type, Callable[[Any], None]] = self._handlers()

    def _handlers(self) -> dict[type, Callable[[Any], None]]:
        watched, note = self._watched, self._note

        def one(shape_of: Callable[[Any], str | None]) -> Callable[[Any], None]:
            def handle(node: ast.AST) -> None:
                shape = shape_of(node)
                if shape in watched:
                    note(shape, node)

            return handle

        def several(shapes_of: Callable[[Any], Iterable[str]]) -> Callable[[Any], None]:
            def handle(node: ast.AST) -> None:
                for shape in shapes_of(node):
                    if shape in watched:
                        note(shape, node)

            return handle

        handlers = {node_type: one(shape_of) for node_type, shape_of in _SHAPE_BY_TYPE.items()}
        handlers.update((node_type, several(shapes_of)) for node_type, shapes_of in _SHAPES_BY_TYPE.items())
        handlers[ast.Call] = self._call
        if any(shape.endswith("=") for shape in watched):  # (a keyword argument: its name, and its name with "=")
            handlers[ast.keyword] = several(lambda node: (node.arg, f"{node.arg}=") if node.arg else ())
        if self._looks_for_copies:
            import_from = handlers[ast.ImportFrom]
            handlers[ast.Assign] = self._copies

            def import_from_and_aliases(node: ast.ImportFrom) -> None:
                import_from(node)
                self._copies(node)

            handlers[ast.ImportFrom] = import_from_and_aliases
        if self._looks_for_loaders:
            handlers[ast.alias] = _both(handlers[ast.alias], self._loader_alias)
        if self._looks_for_logging:
            handlers[ast.Import] = self.bind_import
            handlers[ast.ImportFrom] = _both(handlers[ast.ImportFrom], self.bind_import)
        if self._places is not None:
            for node_type, place in self._places.placers().items():
                handlers[node_type] = _both(handlers[node_type], place) if node_type in handlers else place
        return handlers

    def _note(self, shape: str, node: ast.AST) -> None:
        if shape in self._wanted:
            self._found.add(shape)
        if self._looks_for_apply and shape == ".apply(":
            self._apply(node)
        elif shape in _OPTIMIZER_IDENTIFIERS:
            self._names_optimizer = True

    def _call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in self._methods:
                self._note(f".{func.attr}(", node)
            if self._places is not None and func.attr in STEP_METHODS:
                self._places.step_shaped(node)
            if self._looks_for_loaders and func.attr == "DataLoader":
                self._found.add(LOADER_BUILT)
            if self._looks_for_logging:
                if func.attr in LOG_METHODS or func.attr == "log" or func.attr.startswith("add_"):
                    self._found.add(LOGGED)
                elif (dotted := dotted_name(func)) is not None:
                    self._called_heads.add(dotted.partition(".")[0])
            if self._looks_for_evaluation and EVALUATION_NAME.match(func.attr):
                self._found.add(EVALUATED)
        elif isinstance(func, ast.Name):
            if func.id in self._functions:
                self._note(f"{func.id}(", node)
            if self._looks_for_logging:
                if func.id == "print":
                    self._found.add(LOGGED)
                else:
                    self._called_heads.add(func.id)
            if self._looks_for_evaluation and func.id != "eval" and EVALUATION_NAME.match(func.id):
                self._found.add(EVALUATED)
            if func.id in self._outer_functions and node.args:
                inner = node.args[0]
                if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name):
                    self._note(f"{func.id}({inner.func.id}(", node)
            if self._looks_for_loaders:
                self._called_names.add(func.id)
        if self._looks_for_copies:
            self._copies(node)

    def bind_import(self, node: ast.Import | ast.ImportFrom) -> None:
        """Read the names an import binds into a logging library (as imports.ImportTable binds
        them), for LOGGED; also called on the imports of a module whose part alone is walked."""
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.partition(".")[0]
                if top in LOGGING_LIBRARIES:
                    self._logging_names.add(alias.asname or top)
        elif node.level == 0 and node.module and node.module.partition(".")[0] in LOGGING_LIBRARIES:
            self._logging_names.update(alias.asname or alias.name for alias in node.names)

    def _loader_alias(self, node: ast.alias) -> None:
        if node.asname and node.name.rpartition(".")[2] == "DataLoader":
            self._loader_aliases.add(node.asname)

    def _apply(self, call: ast.AST) -> None:
        func = call.func if isinstance(call, ast.Call) else None
        receiver = func.value if isinstance(func, ast.Attribute) else None
        name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", None)
        if is_step_method("apply", name):
            self._found.add(OPTIMIZER_APPLY)
        else:
            self._other_apply = True

    def _copies(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in DEVICE_COPY_METHODS:
                copied = _host_chain_start(func.value)
                if isinstance(copied, ast.Call) and (name := last_name(copied.func)) is not None:
                    self._copied_calls.setdefault(name, []).append(_span(node))
                elif isinstance(copied, ast.Name):
                    self._copied_names.setdefault(copied.id, []).append(_span(node))
        elif isinstance(node, ast.Assign):
            targets = [target.id for target in node.targets if isinstance(target, ast.Name)]
            value = _host_chain_start(node.value)
            if isinstance(value, ast.Call) and (name := last_name(value.func)) is not None:
                for target in targets:
                    self._assigned_calls.setdefault(target, set()).add(name)
            elif last_name(node.value) in HOST_BUILDERS:  # `zeros = torch.zeros`
                self._builder_aliases.update(targets)
        elif isinstance(node, ast.ImportFrom):
            self._builder_aliases.update(a.asname for a in node.names if a.asname and a.name in HOST_BUILDERS)

    def found(self) -> frozenset[str]:
        if self._looks_for_loaders and not self._called_names.isdisjoint({"DataLoader", *self._loader_aliases}):
            self._found.add(LOADER_BUILT)
        if self._looks_for_logging and not self._called_heads.isdisjoint(self._logging_names):
            self._found.add(LOGGED)
        if HOST_READ in self._wanted:
            self._found.add(HOST_READ)  # (decided on a per-step region only: step_region.py)
        if (
            STEP_LOOP in self._wanted
            and self._places is not None
            and self._places.may_run_per_step(self._names_optimizer)
        ):
            self._found.add(STEP_LOOP)
        if self._other_apply and self._names_optimizer:
            self._found.add(OPTIMIZER_APPLY)
        if self._looks_for_copies:
            builders = HOST_BUILDERS | self._builder_aliases
            copies = [span for name in builders for span in self._copied_calls.get(name, ())]
            copies += [
                span
                for name, spans in self._copied_names.items()
                if not self._assigned_calls.get(name, set()).isdisjoint(builders)
                for span in spans
            ]
            if copies:
                self._found.add(FACTORY_COPY)
            if REPEATED_COPY in self._wanted and self._places is not None and any(map(self._places.may_repeat, copies)):
                self._found.add(REPEATED_COPY)
        return frozenset(self._found & self._wanted)


Span = tuple[tuple[int, int], tuple[int, int]]  # (line, column) of a node's start, and of its end


def _span(node: Any) -> Span:
    return (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)


def _within(inner: Span, outer: Span) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def _scope_span(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda) -> Span:
    """A scope's span with its decorators, which libcst's tree holds in the definition as well."""
    decorators = getattr(node, "decorator_list", None)
    start, end = _span(node)
    return (_span(decorators[0])[0] if decorators else start), end


def _both(first: Callable[[Any], None], second: Callable[[Any], None]) -> Callable[[Any], None]:
    def handle(node: ast.AST) -> None:
        first(node)
        second(node)

    return handle


class _Places:
    """Where the step-shaped calls, the loops and the scopes of a module are (an `ast` node has no
    parent: the walk records spans, and nodes nest), for the shapes that over-approximate the loop
    model (loops.LoopModel), which decides with the module's values.

    STEP_LOOP (`may_run_per_step`):

    * a step call in a function that is no test function (pytest's `test*`), a lambda or a class
      body may make a step function, or a step loop there: the module may run code per step;
    * one outside every loop of the module, or of a test function, takes one step: no step loop;
    * one in a loop of the module, or of a test function nothing in the module names, that runs
      fewer than SHORT_LOOP_STEPS times as literals say (`for _ in range(3)`, `for x in (a, b)`,
      through `enumerate`, `zip`...: a subset of what LoopModel.iterations reads) is in a short
      step loop, which the model does not count -- unless the function also steps outside its
      loops (the model then takes it for a hook a framework calls per step);
    * `.apply(` is a step only where the module may hold an optimizer (OPTIMIZER_APPLY's reading).

    REPEATED_COPY (`may_repeat`, LoopModel.runs_repeatedly): code runs once when it is straight-line
    code of the module, or of a test function nothing in the module names (`test_step`, a method
    Lightning calls per batch, is no test function here); anywhere else it may run again and again.

    The loops and scopes are *blocks*, nested as the code nests them; what holds a span is found by
    bisecting their starts and climbing to the parents (a file with a thousand test functions and
    as many steps is decided in milliseconds).
    """

    def __init__(self, source: bytes | str | None) -> None:
        self._source = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
        self._calls: list[Span] = []
        self._applies: list[Span] = []  # `.apply(` on a receiver not named like an optimizer
        self._blocks: list[_Block] = []
        self._training_step = False
        self._imported: set[str] = set()  # names imports bind (`range` imported is not the builtin)
        self._names: dict[bytes, int] | None = None  # how many times each identifier is written
        self._starts: list[tuple[int, int]] = []  # (the blocks' starts, sorted, once decided)
        self._parents: list[int] = []  # each sorted block's parent block (-1: the module)

    def placers(self) -> dict[type, Callable[[Any], None]]:
        """The walk's handlers that record where things are."""
        return {
            ast.For: self._loop,
            ast.AsyncFor: self._loop,
            ast.While: self._loop,
            ast.FunctionDef: self._function,
            ast.AsyncFunctionDef: self._function,
            ast.Lambda: self._scope,
            ast.ClassDef: self._scope,
            ast.alias: self._alias,
        }

    def step_shaped(self, call: ast.Call) -> None:
        func = call.func
        assert isinstance(func, ast.Attribute)
        if func.attr == "apply" and not is_step_method("apply", last_name(func.value)):
            self._applies.append(_span(call))
        else:
            self._calls.append(_span(call))

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While) -> None:
        first = node.test if isinstance(node, ast.While) else node.body[0]
        each_iteration = ((first.lineno, first.col_offset), _span(node.body[-1])[1])
        iterated = None if isinstance(node, ast.While) else node.iter  # (counted at the end: imports)
        self._blocks.append(_Block(_span(node), True, None, each_iteration, iterated))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name == "training_step":
            self._training_step = True
        self._blocks.append(_Block(_scope_span(node), False, node.name))

    def _scope(self, node: ast.Lambda | ast.ClassDef) -> None:
        self._blocks.append(_Block(_scope_span(node), False, None))

    def _alias(self, node: ast.alias) -> None:
        self._imported.add(node.asname or node.name.partition(".")[0])

    # -- STEP_LOOP ----------------------------------------------------------------------------------
    def may_run_per_step(self, names_optimizer: bool) -> bool:
        if self._training_step:
            return True
        calls = self._calls + self._applies if names_optimizer else self._calls
        placed = [(call, *self._where(call)) for call in calls]
        # The scopes that step outside their loops (of a test function: a hook, to the model).
        stepping = {
            id(scope)
            for call, scope, loops in placed
            if scope is not None and not any(_within(call, loop.each_iteration) for loop in loops)
        }
        return any(self._may_step(call, scope, loops, stepping) for call, scope, loops in placed)

    def _may_step(self, call: Span, scope: _Block | None, loops: list[_Block], stepping: set[int]) -> bool:
        """Whether a step-shaped call may run per step, given its innermost `scope` (None: the
        module's code) and the `loops` of that scope that hold it."""
        test_name = scope.name if scope is not None else None
        if scope is not None and (test_name is None or not test_name.startswith("test")):  # loops.is_test_function
            return True  # a function that is no test, a lambda, a class body
        if not loops:
            return False  # straight-line code of the module or of a test function: one step
        if test_name is not None:
            if not self._named_once(test_name):
                return True  # a test function something here may call or pass on
            if id(scope) in stepping:
                return True  # a test that also steps outside its loops: a hook to the model
        runs = 1
        for loop in loops:
            if _within(call, loop.each_iteration):
                count = None if loop.iterated is None else _literal_length(loop.iterated, self._imported)
                if count is None:
                    return True
                runs *= count
        return runs >= SHORT_LOOP_STEPS

    # -- REPEATED_COPY ------------------------------------------------------------------------------
    def may_repeat(self, span: Span) -> bool:
        scope, loops = self._where(span)
        if scope is not None:
            name = scope.name
            if name is None or not name.startswith("test") or name in PER_CALL_METHODS:
                return True  # a function that is no test, a lambda, a class body
            if not self._named_once(name):
                return True  # a test function something here may call
        return bool(loops)

    # -- where ----------------------------------------------------------------------------------------
    def _where(self, span: Span) -> tuple[_Block | None, list[_Block]]:
        """The innermost scope that holds `span` (None: the module's code), and the loops of that
        scope that hold it, innermost first (a loop around the scope runs its definition)."""
        if not self._starts and self._blocks:
            self._nest()
        blocks, parents = self._blocks, self._parents
        index = bisect_right(self._starts, span[0]) - 1
        while index >= 0 and not _within(span, blocks[index].span):
            index = parents[index]
        loops = []
        while index >= 0 and blocks[index].loop:
            loops.append(blocks[index])
            index = parents[index]
        return (blocks[index] if index >= 0 else None), loops

    def _nest(self) -> None:
        """Sort the blocks by their starts and find each one's parent (the nearest block before it
        that holds it): blocks nest, and no two start at one place."""
        self._blocks.sort(key=lambda block: block.span[0])
        stack: list[int] = []
        for index, block in enumerate(self._blocks):
            while stack and not _within(block.span, self._blocks[stack[-1]].span):
                stack.pop()
            self._parents.append(stack[-1] if stack else -1)
            stack.append(index)
        self._starts = [block.span[0] for block in self._blocks]

    def _named_once(self, name: str) -> bool:
        """Whether the module writes the identifier `name` only where it defines it, as far as its
        bytes tell -- code, strings and comments (never, without them)."""
        if self._source is None:
            return False
        if self._names is None:
            self._names = Counter(_IDENTIFIER.findall(self._source))
        return self._names.get(name.encode(), 0) == 1


@dataclass(frozen=True)
class _Block:
    """A loop or a scope (a function, a lambda, a class body) of `_Places`."""

    span: Span
    loop: bool
    name: str | None = None  # a function's
    each_iteration: Span = ((0, 0), (0, 0))  # a loop's: what runs on each iteration
    iterated: ast.expr | None = None  # a `for`'s iterable


# Identifiers in a source's bytes (ASCII ones whole; a name with other letters is counted in
# pieces, which never makes a name seem written once when it is written twice).
_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def _literal_length(iterable: ast.expr, imported: set[str]) -> int | None:
    """How many items a `for` iterates, when literals say: a list, tuple or set display, `range` of
    integer literals, and `enumerate`, `tqdm`, `zip`... of those.  What LoopModel._length reads of
    them, the same way (it reads more: names given literals, argparse defaults)."""
    if isinstance(iterable, (ast.List, ast.Tuple, ast.Set)):
        return None if any(isinstance(element, ast.Starred) for element in iterable.elts) else len(iterable.elts)
    if not (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name)):
        return None
    func = iterable.func.id
    args = [arg for arg in iterable.args if not isinstance(arg, ast.Starred)]
    if not args or (func in imported and func not in ("tqdm", "trange")):
        return None
    if func in RANGES and len(args) <= 3:
        bounds = [arg.value if isinstance(arg, ast.Constant) and type(arg.value) is int else None for arg in args]
        known = [bound for bound in bounds if bound is not None]
        if len(known) != len(bounds) or (len(known) == 3 and known[2] == 0):
            return None
        return len(range(*known))
    if func in PASS_THROUGH_ITERATORS:
        return _literal_length(args[0], imported)
    if func == "zip":
        lengths = [n for n in (_literal_length(arg, imported) for arg in args) if n is not None]
        return min(lengths) if lengths else None
    return None


def _host_chain_start(expr: ast.expr) -> ast.expr:
    """What a host tensor's subscripts and host-side methods start from: `torch.arange(n)[None]
    .float()` -> `torch.arange(n)`."""
    while True:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in HOST_TENSOR_METHODS
        ):
            expr = expr.func.value
        else:
            return expr


def _imported(node: ast.alias) -> Iterable[str]:
    return (*node.name.split("."), node.asname) if node.asname else node.name.split(".")


# The identifier (or statement) each node type holds, None when it has none; a call's shapes are
# its callee's (ShapeCollector._call).  The types not listed hold none.
_SHAPE_BY_TYPE: dict[type, Callable[[Any], str | None]] = {
    ast.For: lambda node: "for",
    ast.AsyncFor: lambda node: "for",
    ast.While: lambda node: "while",
    ast.Name: lambda node: node.id,
    ast.Attribute: lambda node: node.attr,
    ast.keyword: lambda node: node.arg,
    ast.FunctionDef: lambda node: node.name,
    ast.AsyncFunctionDef: lambda node: node.name,
    ast.ClassDef: lambda node: node.name,
    ast.arg: lambda node: node.arg,
    ast.ExceptHandler: lambda node: node.name,
    ast.MatchAs: lambda node: node.name,
    ast.MatchStar: lambda node: node.name,
    ast.MatchMapping: lambda node: node.rest,
}
# The node types that hold several.
_SHAPES_BY_TYPE: dict[type, Callable[[Any], Iterable[str]]] = {
    ast.alias: _imported,
    ast.ImportFrom: lambda node: node.module.split(".") if node.module else (),
    ast.Global: lambda node: node.names,
    ast.Nonlocal: lambda node: node.names,
    ast.MatchClass: lambda node: node.kwd_attrs,
}
