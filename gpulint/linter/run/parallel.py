"""Worker processes for linting and fixing, and the progress bar of long runs.

Files stream through a process pool (`imap` with a chunk size, so results come back in the order
the files were given whatever the scheduling); each worker builds its `Linter` once, and keeps no
tree after the file it came from.  Each file is independent, so `--fix` goes through the same
pool: a worker writes its own file atomically.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.run.process import process_file_cached

# Below this many files to process, starting workers costs more than it saves (a parse is tens of
# milliseconds, a worker start about as much).
MIN_FILES_FOR_WORKERS = 4

_worker: dict = {}


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
    # fork starts a worker in milliseconds with gpulint and libcst already imported; it is safe here
    # because the pool is created before this process starts any thread of its own (the progress
    # bar redraws from the main thread).  Elsewhere, the platform's default (spawn).
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def _init_worker(settings: Settings, options, cache) -> None:
    # Ctrl-C goes to the whole process group; let the parent alone handle it (one message, exit 130).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker["linter"] = Linter(settings)
    _worker["options"] = options
    _worker["cache"] = cache


def _work(path: Path):
    return process_file_cached(path, _worker["linter"], _worker["options"], _worker["cache"])


def map_files(paths: Sequence[Path], settings: Settings, options, cache, jobs: int) -> Iterator:
    """Outcomes of `paths` in order, computed by `jobs` worker processes."""
    jobs = max(1, min(jobs, len(paths)))
    # Small chunks: the files come largest first, and a chunk of big files at the end would leave
    # the other workers idle; a task costs ~0.1 ms of IPC against tens of ms of parsing.
    chunksize = max(1, min(8, len(paths) // (jobs * 32)))
    with _context().Pool(jobs, initializer=_init_worker, initargs=(settings, options, cache)) as pool:
        yield from pool.imap(_work, paths, chunksize)


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
        self._progress = None
        self._task = None
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
