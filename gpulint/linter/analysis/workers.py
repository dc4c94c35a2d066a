"""Whether loader worker processes can be added to a DataLoader without breaking the script.

Under the `spawn` and `forkserver` start methods (the default on macOS and Windows, and on Linux
from Python 3.14), every worker process imports the main module again before it loads a batch:

* code at module level runs again in each worker, and a worker that code starts fails ("An attempt
  has been made to start a new process before the current process has finished its bootstrapping
  phase").  Workers can start only from code that runs when the module is the main program: under
  `if __name__ == "__main__":`, or in a function or class reached from there;
* the dataset, `collate_fn`, `worker_init_fn` and samplers are pickled into the workers: a lambda,
  or a function or class defined inside a function, cannot be.

Under any start method, an `IterableDataset` is copied into every worker, and each copy yields
every item unless it splits them between workers with `get_worker_info()` (in the dataset, or
through a `worker_init_fn`).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.analysis.nodes import dotted_name, keyword_arg
from gpulint.linter.analysis.values import target_key
from gpulint.linter.analysis.walk import names_under, nodes_under

if TYPE_CHECKING:
    from gpulint.linter.analysis.context import FileContext

ITERABLE_DATASETS = ("torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset")


def is_main_guard(statement: cst.CSTNode) -> bool:
    """`if __name__ == "__main__":` (either way round)."""
    if not isinstance(statement, cst.If) or not isinstance(statement.test, cst.Comparison):
        return False
    test = statement.test
    if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    names = [s.value for s in sides if isinstance(s, cst.Name)]
    strings = [s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)]
    return names == ["__name__"] and strings == ["__main__"]


class WorkerStart:
    """The worker questions of one module (`ctx.workers`)."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx

    @cached_property
    def _definitions(self) -> dict[str, list[cst.FunctionDef | cst.ClassDef]]:
        """Every function and class of the module, by name (methods and nested ones included)."""
        found: dict[str, list[cst.FunctionDef | cst.ClassDef]] = {}
        definitions: list[cst.FunctionDef | cst.ClassDef] = [*self.ctx.index.nodes("FunctionDef")]
        definitions += self.ctx.index.nodes("ClassDef")
        for statement in definitions:
            found.setdefault(statement.name.value, []).append(statement)
        return found

    @cached_property
    def _reached_from_main(self) -> set[int]:
        """id() of the functions and classes that the main guard's code names, directly or through
        other reached functions (a class reaches its methods; a name reaches every definition
        that has it: generous, as a call graph without types must be)."""
        reached: set[int] = set()
        pending = [s for s in self.ctx.module.body if is_main_guard(s)]
        while pending:
            node = pending.pop()
            for name in names_under(node):
                for definition in self._definitions.get(name, ()):
                    if id(definition) not in reached:
                        reached.add(id(definition))
                        pending.append(definition)
        return reached

    def runs_as_main_program(self, node: cst.CSTNode) -> bool:
        """Whether `node` runs only when the module is the main program (see the module docstring)."""
        child = node
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return id(ancestor) in self._reached_from_main
            if isinstance(ancestor, cst.Module):
                return is_main_guard(child)
            child = ancestor
        return False

    @cached_property
    def _local_definitions(self) -> set[str]:
        """Names of functions and classes defined inside a function: pickle cannot find them."""
        return {
            definition.name.value
            for definitions in self._definitions.values()
            for definition in definitions
            if self.ctx.enclosing_function(definition) is not None
        }

    def _with_origins(self, expressions: list[cst.BaseExpression]) -> list[cst.BaseExpression]:
        """The expressions and, for names, the values assigned to them (one level)."""
        found = list(expressions)
        for expression in expressions:
            key = target_key(expression)
            if key is not None:
                found.extend(self.ctx.values.assigned.get(key, ()))
        return found

    def _reaching(self, expressions: list[cst.BaseExpression]) -> list[cst.BaseExpression]:
        """The expressions and every value assigned to a name or attribute used in them, followed
        to the end (`ImageFolder(root, transform)`, then `transform = Compose([...])`)."""
        found: list[cst.BaseExpression] = []
        pending, seen = list(expressions), set()
        while pending:
            expression = pending.pop()
            found.append(expression)
            nodes = list(nodes_under(expression))
            # `x.name` and `f(name=...)` do not read a variable `name`.
            not_read = {id(n.attr) for n in nodes if isinstance(n, cst.Attribute)}
            not_read |= {id(n.keyword) for n in nodes if isinstance(n, cst.Arg) and n.keyword is not None}
            for node in nodes:
                key = target_key(node) if id(node) not in not_read else None
                if key is not None and key not in seen:
                    seen.add(key)
                    pending.extend(self.ctx.values.assigned.get(key, ()))
        return found

    def unpicklable(self, call: cst.Call) -> str | None:
        """What the DataLoader hands its workers that cannot be pickled (a lambda, a function or
        class defined inside a function, or what a function of the module returns that is one: a
        `make_collate(tokenizer)` that returns its nested `collate`), there or in what its
        arguments were built from (a dataset whose transforms hold `transforms.Lambda(lambda x:
        x.mul(255))`), in words; None where everything can be."""
        for value in self._reaching([arg.value for arg in call.args]):
            if any(isinstance(node, cst.Lambda) for node in nodes_under(value)):
                return "a lambda"
            local = sorted(names_under(value) & self._local_definitions)
            if local:
                return f"`{local[0]}`, defined inside a function,"
            for node in nodes_under(value):
                factory = dotted_name(node.func) if isinstance(node, cst.Call) else None
                if factory in self._local_factories:
                    return f"what `{factory}()` returns, defined inside it,"
        return None

    @cached_property
    def _local_factories(self) -> set[str]:
        """Names of the module's functions that return a lambda, a function or class defined in
        them (a closure), or an object of such a class: what they return cannot be pickled either."""
        found: set[str] = set()
        for definitions in self._definitions.values():
            for definition in definitions:
                if not isinstance(definition, cst.FunctionDef):
                    continue
                nested = {
                    node.name.value
                    for node in nodes_under(definition.body)
                    if isinstance(node, (cst.FunctionDef, cst.ClassDef))
                }
                for node in nodes_under(definition.body):
                    if not isinstance(node, cst.Return) or node.value is None:
                        continue
                    if self.ctx.enclosing_function(node) is not definition:
                        continue  # a nested function's own return
                    returned = node.value
                    if isinstance(returned, cst.Call):
                        returned = returned.func  # an object of a class defined in the function
                    if isinstance(returned, cst.Lambda) or (
                        isinstance(returned, cst.Name) and returned.value in nested
                    ):
                        found.add(definition.name.value)
        return found

    def unsharded_iterable(self, call: cst.Call, dataset: cst.BaseExpression | None) -> bool:
        """Whether the DataLoader loads an IterableDataset of this module that does not split its
        items between workers (`get_worker_info()` in the class, or a `worker_init_fn`)."""
        if dataset is None or keyword_arg(call, "worker_init_fn") is not None:
            return False
        for value in self._with_origins([dataset]):
            if isinstance(value, cst.Call):
                for definition in self._definitions.get(dotted_name(value.func) or "", ()):
                    if isinstance(definition, cst.ClassDef) and self._iterable(definition, set()):
                        return not self._shards(definition, set())
        return False

    def _iterable(self, cls: cst.ClassDef, seen: set[int]) -> bool:
        seen.add(id(cls))
        for base in cls.bases:
            if self.ctx.qualified_name(base.value) in ITERABLE_DATASETS:
                return True
            for parent in self._definitions.get(dotted_name(base.value) or "", ()):
                if isinstance(parent, cst.ClassDef) and id(parent) not in seen and self._iterable(parent, seen):
                    return True
        return False

    def _shards(self, cls: cst.ClassDef, seen: set[int]) -> bool:
        seen.add(id(cls))
        if "get_worker_info" in names_under(cls.body):
            return True
        return any(
            isinstance(parent, cst.ClassDef) and id(parent) not in seen and self._shards(parent, seen)
            for base in cls.bases
            for parent in self._definitions.get(dotted_name(base.value) or "", ())
        )
