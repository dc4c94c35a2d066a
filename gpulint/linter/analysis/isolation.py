"""Run one call in a child process, so a crash in native code costs that call and not the run.

libcst's parser is native code: on input deep enough it overflows the stack and the process dies
with SIGSEGV, which no `except` can catch.  `call_isolated` forks, runs the call in the child and
sends the result back through a pipe; a child that dies raises ChildCrashed in the parent.  The
result travels as a pickle between two processes of this run, never through a file.

Forking is cheap (the child shares the parent's loaded modules) but is only safe in a process with
one thread; elsewhere (no fork on the platform, or a host application with threads) the call runs
in this process.
"""

from __future__ import annotations

import faulthandler
import os
import threading
from collections.abc import Callable
from typing import Any


class ChildCrashed(Exception):
    """The child died before it could answer; `str()` says how (`SIGSEGV`, `exit status 3`)."""


def can_isolate() -> bool:
    return hasattr(os, "fork") and threading.active_count() == 1


def call_isolated(function: Callable[..., Any], *args: Any) -> Any:
    """`function(*args)`, computed in a forked child; its exception is raised here as it was
    raised there.  ChildCrashed when the child dies."""
    if not can_isolate():
        return function(*args)
    import pickle  # (here: only a source CPython rejects comes this way, and start-up is paid every run)

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer, then leave without running the parent's exit handlers
        status = 0
        try:
            faulthandler.disable()  # a crash here is expected and reported by the parent, not dumped
            os.close(read_fd)
            try:
                answer = (True, function(*args))
            except Exception as exc:  # noqa: BLE001 - handed to the parent to raise
                answer = (False, exc)
            try:
                payload = pickle.dumps(answer)
            except Exception as exc:  # noqa: BLE001 - an unpicklable result or exception
                payload = pickle.dumps((False, RuntimeError(f"{exc.__class__.__name__}: {exc}")))
            with os.fdopen(write_fd, "wb") as out:
                out.write(payload)
        except BaseException:  # noqa: BLE001 - whatever happens, the child must not return
            status = 70
        finally:
            os._exit(status)
    os.close(write_fd)
    try:
        with os.fdopen(read_fd, "rb") as handle:
            payload = handle.read()
    finally:
        _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        raise ChildCrashed(_signal_name(os.WTERMSIG(status)))
    if os.WEXITSTATUS(status) != 0 or not payload:
        raise ChildCrashed(f"exit status {os.WEXITSTATUS(status)}")
    ok, value = pickle.loads(payload)
    if not ok:
        raise value
    return value


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
