"""The package's shape: imports go one way along the pipeline.

Read from the source (ast), not by importing: an import inside a function counts as much as one at
the top; one under `if TYPE_CHECKING:` (annotations only) does not.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

PACKAGE = ROOT / "gpulint"
# The engine: what one file goes through.  It never reaches the rules, the run around it, the
# reporters or the configuration (the settings object it is handed selects the rules; the catalog is
# data generated from the rules, the grammar its `num-workers` check reads, and the gitignore-style
# matcher that tells a test file, which imports nothing but the standard library).
ENGINE = (
    "gpulint.linter.analysis",
    "gpulint.linter.fix",
    "gpulint.linter.engine",
    "gpulint.linter.rule",
    "gpulint.linter.findings",
    "gpulint.linter.suppressions",
    "gpulint.linter.catalog",
    "gpulint.linter.option_expression",
    "gpulint.linter.path_patterns",
)
# What a rule module may import: the engine's API, the options rules share and the headers of their cases.
RULE_IMPORTS = (
    "gpulint.linter.analysis",
    "gpulint.linter.rule",
    "gpulint.linter.findings",
    "gpulint.linter.fix.builders",
    "gpulint.linter.fix.guards",
    "gpulint.linter.fix.startup",
    "gpulint.linter.suppressions",
    "gpulint.rules.options",
    "gpulint.rules.case_headers",
)


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The gpulint modules `name` imports (by their module, not the names imported from them)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    annotations_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and getattr(block.test, "id", None) == "TYPE_CHECKING"
        for node in ast.walk(block)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in annotations_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from package import module` imports that module (the package's __init__ runs first
            # whatever imports the module, so it is no edge of its own); other names come from `node.module`.
            targets = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_no_import_cycles():
    graph = _graph()
    cycles = []
    for start in graph:
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, route = stack.pop()
            for target in graph[node]:
                if target == start:
                    cycles.append(" -> ".join([*route, start]))
                elif target not in seen:
                    seen.add(target)
                    stack.append((target, [*route, target]))
    assert not cycles, cycles[:5]


def test_the_engine_imports_neither_rules_nor_what_runs_it():
    bad = {
        name: sorted(t for t in targets if not t.startswith(ENGINE))
        for name, targets in _graph().items()
        if name.startswith(ENGINE)
    }
    assert not {name: targets for name, targets in bad.items() if targets}


def test_rule_modules_import_only_the_engine_api():
    bad = {}
    for name, targets in _graph().items():
        if name.count(".") == 3 and name.startswith("gpulint.rules."):  # gpulint.rules.<family>.<rule>
            outside = sorted(t for t in targets if not t.startswith(RULE_IMPORTS))
            if outside:
                bad[name] = outside
    assert not bad
