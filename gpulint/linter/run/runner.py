"""Run the linter over paths: discover the files, build the project index over them (each module's
view of the rest of the project: analysis/project.py), answer what the cache knows, process the
rest in this process or in worker processes, and collect the outcomes in the sorted order of the
files.  With `--fix`, files are written only inside the paths given (the run's write scope).
"""

from __future__ import annotations

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


def _cached_outcome(path: Path, cache: ResultCache, max_bytes: int, project: ModuleView | None) -> FileOutcome | None:
    try:
        source = read_source(path, max_bytes)
    except OSError:
        return None  # reported when the file is processed
    name = display_path(path)
    return cache.get(cache.key(path, name, content_hash(source), project.digest() if project is not None else ""), name)


def _project_views(files: list[Path], cache: ResultCache | None, settings: Settings) -> list[ModuleView | None]:
    """Each file's view of the project (run/project.py), the modules summarized once per content
    (through the cache when there is one; a module over the settings' `max_syntax_nodes` is not);
    the settings say which modules are test code."""
    from gpulint.linter.analysis.project import summarize
    from gpulint.linter.run.project import RunIndex

    def cached_summary(path: Path, source: bytes, dotted: str, package: bool, budget: int | None):
        assert cache is not None  # only handed to RunIndex when there is a cache
        key = cache.summary_key(dotted, package, content_hash(source))
        summary = cache.get_summary(key)
        if summary is None:
            summary = summarize(source, dotted, package, budget)
            if summary is not None:
                cache.put_summary(key, summary)
        return summary

    index = RunIndex(
        files, cached_summary if cache is not None else None, settings.max_syntax_nodes, settings.is_test_file
    )
    return [index.view(path) if path.suffix == ".py" else None for path in files]


def run(
    paths: list[Path],
    settings: Settings,
    options: RunOptions,
    jobs: int = 1,
    cache: ResultCache | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Lint (or fix) every file under `paths`; outcomes in the sorted order of the files.

    Cache hits are looked up here first, so a warm run over an unchanged tree starts no worker and
    parses nothing; the rest go to `jobs` worker processes (in this process when `jobs` is 1 or
    there are only a few files).  `progress(done, total)` is called as files finish."""
    files, path_errors = discover(paths, settings.exclude, settings.root)
    result = RunResult(path_errors=path_errors)
    if options.fix and not options.diff:
        options = replace(options, write_scope=WriteScope.of(paths))
        left = remove_stale_temporaries({path.parent for path in files}, options.write_scope)
        if left:
            result.warnings.append(f"removed {len(left)} temporary file(s) an interrupted --fix left behind")
    if cache is not None and (reason := cache.unusable_reason()) is not None:
        result.warnings.append(printable(f"{reason}; running without a cache"))
        cache = None
    views = _project_views(files, cache, settings) if options.project_index else [None] * len(files)
    outcomes: list[FileOutcome | None] = [None] * len(files)
    done = 0
    if cache is not None:
        for index, path in enumerate(files):
            outcomes[index] = _cached_outcome(path, cache, settings.size_limit(path), views[index])
        done = sum(o is not None for o in outcomes)
    pending = [i for i, o in enumerate(outcomes) if o is None]
    if progress is not None and done:
        progress(done, len(files))
    if jobs > 1 and len(pending) >= parallel.MIN_FILES_FOR_WORKERS:
        # Largest files first, so a big file is not the last one left while the other workers idle
        # (results are placed by index: the order of the outcomes does not change).
        pending.sort(key=lambda i: -_size(files[i]))
        stream = parallel.map_files([(files[i], views[i]) for i in pending], settings, options, cache, jobs)
    else:
        linter = Linter(settings)
        stream = (process_file_cached(files[i], linter, options, cache, views[i]) for i in pending)
    for index, outcome in zip(pending, stream, strict=False):
        outcomes[index] = outcome
        done += 1
        if progress is not None:
            progress(done, len(files))
    stream.close()  # zip stops before the generator ends: close it so the pool shuts down now
    if cache is not None and pending:  # entries were written (by this process or its workers)
        cache.evict()
    result.outcomes = [o for o in outcomes if o is not None]
    return result
