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

Strings and comments hold none (an f-string's expressions are code and do).  The walk keeps only
the shapes some trigger names (`wanted`): a module's set stays small, so the project index can keep
it for every module between its parse and the module's lint.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from typing import Any

from gpulint.linter.analysis.ast_names import last_name
from gpulint.linter.analysis.vocabulary import (
    DEVICE_COPY_METHODS,
    HOST_BUILDERS,
    HOST_TENSOR_METHODS,
    KINDS,
    is_step_method,
)

# (see the module docstring)
OPTIMIZER_APPLY = "optimizer.apply("
FACTORY_COPY = "torch.zeros(...).to("
# The identifiers a module's code holds wherever a value of it may be an optimizer: the last name
# of each optimizer constructor (or module of them) the value analysis recognises -- its qualified
# name is made of the code's own identifiers (`torch.optim.Adam`, `from torch import optim`).
_OPTIMIZER_IDENTIFIERS = frozenset(
    constructor.rstrip(".").rsplit(".", 1)[-1] for constructor in KINDS["optimizer"].constructors
)


def code_shapes(tree: ast.AST, wanted: frozenset[str]) -> frozenset[str]:
    """The shapes of `wanted` that the module's code holds (see the module docstring)."""
    collector = ShapeCollector(wanted)
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

    def __init__(self, wanted: frozenset[str]) -> None:
        self._wanted = wanted
        self._found: set[str] = set()
        # For OPTIMIZER_APPLY: an `.apply(` call on a receiver not named like an optimizer, and an
        # identifier of an optimizer's module or class.
        self._looks_for_apply = OPTIMIZER_APPLY in wanted
        self._other_apply = self._names_optimizer = False
        # For FACTORY_COPY (decided at the end: an alias may be bound below its use): the callee
        # names of the host tensors copied, the names copied, what each name is assigned from,
        # and the names bound to a host builder.
        self._looks_for_copies = FACTORY_COPY in wanted
        self._copied_calls: set[str] = set()
        self._copied_names: set[str] = set()
        self._assigned_calls: dict[str, set[str]] = {}
        self._builder_aliases: set[str] = set()
        # The shapes worth a look: those wanted, and what OPTIMIZER_APPLY is decided from.
        watched = set(wanted)
        if self._looks_for_apply:
            watched |= {".apply(", *_OPTIMIZER_IDENTIFIERS}
        self._watched = frozenset(watched)
        # Calls by the name called: `.item(` -> "item" among the methods, `float(` -> "float".
        self._methods = frozenset(shape[1:-1] for shape in watched if shape.startswith(".") and shape.endswith("("))
        self._functions = frozenset(
            shape[:-1] for shape in watched if shape.endswith("(") and shape[:-1].isidentifier()
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
        if self._looks_for_copies:
            import_from = handlers[ast.ImportFrom]
            handlers[ast.Assign] = self._copies

            def import_from_and_aliases(node: ast.ImportFrom) -> None:
                import_from(node)
                self._copies(node)

            handlers[ast.ImportFrom] = import_from_and_aliases
        return handlers

    def _note(self, shape: str, node: ast.AST) -> None:
        if shape in self._wanted:
            self._found.add(shape)
        if self._looks_for_apply:
            if shape == ".apply(":
                self._apply(node)
            elif shape in _OPTIMIZER_IDENTIFIERS:
                self._names_optimizer = True

    def _call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in self._methods:
                self._note(f".{func.attr}(", node)
        elif isinstance(func, ast.Name) and func.id in self._functions:
            self._note(f"{func.id}(", node)
        if self._looks_for_copies:
            self._copies(node)

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
                    self._copied_calls.add(name)
                elif isinstance(copied, ast.Name):
                    self._copied_names.add(copied.id)
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
        if self._other_apply and self._names_optimizer:
            self._found.add(OPTIMIZER_APPLY)
        if self._looks_for_copies:
            builders = HOST_BUILDERS | self._builder_aliases
            if not self._copied_calls.isdisjoint(builders) or any(
                not self._assigned_calls.get(name, set()).isdisjoint(builders) for name in self._copied_names
            ):
                self._found.add(FACTORY_COPY)
        return frozenset(self._found)


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
