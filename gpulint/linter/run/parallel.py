"""Worker processes for linting and fixing, and the progress bar of long runs.

Files stream through a process pool in chunks, at most two chunks per worker being worked on, and
come back in the order the files were given whatever the scheduling (a slow file holds back the
outcomes after it, not the work on them); each worker builds its `Linter` once, and keeps no tree
after the file it came from.  Each file is independent, so `--fix` goes through the same pool: a
worker writes its own file atomically.

A worker can die (native code crashing on a hostile file): the pool then reports itself broken
instead of waiting forever.  Only the chunks in flight can hold the culprit; each of their files is
processed again alone in a one-worker pool, a file that kills that one too is reported as "could
not be analysed: the parser crashed", and the other files go on in a fresh pool.

Before the lint, a pool of its own summarizes the modules for the project index (`summarize_files`:
CPython's parser only, no libcst); if it breaks, the index summarizes them in this process.  A large
index is built in a child process of its own (`in_child`) that hands back only the views, so that
this process, which the lint's workers are forked from, never holds it.
"""

from __future__ import annotations

import _thread
import gc
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from gpulint.child_processes import SPAWN_CAN_LEAVE_OUT_WORKING_DIRECTORY, spawned_without_working_directory
from gpulint.linter.config import Settings
from gpulint.linter.engine import FileResult, Linter
from gpulint.linter.run.outcome import FileOutcome
from gpulint.linter.run.process import display_path, process_file_cached

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

    from rich.progress import Progress, TaskID

    from gpulint.linter.analysis.project import ModuleView
    from gpulint.linter.run.project import Summarized

# Below this many files to process, starting workers costs more than it saves (a parse is tens of
# milliseconds, a worker start about as much).
MIN_FILES_FOR_WORKERS = 4
# The project index's summaries take about a third of a millisecond of CPU per kilobyte of source
# (CPython's parser and two walks).  In a pool they run beside libcst's import (`summarize_files`)
# instead of before it, which pays for starting the workers once they hold about 30 ms of work:
# measured on 2 cores, wall time pooled against not, 52 KB of modules 3% slower, 85 KB (36
# modules) even, 153-155 KB 4-5% faster, 305 KB 8-15% faster.  What decides is the bytes, not the
# number of modules.
MIN_BYTES_FOR_SUMMARY_WORKERS = 96 * 1024

_worker: dict = {}
T = TypeVar("T")
# Where the pools fork (see _context).
FORK_IS_SAFE = sys.platform.startswith("linux")

# The cyclic collector's thresholds during a lint (gc.set_threshold; Python's are 700, 10, 10).
# libcst's trees are hundreds of thousands of small objects and hold no cycle (a node refers only
# to its children: reference counting frees them), so at Python's pace -- a pass every 700
# allocations, a full one as the heap grows -- the collector walks them again and again and frees
# next to nothing.  Measured on the 44 training scripts of the development corpus, `--jobs 1`: 642
# collections, a tenth of the run; at this pace 47, half the time, and no full collection.
LINT_COLLECTOR_THRESHOLDS = (10_000, 50, 10)


# How many runs in this process are at the lint's pace (runs in threads, as a test or a program
# embedding gpulint may start, overlap), and the thresholds to put back when the last one ends.
_paced_runs = 0
_paced_from: tuple[int, ...] = gc.get_threshold()
_paced_runs_lock = _thread.allocate_lock()


@contextmanager
def collector_paced_for_lint() -> Iterator[None]:
    """The cyclic collector at LINT_COLLECTOR_THRESHOLDS (workers forked meanwhile inherit it),
    as it was once the last run in this process that asked for it is over."""
    global _paced_runs, _paced_from
    with _paced_runs_lock:
        if _paced_runs == 0:
            _paced_from = gc.get_threshold()
            gc.set_threshold(*LINT_COLLECTOR_THRESHOLDS)
        _paced_runs += 1
    try:
        yield
    finally:
        with _paced_runs_lock:
            _paced_runs -= 1
            if _paced_runs == 0:
                gc.set_threshold(*_paced_from)


def default_jobs() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one, as in containers
    and under `taskset`), else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)


def _context():
    """The multiprocessing context the pools use; None where workers cannot be started without
    the working directory on their import path (the files are then processed in this process)."""
    # fork starts a worker in milliseconds with gpulint and libcst already imported; it is safe here
    # because the pool is created before this process starts any thread of its own (the progress
    # bar redraws from the main thread).  Elsewhere, the platform's default (spawn), which starts a
    # fresh interpreter: the pools run inside child_processes.spawned_without_working_directory,
    # which needs Python 3.11.
    import multiprocessing  # only runs with workers pay for its import

    if FORK_IS_SAFE:
        return multiprocessing.get_context("fork")
    if not SPAWN_CAN_LEAVE_OUT_WORKING_DIRECTORY:
        return None
    return multiprocessing.get_context()


def _init_worker(settings: Settings, options, cache) -> None:
    import signal

    # Ctrl-C goes to the whole process group; let the parent alone handle it (one message, exit 130).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.set_threshold(*LINT_COLLECTOR_THRESHOLDS)  # (a worker that was not forked does not inherit it)
    _worker["linter"] = Linter(settings)
    _worker["options"] = options
    _worker["cache"] = cache


def _work(items: list[tuple[Path, ModuleView | None]]) -> list:
    outcomes = [
        process_file_cached(path, _worker["linter"], _worker["options"], _worker["cache"], project)
        for path, project in items
    ]
    release_freed_memory()
    return outcomes


# glibc's malloc_trim, where the C library has one (None elsewhere); looked up on first use.
_malloc_trim: Callable[[int], int] | None | bool = False


def release_freed_memory() -> None:
    """Hand the memory freed since back to the operating system where the C library keeps it
    (glibc: `malloc_trim`; elsewhere nothing is done).  libcst's tree of a large module takes tens
    of megabytes, and glibc keeps what a freed tree leaves between the objects that outlive it: a
    worker that linted a 300 KB module held about 60 MB more until it ended, and the files come
    largest first.  A trim costs a few milliseconds after a large tree, a tenth of one when nothing
    was freed."""
    global _malloc_trim
    if _malloc_trim is False:
        _malloc_trim = None
        if sys.platform.startswith("linux"):
            import ctypes

            try:
                _malloc_trim = ctypes.CDLL(None).malloc_trim
            except (AttributeError, OSError):  # (musl and other C libraries have none)
                pass
    if callable(_malloc_trim):
        _malloc_trim(0)


def _pool(jobs: int, settings: Settings, options, cache) -> ProcessPoolExecutor:
    from concurrent.futures import ProcessPoolExecutor  # only runs with workers pay for multiprocessing

    context = _context()
    if context.get_start_method() == "fork":
        # The rules (and libcst) are loaded lazily, on the first file that needs a parse: with this
        # many files that is likely, so load them once here for the forked workers to share, rather
        # than once in every worker.
        settings.rule_classes(settings.enabled_codes())
        # What this process holds now (the rules, what is left of the project index) the workers
        # share until one writes to it, and the cyclic collector writes to every object it scans:
        # a worker's collection would copy all of it.  Frozen objects are not scanned.  (No
        # collection first: it took 20-30 ms before each pool, and what it would free -- the
        # cycles made since the last one, at the lint's pace -- is freed once the pool closes.)
        gc.freeze()
    return ProcessPoolExecutor(jobs, mp_context=context, initializer=_init_worker, initargs=(settings, options, cache))


def _close(pool: ProcessPoolExecutor, interrupted: bool) -> None:
    """Shut a pool down; when the run was interrupted, without waiting for the files in flight
    (a worker stopped mid-write leaves the file as it was: writes are atomic)."""
    if interrupted:
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()
    pool.shutdown(wait=True, cancel_futures=interrupted)
    gc.unfreeze()  # (the workers are gone: this process's objects are collected again)


def map_files(
    paths: Sequence[tuple[Path, ModuleView | None]], settings: Settings, options, cache, jobs: int
) -> Generator[FileOutcome, None, None]:
    """Outcomes of `paths` -- (path, its project view) pairs -- in order, computed by `jobs` worker
    processes (in this process where workers cannot be started safely: `_context`)."""
    context = _context()
    if context is None:
        linter = Linter(settings)
        yield from (process_file_cached(path, linter, options, cache, view) for path, view in paths)
        return
    with spawned_without_working_directory(context.get_start_method()):
        yield from _map_files(paths, settings, options, cache, jobs)


def _map_files(
    paths: Sequence[tuple[Path, ModuleView | None]], settings: Settings, options, cache, jobs: int
) -> Generator[FileOutcome, None, None]:
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    jobs = max(1, min(jobs, len(paths)))
    # Small chunks: the files come largest first, and a chunk of big files at the end would leave
    # the other workers idle; a task costs ~0.1 ms of IPC against tens of ms of parsing.
    chunksize = max(1, min(8, len(paths) // (jobs * 32)))
    chunks = [list(paths[i : i + chunksize]) for i in range(0, len(paths), chunksize)]
    following = 0  # the next chunk to submit
    while following < len(chunks):
        pool = _pool(jobs, settings, options, cache)
        # The chunks submitted and not yet handed out, in order.  Up to two per worker are being
        # worked on at a time; the outcomes of those done after one still running wait here --
        # waiting for the first before submitting more would leave a worker idle behind a big file.
        in_flight: deque[tuple[list, Future]] = deque()
        suspects: list[tuple[list, Future]] = []
        last: list = []
        interrupted = True
        try:
            while following < len(chunks) or in_flight:
                try:
                    # submit() too raises once a worker has died; the chunk it refused is sent
                    # again to the next pool (`following` has not moved past it).
                    running = [future for _, future in in_flight if not future.done()]
                    while following < len(chunks) and len(running) < 2 * jobs:
                        future = pool.submit(_work, chunks[following])
                        in_flight.append((chunks[following], future))
                        running.append(future)
                        following += 1
                    if not in_flight[0][1].done():
                        wait(running, return_when=FIRST_COMPLETED)
                        continue
                    outcomes = in_flight[0][1].result()
                except BrokenProcessPool:
                    suspects = list(in_flight)
                    break
                in_flight.popleft()
                if following == len(chunks) and not in_flight:
                    last = outcomes  # handed out once the pool is closed: the caller may stop here
                    break
                yield from outcomes
            interrupted = False
        finally:
            _close(pool, interrupted)
        yield from last
        for chunk, future in suspects:  # in order; a chunk that finished before the break is fine
            if future.done() and future.exception() is None:
                yield from future.result()
            else:
                yield from (_alone(item, settings, options, cache) for item in chunk)


def summarize_in_pool(paths: Sequence[Path], sizes: dict[Path, int] | None = None) -> bool:
    """Whether `summarize_files` starts a pool for the modules at `paths` (their sizes, when known):
    enough bytes of them (MIN_BYTES_FOR_SUMMARY_WORKERS)."""
    total = sum(sizes[path] for path in paths) if sizes is not None else sum(file_size(path) for path in paths)
    return total >= MIN_BYTES_FOR_SUMMARY_WORKERS


def _init_summary_worker(cache) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (as _init_worker)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # (a pool in `in_child`'s child: its pool stops it so)
    gc.set_threshold(*LINT_COLLECTOR_THRESHOLDS)
    from gpulint.linter.run.project import Folders

    _worker["cache"] = cache
    _worker["folders"] = Folders()  # (what the folders above the modules hold, listed once per worker)


def _summarize(item: tuple[Path, int | None]):
    from gpulint.linter.run.project import summarize_file

    return summarize_file(item[0], item[1], _worker["cache"], _worker["folders"])


def summarize_files(
    items: Sequence[tuple[Path, int | None]], cache, jobs: int, meanwhile: Callable[[], object] | None = None
) -> dict[tuple[Path, int | None], Summarized]:
    """The project index's summaries of `items` -- (resolved path, node budget) pairs -- computed
    by `jobs` worker processes (run/project.py `summarize_file`), by pair; a file that could not be
    read is left out.  Empty when the modules are too small for a pool to pay
    (MIN_BYTES_FOR_SUMMARY_WORKERS), where workers cannot be started safely (`_context`), or when
    the pool broke: the index then summarizes in this process (and meets the same problem there, as
    it would have without workers).

    `meanwhile()` runs in a thread of this process while the workers summarize, once they are
    started (forked before the thread exists): the lint's start-up work -- importing libcst and the
    rules, about a tenth of a second -- would otherwise leave a core idle after the pool ends.  It
    is done when this returns, so the lint's workers fork from a process with no thread of ours."""
    sizes = {path: file_size(path) for path, _budget in items}
    if not summarize_in_pool(list(sizes), sizes):
        return {}  # (before the imports a pool needs, which a run this small does without)
    import threading
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    context = _context()
    if context is None:
        return {}
    if context.get_start_method() == "fork":
        gc.freeze()  # (see _pool)
    # Largest first, in small chunks, for the reason map_files gives.
    ordered = sorted(items, key=lambda item: -sizes[item[0]])
    chunksize = max(1, min(8, len(ordered) // (jobs * 32)))
    with spawned_without_working_directory(context.get_start_method()):
        pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_init_summary_worker, initargs=(cache,))
        interrupted = True
        helper = None
        try:
            results = pool.map(_summarize, ordered, chunksize=chunksize)  # (submits all: the workers are forked)
            if meanwhile is not None:
                helper = threading.Thread(target=meanwhile, name="gpulint-warm-up", daemon=True)
                helper.start()
            found = dict(zip(ordered, results, strict=True))
            interrupted = False
        except BrokenProcessPool:
            found = {}
            interrupted = False
        finally:
            _close(pool, interrupted)
            if helper is not None:
                helper.join()
    return {item: summarized for item, summarized in found.items() if summarized is not None}


def in_child(work: Callable[[], T], meanwhile: Callable[[], object] | None = None) -> tuple[T] | None:
    """(what `work()` returns,) computed in a forked child process, which ends then; None where
    processes are not forked (`_context`), or when the child could not start, failed or died: the
    caller does the work itself (and meets the same error there, as it would have without the
    child).  What a large computation leaves behind -- the project index of a tree of two thousand
    modules took 120 MB, of which Python and the C library hand little back once freed -- then
    never enters this process, nor the workers forked from it later; only the result is copied
    back (pickled), so it must be small beside the work.  `meanwhile()` runs here while the child
    works.  An interruption (Ctrl-C) stops the child too, and its workers."""
    import signal

    context = _context()
    if context is None or context.get_start_method() != "fork":
        return None
    receiving, sending = context.Pipe(duplex=False)
    for stream in (sys.stdout, sys.stderr):  # (the child must not write what this process buffers again)
        stream.flush()
    child = context.Process(target=_send_result, args=(work, sending), name="gpulint-child", daemon=False)
    try:
        child.start()
    except (OSError, AssertionError):  # (no process left to start; a daemonic process may start none)
        receiving.close()
        sending.close()
        return None
    sending.close()
    finished = False
    try:
        if meanwhile is not None:
            meanwhile()
        try:
            result: tuple[T] | None = (receiving.recv(),)
        except (EOFError, OSError):  # (the child failed or died)
            result = None
        finished = True
    finally:
        receiving.close()
        if not finished and child.is_alive():
            os.kill(child.pid, signal.SIGTERM)  # (it stops as if interrupted: `_send_result`)
            child.join(10)
            if child.is_alive():
                child.kill()
        child.join()
    return result


def _send_result(work: Callable[[], object], sending) -> None:
    """In the child of `in_child`: send what `work()` returns and leave without the interpreter's
    teardown (nothing of this process's is the child's to flush or finalize); on any error or an
    interruption, leave without a word: the parent does the work itself, or is interrupted too.

    Only the parent stops the child, once (a Ctrl-C at a terminal reaches the whole process group:
    a second interruption while the first closes the child's own pool would leave its workers
    behind), by SIGTERM, which unwinds the work as an interruption would."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    code = 1
    try:
        sending.send(work())
        code = 0
    except BaseException:  # noqa: BLE001 - reported by the parent, which meets it again
        pass
    finally:
        os._exit(code)


def file_size(path: Path) -> int:
    """Its size in bytes (0 when it cannot be stat'ed: it is reported when it is read)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _alone(item: tuple[Path, ModuleView | None], settings: Settings, options, cache):
    """One file in a pool of its own: its outcome, or the report that it killed its worker."""
    from concurrent.futures.process import BrokenProcessPool

    pool = _pool(1, settings, options, cache)
    try:
        return pool.submit(_work, [item]).result()[0]
    except BrokenProcessPool:
        name = display_path(item[0])
        return FileOutcome(FileResult(name), errors=[f"{name}: could not be analysed: the parser crashed; skipped"])
    finally:
        pool.shutdown(wait=True)


class DelayedProgress:
    """A progress bar on standard error that appears only on a terminal and only once the run has
    taken more than `delay` seconds; it erases itself at the end.  Call it with (done, total)."""

    def __init__(self, delay: float = 1.0, enabled: bool | None = None, redraw_every: float = 0.1) -> None:
        self.delay = delay
        self.redraw_every = redraw_every
        self.started = time.monotonic()
        self._console = None
        if enabled is None:
            enabled = sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
        self.enabled = enabled
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._last_draw = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or done >= total:
            return
        now = time.monotonic()
        if self._progress is None:
            if now - self.started < self.delay:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            # auto_refresh=False: no redraw thread (worker processes are forked from this one).
            self._progress = Progress(
                TextColumn("gpulint"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
                auto_refresh=False,
            )
            self._progress.start()
            self._task = self._progress.add_task("files", total=total)
        if now - self._last_draw >= self.redraw_every:
            assert self._task is not None  # added with the bar above
            self._progress.update(self._task, completed=done, total=total)
            self._progress.refresh()
            self._last_draw = now

    @property
    def shown(self) -> bool:
        return self._progress is not None

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


ProgressCallback = Callable[[int, int], None]
