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
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.printable import printable
from gpulint.linter.run import parallel
from gpulint.linter.run.cache import ResultCache, content_hash
from gpulint.linter.run.files import Walk, discover_real, read_source
from gpulint.linter.run.outcome import FileOutcome, RunOptions, RunResult
from gpulint.linter.run.process import display_path, process_file_cached
from gpulint.linter.run.safe_files import WriteScope, remove_stale_temporaries

if TYPE_CHECKING:
    from gpulint.linter.analysis.project import ModuleView
    from gpulint.linter.run.project import RunIndex, Summarized


def _cached_outcome(
    path: Path, cache: ResultCache, max_bytes: int, project_digest: str, known: tuple[int, str] | None = None
) -> FileOutcome | None:
    """The cached outcome of a file, or None.  `known`: its (size, content hash) when the project
    index already knows them from stat data (the file is then not read)."""
    if known is not None:
        size, source_hash = known
        if size > max_bytes:
            return None  # (reported when the file is processed)
    else:
        try:
            source_hash = content_hash(read_source(path, max_bytes))
        except OSError:
            return None  # reported when the file is processed
    name = display_path(path)
    return cache.get(cache.key(path, name, source_hash, project_digest), name)


class _ProjectViews:
    """Each file's view of its project (run/project.py), the modules summarized once per content
    (through the cache when there is one; a module over `max-syntax-nodes` is not).

    The views of the run's files (their digests are what the outcome cache keys on) come from one
    cache entry per run shape (the run's files and their projects' files, by path) when it holds:

    * every file the index read has the stat data the entry recorded (run/stamps.py): nothing is
      read, no summary is loaded, nothing is solved;
    * some files differ in stat data: they are hashed; those whose bytes changed are summarized
      again (through the cache) and compared with the summaries the entry was solved from.  When
      every summary is the same (an edit to a comment, a string, a constant, a body that adds no
      call, loop or import), the views are the same: nothing is solved;
    * otherwise the index is built and solved again, and the entry rewritten.  With workers
      (`jobs` > 1), the modules are read, compiled and summarized in a worker pool first
      (`_summarize_ahead`), and the index is built and solved in a child process that hands back
      the views (`parallel.in_child`): the lint's workers are forked from this process, and what
      a large index leaves behind would stay in it, and in each of them, for the whole lint."""

    def __init__(
        self,
        files: list[Path],
        cache: ResultCache | None,
        settings_for: Callable[[Path], Settings],
        warnings: list[str],
        walks: dict[Path, Walk] | None = None,
        jobs: int = 1,
        real_paths: dict[Path, str] | None = None,
    ) -> None:
        from gpulint.linter.run.project import project_files

        def excludes_for(root: Path) -> tuple[list[str], Path]:
            settings = settings_for(root)
            return settings.exclude, settings.root

        self.files = files
        self.cache = cache
        self.jobs = jobs
        # The real paths of the run's files and of their projects' (from the walks), which the
        # index would otherwise resolve again, a system call per folder of each path.
        self.project, too_large = project_files(files, excludes_for, walks)
        self.real_paths = {**self.project, **(real_paths or {})}
        warnings.extend(printable(line) for line in too_large)
        self.max_nodes = settings_for(files[0]).max_syntax_nodes if files else None
        # Which modules are test code, by the settings of the project each belongs to.
        self.is_test = lambda path: settings_for(path).is_test_file(path)
        # The test files no rule reads as a whole (`lint-tests` off): indexed only when imported.
        self.read_if_imported = lambda path: settings_for(path).skips_tests(path)
        self._first_settings = settings_for(files[0]) if files else None
        # What else a view depends on: the test-file settings (in the fingerprint) and the folder
        # the chains' paths are shown from.
        self._context = f"{os.getcwd()}|{settings_for(files[0]).fingerprint()}" if files else ""
        self._views: list[ModuleView | None] | None = None
        self._ahead_paths: list[tuple[Path, int | None]] | None = None
        self._index_key = ""
        # The run's own files' (size, content hash) as the index entry knows them: their outcomes
        # are looked up without reading them again.
        self.known: dict[Path, tuple[int, str]] = {}

    def _real(self, path: Path) -> str:
        """A file's real path (as `Path.resolve` gives it), as discovery found it when it did."""
        real = self.real_paths.get(path)
        return real if real is not None else str(path.resolve())

    def digests(self) -> list[str]:
        if self.cache is not None:
            self._index_key = self.cache.index_key(
                self.max_nodes, [str(path) for path in [*self.files, *self.project]], self._context
            )
            stored = self.cache.get_index(self._index_key)
            if stored is not None and self._still_valid(stored["views"], stored["rows"]):
                from gpulint.linter.analysis.project import EMPTY_VIEW

                views = stored["views"]
                self._views = [
                    views.get(self._real(path), EMPTY_VIEW) if path.suffix == ".py" else None for path in self.files
                ]
        return [view.digest() if view is not None else "" for view in self.views()]

    def _still_valid(self, views: dict[str, ModuleView], rows: dict[str, list]) -> bool:
        """Whether the stored views hold: every file the index read is as it was, or changed
        without changing its summary (the entry's rows are rewritten for those)."""
        from gpulint.linter.run.project import module_identity, module_summary
        from gpulint.linter.run.stamps import recordable, stamp_of

        assert self.cache is not None
        now = time.time_ns()
        fresh: dict[str, list] = {}
        changed: list[tuple[str, bytes, str, list]] = []  # (path, its bytes now, their hash, its stored row)
        stamps: dict[str, tuple[int, int, int, int] | None] = {}
        for path, row in rows.items():
            stamp = stamps[path] = stamp_of(path)
            if stamp is not None and list(stamp) == row[:4]:
                continue
            try:  # (stat first, then read: a write in between makes the next run's stat differ)
                source = read_source(Path(path))
            except OSError:
                source = None
            source_hash = content_hash(source) if source is not None else ""
            fresh[path] = [*recordable(stamp, now), source_hash, row[5]]
            if source_hash != row[4]:
                if source is None or not row[5]:
                    return False  # (vanished, unreadable, or never summarized: solve again)
                changed.append((path, source, source_hash, row))
        if changed:
            budgeted = {self._real(path) for path in [*self.files, *self.project]}
            for path, source, source_hash, row in changed:
                found, before = self.cache.get_summary(row[5])
                if not found:
                    return False
                _module_id, dotted, package = module_identity(Path(path))
                budget = self.max_nodes if path in budgeted else None
                key, after = module_summary(self.cache, source, source_hash, dotted, package, budget)
                if (before.to_data() if before else None) != (after.to_data() if after else None):
                    return False
                fresh[path][5] = key
        if fresh:
            self.cache.put_index(self._index_key, views, {**rows, **fresh})
        for own in self.files:
            resolved = self._real(own)
            own_row = fresh.get(resolved) or rows.get(resolved)
            own_stamp = stamps.get(resolved)
            if own_row is not None and own_row[4] and own_stamp is not None:
                self.known[own] = (own_stamp[0], own_row[4])
        return True

    def views(self) -> list[ModuleView | None]:
        if self._views is None:
            self._views = self._build()
        return self._views

    def _build(self) -> list[ModuleView | None]:
        from gpulint.linter.analysis import parse_guard

        if self.jobs > 1 and parallel.summarize_in_pool([path for path, _budget in self._ahead()]):
            built = parallel.in_child(self._build_for_parent, meanwhile=self.warm_up)
            if built is not None:
                views, measured = built[0]
                for key, found in measured:  # (for the lint of the same bytes, as if measured here)
                    parse_guard.keep_measurement(key, found)
                return views
        return self._build_here(warm_up=True)

    def _build_for_parent(self) -> tuple[list[ModuleView | None], list]:
        """In the child process of `_build`: the views, and what the parse guard measured on the
        way (parse_guard.keep_measurement), for the process that lints."""
        from gpulint.linter.analysis import parse_guard

        views = self._build_here(warm_up=False)
        return views, list(parse_guard._MEASURED.items())

    def _build_here(self, warm_up: bool) -> list[ModuleView | None]:
        from gpulint.linter.analysis import parse_guard
        from gpulint.linter.run.project import RunIndex, module_summary

        now = time.time_ns()
        ahead = self._summarize_ahead(warm_up)
        summarized: dict[str, tuple[str, str]] = {}  # resolved path -> (content hash, summary key)

        def summary_of(path: Path, source: bytes, dotted: str, package: bool, budget: int | None):
            source_hash = content_hash(source)
            done = ahead.get((path, budget))
            if done is not None and done.source_hash == source_hash:
                key, summary = done.cache_key, done.summary
                if done.measured is not None:  # (for the lint of the same bytes, as if summarized here)
                    parse_guard.keep_measurement(*done.measured)
            else:
                key, summary = module_summary(self.cache, source, source_hash, dotted, package, budget)
            summarized[str(path)] = (source_hash, key)
            return summary

        index = RunIndex(
            self.files,
            summary_of,
            self.max_nodes,
            self.is_test,
            self.project,
            real_paths=self.real_paths,
            read_if_imported=self.read_if_imported,
        )
        views = [index.view(path) if path.suffix == ".py" else None for path in self.files]
        if self.cache is not None and self._index_key:
            own = {self._real(path): view for path, view in zip(self.files, views, strict=True) if view}
            self.cache.put_index(self._index_key, own, self._rows(index, summarized, now))
        return views

    def _summarize_ahead(self, warm_up: bool) -> dict[tuple[Path, int | None], Summarized]:
        """With workers, the summaries of what the index reads first -- the run's files and their
        projects', with the lint's budget of nodes -- computed in a worker pool by (resolved path,
        budget); the index takes each for the same bytes.  The modules they import from elsewhere
        are summarized here as the index follows them, as are the test files it reads only where
        imported (`read_if_imported`).  Without workers, or too few bytes of modules for a pool to
        pay, nothing.  `warm_up`: load what the lint starts with meanwhile (`warm_up`; not in a
        child process, whose parent does it)."""
        if self.jobs < 2:
            return {}
        return parallel.summarize_files(
            self._ahead(), self.cache, self.jobs, meanwhile=self.warm_up if warm_up else None
        )

    def _ahead(self) -> list[tuple[Path, int | None]]:
        """What `_summarize_ahead` summarizes: (resolved path, node budget) pairs."""
        if self._ahead_paths is None:
            paths = dict.fromkeys(
                Path(self._real(path))
                for path in [*self.project, *self.files]
                if path.suffix == ".py" and not self.read_if_imported(path)
            )
            self._ahead_paths = [(path, self.max_nodes) for path in paths]
        return self._ahead_paths

    def warm_up(self) -> None:
        """Load what the lint of the run's files starts with (libcst, the rules of the first file's
        settings), while the summaries are computed elsewhere (parallel.summarize_files)."""
        if self._first_settings is not None:
            self._first_settings.rule_classes(self._first_settings.enabled_codes())

    @staticmethod
    def _rows(index: RunIndex, summarized: dict[str, tuple[str, str]], started_ns: int) -> dict[str, list]:
        """The row of each file the index read: its stat data, the hash of its bytes and the key of
        the summary solved from them ("" for a file not summarized: it does not parse, or is a
        second file of one module).  A file the index summarized has the stat data it took just
        before reading the bytes it hashed (a write after that changes them: hashed next time);
        any other is stat'ed and read here, and if its bytes differ from those summarized (written
        during the run) it is recorded with the summarized hash and no stat data."""
        from gpulint.linter.run.stamps import UNKNOWN, recordable, stamp_of

        rows: dict[str, list] = {}
        for resolved in index.modules:
            path = str(resolved)
            read_stamp = index.read_stamp(resolved)
            if read_stamp is not None and path in summarized:
                rows[path] = [*read_stamp, *summarized[path]]
                continue
            stamp = stamp_of(path)
            try:
                source_hash = content_hash(read_source(resolved))
            except OSError:
                source_hash = ""
            summarized_hash, key = summarized.get(path, (source_hash, ""))
            if summarized_hash != source_hash:
                rows[path] = [*UNKNOWN, summarized_hash, key]
            else:
                rows[path] = [*recordable(stamp, started_ns), source_hash, key]
        return rows


def _discover(
    paths: list[Path], settings_for: Callable[[Path], Settings], walks: dict[Path, Walk]
) -> tuple[list[Path], list, dict[Path, str]]:
    """`discover` over each path with the exclude patterns of the configuration that applies there,
    and each file's real path.  `walks` gets each folder's walk, by its real path (a project index
    over the same folder, with the same configuration, takes it: `project_files`)."""
    found: dict[str, Path] = {}
    errors = []
    for path in paths:
        settings = settings_for(path)
        real_files, path_errors = discover_real([path], settings.exclude, settings.root)
        in_order = sorted(real_files.items(), key=lambda item: item[1].as_posix())
        if os.path.isdir(path) and not path_errors:
            patterns = (settings.exclude, settings.root)
            walks.setdefault(
                Path(os.path.realpath(path)), Walk(path, patterns, [f for _, f in in_order], [r for r, _ in in_order])
            )
        for real, file in in_order:
            found.setdefault(real, file)
        errors.extend(path_errors)
    files = sorted(found.values(), key=lambda p: p.as_posix())
    return files, list(dict.fromkeys(errors)), {file: real for real, file in found.items()}


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
    with parallel.collector_paced_for_lint():
        return _run(paths, settings, options, jobs, cache, progress, settings_for)


def _run(
    paths: list[Path],
    settings: Settings,
    options: RunOptions,
    jobs: int,
    cache: ResultCache | None,
    progress: Callable[[int, int], None] | None,
    settings_for: Callable[[Path], Settings] | None,
) -> RunResult:
    settings_for = settings_for or (lambda path: settings)
    walks: dict[Path, Walk] = {}
    files, path_errors, real_paths = _discover(paths, settings_for, walks)
    result = RunResult(path_errors=path_errors)
    if options.fix and not options.diff:
        options = replace(options, write_scope=WriteScope.of(paths))
        left = remove_stale_temporaries({path.parent for path in files}, options.write_scope)
        if left:
            result.warnings.append(f"removed {len(left)} temporary file(s) an interrupted --fix left behind")
    if cache is not None and (reason := cache.unusable_reason()) is not None:
        result.warnings.append(printable(f"{reason}; running without a cache"))
        cache = None
    # A run over test files alone (`gpulint tests`, lint-tests off) needs no index: only the rules
    # reported in test code run there, and the index would only give them the views the test files
    # of any other run get, none -- but where library code imports one (a test helper).
    project = (
        _ProjectViews(files, cache, settings_for, result.warnings, walks, jobs, real_paths)
        if options.project_index and any(p.suffix == ".py" and not settings_for(p).skips_tests(p) for p in files)
        else None
    )
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
                known = project.known.get(path) if project is not None else None
                outcomes[index] = _cached_outcome(
                    path, group_cache, group_settings.size_limit(path), digests[index], known
                )
        done = sum(o is not None for o in outcomes)
        pending = [i for i in members if outcomes[i] is None]
        views = project.views() if project is not None and pending else [None] * len(files)
        if progress is not None and done:
            progress(done, len(files))
        if jobs > 1 and len(pending) >= parallel.MIN_FILES_FOR_WORKERS:
            # Largest files first, so a big file is not the last one left while the other workers
            # idle (results are placed by index: the order of the outcomes does not change).
            pending.sort(key=lambda i: -parallel.file_size(files[i]))
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
