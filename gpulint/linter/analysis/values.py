"""Where a value comes from: a small, flow-insensitive origin analysis.

Rules need to know what kind of object an expression is: is `ds` a tf.data pipeline (so `.map` is
tf.data's), is `opt` an optimizer (so `.step()` is a training step, not `scheduler.step()` or an RL
`env.step()`)?  This module answers with *kinds*: it follows names (and `self.attr`) to every value
assigned to them anywhere in the module, through method chains that keep the kind (`ds.map(f)
.batch(32)` is still a dataset), to the constructor call, and matches the constructor's qualified
name.  Anything it cannot follow is "unknown", which rules treat as "not a match".

Besides plain assignments it follows what real scripts write between a constructor and its use:
tuple unpacking of a call (`train, info = tfds.load(...)`), subscripts of containers
(`datasets["train"]`, `splits[0]` of a list the module appended to), the values a function of this
module returns (`ds = make_dataset(files)`), the arguments a function of this module is called with
(its parameters), and keyword dictionaries (`DataLoader(ds, **kwargs)` after `kwargs.update(...)`).
A function of another module of the project is answered by the project index when the run has one
(`resolve_external`).

It also answers where a tensor provably lives on the host (`on_host`): built by a `torch` factory
without a device (`torch.zeros(3)`, `torch.tensor(xs)`; or on `meta`, which holds no data), moved
there (`.cpu()`, `.to("cpu")`), an optimizer's `state["step"]` (a CPU tensor in PyTorch's
optimizers, unless made `capturable`), or arithmetic and conversions of those -- and every value
its name is ever given is one of these (one `x = x.to(device)` anywhere and it is not).  Reading
such a tensor (`.item()`) is not a sync; GL201's wider "may this be a host value" (numbers, NumPy,
values read back) builds on this answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

from gpulint.linter.analysis.imports import ImportTable
from gpulint.linter.analysis.vocabulary import KINDS, Kind


def target_key(node: cst.CSTNode) -> str | None:
    """The key an assignment target is stored under: `x`, or `self.x` for attributes of self."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value in ("self", "cls"):
        return f"self.{node.attr.value}"
    return None


# What a subscript selects: a position, a string key, or not known.
Index = int | str | None
# Container methods that put one value in (`xs.append(v)`, `xs.insert(0, v)`, `s.add(v)`).
_PUTTERS = {"append": 0, "add": 0, "insert": 1}
# `torch.<factory>(...)` builds its tensor on the host unless given a device.
HOST_FACTORIES = frozenset(
    "tensor as_tensor zeros ones full empty arange linspace logspace eye rand randn randint randperm "
    "from_numpy scalar_tensor".split()
)
# Tensor methods whose result lives where their receiver does.
_SAME_DEVICE_METHODS = frozenset(
    "float double long int half bfloat16 bool sum mean max min prod abs neg add sub mul div pow sqrt "
    "detach clone contiguous view reshape squeeze unsqueeze flatten".split()
)
# Devices whose tensors a read never waits for: the host, and `meta` (shapes only, no data).
_HOST_DEVICE = re.compile(r"""^[rbuRBU]*['"](cpu|meta)\b""")


class ValueOrigins:
    """Every value assigned to each name in the module, and the kind queries built on them."""

    def __init__(self, imports: ImportTable) -> None:
        self.imports = imports
        self.assigned: dict[str, list[cst.BaseExpression]] = {}
        self.functions: set[str] = set()  # keys of the module's functions: `f`, or `self.f` for methods
        self.returns: dict[str, list[cst.BaseExpression]] = {}  # what each function returns
        self.stored: dict[str, list[tuple[Index, cst.BaseExpression]]] = {}  # put into a container
        self.merged: dict[str, list[cst.BaseExpression]] = {}  # dictionaries `d.update(...)`d into `d`
        self.opaque_dicts: set[str] = set()  # dictionaries given keys this module does not spell
        # Whether a call of a function of another module of the project returns a kind (set from
        # the project index when the run has one).
        self.external_returns: Callable[[cst.Call, str], bool] | None = None
        self._elements: dict[tuple[int, Index], cst.Subscript] = {}
        self._memo: dict[tuple[int, str], bool] = {}

    # -- building ---------------------------------------------------------------------------
    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        key = target_key(target)
        if key is not None:
            self.assigned.setdefault(key, []).append(value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            if any(isinstance(el, cst.StarredElement) for el in target.elements):
                return
            if isinstance(value, (cst.Tuple, cst.List)):
                if len(target.elements) == len(value.elements):
                    for t, v in zip(target.elements, value.elements, strict=True):
                        self._bind(t.value, v.value)
            else:  # `train, test = load(...)`: each name holds an element of the result
                for position, element in enumerate(target.elements):
                    self._bind(element.value, self.element(value, position))
        elif isinstance(target, cst.Subscript):  # `d["k"] = v`
            key = target_key(target.value)
            if key is not None:
                index = index_of(target)
                self.stored.setdefault(key, []).append((index, value))
                if not isinstance(index, str):
                    self.opaque_dicts.add(key)

    def add(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self._bind(target.target, node.value)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self._bind(node.target, node.value)
            self._bind(node.target, node.annotation.annotation)
        elif isinstance(node, cst.WithItem):
            if node.asname is not None:
                self._bind(node.asname.name, node.item)
        elif isinstance(node, cst.Param):
            if node.annotation is not None:
                self._bind(node.name, node.annotation.annotation)

    def add_function(self, key: str, returned: list[cst.BaseExpression]) -> None:
        """A function of the module (`f`, or `self.f` for a method) and the values it returns."""
        self.functions.add(key)
        self.returns.setdefault(key, []).extend(returned)

    def add_container_call(self, call: cst.Call) -> None:
        """`xs.append(v)`, `d.update(other, k=v)` and the like: what goes into a container."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return
        key = target_key(func.value)
        if key is None:
            return
        method = func.attr.value
        if method in _PUTTERS and len(call.args) == _PUTTERS[method] + 1:
            self.stored.setdefault(key, []).append((None, call.args[-1].value))
        elif method == "extend" and len(call.args) == 1:
            self.stored.setdefault(key, []).append((None, self.element(call.args[0].value, None)))
        elif method == "update":
            for arg in call.args:
                if arg.keyword is not None:
                    self.stored.setdefault(key, []).append((arg.keyword.value, arg.value))
                elif arg.star == "":
                    self.merged.setdefault(key, []).append(arg.value)
                else:
                    self.opaque_dicts.add(key)

    def bind_arguments(self, call: cst.Call, params: cst.Parameters, skip_first: bool) -> None:
        """A call of a function of this module: each parameter may hold the argument given for it."""
        positional = [p for p in (*params.posonly_params, *params.params)][1 if skip_first else 0 :]
        by_name = {p.name.value: p for p in (*positional, *params.kwonly_params)}
        for arg in call.args:
            if arg.star:
                return  # `f(*args)`: which parameter gets what is not known
            if arg.keyword is not None:
                param = by_name.get(arg.keyword.value)
            else:
                param = positional.pop(0) if positional else None
            if param is not None:
                self._bind(param.name, arg.value)

    def element(self, container: cst.BaseExpression, index: Index) -> cst.Subscript:
        """An expression standing for `container[index]` (one per container and index)."""
        key = (id(container), index)
        node = self._elements.get(key)
        if node is None:
            selected: cst.BaseExpression = cst.Ellipsis()
            if isinstance(index, int):
                selected = cst.Integer(str(abs(index)))
                if index < 0:
                    selected = cst.UnaryOperation(cst.Minus(), selected)
            elif isinstance(index, str):
                selected = cst.SimpleString(repr(index))
            node = self._elements[key] = cst.Subscript(container, [cst.SubscriptElement(cst.Index(selected))])
        return node

    # -- following values -------------------------------------------------------------------
    def function_key(self, call: cst.Call) -> str | None:
        """`f` / `self.f` when the call calls a function of this module."""
        key = target_key(call.func)
        if key is None or key not in self.functions:
            return None
        if isinstance(call.func, cst.Name) and call.func.value in self.imports.bindings:
            return None
        return key

    def origins(self, expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
        """What `expr` may hold, one step back: every value assigned to a name (a parameter: the
        arguments it is called with here); what a subscript selects from a container (an element
        of a call's result that is not followed further stands as `call[...]`); what a function of
        this module returns.  None when `expr` is none of these (it is its own origin)."""
        if isinstance(expr, cst.Subscript):
            return self._element_origins(expr.value, index_of(expr), set())
        if isinstance(expr, cst.Call):
            key = self.function_key(expr)
            return None if key is None else self.returns.get(key, [])
        key = target_key(expr)
        return None if key is None else self.assigned.get(key, [])

    def _element_origins(self, container: cst.BaseExpression, index: Index, seen: set[str]) -> list[cst.BaseExpression]:
        if isinstance(container, (cst.Tuple, cst.List, cst.Set)):
            elements = container.elements
            if isinstance(index, int) and -len(elements) <= index < len(elements):
                if not any(isinstance(el, cst.StarredElement) for el in elements):
                    return [elements[index].value]
            return [el.value for el in elements if not isinstance(el, cst.StarredElement)]
        if isinstance(container, cst.Dict):
            items = [el for el in container.elements if isinstance(el, cst.DictElement)]
            chosen = [el.value for el in items if _string_value(el.key) == index]
            return chosen if isinstance(index, str) and chosen else [el.value for el in items]
        if isinstance(container, cst.Call):
            key = self.function_key(container)
            if key is None:
                return [self.element(container, index)]
            found = []
            for value in self.returns.get(key, ()):
                found += self._element_origins(value, index, seen)
            return found
        if isinstance(container, cst.Subscript):
            inner = container.value
            if isinstance(inner, cst.Call) and self.function_key(inner) is None:
                return [container]  # within an element of a call's result: it stands for the rest
            found = []
            for origin in self._element_origins(inner, index_of(container), seen):
                found += self._element_origins(origin, index, seen)
            return found
        key = target_key(container)
        if key is None or key in seen:
            return []
        seen.add(key)
        found = []
        for value in self.assigned.get(key, ()):
            found += self._element_origins(value, index, seen)
        for stored_index, value in self.stored.get(key, ()):
            if index is None or stored_index is None or stored_index == index:
                found.append(value)
        seen.discard(key)
        return found

    # -- kinds ------------------------------------------------------------------------------
    def is_kind(self, expr: cst.BaseExpression, kind: str) -> bool:
        return self._is_kind(expr, KINDS[kind], set())

    def _is_kind(self, expr: cst.BaseExpression, kind: Kind, seen: set[str]) -> bool:
        memo_key = (id(expr), kind.name)
        if not seen and memo_key in self._memo:
            return self._memo[memo_key]
        result = self._compute(expr, kind, seen)
        if not seen:
            self._memo[memo_key] = result
        return result

    def _compute(self, expr: cst.BaseExpression, kind: Kind, seen: set[str]) -> bool:
        if isinstance(expr, cst.Call):
            local = self.function_key(expr)
            if local is not None:
                return self._follow(f"{local}()", self.returns.get(local, ()), kind, seen)
            if self.external_returns is not None and self.external_returns(expr, kind.name):
                return True
            qualified = self.imports.qualified_name(expr.func)
            if qualified is not None:
                return kind.matches(qualified)
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in kind.chain_methods:
                return self._is_kind(func.value, kind, seen)
            return False
        if isinstance(expr, cst.Subscript):
            # An annotation such as `Optional[tf.data.Dataset]` names the kind inside.
            if any(isinstance(el.slice, cst.Index) and self._is_kind(el.slice.value, kind, seen) for el in expr.slice):
                return True
            container = expr.value
            if isinstance(container, cst.Call) and self.function_key(container) is None:
                qualified = self.imports.qualified_name(container.func)
                return qualified is not None and any(qualified == c for c in kind.containers)
            elements = self._element_origins(container, index_of(expr), set())
            return self._follow(f"[{id(expr)}]", elements, kind, seen)
        qualified = self.imports.qualified_name(expr)
        if qualified is not None and kind.matches(qualified):
            return True  # an annotation naming the class itself
        key = target_key(expr)
        if key is None:
            return False
        return self._follow(key, self.assigned.get(key, ()), kind, seen)

    def _follow(self, key: str, values, kind: Kind, seen: set[str]) -> bool:
        if key in seen:
            return False
        seen.add(key)
        try:
            return any(self._is_kind(value, kind, seen) for value in values)
        finally:
            seen.discard(key)

    # -- where a tensor lives ------------------------------------------------------------------
    def on_host(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` is a tensor that provably lives on the host (module docstring)."""
        return self._on_host(expr, set())

    def _on_host(self, expr: cst.BaseExpression, seen: set[str]) -> bool:
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute):
                if func.attr.value == "cpu" or (func.attr.value == "to" and _to_host(expr)):
                    return True
                if func.attr.value in _SAME_DEVICE_METHODS:
                    return self._on_host(func.value, seen)
            qualified = self.imports.qualified_name(func) or ""
            if qualified.startswith("torch.") and qualified[len("torch.") :] in HOST_FACTORIES:
                device = next((arg.value for arg in expr.args if arg.keyword and arg.keyword.value == "device"), None)
                if (  # `torch.device("cpu")`
                    isinstance(device, cst.Call)
                    and self.imports.qualified_name(device.func) == "torch.device"
                    and device.args
                ):
                    device = device.args[0].value
                return device is None or (
                    isinstance(device, cst.SimpleString) and bool(_HOST_DEVICE.match(device.value))
                )
            return False
        if isinstance(expr, cst.BinaryOperation):  # `step_t + 1`: host tensors and numbers
            operands = [expr.left, expr.right]
            numbers = [o for o in operands if isinstance(o, (cst.Integer, cst.Float))]
            return len(numbers) < 2 and all(o in numbers or self._on_host(o, seen) for o in operands)
        if isinstance(expr, cst.Subscript):
            if index_of(expr) == "step" and self._is_optimizer_state(expr.value, seen):
                return True
            return self._on_host(expr.value, seen)
        key = target_key(expr)
        values = self.assigned.get(key, []) if key is not None else []
        if key is None or key in seen or not values:
            return False
        seen.add(key)
        try:
            return all(self._on_host(value, seen) for value in values)
        finally:
            seen.discard(key)

    def _is_optimizer_state(self, expr: cst.BaseExpression, seen: set[str]) -> bool:
        """`self.state[p]`, `optimizer.state[p]`, or a name only ever given one: an optimizer's
        per-parameter state."""
        if isinstance(expr, cst.Subscript):
            return isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "state"
        key = target_key(expr)
        values = self.assigned.get(key, []) if key is not None else []
        if key is None or key in seen or not values:
            return False
        seen.add(key)
        try:
            return all(self._is_optimizer_state(value, seen) for value in values)
        finally:
            seen.discard(key)

    # -- keyword dictionaries -----------------------------------------------------------------
    def keywords_of(self, call: cst.Call, every_branch: bool = False) -> dict[str, cst.BaseExpression] | None:
        """The keywords a call passes, its `**` dictionaries resolved (`DataLoader(ds, **kwargs)`
        after `kwargs = {...}` and `kwargs.update(cuda_kwargs)`, in any branch: flow-insensitive, a
        keyword any definition sets counts); None when a `**` holds what this module does not show.
        Of a dictionary a conditional expression picks on whether there is an accelerator, only
        the accelerator's branch counts -- unless `every_branch` (what a fix that adds a keyword
        must ask: a keyword any branch passes would then be passed twice)."""
        found: dict[str, cst.BaseExpression] = {}
        for arg in call.args:
            if arg.star == "**":
                items = self._dict_items(arg.value, set(), every_branch)
                if items is None:
                    return None
                for name, value in items:
                    found.setdefault(name, value)
            elif arg.keyword is not None:
                found[arg.keyword.value] = arg.value
        return found

    def _dict_items(
        self, expr: cst.BaseExpression, seen: set[str], every_branch: bool = False
    ) -> list[tuple[str, cst.BaseExpression]] | None:
        if isinstance(expr, cst.IfExp):
            # `{"num_workers": 1, "pin_memory": True} if use_cuda else {}`: the branch taken on an
            # accelerator is the one that matters for loading batches; with no accelerator in the
            # test, a keyword either branch sets counts (flow-insensitive, as everywhere here).
            branch = None if every_branch else _accelerator_branch(expr)
            if branch is not None:
                return self._dict_items(branch, seen)
            body = self._dict_items(expr.body, seen, every_branch)
            orelse = self._dict_items(expr.orelse, seen, every_branch)
            return None if body is None or orelse is None else body + orelse
        if isinstance(expr, cst.Dict):
            items: list[tuple[str, cst.BaseExpression]] = []
            for element in expr.elements:
                if isinstance(element, cst.StarredDictElement):
                    inner = self._dict_items(element.value, seen, every_branch)
                    if inner is None:
                        return None
                    items += inner
                    continue
                assert isinstance(element, cst.DictElement)  # the only other kind of dict element
                name = _string_value(element.key)
                if name is None:
                    return None
                items.append((name, element.value))
            return items
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict":
            if "dict" in self.imports.bindings:
                return None
            items = []
            for arg in expr.args:
                if arg.keyword is not None:
                    items.append((arg.keyword.value, arg.value))
                else:
                    inner = None if arg.star == "*" else self._dict_items(arg.value, seen, every_branch)
                    if inner is None:
                        return None
                    items += inner
            return items
        key = target_key(expr)
        if key is None or key in self.opaque_dicts or not self.assigned.get(key):
            return None
        if key in seen:
            return []
        seen.add(key)
        items = []
        for value in [*self.assigned[key], *self.merged.get(key, ())]:
            inner = self._dict_items(value, seen, every_branch)
            if inner is None:
                return None
            items += inner
        items += [(name, value) for name, value in self.stored.get(key, ()) if isinstance(name, str)]
        return items


# A condition that asks whether the run has an accelerator: `use_cuda`, `torch.cuda.is_available()`,
# `args.gpu`, `device.type == "cuda"`.
_ACCELERATOR_TEST = re.compile(r"cuda|gpu|accelerat|mps", re.IGNORECASE)


def _accelerator_branch(expr: cst.IfExp) -> cst.BaseExpression | None:
    """The branch of `a if test else b` taken on an accelerator, when the test asks about one
    (`not use_cuda` flips it); None when it does not."""
    test, negated = expr.test, False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negated = test.expression, not negated
    names = [n.value for n in _names_in(test)]
    if not any(_ACCELERATOR_TEST.search(name) for name in names) and not (
        isinstance(test, cst.Comparison)
        and any(
            isinstance(c.comparator, cst.SimpleString) and _ACCELERATOR_TEST.search(c.comparator.value)
            for c in test.comparisons
        )
    ):
        return None
    return expr.orelse if negated else expr.body


def _names_in(expr: cst.BaseExpression) -> list[cst.Name]:
    """The names an expression reads (attributes' too: `args.cuda` gives `args` and `cuda`)."""
    found: list[cst.Name] = []
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found.append(node)
        stack.extend(node.children)
    return found


def _to_host(call: cst.Call) -> bool:
    """`.to("cpu")`, `.to(device="cpu")`."""
    target = next((arg.value for arg in call.args if arg.keyword is None or arg.keyword.value == "device"), None)
    return isinstance(target, cst.SimpleString) and bool(_HOST_DEVICE.match(target.value))


def index_of(subscript: cst.Subscript) -> Index:
    """What a one-element subscript selects: `x[0]` -> 0, `x["train"]` -> "train", else None."""
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return None
    value = subscript.slice[0].slice.value
    if isinstance(value, cst.Integer):
        return int(value.evaluated_value)
    if (
        isinstance(value, cst.UnaryOperation)
        and isinstance(value.operator, cst.Minus)
        and isinstance(value.expression, cst.Integer)
    ):
        return -int(value.expression.evaluated_value)
    return _string_value(value)


def _string_value(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None
