"""The training-loop model, shared by every rule that asks "does this run every step?".

Built once per module after the walk, when the whole module is known (a step function may be defined
below the loop that calls it):

* a *step call* performs a training step: `loss.backward()`, `optimizer.step()`, `scaler.step(opt)`,
  `tape.gradient(...)`, `opt.apply_gradients(...)`, Keras 3 `opt.apply(...)`, `train_on_batch(...)`,
  or a call of a *step function* -- by its name, through a parameter called with one
  (`train(trainer.train_step, loader)`), or handed to a runner (`strategy.run(train_step, ...)`);
* a *step function* is a function of this module that makes a step call outside any loop of its
  own (`train_step`, `self._run_batch`); calling it is a step call (found to a fixpoint).  A test
  function (`test*`, pytest's own rule) that takes one step checks behaviour once: it is none;
* a *step loop* is the innermost `for`/`while` that encloses a step call.  Loops around it (epochs)
  and loops without a step call (evaluation) are not step loops;
* code runs *per step* when a step loop's body (or a `while` test) encloses it, or when it is in a
  step function or a Lightning `training_step`;
* an *interval guard* is an `if` between the code and its step loop whose condition throttles by a
  counter (`step % 100 == 0`, `step >= next_log`), picks one step (`i == 0`, `step == n - 1`,
  `is_last_batch`), calls a helper of this module that does (`divisible_by(step, n)`), or counts by
  hand (`if since_save >= n:` ... `since_save = 0`), also when `or` adds a one-off
  (`step % 100 == 0 or last_batch`, `... or i == max_steps`); `% accum_steps`, other flags and rank
  checks are not;
* a *data guard* is an `if` between the code and its step loop whose condition reads the data
  (`if loss > 10:`, `if torch.isnan(loss):`, `if tf.equal(opt.iterations % n, 0):`, `if acc > best:`
  with `acc = metric.item()`): whether its body runs on a given step depends on the values, so
  the body is not known to run every step (whether the *condition* reads a device tensor back
  is a sync rule's question);
* a *short* step loop runs fewer than `SHORT_LOOP_STEPS` (20) steps in all, as the code says
  statically: `range(N)` or a tf.data pipeline's `take(N)` of a literal, of a name only ever
  given literals (`num_batches = 3`), of a parameter's default (`def train(steps=15)`), of an
  argparse default (`range(args.steps)` with `add_argument("--steps", default=15)`), a literal
  list or an argparse list default (`for k in args.nb_knn`), `enumerate`/`zip`/`tqdm` of those,
  or fewer where a counter ends the loop first (`if i >= 10: break` among the body's own
  statements, `i` from `enumerate` or raised by 1 every iteration from 0; `while step < 10:`) --
  times every loop around it in its function and, for a function of this module, around its
  calls.  A demo or a smoke test: what a step costs there is fixed start-up noise (CUDA context,
  model load take seconds; 20 syncs or prints take milliseconds), so code in a short step loop,
  and a step function called only from short loops, is not per step;
* a *few-step* step loop runs fewer than `FEW_LOOP_STEPS` (50) steps in all, as the same reading
  of the code says (and at least `SHORT_LOOP_STEPS`): its code runs per step, but a per-step cost
  paid a few dozen times is no evidence of a real one, so the per-step rules report it with a hint
  (`few_steps_hint`) that holds the finding back unless hints are shown;
* code runs *repeatedly* when it runs per step, in a loop not known to be short, in a method a
  framework calls per batch or sample (`forward`, `__call__`, Keras' `call`, Lightning's
  `*_step`, `__getitem__`), or in a function of this module called from such code: where a
  one-off cost (building a tensor) becomes a per-step or per-epoch one;
* *per-step work* runs per step, under no interval guard or data guard, and not as the handling of
  a rare event (in an `except` handler, in a branch that leaves the iteration: `break`,
  `continue`, `return`, `raise`, `sys.exit()`, or in the `else` of an `if`, not an interval, whose
  body takes the step and whose `else` does not: the handling of a batch skipped).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.analysis import intervals
from gpulint.linter.analysis.code_shapes import OPTIMIZER_APPLY
from gpulint.linter.analysis.command_line import Option, declared_options
from gpulint.linter.analysis.imports import ImportTable
from gpulint.linter.analysis.nodes import dotted_name, is_zero, last_name, method_name
from gpulint.linter.analysis.values import ValueOrigins, target_key
from gpulint.linter.analysis.vocabulary import (
    CLOCKS,
    EXIT_CALLS,
    FEW_LOOP_STEPS,
    PASS_THROUGH_ITERATORS,
    PER_CALL_METHODS,
    RANGES,
    SHORT_LOOP_STEPS,
    STEP_METHODS,
    is_step_method,
)
from gpulint.linter.analysis.walk import TreeIndex, names_under, nodes_under

if TYPE_CHECKING:
    from gpulint.linter.analysis.project import ModuleView

LOOP_TYPES = (cst.For, cst.While)
SCOPE_TYPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)

# Method names too generic to link `obj.name()` to a same-named function of this module unless the
# receiver is `self`: `scheduler.step()` is not a call of some class's `def step(self)`.
_GENERIC_METHODS = frozenset({"step", "update", "apply", "run", "forward", "__call__", "call", "fit"})
_EXITS = (cst.Break, cst.Continue, cst.Return, cst.Raise)
# Methods that call the function given as their first argument (`strategy.run(step_fn, args=...)`).
_RUNNERS = frozenset({"run", "experimental_run_v2", "call_for_each_replica"})
# Names in a step loop's body that draw a batch (mini-batch training, not full-batch).
_DRAWS_BATCH = re.compile(
    r"batch|loader|sample|shuffle|perm|chunk|(^|_)(next|iter|iterator|idx|indices|split|gen|data_?gen)($|_)", re.I
)
# Names of a reinforcement-learning environment (`env`, `envs`, `train_env`, `environment`).
_ENVIRONMENT_NAME = re.compile(r"(^|_)(env|envs|environment|environments)($|_)", re.IGNORECASE)
# Names of an epoch counter or count (`epoch`, `num_epochs`, `n_epoch`).
_EPOCH_NAME = re.compile(r"(^|_)(epoch|epochs|ep)(_|$)", re.IGNORECASE)

# How far the loop-length and repetition questions follow a function's callers up the module.
_CALLER_DEPTH = 4
# `torch.*` / `tf.*` calls whose result is not the data: a process's rank, the device, the API.
_NOT_DATA_CALL = re.compile(
    r"^(torch\.(distributed|cuda|backends|jit|compiler|accelerator|is_|get_|are_)|"
    r"tensorflow\.(distribute|config|executing_eagerly|test|is_|get_))"
)
_ORDERING = (cst.GreaterThan, cst.GreaterThanEqual, cst.LessThan, cst.LessThanEqual, cst.Equal, cst.NotEqual)
# A device-wide wait: `torch.cuda.synchronize()`, `torch.accelerator.synchronize()`.
_SYNCHRONIZE = re.compile(r"^torch\.(cuda|accelerator|xpu|mps)\.synchronize$")
# Names of a function that measures code on purpose.
_BENCHMARK_NAME = re.compile(r"bench|profil|(^|_)(timing|speed_test|throughput)(_|$)", re.IGNORECASE)
# Reads of a tensor into a Python value: `acc = metric.item()` holds data.
_READ_METHODS = frozenset({"item", "numpy", "tolist", "cpu"})

# Text every module with a step call contains (one of): what `is_direct_step_call` recognises,
# plus Lightning's `training_step` (the prefilter of the STEPS fact).
STEP_TOKENS = (
    b"backward",
    b".step(",
    b"gradient(",
    b"apply_gradients",
    b"train_on_batch",
    b"training_step",
    b".apply(",
)
# The same in code (analysis/code_shapes.py): a method call `is_direct_step_call` may take for a
# step (`.apply(` only on what may be an optimizer: Keras 3), or a `training_step` (a
# LightningModule's).
STEP_SHAPES = (
    *(f".{method}(" for method in sorted(STEP_METHODS - {"apply"})),
    OPTIMIZER_APPLY,
    "training_step",
)
# The shapes of code without one of which nothing in a module runs repeatedly (`runs_repeatedly`)
# unless another module says so: a loop, a method a framework calls per batch, or a step (a step
# function or a per-step hook holds one) -- a trigger group of the rules that report only work
# done again and again.
REPEATS_SHAPES = tuple(dict.fromkeys(("for", "while", *sorted(PER_CALL_METHODS), *STEP_SHAPES)))

LIGHTNING_MODULES = (
    "lightning.pytorch.LightningModule",
    "lightning.LightningModule",
    "lightning.pytorch.core.LightningModule",
)


def is_direct_step_call(call: cst.Call, values: ValueOrigins) -> bool:
    """A call that takes a training step by itself (not through a step function)."""
    method = method_name(call)
    if method is None or not isinstance(call.func, cst.Attribute):  # a method name means an attribute
        return False
    receiver = call.func.value
    if method == "step":
        if values.is_kind(receiver, "optimizer") or values.is_kind(receiver, "gradscaler"):
            return True
        if values.is_kind(receiver, "scheduler"):
            return False
    elif method == "gradient" and values.is_kind(receiver, "tape"):
        return True
    elif method == "apply" and values.is_kind(receiver, "optimizer"):
        return True
    return is_step_method(method, last_name(receiver))


def is_method(index: TreeIndex, function: cst.FunctionDef) -> bool:
    """Whether a function is defined directly in a class body."""
    return method_class(index, function) is not None


def method_class(index: TreeIndex, function: cst.FunctionDef) -> cst.ClassDef | None:
    """The class whose body defines `function` directly; None when it is not a method."""
    parent = index.parent(function)
    # FunctionDef -> IndentedBlock -> ClassDef
    grand = index.parent(parent) if parent is not None else None
    return grand if isinstance(grand, cst.ClassDef) else None


def lightning_training_steps(index: TreeIndex, imports: ImportTable) -> list[cst.FunctionDef]:
    """The `training_step` methods of LightningModule subclasses: Lightning calls them every step."""
    found = []
    for function in index.nodes("FunctionDef"):
        if function.name.value != "training_step":
            continue
        cls = method_class(index, function)
        if cls is None:
            continue
        if any(imports.qualified_name(base.value) in LIGHTNING_MODULES for base in cls.bases):
            found.append(function)
    return found


def qualname(index: TreeIndex, function: cst.FunctionDef) -> str:
    """`Trainer.train_step`, `main.inner`: the function's name within its module."""
    names = [function.name.value]
    for ancestor in index.ancestors(function):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            names.append(ancestor.name.value)
    return ".".join(reversed(names))


def is_test_function(function: cst.FunctionDef) -> bool:
    """A function pytest collects (`test*`): it checks behaviour once, however many steps it takes."""
    return function.name.value.startswith("test")


def loop_around(index: TreeIndex, node: cst.CSTNode) -> tuple[cst.For | cst.While | None, cst.FunctionDef | None]:
    """(innermost loop that runs `node` on each iteration, innermost function) -- the loop only
    within that function: a loop outside the function runs the definition, not the body."""
    child = node
    loop: cst.For | cst.While | None = None
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, SCOPE_TYPES):
            return loop, ancestor if isinstance(ancestor, cst.FunctionDef) else None
        if loop is None and isinstance(ancestor, LOOP_TYPES) and runs_each_iteration(ancestor, child):
            loop = ancestor
        child = ancestor
    return loop, None


def runs_each_iteration(loop: cst.For | cst.While, child: cst.CSTNode) -> bool:
    """Whether `child` of `loop` runs on every iteration (the body, or a `while` test)."""
    if child is loop.body:
        return True
    return isinstance(loop, cst.While) and child is loop.test


class LoopModel:
    """The training-loop model of one module (`ctx.loops`): its step calls, step functions and step
    loops, built once, and the per-step questions rules ask of a node."""

    def __init__(
        self,
        index: TreeIndex,
        imports: ImportTable,
        values: ValueOrigins,
        project: ModuleView | None = None,
        is_tensor: Callable[[cst.BaseExpression], bool] | None = None,
        command_line: Callable[[], Sequence[Option]] | None = None,
    ) -> None:
        self.index = index
        self.imports = imports
        self.values = values
        # Which expressions hold tensors (the PyTorch analysis's answer), for data guards.
        self._is_tensor = is_tensor or (lambda expr: False)
        # The module's command-line options (command_line.py), read when a question needs them.
        self._command_line = command_line or (lambda: declared_options(index))
        # What other modules say: which functions here they run per step, what the project
        # functions called here do (a step, a clock).
        self.project = project
        self.step_functions: set[int] = set()  # id() of FunctionDef nodes
        self.per_step_functions: set[int] = set()  # the step functions whose body runs every step
        self.step_loops: set[int] = set()  # id() of For/While nodes
        self.step_calls: set[int] = set()  # id() of Call nodes
        self.lightning_steps: set[int] = set()  # id() of `training_step` methods of LightningModules
        self._callers: dict[int, list[cst.Call]] = {}  # id() of a function -> the calls of it here
        self._continued: set[int] | None = None  # (_continued_loops)
        self._raises: dict[str, list[cst.AugAssign]] | None = None  # (_raised_names)
        self._build()

    # -- building ---------------------------------------------------------------------------
    def _callee_functions(
        self, call: cst.Call, functions_by_name: dict[str, list[cst.FunctionDef]]
    ) -> list[cst.FunctionDef]:
        found = self._functions_named(call.func, functions_by_name, 3)
        # A function handed to a runner: `strategy.run(train_step, args=(x,))`.
        if method_name(call) in _RUNNERS and call.args and call.args[0].keyword is None:
            found += self._functions_named(call.args[0].value, functions_by_name, 1)
        return found

    def _functions_named(
        self, func: cst.BaseExpression, functions_by_name: dict[str, list[cst.FunctionDef]], depth: int
    ) -> list[cst.FunctionDef]:
        """The functions of this module `func` may be: by name, or through what a name holds (a
        parameter called with one: `train(trainer.train_step, loader)`)."""
        if isinstance(func, cst.Name) and func.value == "self":  # `self(x)` runs the object's `__call__`
            return [f for f in functions_by_name.get("__call__", ()) if is_method(self.index, f)]
        if isinstance(func, cst.Name):
            functions = [f for f in functions_by_name.get(func.value, ()) if not is_method(self.index, f)]
            if functions or depth <= 1 or func.value in self.imports.bindings:
                return functions
            found = []
            for value in self.values.assigned.get(func.value, ()):
                if isinstance(value, (cst.Name, cst.Attribute)):
                    found += self._functions_named(value, functions_by_name, depth - 1)
            return found
        if isinstance(func, cst.Attribute):
            name = func.attr.value
            receiver = dotted_name(func.value)
            if receiver in ("self", "cls") or (
                name not in _GENERIC_METHODS and ("step" in name or "batch" in name or "train" in name)
            ):
                return [f for f in functions_by_name.get(name, ()) if is_method(self.index, f)]
        return []

    def _build(self) -> None:
        calls: list[cst.Call] = self.index.nodes("Call")
        functions: list[cst.FunctionDef] = self.index.nodes("FunctionDef")
        functions_by_name: dict[str, list[cst.FunctionDef]] = {}
        for function in functions:
            functions_by_name.setdefault(function.name.value, []).append(function)
        self.lightning_steps = {id(f) for f in lightning_training_steps(self.index, self.imports)}

        placement = {id(call): loop_around(self.index, call) for call in calls}
        step_calls = {
            id(call) for call in calls if is_direct_step_call(call, self.values) or self._steps_elsewhere(call)
        }
        # Functions that step themselves (not only through calls): an uncalled one is a hook.
        self._direct_steppers = {
            id(placement[id(call)][1])
            for call in calls
            if id(call) in step_calls and placement[id(call)][0] is None and placement[id(call)][1] is not None
        }
        callees_of = {id(call): self._callee_functions(call, functions_by_name) for call in calls}

        # Step functions to a fixpoint: a function that steps outside its own loops is one, and a
        # call of one is a step call.
        changed = True
        while changed:
            changed = False
            for call in calls:
                if id(call) not in step_calls:
                    if any(id(f) in self.step_functions for f in callees_of[id(call)]):
                        step_calls.add(id(call))
                        changed = True
                if id(call) in step_calls:
                    loop, enclosing = placement[id(call)]
                    if (
                        loop is None
                        and enclosing is not None
                        and id(enclosing) not in self.step_functions
                        and not is_test_function(enclosing)
                    ):
                        self.step_functions.add(id(enclosing))
                        changed = True

        self.step_calls = step_calls
        for call in calls:
            if id(call) in step_calls:
                loop, _ = placement[id(call)]
                if loop is not None:
                    self.step_loops.add(id(loop))
        self._find_per_step_functions(functions, calls, placement, callees_of)
        if self.project is not None and self.project.per_step:  # functions another module runs on every step
            self.per_step_functions |= {id(f) for f in functions if qualname(self.index, f) in self.project.per_step}

    def _steps_elsewhere(self, call: cst.Call) -> bool:
        """A call of a step function of another module of the project."""
        facts = self.project.callee(dotted_name(call.func)) if self.project else None
        return facts is not None and facts.steps

    def _find_per_step_functions(self, functions, calls, placement, callees_of) -> None:
        """Step functions whose body runs every step: called from a step loop, or from another
        per-step function, or -- when it takes the step itself -- not called in this module at all
        (a framework hook such as Keras' `train_step`).  A step function only ever called in
        straight-line code (a one-shot check that takes a single step, and the `main()` that calls
        it) runs once, and its body is not per-step work."""
        callers = self._callers
        for call in calls:
            for function in callees_of[id(call)]:
                callers.setdefault(id(function), []).append(call)
        step_functions = [f for f in functions if id(f) in self.step_functions]
        changed = True
        while changed:
            changed = False
            for function in step_functions:
                if id(function) in self.per_step_functions:
                    continue
                sites = callers.get(id(function), [])
                if (not sites and id(function) in self._direct_steppers) or any(
                    (placement[id(site)][0] is not None and not self._short(site))
                    or (placement[id(site)][1] is not None and id(placement[id(site)][1]) in self.per_step_functions)
                    for site in sites
                ):
                    self.per_step_functions.add(id(function))
                    changed = True

    # -- queries ----------------------------------------------------------------------------
    def _per_step_boundary(self, node: cst.CSTNode) -> tuple[cst.CSTNode | None, list[tuple[cst.CSTNode, cst.CSTNode]]]:
        """The step loop or step function that makes `node` run per step, and the path to it.

        The path is the (ancestor, child-on-the-way) pairs walked, for guard checks.
        """
        path: list[tuple[cst.CSTNode, cst.CSTNode]] = []
        child = node
        for ancestor in self.index.ancestors(node):
            path.append((ancestor, child))
            # step_loops holds only loops: the isinstance check is for the type checker
            if (
                id(ancestor) in self.step_loops
                and isinstance(ancestor, LOOP_TYPES)
                and runs_each_iteration(ancestor, child)
            ):
                if self._short(ancestor.body):
                    return None, path
                return ancestor, path
            if isinstance(ancestor, cst.FunctionDef):
                if id(ancestor) in self.per_step_functions or id(ancestor) in self.lightning_steps:
                    return ancestor, path
                return None, path
            if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return None, path
            child = ancestor
        return None, path

    def per_step(self, node: cst.CSTNode) -> bool:
        """Whether `node` runs on every training step (ignoring guards)."""
        return self._per_step_boundary(node)[0] is not None

    def step_boundary(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The step loop (For/While) or step function that `node` runs in, or None."""
        return self._per_step_boundary(node)[0]

    def is_step_call(self, call: cst.Call) -> bool:
        return id(call) in self.step_calls

    def is_step_loop(self, loop: cst.CSTNode) -> bool:
        return id(loop) in self.step_loops

    def interval_guard(self, node: cst.CSTNode) -> cst.If | None:
        """The `if` that throttles `node` inside its step loop, or None."""
        boundary, path = self._per_step_boundary(node)
        if boundary is None:
            return None
        for ancestor, child in path:
            if ancestor is boundary:
                break
            if isinstance(ancestor, cst.If) and child is ancestor.body and self._throttles(ancestor):
                return ancestor
        return None

    def _throttles(self, guard: cst.If) -> bool:
        """An interval condition (`is_interval_condition`), a call of a helper of this module that
        returns one (`divisible_by(step, n)`), or a counter the branch resets (`if since_save >= n:
        ... since_save = 0`)."""
        return (
            is_interval_condition(guard.test)
            or _holds_anywhere(guard.test, self._calls_interval_helper)
            or _holds_anywhere(guard.test, lambda test: _resets_counter(guard, test))
        )

    def _calls_interval_helper(self, test: cst.BaseExpression) -> bool:
        if not isinstance(test, cst.Call) or not isinstance(test.func, cst.Name):
            return False
        return test.func.value in self._interval_helpers

    @cached_property
    def _interval_helpers(self) -> frozenset[str]:
        """Functions of this module that return an interval condition of their parameters
        (`def divisible_by(a, b): return a % b == 0`)."""
        helpers = set()
        for node in self.index.nodes("Return"):
            function = next((a for a in self.index.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
            if function is not None and node.value is not None and is_interval_condition(node.value):
                helpers.add(function.name.value)
        return frozenset(helpers)

    def per_step_work(self, node: cst.CSTNode) -> bool:
        """The question most in-loop rules ask: runs every step, nothing throttles it, its running
        does not depend on the data, and it is not the handling of a rare event."""
        return (
            self.per_step(node)
            and self.interval_guard(node) is None
            and self.data_guard(node) is None
            and not self.in_event_branch(node)
        )

    def data_guard(self, node: cst.CSTNode) -> cst.If | None:
        """The `if` between `node` and its step loop whose condition reads the data (`if loss > 10:`),
        or None: the body runs on the steps the values pick, not on every step."""
        boundary, path = self._per_step_boundary(node)
        if boundary is None:
            return None
        for ancestor, child in path:
            if ancestor is boundary:
                break
            if isinstance(ancestor, cst.If) and child is ancestor.body and self._reads_data(ancestor.test):
                return ancestor
        return None

    def _reads_data(self, test: cst.BaseExpression) -> bool:
        """Whether a condition depends on the values computed in the step: a tensor compared or
        tested (`loss > 10`, `torch.isnan(loss)`, `tf.equal(...)`), or a value read from one
        (`acc > best` after `acc = metric.item()`).  `x is None` and `isinstance` checks do not."""
        if isinstance(test, cst.BooleanOperation):
            left, right = self._reads_data(test.left), self._reads_data(test.right)
            return (left or right) if isinstance(test.operator, cst.And) else (left and right)
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._reads_data(test.expression)
        if isinstance(test, cst.Comparison):
            if not all(isinstance(target.operator, _ORDERING) for target in test.comparisons):
                return False
            return any(self._holds_data(side) for side in (test.left, *(t.comparator for t in test.comparisons)))
        return self._holds_data(test)

    def _holds_data(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            qualified = self.imports.qualified_name(expr.func) or ""
            if qualified.startswith(("torch.", "tensorflow.")) and not _NOT_DATA_CALL.match(qualified):
                return True
        if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)):
            parts = [expr.left, expr.right] if isinstance(expr, cst.BinaryOperation) else [expr.expression]
            return any(self._holds_data(part) for part in parts)
        if self._is_tensor(expr) or _is_read(expr, self._is_tensor):
            return True
        key = target_key(expr)
        return key is not None and any(_is_read(value, self._is_tensor) for value in self.values.assigned.get(key, ()))

    def runs_repeatedly(self, node: cst.CSTNode, depth: int = _CALLER_DEPTH) -> bool:
        """Whether `node` runs many times (module docstring): a cost paid there is paid per step or
        per epoch, not once at start-up."""
        if self.per_step(node):
            return True
        child = node
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, LOOP_TYPES) and runs_each_iteration(ancestor, child):
                return not self._short(node)
            if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return False
            if isinstance(ancestor, cst.FunctionDef):
                if ancestor.name.value in PER_CALL_METHODS and is_method(self.index, ancestor):
                    return True
                return depth > 0 and any(
                    self.runs_repeatedly(site, depth - 1) for site in self._callers.get(id(ancestor), ())
                )
            child = ancestor
        return False

    # -- loop length ------------------------------------------------------------------------
    def steps_in_all(self, node: cst.CSTNode) -> int | None:
        """How many steps the step loop or step function around `node` runs in all, when the code
        bounds it statically (`_runs_at_most` of its body); None when not known or not per step."""
        boundary = self.step_boundary(node)
        if not isinstance(boundary, (*LOOP_TYPES, cst.FunctionDef)):
            return None
        return self._runs_at_most(boundary.body, _CALLER_DEPTH)

    def few_steps_hint(self, node: cst.CSTNode) -> str | None:
        """The hint of a per-step finding in a few-step loop ("the loop runs at most 30 steps"), or
        None where the loop is not known to be one (module docstring)."""
        steps = self.steps_in_all(node)
        if steps is None or steps >= FEW_LOOP_STEPS:
            return None
        return f"the training loop runs at most {steps} steps"

    def _short(self, node: cst.CSTNode) -> bool:
        """Whether `node` is known to run fewer than `SHORT_LOOP_STEPS` times in all."""
        runs = self._runs_at_most(node, _CALLER_DEPTH)
        return runs is not None and runs < SHORT_LOOP_STEPS

    def _runs_at_most(self, node: cst.CSTNode, depth: int) -> int | None:
        """How many times `node` runs at most, as the code shows statically: the product of the
        iteration counts of the loops around it in its function, times the most any call of its
        function in this module runs; None when a loop's count is not known (a loader, a `while`),
        or the function runs every step by a framework's or another module's doing."""
        total = 1
        child = node
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, LOOP_TYPES) and runs_each_iteration(ancestor, child):
                count = self.iterations(ancestor)
                if count is None:
                    return None
                total *= count
            if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return total
            if isinstance(ancestor, cst.FunctionDef):
                return self._calls_run_at_most(ancestor, total, depth)
            child = ancestor
        return total

    def _calls_run_at_most(self, function: cst.FunctionDef, runs: int, depth: int) -> int | None:
        sites = self._callers.get(id(function), ())
        if not sites:
            hooked = (
                id(function) in self._direct_steppers
                or id(function) in self.lightning_steps
                or (self.project is not None and qualname(self.index, function) in self.project.per_step)
            )
            return None if hooked else runs  # called from elsewhere: as its own loops say
        if depth <= 0:
            return None
        most = 0
        for site in sites:
            site_runs = self._runs_at_most(site, depth - 1)
            if site_runs is None:
                return None
            most = max(most, site_runs)
        return runs * most

    def iterations(self, loop: cst.For | cst.While) -> int | None:
        """How many times a loop iterates, when the code says so statically (module docstring): the
        length of what a `for` iterates, or fewer where a counter ends the loop first (`if i >= 10:
        break` at the top level of its body, `while step < 10:`)."""
        counts = [self._length(loop.iter, 2)] if isinstance(loop, cst.For) else []
        counts.append(self._counted_bound(loop))
        known = [count for count in counts if count is not None]
        return min(known) if known else None

    def _counted_bound(self, loop: cst.For | cst.While) -> int | None:
        """The most iterations a counter of the loop allows: a counter is `enumerate`'s index (from
        its literal start) or a name the loop's own body raises by 1 (and by positive steps only)
        that the module only ever sets to 0; it ends the loop by `while counter < N` or by `if
        counter >= N: break` (also `>`, `==`, and `counter + 1 >= N`) among the body's own
        statements -- a branch that ends in the `break` (`prof.stop()` first) -- N known
        statically."""
        counters = self._loop_counters(loop)
        if not counters:
            return None
        tests: list[cst.BaseExpression] = []
        if isinstance(loop, cst.While):
            tests.append(loop.test)
        for statement in loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ():
            if (
                isinstance(statement, cst.If)
                and statement.orelse is None
                and isinstance(statement.body, cst.IndentedBlock)
                and isinstance(statement.body.body[-1], cst.SimpleStatementLine)
                and any(isinstance(small, cst.Break) for small in statement.body.body[-1].body)
            ):
                tests.append(statement.test)
        bounds = []
        for test in tests:
            if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
                continue
            counted = self._counter_offset(test.left, counters, loop)
            limit = self._static_int(test.comparisons[0].comparator, loop)
            if counted is None or limit is None:
                continue
            start, offset = counted
            limit -= offset + start  # `i + 1 >= N` from `enumerate(xs, 1)`: N - 2 iterations before it
            operator = test.comparisons[0].operator
            if limit < 0:
                continue
            is_while = test is getattr(loop, "test", None)
            if is_while and isinstance(operator, (cst.LessThan, cst.LessThanEqual, cst.NotEqual)):
                bounds.append(limit + (1 if isinstance(operator, cst.LessThanEqual) else 0))
            elif not is_while and isinstance(operator, (cst.GreaterThanEqual, cst.GreaterThan, cst.Equal)):
                bounds.append(limit + (2 if isinstance(operator, cst.GreaterThan) else 1))
        return min(bounds) if bounds else None

    def _counter_offset(
        self, expr: cst.BaseExpression, counters: dict[str, int], loop: cst.CSTNode
    ) -> tuple[int, int] | None:
        """(the counter's start, what is added to it) for `counter`, `counter + k`, `counter - k`
        with `k` a literal; None for any other expression."""
        if isinstance(expr, cst.Name) and expr.value in counters:
            return counters[expr.value], 0
        if (
            isinstance(expr, cst.BinaryOperation)
            and isinstance(expr.operator, (cst.Add, cst.Subtract))
            and isinstance(expr.left, cst.Name)
            and expr.left.value in counters
        ):
            if not isinstance(expr.right, cst.Integer):  # a value only known at most would not bound it
                return None
            added = int(expr.right.evaluated_value)
            return counters[expr.left.value], added if isinstance(expr.operator, cst.Add) else -added
        return None

    def _loop_counters(self, loop: cst.For | cst.While) -> dict[str, int]:
        """The loop's counters (`_counted_bound`), each with the value it has on the first iteration."""
        counters: dict[str, int] = {}
        if isinstance(loop, cst.For) and isinstance(loop.iter, cst.Call) and dotted_name(loop.iter.func) == "enumerate":
            start_args = [
                arg.value for arg in loop.iter.args[1:] if arg.keyword is None or arg.keyword.value == "start"
            ]
            start = (
                (int(start_args[0].evaluated_value) if isinstance(start_args[0], cst.Integer) else None)
                if start_args
                else 0
            )
            target = loop.target
            if (
                len(loop.iter.args) >= 1
                and start is not None
                and start >= 0
                and isinstance(target, cst.Tuple)
                and target.elements
                and isinstance(target.elements[0].value, cst.Name)
            ):
                counters[target.elements[0].value.value] = start
        # A name raised on every iteration: `n += 1` as a statement of the body itself (not under an
        # `if`), in a body no `continue` skips the rest of.
        if id(loop) in self._continued_loops():
            return counters
        for name, augs in self._raised_names().items():
            every_iteration = any(
                isinstance(aug.operator, cst.AddAssign)
                and isinstance(aug.value, cst.Integer)
                and aug.value.evaluated_value == 1
                and (line := self.index.parent(aug)) is not None
                and self.index.parent(line) is loop.body
                for aug in augs
            )
            only_up = all(
                isinstance(aug.operator, cst.AddAssign) and isinstance(aug.value, (cst.Integer, cst.Float))
                for aug in augs
            )
            set_to = self.values.assigned.get(name, ())
            from_zero_before = bool(set_to) and all(
                is_zero(value) and not any(a is loop for a in self.index.ancestors(value)) for value in set_to
            )
            if every_iteration and only_up and from_zero_before:
                counters[name] = 0
        return counters

    def _continued_loops(self) -> set[int]:
        """id() of the loops a `continue` of their own skips the rest of the body of (found once
        from the walked `continue`s, rather than by walking every loop's body)."""
        if self._continued is None:
            self._continued = {id(loop_around(self.index, node)[0]) for node in self.index.nodes("Continue")}
        return self._continued

    def _raised_names(self) -> dict[str, list[cst.AugAssign]]:
        """The module's `name += ...` statements by the name raised (gathered once)."""
        if self._raises is None:
            self._raises = {}
            for aug in self.index.nodes("AugAssign"):
                if isinstance(aug.target, cst.Name):
                    self._raises.setdefault(aug.target.value, []).append(aug)
        return self._raises

    def _length(self, iterable: cst.BaseExpression, depth: int) -> int | None:
        if isinstance(iterable, (cst.List, cst.Tuple, cst.Set)):
            if any(isinstance(el, cst.StarredElement) for el in iterable.elements):
                return None
            return len(iterable.elements)
        if (
            isinstance(iterable, cst.Call)
            and isinstance(iterable.func, cst.Attribute)
            and iterable.func.attr.value == "take"
            and len(iterable.args) == 1
            and iterable.args[0].keyword in (None, "count")
            and (self.values.is_kind(iterable.func.value, "tfdata") or self._imports_tensorflow)
        ):
            return self._static_int(iterable.args[0].value, iterable)  # `ds.take(10)`: at most 10 elements
        if isinstance(iterable, cst.Call) and self.imports.qualified_name(iterable.func) == "itertools.islice":
            # `islice(loader, n)`, `islice(loader, start, n)`: at most `n` items, whatever it slices
            stops = [arg.value for arg in iterable.args if arg.keyword is None and not arg.star][1:3]
            stop = stops[-1] if stops else None
            return None if stop is None else self._static_int(stop, iterable)
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name):
            func = iterable.func.value
            args = [arg.value for arg in iterable.args if arg.keyword is None and not arg.star]
            if not args or (func in self.imports.bindings and func not in ("tqdm", "trange")):
                return None
            if func in RANGES and len(args) <= 3:
                bounds = [self._static_int(arg, iterable) for arg in args]
                known = [bound for bound in bounds if bound is not None]
                if len(known) != len(bounds) or (len(known) == 3 and known[2] == 0):
                    return None  # a bound not known, or a step of 0 (which raises)
                return len(range(*known))
            if func in PASS_THROUGH_ITERATORS:
                return self._length(args[0], depth)
            if func == "zip":
                known = [n for n in (self._length(arg, depth) for arg in args) if n is not None]
                return min(known) if known else None
            return None
        if (
            isinstance(iterable, cst.Attribute)
            and isinstance(iterable.value, cst.Name)
            and iterable.value.value not in ("self", "cls")
            and iterable.attr.value in self._argparse_list_defaults
        ):
            return self._argparse_list_defaults[iterable.attr.value]  # `for k in args.nb_knn`
        key = target_key(iterable)
        if key is None or depth <= 0 or self._changed_in_place(key):
            return None
        lengths = [self._length(value, depth - 1) for value in self.values.assigned.get(key, ())]
        known = [n for n in lengths if n is not None]
        return max(known) if known and len(known) == len(lengths) else None

    @cached_property
    def _imports_tensorflow(self) -> bool:
        """In a TensorFlow module, `x.take(n)` iterated by a loop is a tf.data pipeline's (a
        pipeline built elsewhere is not known to be one by its origin)."""
        return any(
            target == "tensorflow" or target.startswith("tensorflow.") for target in self.imports.bindings.values()
        )

    def static_int(self, expr: cst.BaseExpression, where: cst.CSTNode) -> int | None:
        """The largest value an integer expression at `where` may have, when the module says (a
        literal, a name only ever given literals, an argparse default: see `_static_int`)."""
        return self._static_int(expr, where)

    def _static_int(self, expr: cst.BaseExpression, where: cst.CSTNode, depth: int = 3) -> int | None:
        """The largest value an integer expression may have, when the module says: a literal, a
        name only ever given literals (its assignments, a parameter's default and the arguments
        calls here pass), an argparse option's default, `len` of a literal, arithmetic of those."""
        if isinstance(expr, cst.Integer):
            return int(expr.evaluated_value)
        if depth <= 0:
            return None
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
            inner = self._static_int(expr.expression, where, depth - 1)
            return None if inner is None else -inner
        if isinstance(expr, cst.BinaryOperation):
            left, right = self._static_int(expr.left, where, depth - 1), self._static_int(expr.right, where, depth - 1)
            if left is None or right is None:
                return None
            if isinstance(expr.operator, cst.Add):
                return left + right
            if isinstance(expr.operator, cst.Subtract):
                return left - right
            if isinstance(expr.operator, cst.Multiply):
                return left * right
            if isinstance(expr.operator, cst.FloorDivide) and right:
                return left // right
            return None
        if isinstance(expr, cst.Call) and dotted_name(expr.func) == "len" and len(expr.args) == 1:
            return self._length(expr.args[0].value, depth - 1)
        if (
            isinstance(expr, cst.Attribute)
            and isinstance(expr.value, cst.Name)
            and expr.value.value not in ("self", "cls")
        ):
            return self._argparse_defaults.get(expr.attr.value)
        key = target_key(expr)
        if key is None or self._changed_in_place(key):
            return None
        candidates = list(self.values.assigned.get(key, ()))
        if isinstance(expr, cst.Name):
            default = self._parameter_default(expr.value, where)
            if default is not None:
                candidates.append(default)
        if not candidates:
            return None
        found = [
            self._static_int(value, where, depth - 1)
            for value in candidates
            if not isinstance(self.index.parent(value), cst.Annotation)  # `steps: int` is no value
        ]
        known = [value for value in found if value is not None]
        return max(known) if known and len(known) == len(found) else None

    def _changed_in_place(self, key: str) -> bool:
        """`n += 1`, `xs += [...]`, `xs.append(...)`: a name whose value grows where this module does not spell it."""
        return key in self._grown

    @cached_property
    def _grown(self) -> frozenset[str]:
        grown = {target_key(aug.target) for aug in self.index.nodes("AugAssign")}
        grown |= set(self.values.stored)
        return frozenset(key for key in grown if key is not None)

    def _parameter_default(self, name: str, where: cst.CSTNode) -> cst.BaseExpression | None:
        """The default of the parameter `name` of the function around `where`."""
        function = next((a for a in self.index.ancestors(where) if isinstance(a, cst.FunctionDef)), None)
        if function is None:
            return None
        params = function.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == name:
                return param.default
        return None

    @cached_property
    def _argparse_defaults(self) -> dict[str, int]:
        """`--steps` with `default=15` (an `add_argument` of this module): `args.steps` is 15 unless
        the command line says otherwise.  Only integer defaults; the largest when given twice."""
        return self._argparse_option_defaults(
            lambda default: int(default.evaluated_value) if isinstance(default, cst.Integer) else None
        )

    @cached_property
    def _argparse_list_defaults(self) -> dict[str, int]:
        """`--nb_knn` with `default=[10, 20, 100, 200]`: `for k in args.nb_knn` runs 4 times unless
        the command line says otherwise.  The length of a literal list or tuple default."""
        return self._argparse_option_defaults(
            lambda default: (
                len(default.elements)
                if isinstance(default, (cst.List, cst.Tuple))
                and not any(isinstance(element, cst.StarredElement) for element in default.elements)
                else None
            )
        )

    def _argparse_option_defaults(self, value_of: Callable[[cst.BaseExpression], int | None]) -> dict[str, int]:
        """Option attribute -> `value_of` its `add_argument(..., default=...)` (the largest when
        given twice), for the options whose default `value_of` can read."""
        found: dict[str, int] = {}
        for option in self._command_line():
            value = value_of(option.default) if option.default is not None else None
            if value is not None:
                found[option.dest] = max(found.get(option.dest, 0), value)
        return found

    def in_event_branch(self, node: cst.CSTNode) -> bool:
        """Whether `node` sits in an `except` handler, in an `if` branch that ends the iteration
        (break/continue/return/raise), or in the `else` of an `if` that takes the step in its body
        and not in its `else` (a bad batch skipped: `_skips_the_step`), between it and its step
        loop."""
        boundary = self.step_boundary(node)
        child = node
        for ancestor in self.index.ancestors(node):
            if ancestor is boundary:
                return False
            if isinstance(ancestor, cst.ExceptHandler):
                return True
            if (  # `if loss < limit: loss.backward(); opt.step()  else: skipped += 1`
                isinstance(ancestor, cst.If) and child is ancestor.orelse and self._skips_the_step(ancestor)
            ):
                return True
            if isinstance(ancestor, (cst.If, cst.Else)) and isinstance(child, cst.IndentedBlock):
                for statement in child.body:
                    if isinstance(statement, cst.SimpleStatementLine) and any(_exits(s) for s in statement.body):
                        return True
            child = ancestor
        return False

    def _skips_the_step(self, branch: cst.If) -> bool:
        """Whether the `else` of `branch` is the step skipped: its body takes the step, its `else`
        takes none, and its condition is no interval (`(i + 1) % accum == 0` makes the `else` the
        common case: a micro-batch that accumulates)."""
        orelse = branch.orelse
        if orelse is None or self._throttles(branch):
            return False

        def steps(node: cst.CSTNode) -> bool:
            return any(id(call) in self.step_calls for call in nodes_under(node) if isinstance(call, cst.Call))

        return steps(branch.body) and not steps(orelse)

    def one_step_per_epoch(self, node: cst.CSTNode, depth: int = _CALLER_DEPTH) -> bool:
        """Whether the step loop around `node` iterates epochs: full-batch training, where per step
        is per epoch.  Either the loop says so (`for epoch in range(epochs)` that takes its step on
        the whole data set), or it counts with `range` and its body draws no batch: nothing named
        for a batch, a loader, a sample or an index (`get_batch()`, `next(it)`, `idx = randint(...)`),
        in it or in the step functions it calls, and no subscript by the counter (`data[i]`): every
        step sees the same, whole data -- unless another loop runs it (an epoch loop: then it counts
        steps).  A step
        function (`def train(): ... optimizer.step()`) is one when every call of it in this module
        is in such a loop (`for epoch in range(200): train()`)."""
        boundary = self.step_boundary(node)
        if isinstance(boundary, cst.FunctionDef) and depth > 0 and id(boundary) not in self.lightning_steps:
            sites = self._callers.get(id(boundary), ())
            return bool(sites) and all(self.one_step_per_epoch(site, depth - 1) for site in sites)
        if not isinstance(boundary, cst.For):
            return False
        names = names_under(boundary.target) | names_under(boundary.iter)
        if any(_EPOCH_NAME.search(name) for name in names):
            return True
        iterator = boundary.iter
        if isinstance(iterator, cst.Name) and len(self.values.assigned.get(iterator.value, ())) == 1:
            iterator = self.values.assigned[iterator.value][0]  # `pbar = tqdm(range(n))` ... `for _ in pbar:`
        while (  # `tqdm(range(n))`
            isinstance(iterator, cst.Call)
            and dotted_name(iterator.func) in PASS_THROUGH_ITERATORS
            and iterator.args
            and not iterator.args[0].star
        ):
            iterator = iterator.args[0].value
        if not (isinstance(iterator, cst.Call) and dotted_name(iterator.func) in RANGES):
            return False
        if loop_around(self.index, boundary)[0] is not None or _environment_loops(boundary):
            return False  # a counted loop inside another (epochs) counts steps; one of rollouts, updates
        body_names = names_under(boundary.body)
        # The step functions the loop calls draw the batch as well as the loop could (`x, y =
        # next(it)` in `train_step()`).
        called = {last_name(call.func) for call in nodes_under(boundary.body) if isinstance(call, cst.Call)}
        for function in self.index.nodes("FunctionDef"):
            if id(function) in self.step_functions and function.name.value in called:
                body_names |= _variable_names(function.body)
        if any(_DRAWS_BATCH.search(name) for name in body_names):
            return False
        counters = names_under(boundary.target)
        return not any(
            isinstance(sub, cst.Subscript) and names_under(sub.slice[0]) & counters
            for sub in nodes_under(boundary.body)
            if isinstance(sub, cst.Subscript) and sub.slice
        )

    def one_step_per_episode(self, node: cst.CSTNode) -> bool:
        """Whether `node` runs once per episode: its step loop's body holds a loop, not around
        `node`, that steps an environment (`while not done: ... obs, reward, done, _ =
        env.step(action)`), so each iteration is a whole rollout -- whether the optimizer steps
        once after it (REINFORCE) or inside it as well (a step per environment step, and `node`
        after the rollout runs once per many of them)."""
        boundary = self.step_boundary(node)
        if not isinstance(boundary, LOOP_TYPES) or loop_around(self.index, node)[0] is not boundary:
            return False  # (in a loop of its own inside the step loop: many times an episode)
        around = {id(ancestor) for ancestor in self.index.ancestors(node)}
        return any(id(loop) not in around for loop in _environment_loops(boundary))

    def times_steps(self, node: cst.CSTNode) -> bool:
        """Whether the step loop around `node` reads a clock (`time.perf_counter()`, a CUDA event's
        `record()`/`elapsed_time()`) -- or, in a step function, a loop that calls it does: there a
        sync is what makes the timing measure the GPU."""
        boundary = self.step_boundary(node)
        if boundary is None:
            return False
        boundaries = {id(boundary)}
        if isinstance(boundary, cst.FunctionDef):
            for site in self._callers.get(id(boundary), ()):
                caller = self.step_boundary(site) or loop_around(self.index, site)[0]
                if caller is not None:
                    boundaries.add(id(caller))
        return bool(boundaries & self._timed_boundaries)

    @cached_property
    def _timed_boundaries(self) -> set[int]:
        timed = set()
        for call in self.index.nodes("Call"):
            if self._reads_clock(call):
                boundary = self.step_boundary(call) or loop_around(self.index, call)[0]
                if boundary is not None:
                    timed.add(id(boundary))
                # A clock in what a loop iterates (`for batch in logger.log_every(loader)`) times
                # each of its iterations.
                child: cst.CSTNode = call
                for ancestor in self.index.ancestors(call):
                    if isinstance(ancestor, cst.For) and child is ancestor.iter:
                        timed.add(id(ancestor))
                    if isinstance(ancestor, (*SCOPE_TYPES, cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                        break
                    child = ancestor
        return timed

    def benchmarks_steps(self, node: cst.CSTNode) -> bool:
        """Whether the step loop around `node` measures its steps on purpose: it times them
        (`times_steps`) and either waits for the device every step (an unguarded
        `torch.cuda.synchronize()`: what makes the timing measure the GPU, and a wait every other
        read-back then shares), or keeps each step's time (`times.append(time.perf_counter() -
        start)`), or the function holding it says it is a benchmark or a profile (`def benchmark()`)
        -- a name counts only beside the timing."""
        if not self.times_steps(node):
            return False
        boundary = self.step_boundary(node)
        if not isinstance(boundary, (*LOOP_TYPES, cst.FunctionDef)):
            return False
        for call in nodes_under(boundary.body):
            if not isinstance(call, cst.Call):
                continue
            qualified = self.imports.qualified_name(call.func) or ""
            if _SYNCHRONIZE.match(qualified) and self.per_step_work(call):
                return True
            if method_name(call) == "append" and any(
                isinstance(inner, cst.Call) and self._reads_clock(inner)
                for arg in call.args
                for inner in nodes_under(arg.value)
            ):
                return True
        functions = [a for a in (boundary, *self.index.ancestors(boundary)) if isinstance(a, cst.FunctionDef)]
        return any(_BENCHMARK_NAME.search(function.name.value) for function in functions)

    def times_the_loop(self, node: cst.CSTNode) -> bool:
        """Whether the step loop around `node` is timed as a benchmark: a clock read in it
        (`times_steps`), or one in the statements of its block before it and another after it
        (`start = time.perf_counter()`, the loop, `return time.perf_counter() - start`) -- the run's
        time is what the code measures, so whatever the loop's first steps pay is in the figure."""
        if self.times_steps(node):
            return True
        loop = self.step_boundary(node)
        if not isinstance(loop, LOOP_TYPES):
            return False
        block = self.index.parent(loop)
        if not isinstance(block, (cst.IndentedBlock, cst.Module)) or loop not in block.body:
            return False
        position = block.body.index(loop)

        def reads_clock(statements: Sequence[cst.BaseStatement]) -> bool:
            return any(
                isinstance(call, cst.Call) and self._reads_clock(call)
                for statement in statements
                for call in nodes_under(statement)
            )

        return reads_clock(block.body[:position]) and reads_clock(block.body[position + 1 :])

    def _reads_clock(self, call: cst.Call) -> bool:
        qualified = self.imports.qualified_name(call.func) or ""
        if CLOCKS.match(qualified) or method_name(call) in ("elapsed_time", "record"):
            return True
        facts = self.project.callee(dotted_name(call.func)) if self.project else None
        return facts is not None and facts.reads_clock

    def step_counter(self, node: cst.CSTNode) -> str | None:
        """A counter of the step loop around `node`, for guard fixes: `step` in `for step, b in
        enumerate(...)`, `i` in `for i in range(...)`, or a name incremented by `+= 1` in the loop.
        None when the loop has none (the fix then is not offered)."""
        boundary = self.step_boundary(node)
        if not isinstance(boundary, LOOP_TYPES):
            return None
        if isinstance(boundary, cst.For):
            iterator = boundary.iter
            if isinstance(iterator, cst.Call):
                callee = dotted_name(iterator.func)
                target = boundary.target
                if callee == "enumerate" and isinstance(target, cst.Tuple) and target.elements:
                    first = target.elements[0].value
                    if isinstance(first, cst.Name):
                        return first.value
                if callee == "range" and isinstance(target, cst.Name):
                    return target.value
        for aug in self.index.nodes("AugAssign"):
            if (
                isinstance(aug.operator, cst.AddAssign)
                and isinstance(aug.target, (cst.Name, cst.Attribute))
                and isinstance(aug.value, cst.Integer)
                and aug.value.value == "1"
                and self.step_boundary(aug) is boundary
            ):
                return dotted_name(aug.target)
        return None


def _variable_names(node: cst.CSTNode) -> set[str]:
    """The names of variables and functions under `node` (`batch`, `next`), not of attributes
    (`dataset.split` gives `dataset`)."""
    nodes = list(nodes_under(node))
    attributes = {id(n.attr) for n in nodes if isinstance(n, cst.Attribute)}
    return {n.value for n in nodes if isinstance(n, cst.Name) and id(n) not in attributes}


def _environment_loops(boundary: cst.For | cst.While) -> list[cst.For | cst.While]:
    """The loops in a step loop's body that step an environment (`env.step(action)`): rollouts."""
    return [
        inner
        for inner in nodes_under(boundary.body)
        if isinstance(inner, LOOP_TYPES)
        and any(
            isinstance(call, cst.Call)
            and method_name(call) == "step"
            and isinstance(call.func, cst.Attribute)
            and _ENVIRONMENT_NAME.search(last_name(call.func.value) or "")
            for call in nodes_under(inner.body)
        )
    ]


def _is_read(expr: cst.BaseExpression, is_tensor: Callable[[cst.BaseExpression], bool]) -> bool:
    """`t.item()`, `float(t)`, `t.cpu().numpy()` of a tensor `t`: a value read from the data."""
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in _READ_METHODS:
        return is_tensor(func.value) or _is_read(func.value, is_tensor)
    if isinstance(func, cst.Name) and func.value in ("float", "int", "bool") and len(expr.args) == 1:
        return is_tensor(expr.args[0].value)
    return False


def is_interval_condition(test: cst.BaseExpression) -> bool:
    """Whether an `if` condition throttles by a counter (analysis/intervals.py)."""
    return intervals.is_interval_condition(CST_READER, test)


def _exits(statement: cst.BaseSmallStatement) -> bool:
    """`break`, `continue`, `return`, `raise`, or a call that ends the program (`sys.exit(1)`)."""
    if isinstance(statement, _EXITS):
        return True
    if isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
        return dotted_name(statement.value.func) in EXIT_CALLS
    return False


def _holds_anywhere(test: cst.BaseExpression, check: Callable[[cst.BaseExpression], bool]) -> bool:
    """`check` on a condition, through `and` and `or` as an interval condition is (intervals.py)."""
    return intervals.holds_anywhere(CST_READER, test, check)


def _resets_counter(guard: cst.If, test: cst.BaseExpression) -> bool:
    """`counter >= n` where the guarded branch sets `counter = 0`: an interval counted by hand."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    if not isinstance(test.comparisons[0].operator, (cst.GreaterThan, cst.GreaterThanEqual)):
        return False
    counter = dotted_name(test.left)
    if counter is None or not isinstance(guard.body, cst.IndentedBlock):
        return False
    for statement in guard.body.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Integer) and small.value.value == "0":
                    if any(dotted_name(t.target) == counter for t in small.targets):
                        return True
    return False


class _CstReader:
    """`intervals.ExpressionReader` for libcst's tree."""

    def boolean(self, node: cst.BaseExpression) -> tuple[str, cst.BaseExpression, cst.BaseExpression] | None:
        if not isinstance(node, cst.BooleanOperation):
            return None
        return ("and" if isinstance(node.operator, cst.And) else "or"), node.left, node.right

    def negated(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            return node.expression
        return None

    def modulo(self, node: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
            return node.left, node.right
        return None

    def is_string(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString))

    def comparison(
        self, node: cst.BaseExpression
    ) -> tuple[cst.BaseExpression, list[tuple[str, cst.BaseExpression]]] | None:
        if not isinstance(node, cst.Comparison):
            return None
        return node.left, [
            (_CST_OPERATORS.get(type(t.operator), intervals.OTHER), t.comparator) for t in node.comparisons
        ]

    def call(self, node: cst.BaseExpression) -> tuple[cst.BaseExpression, list[tuple[bool, cst.BaseExpression]]] | None:
        if not isinstance(node, cst.Call):
            return None
        return node.func, [(bool(arg.star), arg.value) for arg in node.args]

    def dotted(self, node: cst.BaseExpression) -> str | None:
        return dotted_name(node)

    def is_name(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, (cst.Name, cst.Attribute))

    def integer(self, node: cst.BaseExpression) -> int | None:
        return int(node.evaluated_value) if isinstance(node, cst.Integer) else None

    def names(self, node: cst.BaseExpression) -> set[str]:
        return names_under(node)


_CST_OPERATORS = {
    cst.Equal: intervals.EQUAL,
    cst.NotEqual: intervals.NOT_EQUAL,
    cst.LessThan: intervals.ORDER,
    cst.LessThanEqual: intervals.ORDER,
    cst.GreaterThan: intervals.ORDER,
    cst.GreaterThanEqual: intervals.ORDER,
}

CST_READER: intervals.ExpressionReader = _CstReader()
