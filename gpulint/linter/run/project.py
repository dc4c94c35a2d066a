"""The project index of a run (gpulint.linter.analysis.project): which module each file of the
run is, the other Python files of the projects those files belong to, the modules they import
(found on disk and followed, also outside the project), their summaries, and each file's view.

The index covers each linted file's whole project -- its root is the nearest folder above with a
pyproject.toml or a .git (gpulint/linter/project.py `project_root`), walked as a run over the root
would walk it (run/files.py `discover`: .gitignore, the configured excludes, no virtual
environments or build output, no symbolic links) -- so `gpulint helpers.py`, a pre-commit run over
the changed files, the editor and `gpulint .` give a module the same view of the project: a loop
in `train.py` makes `helpers.py`'s function per-step however `helpers.py` is linted.  Only the
run's own files are linted; the others are only summarized.

A module's identity is its source root -- the first folder above it without an `__init__.py`, as
Python finds it from a script's folder -- and its dotted name under that root.  Summaries come
from `summarize` (stdlib `ast`), or from the run's cache when the file's bytes are unchanged.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gpulint.linter.analysis import parse_guard
from gpulint.linter.analysis.project import EMPTY_VIEW, ModuleSummary, ModuleView, ProjectIndex, summarize
from gpulint.linter.project import project_root
from gpulint.linter.run.cache import content_hash
from gpulint.linter.run.files import Walk, WalkStamps, discover_real, read_source
from gpulint.linter.run.stamps import UNKNOWN, Stamp, recordable, stamp_of, unchanged

if TYPE_CHECKING:
    from gpulint.linter.run.cache import ResultCache

# Modules followed through imports beyond the run's own files and their projects: a bound on a run
# that names one file of a very large tree (the run's own files are always summarized).
MAX_FOLLOWED_MODULES = 2000
# The most Python files the index reads of a project beyond the run's own files.  A larger "project"
# (a home folder under git, a monorepo without a pyproject.toml per package) is indexed through the
# imports of the linted files alone, with a warning: reading it all would make `gpulint file.py`
# slow for every user of the tree.
MAX_PROJECT_FILES = 10_000


def project_files(
    files: Iterable[Path],
    excludes_for: Callable[[Path], tuple[list[str], Path]],
    walks: dict[Path, Walk] | None = None,
    remembered: dict[Path, RememberedWalk] | None = None,
) -> tuple[dict[Path, str], list[str]]:
    """The Python files of the projects `files` belong to, each with its real path (the walk knows
    it: `RunIndex` takes it instead of resolving the file again), and warnings about projects too
    large to index.  `excludes_for(root)`: the exclude patterns that apply under a project root and
    the folder they are relative to (the root's configuration).  `walks`: the walks the run already
    made, by the real path of the folder walked; one of a root with the root's patterns is taken
    instead of walking it again (a run over the project's root).  `remembered`: the walks of the
    roots by an earlier call, kept there by this one; one with the same patterns is taken while
    nothing it read changed (files.WalkStamps: an editor's index of the same project, edit after
    edit)."""
    # The root of a file that is not a symbolic link is its folder's: found once per folder.
    by_folder: dict[Path, Path | None] = {}
    for path in files:
        if path.is_symlink():
            by_folder.setdefault(path, project_root(path))
        elif path.parent not in by_folder:
            by_folder[path.parent] = project_root(path.parent)
    roots = sorted({root for root in by_folder.values() if root is not None})
    found: dict[Path, str] = {}
    warnings: list[str] = []
    for root in roots:
        exclude, relative_to = excludes_for(root)
        walk = walks.get(root) if walks is not None else None
        kept = remembered.get(root) if remembered is not None else None
        if walk is not None and walk.patterns == (exclude, relative_to):
            # (as a walk of `root` names them)
            walked = [
                (root / path.relative_to(walk.top), real) for path, real in zip(walk.files, walk.reals, strict=True)
            ]
        elif kept is not None and kept.patterns == (exclude, relative_to) and kept.stamps.unchanged():
            walked = kept.found
        else:
            noted = WalkStamps() if remembered is not None else None
            # (a lint of the paths it cannot read reports them)
            reals, _unreadable = discover_real([root], exclude, relative_to, noted)
            walked = sorted(((path, real) for real, path in reals.items()), key=lambda item: item[0].as_posix())
            if remembered is not None and noted is not None:
                remembered[root] = RememberedWalk((exclude, relative_to), walked, noted)
        python = [(path, real) for path, real in walked if path.suffix == ".py"]
        if len(python) > MAX_PROJECT_FILES:
            warnings.append(
                f"{root}: more than {MAX_PROJECT_FILES} Python files; the project index reads only the "
                "modules the linted files import (a pyproject.toml in each package narrows the project)"
            )
            continue
        found.update(python)
    return found, warnings


class RememberedWalk(NamedTuple):
    """A project root's walk for `project_files`: the patterns it applied, the files it found
    (with their real paths) and what else it read."""

    patterns: tuple[list[str], Path]
    found: list[tuple[Path, str]]
    stamps: WalkStamps


class Folders:
    """What the folders the index looks into hold: each listed once (`os.scandir`) and kept while
    one index is built.  The modules of a project import the same packages again and again, and
    finding a module asks, for every prefix of every import, for `pkg/utils.py` and
    `pkg/utils/__init__.py`, and for each folder above a module whether it holds an `__init__.py`:
    a stat each, a third of the time litgpt's index took to solve (about 1,200 lookups).  As in
    Python's own import system, a name matches an entry exactly, on a case-insensitive file system
    too; a folder that cannot be listed holds nothing.

    An editor builds its project's index again on every edit: `unchanged()` hands the next index
    the listings of the folders whose stat data has not changed since they were listed (adding,
    removing or renaming an entry changes a folder's; run/stamps.py says what stat data can and
    cannot tell)."""

    def __init__(self) -> None:
        self._listed: dict[str, tuple[Stamp, dict[str, os.DirEntry[str]]]] = {}

    def _entry(self, folder: str, name: str) -> os.DirEntry[str] | None:
        listed = self._listed.get(folder)
        if listed is None:
            started = time.time_ns()
            stamp = recordable(stamp_of(folder), started)  # (before the listing: a change after it shows)
            try:
                with os.scandir(folder) as entries:
                    listed = stamp, {entry.name: entry for entry in entries}
            except OSError:
                listed = UNKNOWN, {}
            self._listed[folder] = listed
        return listed[1].get(name)

    def has_file(self, folder: str, name: str) -> bool:
        """Whether `folder/name` is a file (or a link to one)."""
        entry = self._entry(folder, name)
        try:
            return entry is not None and entry.is_file()
        except OSError:  # (a link whose target cannot be stat'ed)
            return False

    def has_folder(self, folder: str, name: str) -> bool:
        """Whether `folder/name` is a folder (or a link to one)."""
        entry = self._entry(folder, name)
        try:
            return entry is not None and entry.is_dir()
        except OSError:
            return False

    def __len__(self) -> int:
        """How many folders are listed."""
        return len(self._listed)

    def unchanged(self) -> Folders:
        """These listings, less those of folders whose stat data changed since (or that changed
        too shortly before they were listed to tell), for the next index of the same project."""
        kept = Folders()
        kept._listed = {folder: listed for folder, listed in self._listed.items() if unchanged(folder, listed[0])}
        return kept


def module_identity(path: Path, folders: Folders | None = None) -> tuple[str, str, bool]:
    """(module id `<source root>|<dotted name>`, dotted name, whether it is a package's
    `__init__`) for a Python file, given by its resolved path; `folders`: what the folders above it
    hold, as far as they were listed already."""
    folders = folders or Folders()
    package = path.name == "__init__.py"
    parts = [] if package else [path.stem]
    folder = path.parent
    while folder.parent != folder and folders.has_file(str(folder), "__init__.py"):
        parts.insert(0, folder.name)
        folder = folder.parent
    dotted = ".".join(parts)
    return f"{folder}|{dotted}", dotted, package


def module_summary(
    cache: ResultCache | None, source: bytes, source_hash: str, dotted: str, package: bool, budget: int | None
) -> tuple[str, ModuleSummary | None]:
    """(its cache key, the summary of a module's bytes whose `content_hash` is `source_hash`), from
    the cache or summarized and stored; without a cache, summarized, with the key "" ."""
    if cache is None:
        return "", summarize(source, dotted, package, budget)
    key = cache.summary_key(dotted, package, source_hash, budget)
    found, summary = cache.get_summary(key)
    if not found:
        summary = summarize(source, dotted, package, budget)
        cache.put_summary(key, summary)
    return key, summary


@dataclass(frozen=True)
class Summarized:
    """A module summarized ahead of the index, in a worker process (`summarize_file`): the index
    takes it for the same bytes.  `measured`: what the parse guard measured on the bytes (kept for
    the lint in the process that builds the index: parse_guard.keep_measurement); None when the
    summary came from the cache (no tree was built)."""

    source_hash: str
    cache_key: str  # "" without a cache
    summary: ModuleSummary | None
    measured: tuple[parse_guard.MeasuredKey, parse_guard.Measured] | None


def summarize_file(
    path: Path, budget: int | None, cache: ResultCache | None, folders: Folders | None = None
) -> Summarized | None:
    """Read and summarize one module, given by its resolved path, as `RunIndex` would (None when it
    cannot be read); `folders` as for `module_identity`."""
    try:
        source = read_source(path)
    except OSError:
        return None
    _module_id, dotted, package = module_identity(path, folders)
    source_hash = content_hash(source)
    key, summary = module_summary(cache, source, source_hash, dotted, package, budget)
    measured = parse_guard.take_measurement(source, budget) if budget is not None else None
    return Summarized(source_hash, key, summary, measured)


def _module_file(root: str, dotted: str, folders: Folders) -> str | None:
    """The file of module `dotted` under the folder `root` (`pkg/utils.py` or
    `pkg/utils/__init__.py`), if it is there."""
    *packages, name = dotted.split(".")
    folder = root
    for package in packages:
        if not folders.has_folder(folder, package):
            return None
        folder = os.path.join(folder, package)
    if folders.has_file(folder, f"{name}.py"):
        return os.path.join(folder, f"{name}.py")
    if folders.has_folder(folder, name) and folders.has_file(os.path.join(folder, name), "__init__.py"):
        return os.path.join(folder, name, "__init__.py")
    return None


@dataclass(frozen=True, slots=True)
class _ReadModule:
    """A module file as an index read it: its stat data just before (UNKNOWN when it had changed
    too shortly before to tell), its identity (`module_identity`), the node budget and the summary."""

    stamp: Stamp
    identity: tuple[str, str, bool]
    budget: int | None
    summary: ModuleSummary | None


class RunIndex:
    """The project index over a run's Python files, the other files of their projects
    (`project_files`) and the modules they import.

    `cached_summary(path, source, dotted name, is package, node budget)` may answer from a cache;
    without it each source is summarized.  The run's own files and their projects' files are
    summarized with the lint's budget of syntax nodes, `max_nodes` (one over it, which the lint
    skips, is not summarized), the modules they import from elsewhere with None (see
    analysis/project.py `summarize`).  `is_test(path)` says which modules are test code (the
    settings' `is_test_file`): their loops make no library code per step.  `sources` holds texts
    that replace what is on disk (an editor's unsaved document).  With the same summaries, test
    modules and paths as `previous` (an edit that changed no call, loop or import), its solved
    index is reused; with summaries that differ only in where calls and loops are (an edit that
    added or removed lines), its solution is (ProjectIndex.moved).  `real_paths`: the real paths
    of files a walk found (`project_files`), which are not resolved again.  `read_if_imported(path)`
    says which of the run's and its projects' files are read only when a module that is read
    imports them: the test files that are not linted (`lint-tests` off).  Leaving the others out
    changes no other module's view, as what a test does makes no library code per step
    (analysis/project.py `ProjectIndex._reaches`); a test helper that library code imports is read."""

    def __init__(
        self,
        files: list[Path],
        cached_summary: Callable[[Path, bytes, str, bool, int | None], ModuleSummary | None] | None = None,
        max_nodes: int | None = None,
        is_test: Callable[[Path], bool] | None = None,
        project: Iterable[Path] = (),
        sources: dict[Path, bytes] | None = None,
        previous: RunIndex | None = None,
        real_paths: Mapping[Path, str] | None = None,
        read_if_imported: Callable[[Path], bool] | None = None,
    ) -> None:
        self._summary_of = cached_summary or (
            lambda path, source, dotted, package, budget: summarize(source, dotted, package, budget)
        )
        self._resolved: dict[Path, Path] = {path: Path(real) for path, real in (real_paths or {}).items()}  # (resolve)
        self._folders: Folders = previous._folders.unchanged() if previous is not None else Folders()
        sources = {self.resolve(path): text for path, text in (sources or {}).items()}
        own = [path for path in files if path.suffix == ".py"]
        # Queued last, popped first: the run's own files, then their projects'.
        queue = [*project, *own]
        budgeted = {self.resolve(path) for path in queue}
        if read_if_imported is not None:
            queue = [path for path in queue if not read_if_imported(path)]
        self.modules: dict[Path, str] = {}  # resolved path -> module id
        # Every folder the last index listed is as it was (an editor's next edit): what the imports
        # named and where each module sits are as it found them.
        folders_as_before = previous is not None and len(self._folders) == len(previous._folders)
        # (source root, module name) -> its file
        self._imports: dict[tuple[str, str], Path | None] = (
            dict(previous._imports) if previous is not None and folders_as_before else {}
        )
        # Each module file as this index read it, for the next: one whose stat data is unchanged
        # is not read or summarized again.
        self._read: dict[Path, _ReadModule] = {}
        read_before = previous._read if previous is not None else {}
        started = time.time_ns()
        summaries: dict[str, ModuleSummary] = {}
        followed = 0
        while queue:
            path = queue.pop()
            resolved = self.resolve(path)
            if resolved in self.modules:
                continue
            budget = max_nodes if resolved in budgeted else None
            stamp = stamp_of(resolved) if resolved not in sources else None  # (before the read)
            before = read_before.get(resolved)
            if before is not None and (before.budget, before.stamp) != (budget, stamp):
                before = None  # (changed since, too shortly before to tell, or another budget: read again)
            identity = (
                before.identity
                if before is not None and folders_as_before
                else module_identity(resolved, self._folders)
            )
            module_id, dotted, package = identity
            self.modules[resolved] = module_id
            if module_id in summaries:
                continue
            if before is not None and before.identity == identity:
                summary = before.summary
            else:
                try:
                    source = sources[resolved] if resolved in sources else read_source(resolved)
                except OSError:
                    continue
                summary = self._summary_of(resolved, source, dotted, package, budget)
            if stamp is not None:
                self._read[resolved] = _ReadModule(recordable(stamp, started), identity, budget, summary)
            if summary is None:
                continue
            summaries[module_id] = summary
            root = module_id.partition("|")[0]
            for imported in set(summary.bindings.values()):
                found = self._imported_file(root, imported)
                if found is not None and found not in self.modules and followed < MAX_FOLLOWED_MODULES:
                    followed += 1
                    queue.append(found)
        test_modules = frozenset(
            module_id for path, module_id in self.modules.items() if is_test is not None and is_test(path)
        )
        from gpulint.linter.run.process import display_path  # (the engine, which a run has loaded)

        # Each module's path as findings show it (relative to the working folder, as the last
        # index of the same working folder had it).
        self._display_cwd = os.getcwd()
        self._displayed: dict[Path, str] = (
            previous._displayed if previous is not None and previous._display_cwd == self._display_cwd else {}
        )
        displayed = self._displayed
        shown: dict[str, str] = {}  # module id -> its path as findings show paths
        for resolved, module_id in self.modules.items():
            if module_id not in shown:
                if resolved not in displayed:
                    displayed[resolved] = display_path(resolved)
                shown[module_id] = displayed[resolved]
        self._solved_from = (summaries, test_modules, shown)
        self.index: ProjectIndex = self._solved(previous)

    def _solved(self, previous: RunIndex | None) -> ProjectIndex:
        """The solved index: the previous one when nothing it was solved from changed, or only
        where calls and loops are (an edit that added or removed lines); else solved again."""
        summaries, test_modules, shown = self._solved_from
        if previous is not None and previous._solved_from[1:] == (test_modules, shown):
            if previous._solved_from[0] == summaries:
                return previous.index
            moved = previous.index.moved(summaries)
            if moved is not None:
                return moved
        return ProjectIndex(summaries, test_modules, shown)

    def _imported_file(self, root: str, dotted: str) -> Path | None:
        """`pkg.utils.clip` -> root/pkg/utils.py, resolved (the longest prefix that is a module
        file); remembered, as the modules of a project import the same names again and again."""
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            key = (root, ".".join(parts[:cut]))
            if key not in self._imports:
                found = _module_file(root, key[1], self._folders)
                self._imports[key] = self.resolve(Path(found)) if found is not None else None
            if self._imports[key] is not None:
                return self._imports[key]
        return None

    def read_stamp(self, resolved: Path) -> Stamp | None:
        """The stat data a module file (by its resolved path) had just before this index read it
        (UNKNOWN: changed too shortly before to tell); None for a file it did not stat (an
        editor's unsaved text) or took from the last index without reading."""
        read = self._read.get(resolved)
        return read.stamp if read is not None else None

    def resolve(self, path: Path) -> Path:
        """`path.resolve()`, once per path for this index (the run's files are queued, looked up
        among the modules and asked for their view by the same paths)."""
        resolved = self._resolved.get(path)
        if resolved is None:
            resolved = self._resolved[path] = path.resolve()
        return resolved

    def view(self, path: Path) -> ModuleView:
        module_id = self.modules.get(self.resolve(path))
        return self.index.view(module_id) if module_id is not None else EMPTY_VIEW
