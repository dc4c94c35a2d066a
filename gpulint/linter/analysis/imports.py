"""Qualified names from a module's own import statements.

libcst's QualifiedNameProvider needs scope analysis, which costs about eight times the parse on real
code.  Training scripts bind framework names with plain imports, so a module-wide table of
"local name -> dotted import path" resolves `DL(...)`, `tud.DataLoader(...)` and `tf.data.Dataset`
correctly at a small fraction of the cost.  The trade-off: a local variable that shadows an imported
name is not seen; rules treat an unresolved name as "unknown", never as a match.
"""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.nodes import dotted_name
from gpulint.linter.analysis.vocabulary import canonical


class ImportTable:
    """Local names bound by import statements anywhere in the module, and what they refer to."""

    def __init__(self) -> None:
        self.bindings: dict[str, str] = {}
        self.modules: set[str] = set()  # every module imported, canonical, for "does it use X?"
        # `qualified_name` by node id: the rules ask it of the same calls again and again (tens of
        # thousands of times on the corpus's 44 scripts).  The entry holds the node, so its id is
        # not reused by a node built later (libcst's own hash is a Python call: slower than id);
        # cleared when an import is added.
        self._qualified: dict[int, tuple[cst.CSTNode, str | None]] = {}

    # -- building -----------------------------------------------------------------------------
    def add_import(self, node: cst.Import) -> None:
        self._qualified.clear()
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            self.modules.add(canonical(full))
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.bindings[alias.asname.name.value] = full
            else:
                # `import torch.nn` binds `torch`, which then resolves attribute by attribute.
                top = full.split(".", 1)[0]
                self.bindings.setdefault(top, top)

    def add_import_from(self, node: cst.ImportFrom) -> None:
        self._qualified.clear()
        if node.relative or node.module is None:
            return  # relative imports are the project's own code, never a framework
        module = dotted_name(node.module)
        if module is None:
            return
        self.modules.add(canonical(module))
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            local = alias.name.value
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.bindings[local] = f"{module}.{alias.name.value}"
            self.modules.add(canonical(f"{module}.{alias.name.value}"))

    # -- queries ------------------------------------------------------------------------------
    def qualified_name(self, node: cst.BaseExpression) -> str | None:
        """The canonical dotted path an expression refers to, if it starts from an import."""
        known = self._qualified.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        dotted = dotted_name(node)
        qualified = None
        if dotted is not None:
            head, _, rest = dotted.partition(".")
            target = self.bindings.get(head)
            if target is not None:
                qualified = canonical(f"{target}.{rest}" if rest else target)
        self._qualified[id(node)] = (node, qualified)
        return qualified

    def uses(self, module: str) -> bool:
        """Whether the module imports `module` or anything under it."""
        return any(m == module or m.startswith(module + ".") for m in self.modules)

    def reference(self, qualified: str) -> str | None:
        """Source text that refers to `qualified` through the module's existing imports.

        `reference("tensorflow.data.AUTOTUNE")` is `"tf.data.AUTOTUNE"` after `import tensorflow as
        tf`.  None when no import reaches it; the caller then adds an import.
        """
        best: str | None = None
        for local, target in self.bindings.items():
            for spelling in {target, canonical(target)}:
                if qualified == spelling:
                    candidate = local
                elif qualified.startswith(spelling + "."):
                    candidate = local + qualified[len(spelling) :]
                else:
                    continue
                if best is None or len(candidate) < len(best):
                    best = candidate
        return best
