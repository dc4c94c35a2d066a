import os
import secrets
import signal
import time
from pathlib import Path

import pytest

# Never let a developer's terminal settings change what the CLI prints in tests.
os.environ.setdefault("NO_COLOR", "1")

# The training scripts that tests/test_fixed_scripts.py runs: one of them is a test file of its own.
collect_ignore = ["fixed_scripts"]

# Every process a test starts is ended by the test or its fixture: a language server's worker or a
# training run left behind would go on using the cores that the tests after it are timed on.  Each
# process that runs tests gives the programs it starts a mark in their environment (inherited by
# theirs, even by those reparented when their parent died), and after each test module looks for
# processes that carry it, and for children of its own, that are still running.
LEFTOVER_MARK = "GPULINT_TEST_PROCESS"
os.environ[LEFTOVER_MARK] = f"{os.getpid()}-{secrets.token_hex(4)}"
# Helpers the interpreter keeps for as long as it runs (multiprocessing's), which end with it.
LIFELONG_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")
# A process a fixture's teardown ended may take a moment to be gone (on a loaded machine, more):
# the wait ends as soon as none is left, so only a process that never ends costs the whole of it.
LEFTOVER_GRACE_S = 60.0
PROC = Path("/proc")


def _own_children() -> set[int]:
    children: set[int] = set()
    for task in (PROC / "self" / "task").iterdir():
        try:
            children.update(int(pid) for pid in (task / "children").read_text().split())
        except OSError:
            pass
    return children


def _leftovers() -> dict[int, str]:
    """The running processes that this one started (directly, or marked): pid -> command line."""
    mark = f"{LEFTOVER_MARK}={os.environ[LEFTOVER_MARK]}".encode()
    children = _own_children()
    found: dict[int, str] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if int(entry.name) not in children and mark not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X"):
                continue  # it has ended; only not yet reaped
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, IndexError):  # gone meanwhile, or not ours to read
            continue
        if not any(helper in command for helper in LIFELONG_HELPERS):
            found[int(entry.name)] = command
    return found


@pytest.fixture(scope="module", autouse=True)
def no_process_outlives_its_module(request):
    """Fail a module whose tests leave a process running (and end that process)."""
    yield
    if not (PROC / "self" / "task").is_dir():
        return  # no /proc to look in (not Linux)
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while (left := _leftovers()) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not left:
        return
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
            if pid in _own_children():
                os.waitpid(pid, 0)
        except (OSError, ChildProcessError):
            pass
    listed = "\n".join(f"  {pid}: {command[:300]}" for pid, command in sorted(left.items()))
    pytest.fail(f"processes still running after the tests of {request.node.nodeid}:\n{listed}", pytrace=False)
