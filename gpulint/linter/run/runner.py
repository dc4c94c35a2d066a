"""Run the linter over paths: discover the files, build the project index over them and the rest of
their projects (each module's view of the rest of the project: analysis/project.py, run/project.py),
answer what the cache knows, process the rest in this process or in worker processes, and collect
the outcomes in the sorted order of the files.  With `--fix`, files are written only inside the
paths given (the run's write scope).

Settings may differ per file (`settings_for`: each file's nearest project, as ruff's hierarchical
configuration does): the files are linted in groups that share a Settings object, each with its
own linter and cache key.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.printable import printable
from gpulint.linter.run import parallel
from gpulint.linter.run.cache import ResultCache, content_hash
from gpulint.linter.run.files import discover, read_source
from gpulint.linter.run.outcome import FileOutcome, RunOptions, RunResult
from gpulint.linter.run.process import display_path, process_file_cached
from gpulint.linter.run.safe_files import WriteScope, remove_stale_temporaries

if TYPE_CHECKING:
    from gpulint.linter.analysis.project import ModuleView


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _cached_outcome(path: Path, cache: ResultCache, max_bytes: int, project_digest: str) -> FileOutcome | None:
    try:
        source = read_source(path, max_bytes)
    except OSError:
        return None  # reported when the file is processed
    name = display_path(path)
    return cache.get(cache.key(path, name, content_hash(source), project_digest), name)


class _ProjectViews:
    """Each file's view of its project (run/project.py), the modules summarized once per content
    (through the cache when there is one; a module over `max-syntax-nodes` is not).

    The digests of the views (what the outcome cache keys on) come first: with a cache, a run over
    the same files of a project whose every Python file has the bytes it had is answered from one
    entry, without loading thousands of summaries and solving the index again; the views
    themselves are built only for files the cache does not answer."""

    def __init__(
        self,
        files: list[Path],
        cache: ResultCache | None,
        settings_for: Callable[[Path], Settings],
        warnings: list[str],
    ) -> None:
        from gpulint.linter.run.project import project_files

        def excludes_for(root: Path) -> tuple[list[str], Path]:
            settings = settings_for(root)
            return settings.exclude, settings.root

        self.files = files
        self.cache = cache
        self.project, too_large = project_files(files, excludes_for)
        warnings.extend(printable(line) for line in too_large)
        self.max_nodes = settings_for(files[0]).max_syntax_nodes if files else None
        # Which modules are test code, by the settings of the project each belongs to.
        self.is_test = lambda path: settings_for(path).is_test_file(path)
        # What else a view depends on: the test-file settings (in the fingerprint) and the folder
        # the chains' paths are shown from.
        self._context = f"{os.getcwd()}|{settings_for(files[0]).fingerprint()}" if files else ""
        self._views: list[ModuleView | None] | None = None
        self._index_key = ""

    def digests(self) -> list[str]:
        if self.cache is not None:
            self._index_key = self.cache.index_key(
                self.max_nodes, [self._hashed(p) for p in [*self.files, *self.project]], self._context
            )
            stored = self.cache.get_index(self._index_key)
            if stored is not None and all(self._hashed(Path(path)) == (path, h) for path, h in stored["followed"]):
                own = stored["digests"]
                return [own.get(str(path.resolve()), "") for path in self.files]
        return [view.digest() if view is not None else "" for view in self.views()]

    def views(self) -> list[ModuleView | None]:
        if self._views is None:
            self._views = self._build()
        return self._views

    def _build(self) -> list[ModuleView | None]:
        from gpulint.linter.analysis.project import summarize
        from gpulint.linter.run.project import RunIndex

        cache = self.cache

        def cached_summary(path: Path, source: bytes, dotted: str, package: bool, budget: int | None):
            assert cache is not None  # only handed to RunIndex when there is a cache
            key = cache.summary_key(dotted, package, content_hash(source), budget)
            found, summary = cache.get_summary(key)
            if not found:
                summary = summarize(source, dotted, package, budget)
                cache.put_summary(key, summary)
            return summary

        index = RunIndex(
            self.files, cached_summary if cache is not None else None, self.max_nodes, self.is_test, self.project
        )
        views = [index.view(path) if path.suffix == ".py" else None for path in self.files]
        if cache is not None and self._index_key:
            indexed = {path.resolve() for path in [*self.files, *self.project]}
            followed = [self._hashed(path) for path in index.modules if path not in indexed]
            digests = {str(path.resolve()): view.digest() for path, view in zip(self.files, views, strict=True) if view}
            cache.put_index(self._index_key, digests, followed)
        return views

    @staticmethod
    def _hashed(path: Path) -> tuple[str, str]:
        """(the resolved path, a hash of its bytes; "" when it cannot be read)."""
        try:
            return str(path.resolve()), content_hash(read_source(path))
        except OSError:
            return str(path.resolve()), ""


def _discover(paths: list[Path], settings_for: Callable[[Path], Settings]) -> tuple[list[Path], list]:
    """`discover` over each path with the exclude patterns of the configuration that applies there."""
    found: dict[str, Path] = {}
    errors = []
    for path in paths:
        settings = settings_for(path)
        files, path_errors = discover([path], settings.exclude, settings.root)
        for file in files:
            found.setdefault(os.path.realpath(file), file)
        errors.extend(path_errors)
    return sorted(found.values(), key=lambda p: p.as_posix()), list(dict.fromkeys(errors))


def run(
    paths: list[Path],
    settings: Settings,
    options: RunOptions,
    jobs: int = 1,
    cache: ResultCache | None = None,
    progress: Callable[[int, int], None] | None = None,
    settings_for: Callable[[Path], Settings] | None = None,
) -> RunResult:
    """Lint (or fix) every file under `paths`; outcomes in the sorted order of the files.

    `settings_for(path)`: the settings of the project a file or folder belongs to (the same object
    for every file of one project); without it, `settings` for all.  Cache hits are looked up here
    first, so a warm run over an unchanged tree starts no worker and parses nothing; the rest go to
    `jobs` worker processes (in this process when `jobs` is 1 or there are only a few files).
    `progress(done, total)` is called as files finish."""
    settings_for = settings_for or (lambda path: settings)
    files, path_errors = _discover(paths, settings_for)
    result = RunResult(path_errors=path_errors)
    if options.fix and not options.diff:
        options = replace(options, write_scope=WriteScope.of(paths))
        left = remove_stale_temporaries({path.parent for path in files}, options.write_scope)
        if left:
            result.warnings.append(f"removed {len(left)} temporary file(s) an interrupted --fix left behind")
    if cache is not None and (reason := cache.unusable_reason()) is not None:
        result.warnings.append(printable(f"{reason}; running without a cache"))
        cache = None
    project = _ProjectViews(files, cache, settings_for, result.warnings) if options.project_index else None
    digests = project.digests() if project is not None else [""] * len(files)
    # The files by the settings that lint them (one group per project configuration), in order.
    groups: dict[int, tuple[Settings, list[int]]] = {}
    for index, path in enumerate(files):
        file_settings = settings_for(path)
        groups.setdefault(id(file_settings), (file_settings, []))[1].append(index)
    outcomes: list[FileOutcome | None] = [None] * len(files)
    done = 0
    wrote = False
    for group_settings, members in groups.values():
        group_cache = cache
        if cache is not None and group_settings is not settings:
            group_cache = cache.for_settings(group_settings.fingerprint())
        if group_cache is not None:
            for index in members:
                path = files[index]
                outcomes[index] = _cached_outcome(path, group_cache, group_settings.size_limit(path), digests[index])
        done = sum(o is not None for o in outcomes)
        pending = [i for i in members if outcomes[i] is None]
        views = project.views() if project is not None and pending else [None] * len(files)
        if progress is not None and done:
            progress(done, len(files))
        if jobs > 1 and len(pending) >= parallel.MIN_FILES_FOR_WORKERS:
            # Largest files first, so a big file is not the last one left while the other workers
            # idle (results are placed by index: the order of the outcomes does not change).
            pending.sort(key=lambda i: -_size(files[i]))
            items = [(files[i], views[i]) for i in pending]
            stream = parallel.map_files(items, group_settings, options, group_cache, jobs)
        else:
            linter = Linter(group_settings)
            stream = (process_file_cached(files[i], linter, options, group_cache, views[i]) for i in pending)
        for index, outcome in zip(pending, stream, strict=False):
            outcomes[index] = outcome
            done += 1
            if progress is not None:
                progress(done, len(files))
        stream.close()  # zip stops before the generator ends: close it so the pool shuts down now
        wrote = wrote or bool(pending)
    if cache is not None and wrote:  # entries were written (by this process or its workers)
        cache.evict()
    result.outcomes = [o for o in outcomes if o is not None]
    return result
