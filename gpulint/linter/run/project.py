"""The project index of a run (gpulint.linter.analysis.project): which module each file of the
run is, the project modules they import (found on disk and followed, so a helper module that a
run over `train.py` alone imports is known too), their summaries, and each file's view.

A module's identity is its source root -- the first folder above it without an `__init__.py`, as
Python finds it from a script's folder -- and its dotted name under that root.  Summaries come
from `summarize` (stdlib `ast`), or from the run's cache when the file's bytes are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpulint.linter.analysis.project import EMPTY_VIEW, ModuleSummary, ModuleView, ProjectIndex, summarize
from gpulint.linter.run.files import read_source

# Modules followed through imports beyond the run's own files: a bound on a run that names one
# file of a very large tree (the run's own files are always summarized).
MAX_FOLLOWED_MODULES = 2000


def module_identity(path: Path) -> tuple[str, str, bool]:
    """(module id `<source root>|<dotted name>`, dotted name, whether it is a package's
    `__init__`) for a Python file."""
    path = path.resolve()
    package = path.name == "__init__.py"
    parts = [] if package else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    dotted = ".".join(parts)
    return f"{folder}|{dotted}", dotted, package


def _module_file(root: Path, dotted: str) -> Path | None:
    """The file of module `dotted` under `root`, if it is there."""
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


class RunIndex:
    """The project index over a run's Python files and the project modules they import.

    `cached_summary(path, source, dotted name, is package, node budget)` may answer from a cache;
    without it each source is summarized.  The run's own files are summarized with the lint's
    budget of syntax nodes, `max_nodes` (one over it, which the lint skips, is not summarized), the
    modules they import with None (see analysis/project.py `summarize`).  `is_test(path)` says
    which modules are test code (the settings' `is_test_file`): their loops make no library code
    per step."""

    def __init__(
        self,
        files: list[Path],
        cached_summary: Callable[[Path, bytes, str, bool, int | None], ModuleSummary | None] | None = None,
        max_nodes: int | None = None,
        is_test: Callable[[Path], bool] | None = None,
    ) -> None:
        self._summary_of = cached_summary or (
            lambda path, source, dotted, package, budget: summarize(source, dotted, package, budget)
        )
        own = {path.resolve() for path in files}
        self.modules: dict[Path, str] = {}  # resolved path -> module id
        summaries: dict[str, ModuleSummary] = {}
        queue = [path for path in files if path.suffix == ".py"]
        followed = 0
        while queue:
            path = queue.pop()
            resolved = path.resolve()
            if resolved in self.modules:
                continue
            module_id, dotted, package = module_identity(resolved)
            self.modules[resolved] = module_id
            if module_id in summaries:
                continue
            try:
                source = read_source(resolved)
            except OSError:
                continue
            summary = self._summary_of(resolved, source, dotted, package, max_nodes if resolved in own else None)
            if summary is None:
                continue
            summaries[module_id] = summary
            root = Path(module_id.partition("|")[0])
            for imported in set(summary.bindings.values()):
                found = self._imported_file(root, imported)
                if found is not None and found.resolve() not in self.modules and followed < MAX_FOLLOWED_MODULES:
                    followed += 1
                    queue.append(found)
        test_modules = frozenset(
            module_id for path, module_id in self.modules.items() if is_test is not None and is_test(path)
        )
        from gpulint.linter.run.process import display_path  # (the engine, which a run has loaded)

        shown: dict[str, str] = {}  # module id -> its path as findings show paths
        for resolved, module_id in self.modules.items():
            shown.setdefault(module_id, display_path(resolved))
        self.index = ProjectIndex(summaries, test_modules, shown)

    @staticmethod
    def _imported_file(root: Path, dotted: str) -> Path | None:
        """`pkg.utils.clip` -> root/pkg/utils.py (the longest prefix that is a module file)."""
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            found = _module_file(root, ".".join(parts[:cut]))
            if found is not None:
                return found
        return None

    def view(self, path: Path) -> ModuleView:
        module_id = self.modules.get(path.resolve())
        return self.index.view(module_id) if module_id is not None else EMPTY_VIEW
