"""The language server's lint worker: a child process that runs the linter, and the handle the
server keeps on it.

The server never lints in its own process.  A document from the workspace may be built to cost
minutes and gigabytes (libcst's parser and the analyses grow much faster than the source), and an
editor sends a new version on every keystroke.  So each lint, fix or suppression edit is a job for
one child process (this module, run as `python -m gpulint.server.worker` would run it, but without
the working directory -- the workspace -- on its import path: gpulint/child_processes.py) that

- runs under an address-space limit (`RLIMIT_AS`, `memory_limit`): an allocation past it fails in
  the worker, never in the server, and the worker is replaced;
- is given `time_limit` seconds per job, after which it is killed and replaced;
- can be killed when its job is no longer wanted (`abandon`: a newer version of the document it is
  linting arrived), so a long lint of an old text never delays the lint of the new one.

Jobs and replies are pickles over the child's stdin and stdout, each preceded by its length: both
ends are this module, and the child is the server's own (a document's text is data in a job, never
code).  The child keeps the projects' linters between jobs, so a re-lint pays no start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import struct
import sys
import time
from dataclasses import dataclass
from typing import Any

from gpulint.child_processes import python_module_command
from gpulint.linter.run.safe_files import format_size
from gpulint.server.limits import DEFAULT_MEMORY_LIMIT, DEFAULT_TIME_LIMIT_S

START_TIME_LIMIT_S = 60.0  # a worker's start (interpreter, imports): about half a second
_LENGTH = struct.Struct(">Q")
# The jobs a worker runs: `Project` methods (the first argument names the file whose project's
# settings apply), and the suppression edit, which needs no project.
PROJECT_JOBS = ("lint", "lint_cells", "fix_changes", "line_fixes", "cell_fix_changes", "fix_all")
SUPPRESSION_JOB = "suppression_changes"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    memory_limit: int = DEFAULT_MEMORY_LIMIT  # bytes of address space, per worker process
    time_limit: float = DEFAULT_TIME_LIMIT_S  # seconds, per job


class JobFailed(Exception):
    """A job that gave no result; `str()` says why in one line (shown to the user)."""


class JobAbandoned(JobFailed):
    """A job whose worker was killed because its result was no longer wanted."""


# -- the server's side ---------------------------------------------------------------------------
class LintWorker:
    """The server's handle on its worker process: one job at a time; a worker that was killed or
    died is replaced at once (its successor starts while the server waits for other things)."""

    def __init__(self, limits: Limits, allow_local_rules: bool = False) -> None:
        self.limits = limits
        self.allow_local_rules = allow_local_rules  # `gpulint server --allow-local-rules`
        self._process: asyncio.subprocess.Process | None = None
        self._turn = asyncio.Lock()
        self._running: tuple[str, float] | None = None  # the running job's tag and start time
        self._abandoned = False
        self._closed = False
        self._successor: asyncio.Future[None] | None = None

    async def run(self, tag: str, job: str, *args: Any) -> Any:
        """The result of `job(*args)` in the worker; JobFailed when it fails, runs out of memory
        or time, or is abandoned.  `tag` names what the job is for (see `abandon`)."""
        async with self._turn:
            process = await self._started()
            assert process.stdin is not None and process.stdout is not None
            self._running, self._abandoned = (tag, time.monotonic()), False
            try:
                payload = pickle.dumps((job, args), protocol=pickle.HIGHEST_PROTOCOL)
                process.stdin.write(_LENGTH.pack(len(payload)) + payload)
                await process.stdin.drain()
                reply = await asyncio.wait_for(_read_frame(process.stdout), self.limits.time_limit)
            except asyncio.TimeoutError:
                self._stop(process)
                raise JobFailed(f"linting took longer than {self.limits.time_limit:g} s; skipped") from None
            except (asyncio.IncompleteReadError, ConnectionError):
                self._stop(process)
                raise self._death(await process.wait()) from None
            finally:
                self._running = None
        status, value = pickle.loads(reply)
        if status == "ok":
            return value
        if status == "exiting":  # the worker caught its own MemoryError and is leaving
            self._stop(process)
        raise JobFailed(value)

    async def start(self) -> None:
        """Start the worker now (it is otherwise started by the first job), so that the first
        lint does not wait for it; a worker that does not start is reported by that job."""
        async with self._turn:
            with contextlib.suppress(JobFailed):
                await self._started()

    def running(self, tag: str) -> float | None:
        """For how many seconds the job tagged `tag` has been running; None when it is not."""
        if self._running is None or self._running[0] != tag:
            return None
        return time.monotonic() - self._running[1]

    def abandon(self) -> None:
        """Kill the worker in the middle of its job (which then raises JobAbandoned)."""
        if self._process is not None and self._running is not None:
            self._abandoned = True
            self._stop(self._process)

    def close(self) -> None:
        self._closed = True
        if self._process is not None and self._process.returncode is None:
            self._process.kill()

    # -------------------------------------------------------------------------------------------
    async def _started(self) -> asyncio.subprocess.Process:
        """The worker process, started (and ready: its imports done, which the time limit of a job
        does not count) if need be."""
        if self._process is None or self._process.returncode is not None:
            process = await asyncio.create_subprocess_exec(
                *python_module_command(
                    "gpulint.server.worker",
                    str(self.limits.memory_limit),
                    str(self.limits.time_limit),
                    "allow-local-rules" if self.allow_local_rules else "no-local-rules",
                ),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            assert process.stdout is not None
            try:
                await asyncio.wait_for(_read_frame(process.stdout), START_TIME_LIMIT_S)
            except (asyncio.TimeoutError, asyncio.IncompleteReadError):
                if process.returncode is None:
                    process.kill()
                raise JobFailed("the lint process did not start; skipped") from None
            self._process = process
        return self._process

    def _stop(self, process: asyncio.subprocess.Process) -> None:
        """Kill `process` if it still runs, and have its successor start as soon as the current
        job's turn ends rather than when the next job comes.  (asyncio reaps the killed one.)"""
        if process.returncode is None:
            process.kill()
        if self._process is process:
            self._process = None
        if not self._closed:
            self._successor = asyncio.ensure_future(self.start())

    def _death(self, returncode: int | None) -> JobFailed:
        if self._abandoned:
            return JobAbandoned("abandoned for a newer version")
        if returncode is not None and returncode < 0:
            try:
                how = f"was killed by {signal.Signals(-returncode).name}"
            except ValueError:
                how = f"was killed by signal {-returncode}"
        else:
            how = f"exited with code {returncode}"
        return JobFailed(
            f"the lint process {how} (its memory limit is {format_size(self.limits.memory_limit)}); skipped"
        )


async def _read_frame(stream: asyncio.StreamReader) -> bytes:
    (length,) = _LENGTH.unpack(await stream.readexactly(_LENGTH.size))
    return await stream.readexactly(length)


# -- the worker's side ---------------------------------------------------------------------------
def _set_soft_limit(kind: str, value: int) -> None:
    """Lower (or raise again, up to the hard limit) one of this process's resource limits; nothing
    where the platform has none (Windows: the server's time limit still bounds a job there)."""
    try:
        import resource
    except ImportError:
        return
    which = getattr(resource, kind)
    _soft, hard = resource.getrlimit(which)
    try:
        resource.setrlimit(which, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))
    except (ValueError, OSError):  # macOS refuses some RLIMIT_AS values: the time limit still holds
        log.warning("gpulint lint worker: could not set %s; running without it", kind)


def _limit_cpu(seconds: float) -> None:
    """The kernel's own bound on the next job: twice its time limit in CPU seconds, after which
    SIGXCPU ends this process.  The server enforces the time limit; this ends a job whose server
    is gone (killed without closing our stdin first)."""
    try:
        import resource
    except ImportError:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _set_soft_limit("RLIMIT_CPU", int(usage.ru_utime + usage.ru_stime + 2 * seconds) + 1)


def _run_job(projects: Any, job: str, args: tuple) -> Any:
    from pathlib import Path

    from gpulint.server import engine_adapter as engine

    if job == SUPPRESSION_JOB:
        return engine.suppression_changes(*args)
    if job not in PROJECT_JOBS:
        raise ValueError(f"no job {job!r}")
    # Every Project job takes (text or cells, file name, ...): the file also selects the project.
    path, text, *rest = args
    return getattr(projects.for_path(Path(path)), job)(text, path, *rest)


def _write_frame(stream: Any, payload: bytes) -> None:
    stream.write(_LENGTH.pack(len(payload)) + payload)
    stream.flush()


def main(argv: list[str]) -> int:
    """Run jobs from stdin until it closes.  argv: memory limit in bytes, time limit in seconds,
    and `allow-local-rules` or `no-local-rules`."""
    # The replies own the real stdout; anything else the linter might print goes to stderr.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    jobs = sys.stdin.buffer
    memory_limit, time_limit = int(argv[0]), float(argv[1])
    _set_soft_limit("RLIMIT_AS", memory_limit)

    from gpulint.server import engine_adapter as engine

    projects = engine.Projects(allow_local_rules=argv[2] == "allow-local-rules")
    # The first lint imports what the rules import lazily: done here, before the time limit runs.
    engine.Project(None).lint("import torch\n", "warm_up.py")
    _write_frame(replies, pickle.dumps(("ready", None)))
    while True:
        header = jobs.read(_LENGTH.size)
        if len(header) < _LENGTH.size:
            return 0
        (length,) = _LENGTH.unpack(header)
        job, args = pickle.loads(jobs.read(length))
        _limit_cpu(time_limit)
        try:
            reply: tuple[str, Any] = ("ok", _run_job(projects, job, args))
        except MemoryError:
            reply = ("exiting", f"linting ran out of memory (limit {format_size(memory_limit)}); skipped")
        except engine.SettingsError as exc:
            reply = ("failed", str(exc))
        except Exception as exc:  # a bug: its traceback goes to the server's log, a short line to the user
            log.exception("gpulint lint worker: %s failed", job)
            reply = ("failed", f"internal error ({type(exc).__name__}); the details are in the server's log")
        _write_frame(replies, pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))
        if reply[0] == "exiting":  # a fresh worker starts with all its memory free
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
