"""The code another module runs on every training step, read from a module's CPython tree.

A module the project index tells something about is linted for the per-step rules even when its
own code has no training loop: another module's loop calls some of its functions on every step
(`ModuleView.per_step`).  Where the module has no step code of its own (its code holds no
STEP_LOOP) and calls no other module's function (the view's `calls`: one may step), the loop
model (loops.LoopModel) finds per-step code in those functions only -- a node runs per step when
the innermost function holding it, not through a lambda or a class body, is one the view names.
That code is the module's *per-step region*.  A rule that reports per-step work only (a trigger
group of STEP_LOOP alone) can report nothing outside it, so the trigger filter checks its site
triggers (Rule.site_triggers) on the region's code instead of the whole module's.

`region_shapes` says which shapes the region holds.  They are code_shapes.py's, collected on the
region's nodes, with two additions, so that the region holds every shape the module-wide walk would
credit to the code a rule reports there:

* a name the region uses that an import binds brings the import's identifiers (`from torch.cuda
  import synchronize as wait` ... `wait()` holds `synchronize`: the rules resolve callees through
  the module's imports, wherever they are);
* HOST_READ, which the module-wide walk takes to hold, is decided: the region holds it where it
  holds a node GL201 may report -- a read-back method, `float()`/`str()` of a tensor, a tensor
  formatted into a string, a count of a selection, a NaN check, an `if`/`while` whose test
  compares a tensor or asks a tensor predicate.  "A tensor" is what pytorch.TensorNames calls one,
  read here from CPython's tree over the whole module (`_TensorNames`, the same analysis); where
  GL201 asks more of a value (that it is on the device, not read back already), the region answers
  "may be" -- the shape over-approximates the rule, never the other way.

STEP_LOOP is in the shapes when the region holds any code: there, code runs per step.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from gpulint.linter.analysis.ast_names import dotted_name, last_name
from gpulint.linter.analysis.code_shapes import (
    FACTORY_COPY,
    HOST_READ,
    LOADER_BUILT,
    OPTIMIZER_APPLY,
    REPEATED_COPY,
    STEP_LOOP,
    ShapeCollector,
)
from gpulint.linter.analysis.intervals import AST_READER
from gpulint.linter.analysis.parse_guard import walk_tree
from gpulint.linter.analysis.vocabulary import (
    LOSSY_NAME,
    MASK_METHODS,
    MODULE_NAME,
    NAN_CHECKS,
    SELECTIONS,
    SYNC_METHODS,
    TENSOR_METHODS,
    TORCH_NOT_TENSOR,
    TORCH_PREDICATES,
    canonical,
)

# Scopes of their own: code in them runs when they are called (or, for a class body, defined).
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# Shapes read from the module's values or places (code_shapes.py), not from the code that holds them.
_DECIDED_ON_THE_MODULE = frozenset({FACTORY_COPY, LOADER_BUILT, OPTIMIZER_APPLY, REPEATED_COPY, STEP_LOOP})
# Comparisons Python answers without reading a tensor's values (host_sync_in_loop: `x is None`).
_IDENTITY_OR_MEMBERSHIP = (ast.Is, ast.IsNot, ast.In, ast.NotIn)


def region_shapes(tree: ast.Module, functions: Iterable[str], wanted: frozenset[str]) -> frozenset[str]:
    """The shapes of `wanted` (and STEP_LOOP, when there is any) that the per-step region holds:
    the code of the module's functions whose qualified names (`Trainer.step`) are `functions`.
    `wanted`: shapes of code itself (the site triggers), not those decided on the whole module."""
    if wanted & _DECIDED_ON_THE_MODULE:
        raise ValueError(f"decided on the whole module, not on a region: {sorted(wanted & _DECIDED_ON_THE_MODULE)}")
    region = [node for function in _functions_named(tree, frozenset(functions)) for node in _own_code(function)]
    if not region:
        return frozenset()
    module = _ModuleCode(tree)
    collector = ShapeCollector(wanted - {HOST_READ})
    for node in module.imports:
        collector.bind_import(node)
    handlers = collector.handlers
    for code in region:
        handler = handlers.get(type(code))
        if handler is not None:
            handler(code)
    found = set(collector.found())
    identifiers = _import_identifiers(module.imports)
    for code in region:
        if isinstance(code, ast.Name) and code.id in identifiers:
            found.update(identifiers[code.id] & wanted)
    if HOST_READ in wanted and _may_read_back(region, _TensorNames(module)):
        found.add(HOST_READ)
    found.add(STEP_LOOP)
    return frozenset(found)


class _ModuleCode:
    """What the region's shapes read from the rest of the module, gathered on one walk: its
    imports (anywhere: imports.ImportTable's), the receivers of its `.backward()` calls and its
    assignments (pytorch.TensorNames')."""

    def __init__(self, tree: ast.Module) -> None:
        self.imports: list[ast.Import | ast.ImportFrom] = []
        self.backward_receivers: list[ast.expr] = []
        self.assignments: list[tuple[ast.expr, ast.expr]] = []  # (target, value)
        walk_tree(
            tree,
            handlers={
                ast.Import: self.imports.append,
                ast.ImportFrom: self.imports.append,
                ast.Call: self._call,
                ast.Assign: self._assign,
                ast.AugAssign: self._augmented,
            },
        )

    def _call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "backward":
            self.backward_receivers.append(node.func.value)

    def _assign(self, node: ast.Assign) -> None:
        self.assignments += [(target, node.value) for target in node.targets]

    def _augmented(self, node: ast.AugAssign) -> None:
        self.assignments.append((node.target, node.value))


# -- the region --------------------------------------------------------------------------------------
def _functions_named(tree: ast.Module, names: frozenset[str]) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions whose qualified name (loops.qualname: the enclosing functions' and classes'
    names, dotted) is one of `names`; found from statement to statement (a definition is one)."""
    found = []
    blocks: list[tuple[list[ast.stmt], str]] = [(tree.body, "")]
    while blocks:
        body, prefix = blocks.pop()
        for statement in body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = f"{prefix}{statement.name}"
                if qualname in names and not isinstance(statement, ast.ClassDef):
                    found.append(statement)
                blocks.append((statement.body, f"{qualname}."))
                continue
            for field in ("body", "orelse", "finalbody"):  # (if, for, while, with, try)
                block = getattr(statement, field, None)
                if block:
                    blocks.append((block, prefix))
            for part in (*getattr(statement, "handlers", ()), *getattr(statement, "cases", ())):  # (try, match)
                blocks.append((part.body, prefix))
    return found


def _own_code(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The function's nodes, its decorators and defaults included, but not those of the scopes
    inside it (a nested function runs per step only if the view names it too)."""
    stack: list[ast.AST] = [function]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, _SCOPES))


# -- imports -------------------------------------------------------------------------------------------
def _import_identifiers(imports: list[ast.Import | ast.ImportFrom]) -> dict[str, frozenset[str]]:
    """For each name an import binds, the identifiers of the imports that bind it (code_shapes
    counts an import's identifiers as the module's shapes)."""
    found: dict[str, set[str]] = {}
    for node in imports:
        module = node.module.split(".") if isinstance(node, ast.ImportFrom) and node.module else []
        for alias in node.names:
            bound = alias.asname or alias.name.partition(".")[0]
            found.setdefault(bound, set()).update(module, alias.name.split("."), [bound])
    return {name: frozenset(identifiers) for name, identifiers in found.items()}


def _bindings(imports: list[ast.Import | ast.ImportFrom]) -> dict[str, str]:
    """What each name imports bind refers to, in source order, as imports.ImportTable binds them."""
    bindings: dict[str, str] = {}
    for node in sorted(imports, key=lambda node: (node.lineno, node.col_offset)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bindings[alias.asname] = alias.name
                else:
                    top = alias.name.partition(".")[0]
                    bindings.setdefault(top, top)
        elif node.level == 0 and node.module:
            for alias in node.names:
                if alias.name != "*":
                    bindings[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bindings


# -- which expressions are tensors ---------------------------------------------------------------------
def _name_key(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return f"self.{expr.attr}"
    return None


class _TensorNames:
    """pytorch.TensorNames on CPython's tree: the receivers of `.backward()`, and the names any
    assignment of the module gives a tensor (a `torch.*` call, a criterion's, `outputs.loss`, tensor
    arithmetic), flow-insensitively."""

    def __init__(self, module: _ModuleCode) -> None:
        self._bindings = _bindings(module.imports)
        self.names = {key for receiver in module.backward_receivers if (key := _name_key(receiver))}
        pairs = [(key, value) for target, value in module.assignments if (key := _name_key(target))]
        changed = True
        while changed:
            changed = False
            for key, value in pairs:
                if key not in self.names and self.is_tensor(value):
                    self.names.add(key)
                    changed = True

    def qualified_name(self, expr: ast.AST) -> str | None:
        """imports.ImportTable.qualified_name."""
        dotted = dotted_name(expr)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        target = self._bindings.get(head)
        if target is None:
            return None
        return canonical(f"{target}.{rest}" if rest else target)

    def is_tensor(self, expr: ast.AST) -> bool:
        key = _name_key(expr)
        if key is not None:
            return key in self.names
        if isinstance(expr, ast.Attribute):
            return expr.attr == "loss"
        if isinstance(expr, ast.Subscript):
            return self.is_tensor(expr.value)
        if isinstance(expr, ast.BinOp):
            return self.is_tensor(expr.left) or self.is_tensor(expr.right)
        if isinstance(expr, ast.UnaryOp):
            return self.is_tensor(expr.operand)
        if isinstance(expr, ast.Call):
            qualified = self.qualified_name(expr.func)
            if qualified is not None:
                rest = qualified[len("torch.") :] if qualified.startswith("torch.") else None
                if rest is None:
                    return False
                if rest.startswith("nn.functional."):
                    return True
                return "." not in rest and not TORCH_NOT_TENSOR.match(rest)
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr in TENSOR_METHODS:
                receiver = func.value
                if isinstance(receiver, ast.Compare):
                    return self.is_tensor(receiver.left) or any(map(self.is_tensor, receiver.comparators))
                return self.is_tensor(receiver)
            callee = last_name(func) or ""
            return bool(LOSSY_NAME.search(callee) or MODULE_NAME.search(callee))
        return False


# -- what GL201 may report -------------------------------------------------------------------------------
def _may_read_back(region: list[ast.AST], tensors: _TensorNames) -> bool:
    """Whether a node of the region is one GL201 (host_sync_in_loop.py) may report, asking of each
    value only whether it is a tensor (the rule also asks that it be on the device)."""
    reader = _ReadBacks(tensors)
    return any(reader.may_report(node) for node in region)


class _ReadBacks:
    """GL201's reports, node by node, over-approximated (see `_may_read_back`)."""

    def __init__(self, tensors: _TensorNames) -> None:
        self.tensors = tensors
        self.is_tensor = tensors.is_tensor

    def may_report(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.FormattedValue):  # `f"{loss}"`
            return self.is_tensor(node.value)
        if isinstance(node, ast.BinOp):  # `"%f" % loss`
            if not (isinstance(node.op, ast.Mod) and _is_format_string(node.left)):
                return False
            values = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            return any(self.is_tensor(_unstarred(value)) for value in values)
        if isinstance(node, (ast.If, ast.While)):  # `if loss > 10:`
            return _holds_anywhere_in(node.test, self._device_truth_value)
        if isinstance(node, ast.Attribute):  # `t[mask].shape`
            return node.attr == "shape" and self._is_selection(node.value)
        return False

    def _call(self, node: ast.Call) -> bool:
        func = node.func
        values = _values(node)
        if isinstance(func, ast.Attribute) and func.attr in SYNC_METHODS:  # `loss.item()`
            return True
        if isinstance(func, ast.Name) and func.id in ("float", "int", "bool", "str") and len(values) == 1:
            if self.is_tensor(values[0]):  # `float(loss)`
                return True
        if isinstance(func, ast.Attribute) and func.attr == "format" and AST_READER.is_string(func.value):
            if any(map(self.is_tensor, values)):  # `"{}".format(loss)`
                return True
        counted = None
        if isinstance(func, ast.Name) and func.id == "len" and len(values) == 1:
            counted = values[0]  # `len(t[mask])`
        elif isinstance(func, ast.Attribute) and func.attr in ("size", "numel"):
            counted = func.value  # `torch.nonzero(t).size(0)`
        if counted is not None and self._is_selection(counted):
            return True
        return self._is_nan_check(node)  # `torch.isnan(loss)`

    def _is_nan_check(self, node: ast.Call) -> bool:
        qualified = self.tensors.qualified_name(node.func)
        if qualified is not None:
            return qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in NAN_CHECKS
        func = node.func
        return isinstance(func, ast.Attribute) and func.attr in NAN_CHECKS and self.is_tensor(func.value)

    def _device_truth_value(self, expr: ast.AST) -> bool:
        """A comparison with a tensor, or a tensor predicate (`(pred == y).all()`, `torch.equal`)."""
        if isinstance(expr, ast.Compare):
            if any(isinstance(op, _IDENTITY_OR_MEMBERSHIP) for op in expr.ops):
                return False
            operands = [expr.left, *expr.comparators]
            if any(isinstance(operand, ast.Constant) and operand.value is None for operand in operands):
                return False  # `t == None` is answered without looking at the values
            return any(map(self.is_tensor, operands))
        if isinstance(expr, ast.Call):
            qualified = self.tensors.qualified_name(expr.func)
            if qualified is not None:
                return qualified in TORCH_PREDICATES and any(map(self.is_tensor, _values(expr)))
            func = expr.func
            if not (isinstance(func, ast.Attribute) and func.attr in ("any", "all")):
                return False
            return self._device_truth_value(func.value) or self.is_tensor(func.value)
        return False

    def _is_selection(self, expr: ast.AST) -> bool:
        """A tensor whose size depends on a tensor's values: `t[mask]`, `torch.nonzero(t)`."""
        if isinstance(expr, ast.Subscript):
            if isinstance(expr.slice, (ast.Slice, ast.Tuple)):
                return False  # (libcst: a slice, or more than one index)
            return self.is_tensor(expr.value) and self._may_be_mask(expr.slice)
        if not isinstance(expr, ast.Call):
            return False
        qualified = self.tensors.qualified_name(expr.func)
        if qualified is not None:
            return qualified in SELECTIONS and any(map(self.is_tensor, _values(expr)))  # (its first: any)
        func = expr.func
        return isinstance(func, ast.Attribute) and f"torch.{func.attr}" in SELECTIONS and self.is_tensor(func.value)

    def _may_be_mask(self, expr: ast.AST) -> bool:
        """A boolean tensor, or a name or attribute that may hold one (the rule follows its
        assignments; here any may)."""
        if isinstance(expr, ast.Compare):
            return self._device_truth_value(expr)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Invert):
            return self._may_be_mask(expr.operand)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            return self._may_be_mask(expr.left) or self._may_be_mask(expr.right)
        if isinstance(expr, ast.Call):
            qualified = self.tensors.qualified_name(expr.func)
            if qualified is not None:
                name = qualified.rsplit(".", 1)[-1]
                return (
                    qualified.startswith("torch.")
                    and (name in NAN_CHECKS or name in MASK_METHODS or name.startswith("logical_"))
                    and any(map(self.is_tensor, _values(expr)))
                )
            func = expr.func
            return (
                isinstance(func, ast.Attribute)
                and (func.attr in MASK_METHODS or func.attr in NAN_CHECKS or func.attr == "bool")
                and self.is_tensor(func.value)
            )
        return isinstance(expr, (ast.Name, ast.Attribute))


def _unstarred(expr: ast.expr) -> ast.expr:
    return expr.value if isinstance(expr, ast.Starred) else expr


def _values(call: ast.Call) -> list[ast.AST]:
    """The values a call passes, positional (unstarred) and keyword: libcst's `Call.args`."""
    _, arguments = AST_READER.call(call) or (None, [])
    return [value for _starred, value in arguments]


def _is_format_string(expr: ast.AST) -> bool:
    """host_sync_in_loop._is_format_string: `"%11.4g" * 5`, `("%11s" * 2 + "%11.4g" * 5)`."""
    if AST_READER.is_string(expr):
        return True
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, ast.Add):
            return _is_format_string(expr.left) and _is_format_string(expr.right)
        if isinstance(expr.op, ast.Mult):
            return _is_format_string(expr.left) or _is_format_string(expr.right)
    return False


def _holds_anywhere_in(test: ast.AST, check) -> bool:
    """`check` on a condition or on any operand of its `and`/`or`/`not`."""
    if isinstance(test, ast.BoolOp):
        return any(_holds_anywhere_in(value, check) for value in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _holds_anywhere_in(test.operand, check)
    return check(test)
