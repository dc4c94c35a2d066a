"""Started in the child as `python bootstrap.py (SCRIPT | -m MODULE) ARGS...`: instruments the
training frameworks when the user's code imports them, runs the user's code unchanged, stops it
after the configured steps, and writes what it measured to a JSON file for the parent.

This file is run by path, so it must import nothing from gpulint (the user's interpreter may not
have gpulint installed) and only the standard library at start-up: torch, TensorFlow and Keras are
instrumented by post-import hooks, so a TF script never pays for importing torch.

Configuration comes in the environment variable GPULINT_RT_CONFIG (JSON):
  out        path of the result JSON (written once, at the end, by rename)
  progress   path of a small progress JSON rewritten at most every 0.2 s (for the progress bar and
             for what a hung run got to)
  steps      measured steps after warm-up (or null with `seconds`)
  warmup     steps run and discarded before timing starts
  seconds    measure this long after warm-up (or null)
  syncs      on CUDA builds, record host-device sync lines (torch.cuda.set_sync_debug_mode)
  sys_path0  the directory to put first on sys.path instead of the script's own (`-m` runs)
  source     run the source in this file as if it were SCRIPT (verify's fixed arm): `__file__`,
             sys.path and tracebacks are the script's own, so the fixed code finds the files and
             modules next to the script, and no copy is ever written there
  stacks     sample the training thread's stack during the measured steps (default true)
  ops        {"steps": N, "trace": bool} or null: after the measured steps, profile N more with
             torch.profiler for the operator table and the trace (OpsWindow)
  sample_interval  seconds between two looks at that stack (default SAMPLE_INTERVAL)
  data_fns   names of the user's functions that make batches (`get_batch`, `module:function`):
             their calls are timed as data wait, like a DataLoader's `__next__`
  find_data_fn  look for such a function in the training loop (a call whose result the loop
             passes on, at the head of the loop or named like a batch source; default true)
  per_rank   started by a launcher (torchrun, accelerate launch): every rank writes `out` + ".rank<RANK>"
             and only local rank 0 writes progress
  parent     gpulint's process id: once that process is gone, however it ended (SIGKILL too), the
             training process ends its own process group (watch_parent)

Under `torchrun --nnodes N` (N > 1) every rank also records its node (torchrun's GROUP_RANK), the
host, and one id for the whole job that the ranks of every node agree on (JobAgreement), so the
node-by-node records can be merged.

Besides step and input times it records what the parent turns into capacity figures: the samples in
each DataLoader batch, DistributedDataParallel's own all-reduce timers, the FLOPs of one warm-up step
(torch's FlopCounterMode, by the math the device runs: fp32, tf32, bf16, ...) and, on CUDA, the
device memory peak.

Memory stays bounded however long the run: every step is reduced as it ends (StepClock), the
per-step series is down-sampled past SERIES_CAP steps, and DDP timers keep their first and latest
reads.

Clocks: every timestamp is time.monotonic(), which on Linux is one system-wide clock, so the
parent can line its CPU and GPU samples up with the child's measurement window.
"""

import functools
import gc
import importlib.abc
import importlib.util
import json
import linecache
import os
import random
import runpy
import select
import signal
import socket
import sys
import threading
import time
import traceback
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any

clock = time.monotonic
THIS_FILE = os.path.abspath(__file__)
SYNC_MESSAGE = "synchronizing CUDA operation"
SERIES_CAP = 4096  # per-step points (and step times for quantiles) kept before down-sampling


# The key of the step clock of backward() calls, beside the optimizers' (keyed by id, never 0).
BACKWARD_CLOCK = 0
# backward() passes with no optimizer step before they become the step clock: a loop that
# accumulates gradients makes a few before its optimizer's first step, and none of them may start
# the measurement (warm-up, the stack sampler) of a run an optimizer paces.
BACKWARD_ADOPTED = 8


class StepClock:
    """The steps of one source (an optimizer, Keras fit batches, tf.data batches), reduced as each
    one ends: totals over the measured window, the per-step series as (steps, seconds, seconds
    waiting for input) points (one step per point; past SERIES_CAP points, neighbours are summed
    pairwise and each point covers twice as many steps), and a uniform sample of step times (all
    of them up to SERIES_CAP) for quantiles."""

    def __init__(self, kind: str, name: str, warmup: int) -> None:
        self.kind, self.name, self.warmup = kind, name, warmup
        self.ends = 0  # step ends seen, warm-up included
        self.last_end: float | None = None
        self.window: list[float] | None = None  # [end of the last warm-up step, end of the last step]
        # the input fetch totals (State.fetched) when the last step ended
        self.fetched_at_end: tuple[float, int, int | None] = (0.0, 0, 0)
        self.fetched_at_start: tuple[float, int, int | None] = (0.0, 0, 0)
        self.measured = 0
        self.seconds = 0.0
        self.waited = 0.0
        self.width = 1  # steps per point of the series
        self.series: list[tuple[float, ...]] = []
        self.point: list[float] = [0, 0.0, 0.0]  # the point being filled
        self.sample: list[float] = []
        self._draw = random.Random(0).random

    def end(self, now: float, fetched: tuple) -> None:
        """A step ended at `now`; `fetched` is (seconds, calls, samples) of every input fetch so far."""
        self.ends += 1
        if self.ends > self.warmup:
            # warm-up is at least one step (State), and its last end set both
            assert self.last_end is not None and self.window is not None
            seconds, waited = now - self.last_end, fetched[0] - self.fetched_at_end[0]
            self.window[1] = now
            self.measured += 1
            self.seconds += seconds
            self.waited += waited
            point = self.point
            point[0] += 1
            point[1] += seconds
            point[2] += waited
            if point[0] == self.width:
                self.series.append(tuple(point))
                self.point = [0, 0.0, 0.0]
                if len(self.series) == SERIES_CAP:
                    # pairs by index, not zip(strict=): the user's interpreter running this may predate 3.10
                    old = self.series
                    self.series = [
                        (old[i][0] + old[i + 1][0], old[i][1] + old[i + 1][1], old[i][2] + old[i + 1][2])
                        for i in range(0, SERIES_CAP, 2)
                    ]
                    self.width *= 2
            if self.measured <= SERIES_CAP:  # reservoir sampling (Vitter's algorithm R)
                self.sample.append(seconds)
            else:
                slot = int(self._draw() * self.measured)
                if slot < SERIES_CAP:
                    self.sample[slot] = seconds
        elif self.ends == self.warmup:
            self.window = [now, now]
            self.fetched_at_start = fetched
        self.last_end = now
        self.fetched_at_end = fetched

    def result(self) -> dict:
        series = self.series + ([tuple(self.point)] if self.point[0] else [])
        return {
            "kind": self.kind,
            "name": self.name,
            "ends": self.ends,
            "window": self.window,
            "measured": self.measured,
            "seconds": self.seconds,
            "waited": self.waited,
            "batches": self.fetched_at_end[1] - self.fetched_at_start[1] if self.window else 0,
            "samples": _difference(self.fetched_at_end[2], self.fetched_at_start[2]) if self.window else None,
            "series": series,
            "sample": self.sample,
        }


def _difference(end, start):
    return None if end is None or start is None else end - start


# Library code on a sampled stack, by the path of its file: what kind of work it is.  Frames of
# other library files add nothing (a deep model's torch frames would make every stack distinct).
STACK_MARKS = (
    ("torch/serialization.py", "torch.save"),
    ("/pickle.py", "pickle"),
    ("/logging/", "logging"),
    ("torch/utils/tensorboard", "tensorboard"),
    ("torch/nn/", "forward"),
    ("torch/autograd/", "backward"),
    ("torch/_tensor", "tensor"),  # Tensor methods in Python: printing, formatting (backward: below)
    ("torch/optim/", "optimizer"),
    ("torch/distributed/", "distributed"),
    ("torch/utils/data/", "data"),
)
# Seconds between two looks at the training thread's stack.  Each look walks the stack while the
# training thread waits for the GIL; at 10 ms that cost 5-11% of a small CPU step
# (benchmarks/runtime_overhead.py), at 20 ms it is about half that, and a phase of 10% of a
# 50-step run of 20 ms steps is still seen about 5 times.
SAMPLE_INTERVAL = 0.02
SAMPLE_KEYS_CAP = 5000  # distinct stacks kept; the time of later new ones is counted as lost
TIMELINE_CAP = 20000  # looks kept in order for a trace (a few profiled steps: far fewer)


# The samplers started and not yet stopped.  A run stops its own when it finishes; a host that drives
# the hooks without finishing a run (the test suite) stops what is left with stop_all_samplers, so
# no thread keeps looking at a stack nobody will read.
RUNNING_SAMPLERS: set["StackSampler"] = set()


def stop_all_samplers() -> None:
    for sampler in list(RUNNING_SAMPLERS):
        sampler.stop()


class StackSampler:
    """Looks at the training thread's Python stack every SAMPLE_INTERVAL seconds during the
    measured steps and keeps the time of each distinct stack, reduced to the frames of the user's code
    (file, line, first line of the function) and marks for the library code between them
    (STACK_MARKS), outermost first, with what the thread was fetching ("train" or "eval" batches).
    Each look is weighted by the time since the previous one: code that holds the GIL (`.tolist()`,
    a pure-Python loop) keeps this thread waiting, and the stack it then sees is the one that held
    it, so counting looks alone would under-count exactly that work.  The parent (attribution.py)
    turns the seconds into the share of the step each phase and each line of the user's code takes."""

    def __init__(self, thread_id: int, interval: float = SAMPLE_INTERVAL, timeline: bool = False) -> None:
        self.thread_id, self.interval = thread_id, interval
        self.seconds: dict[tuple, float] = {}  # stack -> seconds of the looks that saw it
        self.counts: dict[tuple, int] = {}  # stack -> how many looks saw it
        # With `timeline` (the profiled steps of OpsWindow): every look in order, as (time, stack),
        # so a trace can show which phase ran when.
        self.timeline: list[tuple[float, tuple]] | None = [] if timeline else None
        self.looks = 0
        self.total = 0.0  # seconds covered by the looks
        self.overflow = 0.0  # seconds of looks that could not be kept (too many distinct stacks, errors)
        self.kinds: dict[Any, Any] = {}  # code object -> ("user", first line) | ("mark", name) | None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="gpulint-stack-sampler", daemon=True)
        self.libraries = _library_prefixes()

    def start(self) -> "StackSampler":
        RUNNING_SAMPLERS.add(self)
        self.thread.start()
        return self

    def stop(self) -> None:
        RUNNING_SAMPLERS.discard(self)
        self.done.set()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=1.0)

    def _run(self) -> None:
        last = clock()
        while not self.done.wait(self.interval):
            frame = sys._current_frames().get(self.thread_id)
            now = clock()
            weight, last = now - last, now
            if frame is None:
                return
            try:
                key = self.take(frame, weight)
                if self.timeline is not None and key in self.seconds and len(self.timeline) < TIMELINE_CAP:
                    self.timeline.append((now, key))
            except Exception:  # a sample is never worth breaking the user's run
                self.overflow += weight
            finally:
                del frame

    def take(self, frame, weight: float) -> tuple:
        """Count one look at `frame`'s stack, weighted `weight` seconds; returns the stack's key."""
        entries: list = []
        while frame is not None:
            code = frame.f_code
            kind = self.kinds.get(code, False)
            if kind is False:
                kind = self.kinds[code] = self._kind(code)
            if kind is not None:
                if kind[0] == "user":
                    entries.append((code.co_filename, frame.f_lineno, kind[1]))
                elif not entries or entries[-1] != kind[1]:
                    entries.append(kind[1])
            frame = frame.f_back
        entries.reverse()
        key = (STATE.fetching or "", tuple(entries))
        self.looks += 1
        self.total += weight
        if key in self.seconds:
            self.seconds[key] += weight
            self.counts[key] += 1
        elif len(self.seconds) < SAMPLE_KEYS_CAP:
            self.seconds[key] = weight
            self.counts[key] = 1
        else:
            self.overflow += weight
        return key

    def _kind(self, code):
        name = code.co_filename
        if name == THIS_FILE or name.startswith("<"):
            return None
        if _is_user_file(name, self.libraries):
            return ("user", code.co_firstlineno)
        path = name.replace(os.sep, "/")
        if path.endswith("torch/_tensor.py") and code.co_name == "backward":
            return ("mark", "backward")  # loss.backward()
        for part, mark in STACK_MARKS:
            if part in path:
                return ("mark", mark)
        return None

    def result(self) -> dict:
        result = {
            "interval": self.interval,
            "looks": self.looks,
            "seconds": self.total,
            "lost": self.overflow,
            "stacks": [
                {
                    "fetch": fetch,
                    "frames": [list(e) if isinstance(e, tuple) else e for e in entries],
                    "seconds": t,
                    "looks": self.counts[(fetch, entries)],
                }
                for (fetch, entries), t in self.seconds.items()
            ],
        }
        if self.timeline is not None:  # [time, index in "stacks"] per look
            index = {key: i for i, key in enumerate(self.seconds)}
            result["timeline"] = [[t, index[key]] for t, key in self.timeline]
        return result


JOB_KEY = "gpulint/job"  # the key in the launcher's store (one per restart of the job)
JOB_TIMEOUT_S = 60.0  # how long a rank waits to reach the store or for rank 0's id
JOB_WAIT_AT_END_S = 10.0  # how long the report waits for an agreement still under way


class JobAgreement:
    """One id for every rank of a multi-node job, so that what each node records can be merged.
    Global rank 0 draws it (the rendezvous id, `--rdzv-id`, and random hex: the same rendezvous
    id names every launch of a job) and sets it in the launcher's store -- the TCPStore at
    MASTER_ADDR:MASTER_PORT that torchrun's agents host for the workers, reachable from every node
    -- and every rank reads it there.  In a thread: the user's script never waits for it.  When
    the store cannot be reached, the id is the rendezvous id and the master address and port,
    which every node's ranks share for this launch too (said in `note`)."""

    def __init__(self, torch) -> None:
        self.torch = torch
        self.id: str | None = None
        self.note = ""
        self.thread = threading.Thread(target=self._run, name="gpulint-job-id", daemon=True)

    def start(self) -> "JobAgreement":
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            from datetime import timedelta

            store = self.torch.distributed.TCPStore(
                os.environ["MASTER_ADDR"],
                int(os.environ["MASTER_PORT"]),
                is_master=False,
                timeout=timedelta(seconds=JOB_TIMEOUT_S),
            )
            key = f"{JOB_KEY}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
            if STATE.rank == 0:
                run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")
                drawn = os.urandom(4).hex()
                store.set(key, drawn if run_id in ("", "none") else f"{run_id[:64]}-{drawn}")
            self.id = store.get(key).decode("utf-8", errors="replace")
        except Exception as exc:  # the id is worth less than the user's run
            self.note = f"the launcher's store was not reached ({exc.__class__.__name__}: {exc})"

    def result(self) -> dict:
        self.thread.join(JOB_WAIT_AT_END_S)
        if self.id is None:
            fallback = "{}@{}:{}".format(
                os.environ.get("TORCHELASTIC_RUN_ID", "none"),
                os.environ.get("MASTER_ADDR", "?"),
                os.environ.get("MASTER_PORT", "?"),
            )
            return {"id": fallback, "note": self.note or "no id from rank 0 in time: named by the master address"}
        return {"id": self.id, "note": ""}


# Once gpulint is gone, the training processes get this long to end on SIGTERM before SIGKILL.
PARENT_GONE_GRACE_S = 10.0


def watch_parent(pid) -> None:
    """End this process's group once gpulint (process `pid`) has exited, however it ended: the
    training run must not outlive the tool that started it, and a gpulint killed with SIGKILL had
    no chance to end it.  The group is this process with its loader workers: gpulint starts the
    child in a session of its own, and torchrun each rank.  In a thread that sleeps until then."""
    if not isinstance(pid, int) or not hasattr(os, "killpg"):
        return
    threading.Thread(target=_end_with_parent, args=(pid,), name="gpulint-parent-watch", daemon=True).start()


def _end_with_parent(pid: int) -> None:
    _wait_for_exit(pid)
    group = os.getpgrp()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(group, sig)
        except OSError:
            return
        time.sleep(PARENT_GONE_GRACE_S)  # (SIGTERM usually ends this process, and the thread with it)


def _wait_for_exit(pid: int) -> None:
    """Return once process `pid` has exited.  On Linux a pidfd becomes readable then (an exited
    process not yet reaped included); elsewhere the process is looked at every second (where a
    gpulint that was killed but not reaped still counts as running)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:  # already gone
        return
    except (AttributeError, OSError):  # no pidfd here: look every second
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            except OSError:  # (EPERM: alive)
                pass
            time.sleep(1.0)
    select.select([fd], [], [])


class StopProfiling(SystemExit):
    """Raised from a hook once enough steps are measured.  A SystemExit, so a user's
    `except Exception:` does not swallow it and `finally:` blocks still run."""

    def __init__(self) -> None:
        super().__init__(0)


OPERATORS_CAP = 1000  # operator rows kept, by self time (the totals cover them all)
FETCHES_CAP = 10000  # batch fetches kept for the trace of the profiled steps


class OpsWindow:
    """The steps profiled after the measured ones (`ops` in the config: `gpulint profile --ops` or
    `--trace`), so torch.profiler's overhead never reaches a timed step.  As the PyTorch profiler's
    schedule(wait=0, warmup=1, active=N) does, the first step after the measured window runs the
    profiler without recording (its start-up cost), then N steps are recorded: torch's operators
    (key_averages: self time on the CPU and the device; its Chrome trace when one is asked for),
    and, on the checker's own clock, the phases of those steps: each step, each training batch
    fetch, and the training thread's stack sampled in order (torch loops), for the parent to draw.

    Config: {"steps": N, "trace": bool}."""

    def __init__(self, config: dict, source, step: int, now: float, trace_path: str) -> None:
        self.source = source  # what ends a step: id(optimizer), "keras" or "tf"
        self.wanted = max(1, int(config.get("steps") or 1))
        self.first_step = step + 2  # the numbers of the recorded steps, warm-up steps included
        self.trace_path = trace_path if config.get("trace") else None
        self.ends = 0
        self.done = False
        self.last_end = now
        self.start: float | None = None  # end of the profiler's warm-up step
        self.steps: list[list[float]] = []  # [start, end] of each recorded step
        self.fetches: list[list[float]] = []  # [start, end] of each training batch fetch in them
        self.sampler: StackSampler | None = None
        self.profiler: Any = None
        self.operators: list[dict] | None = None
        self.totals: dict | None = None
        self.torch_trace: str | None = None  # torch's exported Chrome trace
        self.error: str | None = None  # why there are no operators
        # torch's trace is timed on the wall clock, this file on the monotonic one
        self.clock_offset = time.time() - clock()
        if source in ("keras", "tf"):
            self.error = "operators come from torch.profiler, and this is a TensorFlow loop"
        else:
            self._start_profiler()

    def _start_profiler(self) -> None:
        try:
            import torch
            from torch.profiler import ProfilerActivity, profile, schedule

            activities = [ProfilerActivity.CPU]
            if STATE.cuda and torch.cuda.is_initialized():
                activities.append(ProfilerActivity.CUDA)
            self.profiler = profile(
                activities=activities,
                schedule=schedule(wait=0, warmup=1, active=self.wanted, repeat=1),
                on_trace_ready=self._ready,
            )
            self.profiler.start()
        except Exception as exc:
            self.profiler = None
            self.error = f"torch.profiler unavailable: {exc.__class__.__name__}: {exc}"

    def _ready(self, profiler) -> None:
        """torch.profiler's on_trace_ready: the recorded steps are in."""
        try:
            rows = []
            for event in profiler.key_averages():
                # self_device_time_total since torch 2.4; self_cuda_time_total before
                device = getattr(event, "self_device_time_total", None)
                if device is None:
                    device = getattr(event, "self_cuda_time_total", 0)
                rows.append(
                    {
                        "name": event.key,
                        "calls": event.count,
                        "self_cpu": event.self_cpu_time_total / 1e6,
                        "self_device": (device or 0) / 1e6,
                    }
                )
            steps = [r for r in rows if r["name"].startswith("ProfilerStep")]
            rows = [r for r in rows if not r["name"].startswith("ProfilerStep")]
            rows.sort(key=lambda r: -(r["self_cpu"] + r["self_device"]))
            self.totals = {
                "self_cpu": sum(r["self_cpu"] for r in rows),
                "self_device": sum(r["self_device"] for r in rows),
                "rows": len(rows),
                # ProfilerStep#N spans a whole step: its self time is the host time outside any operator
                "outside_operators": sum(r["self_cpu"] for r in steps),
            }
            self.operators = rows[:OPERATORS_CAP]
            if self.trace_path:
                profiler.export_chrome_trace(self.trace_path)
                self.torch_trace = self.trace_path
        except Exception as exc:
            self.error = f"torch.profiler failed: {exc.__class__.__name__}: {exc}"

    def step_end(self, now: float) -> bool:
        """A step ended at `now`; True once the recorded steps are done."""
        self.ends += 1
        if self.ends == 1:
            self.start = now
            if self.source not in ("keras", "tf") and STATE.config.get("stacks", True):
                self.sampler = StackSampler(threading.get_ident(), timeline=True).start()
        else:
            self.steps.append([self.last_end, now])
        self.last_end = now
        if self.profiler is not None:
            # right after the step's end, so torch's ProfilerStep#N ends where this step does (the
            # sampler's looks after the last step, at torch's on_trace_ready, are cut off by the parent)
            try:
                self.profiler.step()
            except Exception as exc:
                self.profiler = None
                self.error = f"torch.profiler failed: {exc.__class__.__name__}: {exc}"
        return self.ends > self.wanted

    def fetch(self, start: float, end: float) -> None:
        if self.start is not None and not self.done and len(self.fetches) < FETCHES_CAP:
            self.fetches.append([start, end])

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        if self.sampler is not None:
            self.sampler.stop()
        if self.profiler is not None:
            try:
                self.profiler.stop()  # the script ended inside the recorded steps: what they got
            except Exception as exc:
                self.error = self.error or f"torch.profiler failed: {exc.__class__.__name__}: {exc}"
        if self.operators is None and self.error is None:
            self.error = "the script ended before a profiled step did"

    def result(self) -> dict:
        self.finish()
        return {
            "wanted": self.wanted,
            "first_step": self.first_step,
            "steps": self.steps,
            "fetches": self.fetches,
            "stacks": self.sampler.result() if self.sampler else None,
            "operators": self.operators,
            "totals": self.totals,
            "device": bool(self.totals and self.totals["self_device"] > 0),
            "torch_trace": self.torch_trace,
            "clock_offset": self.clock_offset,
            "error": self.error,
        }


def _env_int(name: str):
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


class State:
    def __init__(self, config: dict) -> None:
        self.config = config
        self.rank = _env_int("RANK")  # set by torchrun and accelerate for every worker
        self.local_rank = _env_int("LOCAL_RANK")
        self.world_size = _env_int("WORLD_SIZE")
        self.local_world_size = _env_int("LOCAL_WORLD_SIZE")
        # torchrun: the node's rank in the job and the number of nodes (GROUP_RANK, GROUP_WORLD_SIZE)
        self.node = _env_int("GROUP_RANK")
        self.nodes = _env_int("GROUP_WORLD_SIZE")
        self.job_agreement: JobAgreement | None = None  # multi-node jobs: started once torch is imported
        self.out = config["out"]
        self.progress_path = config.get("progress")
        if config.get("per_rank"):
            self.out = f"{self.out}.rank{self.rank or 0}"
            if self.local_rank:
                self.progress_path = None
        self.steps_wanted = config.get("steps")
        self.warmup = max(1, int(config.get("warmup") or 0))  # the first step end is the time origin
        self.seconds = config.get("seconds")
        self.pid = os.getpid()
        self.t_start = clock()
        self.optimizers: dict[int, StepClock] = {}  # id(optimizer) -> its steps (BACKWARD_CLOCK: see backward_done)
        self.optimizer_stepped = False
        self.backward_calls = 0
        self.data_functions_timed = False
        self.keras = StepClock("Keras batches", "fit", self.warmup)
        # A custom TF loop: the step of batch k ends when batch k+1 is asked for; the call that
        # ends an epoch (StopIteration) ends a step but starts none.
        self.tf = StepClock("tf.data batches", "tf.data", self.warmup)
        self.tf_last_ok = False
        # Inside DataLoader / tf.data __next__ (outside Keras fit) so far: seconds, calls, and the
        # samples of the batches (None once a batch's size could not be read).
        self.fetched: tuple[float, int, int | None] = (0.0, 0, 0)
        self.stop_time: float | None = None
        self.keras_active = 0  # > 0 while inside Model.fit: tf.data reads there are inside the step
        # "file:line" -> syncs in measured steps; syncs of the step under way wait in `syncs_pending`
        # until it ends (a sync after the last step is outside the window).
        self.syncs: dict[str, int] = {}
        self.syncs_pending: dict[str, int] = {}
        self.instrumented: list[str] = []
        self.notes: list[str] = []
        self.cuda = False
        self.own_sync = False  # True while this file synchronizes CUDA itself: not the user's sync
        self.stop_reason: str | None = None
        self.measure_start: float | None = None  # end of the last warm-up step
        self.last_progress = 0.0
        self.stopping = False
        # callables that remove the torch hooks (the overhead benchmark toggles them)
        self.uninstall: list[Callable[[], object]] = []
        # (weakref to a DistributedDataParallel model, its record in self.ddp)
        self.ddp_models: list[tuple[weakref.ref, dict]] = []
        # per model: {"config": {...}, "reads": [[time, iteration, avg comm ns, avg overlap ns]]}
        self.ddp: list[dict] = []
        # the FlopCounterMode while step 2 runs (Any: typing it would import torch at start-up)
        self.flop_counter: Any = None
        self.flop_optimizer: int | None = None  # id() of the optimizer whose step is counted
        self.flops: dict | None = None  # {"total", "by_math", "optimizer"} or {"error"}: see count_flops
        # CUDA bytes allocated between steps (no activations), at the end of warm-up
        self.steady_memory: int | None = None
        # What the training thread is fetching now: "train", "eval" (a batch read with gradients
        # off: a validation loader, which is not the training loop's data wait) or None.
        self.fetching: str | None = None
        self.loader: dict | None = None  # settings of the training DataLoader (num_workers, ...)
        self.sampler: StackSampler | None = None
        self.step_functions: list | None = None  # the user's functions on the stack of an optimizer step
        self.ops_window: OpsWindow | None = None  # the profiled steps after the measured ones
        # Where the training batches came from: source ("DataLoader", "tf.data", "Keras fit input",
        # or a user function "get_batch") -> [seconds, calls] in the whole run.
        self.sources: dict[str, list] = {}
        # The user's functions timed as data wait: {"name", "where" (file:line of its def), "how"
        # ("--data-fn" or "found": the call the training loop makes)}.
        self.data_functions: list[dict] = []
        # Keras fit batches whose input fetch was timed (see _timed_train_function), and why not
        self.keras_timed = 0
        self.keras_untimed: str | None = None

    # -- step events -----------------------------------------------------------------------
    def _check_stop(self, count: int, now: float, source) -> None:
        """`count` steps of the deciding source (id(optimizer), "keras" or "tf") have ended at `now`."""
        if count == self.warmup and self.measure_start is None:
            self.measure_start = now
        if now - self.last_progress > 0.2:
            self.last_progress = now
            self.write_progress(count)
        if self.stopping or count <= self.warmup:
            return
        if self.steps_wanted is not None and count >= self.warmup + self.steps_wanted:
            self.stop_reason = "steps"
        elif self.seconds is not None and self.measure_start is not None and now - self.measure_start >= self.seconds:
            self.stop_reason = "seconds"
        else:
            return
        self.stopping = True
        self.stop_time = now
        if self.sampler is not None:
            self.sampler.stop()
        self.write_progress(count)
        if self.config.get("ops") and self.ops_window is None:
            # the measured steps are done; the profiled ones follow (OpsWindow)
            # beside the report, under a name the parent's search for reports (`out.rank*`) never matches
            folder, name = os.path.split(self.out)
            trace = os.path.join(folder, f"torch-trace.{name}.json")
            self.ops_window = OpsWindow(self.config["ops"], source, count, now, trace)
            return
        raise StopProfiling()

    def _ops_step(self, source, now: float) -> None:
        """A step of `source` ended after the measured ones: the profiled steps' clock."""
        window = self.ops_window
        if window is None or window.done or window.source != source:
            return
        if window.step_end(now):
            window.finish()
            raise StopProfiling()

    def optimizer_step(self, optimizer) -> None:
        if not self.optimizer_stepped:
            # an optimizer paces the steps: the backward() clock of a loop without one goes
            self.optimizer_stepped = True
            self.optimizers.pop(BACKWARD_CLOCK, None)
        self._step_end(id(optimizer), type(optimizer).__name__, optimizer)

    def backward_done(self) -> None:
        """A backward pass ended.  In a loop that updates its weights by hand (no torch.optim
        optimizer, `p -= lr * p.grad`) each backward() is a training step; once an optimizer
        steps, its steps are the clock and backward() is not counted."""
        self.backward_calls += 1
        if not self.optimizer_stepped and self.backward_calls > BACKWARD_ADOPTED:
            self._step_end(BACKWARD_CLOCK, "backward() (no optimizer)", None)

    def _step_end(self, key: int, name: str, optimizer) -> None:
        if self.stopping:
            if self.ops_window is not None and not self.ops_window.done:
                if self.cuda:
                    _cuda_sync()
                self._ops_step(key, clock())
            return
        if self.cuda:
            _cuda_sync()  # CUDA runs asynchronously: a host timer alone would lie about step time
        now = clock()
        steps = self.optimizers.get(key)
        if steps is None:
            steps = self.optimizers[key] = StepClock("optimizer steps", name, self.warmup)
        steps.end(now, self.fetched)
        count = steps.ends
        if count > self.warmup:
            for where, syncs in self.syncs_pending.items():
                self.syncs[where] = self.syncs.get(where, 0) + syncs
        self.syncs_pending.clear()
        if self.flops is None and count <= 2 and optimizer is not None:
            self.count_flops(optimizer, count)
        if count == 1 and not self.data_functions_timed:
            # in warm-up: the first measured step already has its batches timed
            self.data_functions_timed = True
            _time_data_functions(sys._getframe(1))
        if count >= self.warmup:
            if count == self.warmup and self.cuda:
                self.steady_memory = _cuda_allocated()
            if count == self.warmup and self.step_functions is None:
                self.step_functions = _user_functions()
                # torch loops only: a Keras or tf.data step runs in TensorFlow's C++ under frames
                # that say nothing of what it does
                if self.config.get("stacks", True):
                    interval = self.config.get("sample_interval") or SAMPLE_INTERVAL
                    self.sampler = StackSampler(threading.get_ident(), interval).start()
            self.read_ddp_timers(now)
        self._check_stop(count, now, key)

    def fetch(self, start: float, end: float, samples=None, source: str = "DataLoader") -> None:
        seconds, calls, counted = self.fetched
        counted = None if counted is None or samples is None else counted + samples
        self.fetched = (seconds + end - start, calls + 1, counted)
        if self.ops_window is not None:
            self.ops_window.fetch(start, end)
        totals = self.sources.setdefault(source, [0.0, 0])
        totals[0] += end - start
        totals[1] += 1

    def count_flops(self, optimizer, count: int) -> None:
        """Count the FLOPs of step 2 (from the end of step 1 to the end of step 2 of the first
        optimizer that steps), a warm-up step, so the counter's own slowness never reaches a timed step."""
        if self.flop_counter is None and count == 1:
            if self.warmup < 2:
                self.flops = {"error": "FLOPs are counted in the second warm-up step: use --warmup 2 or more"}
                return
            try:
                self.flop_counter = _flop_counter()
                self.flop_counter.__enter__()
            except Exception as exc:
                self.flop_counter = None
                self.flops = {"error": f"FlopCounterMode unavailable: {exc.__class__.__name__}: {exc}"}
                return
            self.flop_optimizer = id(optimizer)
        elif self.flop_counter is not None and count == 2 and id(optimizer) == self.flop_optimizer:
            counter, self.flop_counter = self.flop_counter, None
            try:
                counter.__exit__(None, None, None)
                self.flops = {
                    "total": counter.get_total_flops(),
                    "by_math": counter.by_math,
                    "optimizer": type(optimizer).__name__,
                }
            except Exception as exc:
                self.flops = {"error": f"FlopCounterMode failed: {exc.__class__.__name__}: {exc}"}

    def read_ddp_timers(self, now: float) -> None:
        """DDP keeps running means of its own per-iteration timers; reading them at two step ends
        gives the all-reduce time of the iterations in between (see distributed.py in the parent).
        The first read (the end of warm-up) and the latest are kept, and the all-reduce wait so far
        at every step end up to SERIES_CAP steps (per step, it tells a rank's steady extra work from
        one slow step)."""
        for model_ref, record in self.ddp_models:
            model = model_ref()
            if model is None:
                continue
            try:
                data = model._get_ddp_logging_data()
            except Exception as exc:
                self.notes.append(f"could not read DDP timers: {exc.__class__.__name__}: {exc}")
                self.ddp_models = []
                return
            if not record["config"]:
                record["config"] = {key: data.get(key) for key in DDP_CONFIG_KEYS}
            read = [
                now,
                data.get("iteration"),
                data.get("avg_backward_comm_time"),
                data.get("avg_backward_compute_comm_overlap_time"),
            ]
            if len(record["reads"]) < 2:
                record["reads"].append(read)
            else:
                record["reads"][-1] = read
            waits = record.setdefault("waits", [])
            if waits is not None and len(waits) <= SERIES_CAP:
                iterations, comm, overlap = read[1] or 0, read[2] or 0, read[3] or 0
                waits.append([now, max(0, comm - overlap) * iterations])
            else:
                record["waits"] = None  # past the cap: the first and latest reads alone

    def keras_batch_end(self) -> None:
        if self.stopping:
            self._ops_step("keras", clock())
            return
        now = clock()
        self.keras.end(now, self.fetched)
        self._check_stop(self.keras.ends, now, "keras")

    def tf_fetch_start(self, now: float) -> None:
        if self.keras_active or self.optimizers:
            return
        if self.stopping:
            if self.tf_last_ok:
                self._ops_step("tf", now)
            return
        if self.tf_last_ok:
            self.tf.end(now, self.fetched)
        self._check_stop(self.tf.ends, now, "tf")

    def tf_fetch_end(self, start: float, ok: bool) -> None:
        if not self.keras_active:
            self.fetch(start, clock(), source="tf.data")
            self.tf_last_ok = ok

    def device_memory(self):
        torch = sys.modules.get("torch")
        if self.cuda and torch is not None:
            return _cuda_memory(torch, self.steady_memory)
        tf = sys.modules.get("tensorflow")
        if tf is not None:
            return _tf_memory(tf)
        return None

    def write_progress(self, count: int) -> None:
        if not self.progress_path:
            return
        _write_json(
            self.progress_path,
            {
                "steps": count,
                "warmup": self.warmup,
                "steps_wanted": self.steps_wanted,
                "seconds": self.seconds,
                "measure_start": self.measure_start,
                "now": clock(),
            },
        )

    def result(self, status: str, exit_code, error) -> dict:
        if self.sampler is not None:
            self.sampler.stop()
        if self.flop_counter is not None:
            self.flops = {"error": "the run ended inside the step whose FLOPs were being counted"}
        return {
            "format": 2,
            "pid": self.pid,
            "status": status,
            "exit_code": exit_code,
            "error": error,
            "t_start": self.t_start,
            "t_end": clock(),
            "warmup": self.warmup,
            "steps_wanted": self.steps_wanted,
            "seconds": self.seconds,
            "stop_reason": self.stop_reason,
            "stop_time": self.stop_time,
            "clocks": [c.result() for c in [*self.optimizers.values(), self.keras, self.tf] if c.ends],
            "fetches": self.fetched[1],
            "syncs": self.syncs,
            "cuda": self.cuda,
            "instrumented": self.instrumented,
            "notes": self.notes,
            "python": sys.version.split()[0],
            "rank": self.rank,
            "local_rank": self.local_rank,
            "world_size": self.world_size,
            "local_world_size": self.local_world_size,
            "node": self.node,
            "nodes": self.nodes,
            "host": socket.gethostname(),
            "job": self.job_agreement.result() if self.job_agreement else None,
            "ddp": self.ddp,
            "flops": self.flops,
            "memory": self.device_memory(),
            "stacks": self.sampler.result() if self.sampler else None,
            "step_functions": self.step_functions,
            "loader": self.loader,
            "ops": self.ops_window.result() if self.ops_window else None,
            "sources": self.sources,
            "data_functions": self.data_functions,
            "keras_timed": self.keras_timed,
            "keras_untimed": self.keras_untimed,
        }


# Set by main() before any hook is installed, so the hooks below never see None.
STATE: State = None  # type: ignore[assignment]


def _write_json(path: str, payload: dict) -> None:
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as handle:
        json.dump(payload, handle)
    os.replace(temporary, path)


def _cuda_sync() -> None:
    import torch

    if not torch.cuda.is_initialized():
        return  # a CPU run on a CUDA machine: synchronizing would create a context for nothing
    STATE.own_sync = True
    try:
        torch.cuda.synchronize()
    finally:
        STATE.own_sync = False


NO_BATCH = object()  # what a __next__ that raised (StopIteration at an epoch's end) delivered


def _timed_loader_next(original, torch):
    """DataLoader iterators' `__next__`, timed.  A batch read with gradients off is a validation
    (or evaluation) batch: it is not the training loop's data wait, and the stack sampler counts
    its time as validation (STATE.fetching)."""
    grad_enabled = torch.is_grad_enabled

    def __next__(self):
        if STATE.fetching is not None:  # inside a timed user function (--data-fn): it counts the time
            if STATE.loader is None and STATE.fetching == "train":
                STATE.loader = _loader_settings(self)
            return original(self)
        kind = "train" if grad_enabled() else "eval"
        STATE.fetching = kind
        start = clock()
        batch = NO_BATCH
        try:
            batch = original(self)
            return batch
        finally:
            end = clock()
            STATE.fetching = None
            if kind == "train":
                STATE.fetch(start, end, 0 if batch is NO_BATCH else _batch_samples(batch))
                if STATE.loader is None or STATE.loader.get("id") != id(self):
                    STATE.loader = _loader_settings(self)

    functools.update_wrapper(__next__, original, assigned=(), updated=())  # only __wrapped__
    return __next__


def _loader_settings(iterator) -> dict:
    """What the training DataLoader runs with: which fixes can still act on it."""
    dataset = getattr(iterator, "_dataset", None)
    return {
        "id": id(iterator),
        "num_workers": getattr(iterator, "_num_workers", None),
        "persistent_workers": getattr(iterator, "_persistent_workers", None),
        "pin_memory": getattr(iterator, "_pin_memory", None),
        "prefetch_factor": getattr(iterator, "_prefetch_factor", None),
        "dataset": type(dataset).__name__ if dataset is not None else None,
        "batches": _length(iterator),  # batches per epoch (None for an iterable dataset without one)
        # the step's own threads, which loader workers compete with for the cores
        "intra_op_threads": _intra_op_threads(),
    }


def _intra_op_threads():
    torch = sys.modules.get("torch")
    try:
        return torch.get_num_threads() if torch is not None else None
    except Exception:  # a torch without the call, or one that fails: not measured
        return None


def _length(iterator):
    try:
        return len(iterator)
    except Exception:  # an IterableDataset without __len__, or one whose __len__ fails
        return None


# -- batches made by the user's own function ---------------------------------------------------
# A callee whose name says it makes batches: `get_batch`, `load_data`, `next_sample`, ...
BATCH_NAME = ("batch", "data", "sample", "fetch", "load", "input", "next")
# Arguments that say a call fetches held-out batches (`get_batch('val')`): not the training data wait.
EVAL_SPLITS = ("val", "eval", "test", "dev", "holdout")


def _timed_data_function(function, name: str):
    """`function`, timed as data wait like a DataLoader's `__next__` (a call with gradients off, or
    asked for a validation split, is a validation fetch).  A call inside another timed fetch is
    that fetch's time, counted once; a call from another thread (a prefetching thread) is not the
    training thread waiting.  Wrapped from the training thread, at an optimizer step."""
    torch = sys.modules.get("torch")
    grad_enabled = torch.is_grad_enabled if torch is not None else (lambda: True)
    training_thread = threading.get_ident()

    @functools.wraps(function)
    def timed(*args, **kwargs):
        if STATE.fetching is not None or STATE.stopping or threading.get_ident() != training_thread:
            return function(*args, **kwargs)
        held_out = any(isinstance(a, str) and a.lower().startswith(EVAL_SPLITS) for a in (*args, *kwargs.values()))
        kind = "eval" if held_out or not grad_enabled() else "train"
        STATE.fetching = kind
        start = clock()
        batch = NO_BATCH
        try:
            batch = function(*args, **kwargs)
            return batch
        finally:
            end = clock()
            STATE.fetching = None
            if kind == "train":
                STATE.fetch(start, end, 0 if batch is NO_BATCH else _batch_samples(batch), name)

    timed.__gpulint_timed__ = True  # type: ignore[attr-defined]
    return timed


def _time_data_functions(frame) -> None:
    """At the first optimizer step: wrap the functions named by --data-fn, and (find_data_fn) the
    one the training loop calls for its batches, in the namespaces the loop looks them up in."""
    libraries = _library_prefixes()
    frames = []
    while frame is not None:
        if _is_user_file(frame.f_code.co_filename, libraries):
            frames.append(frame)
        frame = frame.f_back
    try:
        for spec in STATE.config.get("data_fns") or []:
            if not _wrap_named(spec, frames):
                STATE.notes.append(
                    f"--data-fn {spec}: no such function in the modules of the training loop; its calls are not timed"
                )
        if STATE.config.get("find_data_fn", True) and not STATE.data_functions:
            for found in frames:
                name = _loop_batch_call(found)
                if name is not None and _wrap_in(found.f_globals, name, "found"):
                    break
    except Exception as exc:  # never break the user's run for a measurement
        STATE.notes.append(f"could not time the batch function: {exc.__class__.__name__}: {exc}")
    finally:
        del frames


def _wrap_named(spec: str, frames: list) -> bool:
    """--data-fn NAME (a function in the training loop's modules) or MODULE:NAME."""
    module_name, _, name = spec.rpartition(":")
    if module_name:
        module = sys.modules.get(module_name)
        if module is None:
            import importlib

            module = importlib.import_module(module_name)
        target = getattr(module, name, None)
        if not isinstance(target, types.FunctionType):
            return False
        timed = _timed_data_function(target, name)
        setattr(module, name, timed)
        namespaces = [f.f_globals for f in frames]
    else:
        namespaces = [f.f_globals for f in frames]
        target = next((ns[name] for ns in namespaces if isinstance(ns.get(name), types.FunctionType)), None)
        if target is None:
            return False
        timed = _timed_data_function(target, name)
    for namespace in namespaces:  # `from data import get_batch` made a name of its own
        if namespace.get(name) is target:
            namespace[name] = timed
    _record_data_function(target, name, "--data-fn")
    return True


def _wrap_in(namespace: dict, name: str, how: str) -> bool:
    target = namespace.get(name)
    if not isinstance(target, types.FunctionType) or getattr(target, "__gpulint_timed__", False):
        return False
    namespace[name] = _timed_data_function(target, name)
    _record_data_function(target, name, how)
    return True


def _record_data_function(function, name: str, how: str) -> None:
    code = function.__code__
    STATE.data_functions.append({"name": name, "where": f"{code.co_filename}:{code.co_firstlineno}", "how": how})


def _loop_batch_call(frame) -> str | None:
    """The function a loop around this frame's current line calls for its batches: an assignment
    `x, y = get_batch(...)` in the loop whose targets the loop passes to another call, where the
    callee is a plain function of the user's code looked up as a global, and either the statement
    opens the loop's body or the callee is named like a batch source (nanoGPT fetches the next
    batch at the end of its micro-step loop)."""
    import ast

    code = frame.f_code
    # linecache: verify's fixed arm runs source that is not the file on disk (_run_source_as)
    try:
        tree = ast.parse("".join(linecache.getlines(code.co_filename)))
    except (SyntaxError, ValueError):
        return None
    row = frame.f_lineno
    scope: ast.AST = tree
    if code.co_name != "<module>":
        scope = next(
            (
                n
                for n in ast.walk(tree)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.name == code.co_name
                and min([n.lineno, *(d.lineno for d in n.decorator_list)]) == code.co_firstlineno
            ),
            tree,
        )
        if scope is tree:
            return None
    loops = [
        n
        for n in _own_nodes(scope)
        if isinstance(n, (ast.For, ast.While, ast.AsyncFor)) and n.lineno <= row <= (n.end_lineno or n.lineno)
    ]
    for loop in sorted(loops, key=lambda n: -n.lineno):  # innermost first
        passed = {  # names the loop passes to calls: `model(x)`, `model(**batch)`, `step(batch[0])`
            name.id
            for n in _own_nodes(loop)
            if isinstance(n, ast.Call)
            for a in [*n.args, *(k.value for k in n.keywords)]
            for name in ast.walk(a)
            if isinstance(name, ast.Name)
        }
        for node in _own_nodes(loop):
            if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
                continue
            callee = node.value.func
            if not isinstance(callee, ast.Name):
                continue
            targets = {t.id for target in node.targets for t in ast.walk(target) if isinstance(t, ast.Name)}
            opens = node is loop.body[0]
            if not targets & passed or not (opens or any(w in callee.id.lower() for w in BATCH_NAME)):
                continue
            function = frame.f_globals.get(callee.id)
            if isinstance(function, types.FunctionType) and _is_user_file(
                function.__code__.co_filename, _library_prefixes()
            ):
                return callee.id
    return None


def _own_nodes(scope):
    """The nodes of a function or loop, without those of the functions and classes it defines."""
    import ast

    pending = list(ast.iter_child_nodes(scope))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        pending.extend(ast.iter_child_nodes(node))


def _batch_samples(batch, depth: int = 0):
    """Samples in a batch: the leading dimension of its first tensor (in a tuple, list or dict)."""
    shape = getattr(batch, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else None
    if depth < 2:
        items = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (tuple, list)) else ()
        for item in items:
            found = _batch_samples(item, depth + 1)
            if found is not None:
                return found
    return None


# -- torch ---------------------------------------------------------------------------------
def instrument_torch(torch) -> None:
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils.data import dataloader

    handle = register_optimizer_step_post_hook(lambda optimizer, args, kwargs: STATE.optimizer_step(optimizer))
    iterator_class = dataloader._BaseDataLoaderIter
    original = iterator_class.__next__
    iterator_class.__next__ = _timed_loader_next(original, torch)  # type: ignore[method-assign]  # the hook
    # Tensor.backward calls torch.autograd.backward: its end is a step end in a loop without an
    # optimizer (State.backward_done)
    original_backward = torch.autograd.backward

    def backward(*args, **kwargs):
        result = original_backward(*args, **kwargs)
        STATE.backward_done()
        return result

    torch.autograd.backward = backward

    def uninstall():
        handle.remove()
        iterator_class.__next__ = original
        torch.autograd.backward = original_backward

    STATE.uninstall.append(uninstall)
    STATE.instrumented.append(f"torch {torch.__version__}")
    _watch_ddp(torch)
    if (STATE.nodes or 0) > 1 and "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
        STATE.job_agreement = JobAgreement(torch).start()
    if torch.cuda.is_available():
        STATE.cuda = True
        if STATE.config.get("syncs"):
            _watch_syncs(torch)
    else:
        STATE.notes.append("torch has no CUDA device here: no sync lines, no device timing")


DDP_CONFIG_KEYS = (
    "backend_name",
    "world_size",
    "bucket_cap_bytes",
    "find_unused_parameters",
    "gradient_as_bucket_view",
    "total_parameter_size_bytes",
    "device_ids",
)


def _watch_ddp(torch) -> None:
    """Every DistributedDataParallel model times its all-reduce on every iteration (DDP samples only
    a few by default), so the parent can tell the time spent waiting for collectives."""
    ddp_class = torch.nn.parallel.DistributedDataParallel
    original = ddp_class.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        try:
            self._set_ddp_runtime_logging_sample_rate(1)
        except Exception as exc:
            STATE.notes.append(f"DDP all-reduce not timed: {exc.__class__.__name__}: {exc}")
            return
        record = {"config": {}, "reads": []}
        STATE.ddp.append(record)
        STATE.ddp_models.append((weakref.ref(self), record))

    functools.update_wrapper(__init__, original, assigned=(), updated=())  # only __wrapped__
    ddp_class.__init__ = __init__
    STATE.uninstall.append(lambda: setattr(ddp_class, "__init__", original))


def _flop_counter():
    """torch's FlopCounterMode, also tallying FLOPs by the math the device runs them in."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    class MathFlopCounter(FlopCounterMode):
        def __init__(self) -> None:
            super().__init__(display=False)
            self.by_math: dict[str, int] = {}  # FLOPs by the math they run in (see _math_of)

        def _count_flops(self, func_packet, out, args, kwargs):
            before = self.flop_counts["Global"].get(func_packet, 0)
            result = super()._count_flops(func_packet, out, args, kwargs)
            added = self.flop_counts["Global"].get(func_packet, 0) - before
            if added:
                try:
                    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
                    convolution = "conv" in getattr(func_packet, "__name__", "")
                    math = _math_of(torch, first.dtype if first is not None else None, convolution)
                except Exception:  # a tally never breaks the user's step
                    math = "unknown"
                self.by_math[math] = self.by_math.get(math, 0) + added
            return result

    return MathFlopCounter()


def _math_of(torch, dtype, convolution: bool) -> str:
    """The arithmetic the device uses: fp32 matmuls run as TF32 when the user allowed it (and cuDNN
    convolutions do by default), which has its own, much higher, peak."""
    if dtype == torch.float32:
        if convolution:
            allowed = torch.backends.cudnn.allow_tf32
        else:
            allowed = torch.get_float32_matmul_precision() != "highest"
        return "tf32" if allowed else "fp32"
    names = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64"}
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
        if hasattr(torch, name):
            names[getattr(torch, name)] = "fp8"
    return names.get(dtype, str(dtype).replace("torch.", ""))


def _cuda_allocated():
    torch = sys.modules["torch"]
    try:
        return torch.cuda.memory_allocated() if torch.cuda.is_initialized() else None
    except Exception:
        return None


def _cuda_memory(torch, steady):
    """Peak device memory of the run on the current CUDA device (None when CUDA was never used)."""
    try:
        if not torch.cuda.is_initialized():
            return None
        device = torch.cuda.current_device()
        return {
            "source": "torch.cuda",
            "device": torch.cuda.get_device_name(device),
            "total": torch.cuda.get_device_properties(device).total_memory,
            "peak_allocated": torch.cuda.max_memory_allocated(device),
            "peak_reserved": torch.cuda.max_memory_reserved(device),
            "steady_allocated": steady,
        }
    except Exception as exc:
        return {"error": f"torch.cuda memory figures unavailable: {exc.__class__.__name__}: {exc}"}


def _tf_memory(tf):
    """TensorFlow's own peak on the first GPU (the total comes from NVML in the parent)."""
    try:
        if not tf.config.list_physical_devices("GPU"):
            return None
        info = tf.config.experimental.get_memory_info("GPU:0")
        return {
            "source": "tensorflow",
            "device": None,
            "total": None,
            "peak_allocated": info["peak"],
            "peak_reserved": None,
            "steady_allocated": None,
        }
    except Exception as exc:
        return {"error": f"TensorFlow memory figures unavailable: {exc.__class__.__name__}: {exc}"}


def _library_prefixes():
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple({paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths})


def _is_user_file(name: str, libraries: tuple) -> bool:
    """Code of the user's, not of torch, the standard library, installed packages or this file."""
    return (
        name != THIS_FILE
        and not name.startswith(libraries)
        and not name.startswith("<")
        and "site-packages" not in name
        and "dist-packages" not in name
        and f"{os.sep}torch{os.sep}" not in name
    )


def _user_frame():
    """The innermost frame of the user's code."""
    libraries = _library_prefixes()
    frame = sys._getframe(1)
    while frame is not None:
        if _is_user_file(frame.f_code.co_filename, libraries):
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back
    return None


def _user_functions():
    """The functions of the user's code on the stack, outermost first: (file, first line, name)."""
    libraries = _library_prefixes()
    found = []
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if _is_user_file(code.co_filename, libraries):
            found.append([code.co_filename, code.co_firstlineno, code.co_name])
        frame = frame.f_back
    return found[::-1]


def _watch_syncs(torch) -> None:
    previous = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if SYNC_MESSAGE not in str(message):
            return previous(message, category, filename, lineno, file, line)
        if STATE.own_sync or STATE.stopping:
            return None
        where = _user_frame() or (filename, lineno)
        key = f"{where[0]}:{where[1]}"
        STATE.syncs_pending[key] = STATE.syncs_pending.get(key, 0) + 1
        return None

    warnings.showwarning = showwarning
    # Every occurrence, not once per location: the count per step is the figure.
    warnings.filterwarnings("always", message=".*" + SYNC_MESSAGE)
    torch.cuda.set_sync_debug_mode("warn")
    STATE.instrumented.append("torch.cuda sync debug mode")


# -- TensorFlow / Keras --------------------------------------------------------------------
def instrument_tensorflow(tf) -> None:
    from tensorflow.python.data.ops import iterator_ops

    owned = iterator_ops.OwnedIterator
    original = owned.__next__

    def __next__(self):
        start = clock()
        STATE.tf_fetch_start(start)
        ok = False
        try:
            value = original(self)
            ok = True
            return value
        finally:
            STATE.tf_fetch_end(start, ok)

    functools.update_wrapper(__next__, original, assigned=(), updated=())  # only __wrapped__
    owned.__next__ = __next__
    STATE.instrumented.append(f"tensorflow {tf.__version__}")


def instrument_keras(keras) -> None:
    model_class = getattr(keras, "Model", None)
    if model_class is None or not hasattr(model_class, "fit"):
        return
    original_fit = model_class.fit

    class _StepCallback(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            STATE.keras_batch_end()

    original_make = getattr(model_class, "make_train_function", None)
    # Keras 3 runs its compiled one-batch step on a list of batches; Keras 2 would call next() on
    # it inside tf.function, so its fit is left as it runs (data wait not measured)
    major = str(getattr(keras, "__version__", "0")).split(".")[0]
    if original_make is not None and major.isdigit() and int(major) >= 3:

        def make_train_function(self, *args, **kwargs):
            made = original_make(self, *args, **kwargs)
            function = getattr(self, "train_function", None)
            if function is not None and not getattr(function, "__gpulint_timed__", False):
                self.train_function = _timed_train_function(self, function)
            return made

        functools.update_wrapper(make_train_function, original_make, assigned=(), updated=())
        model_class.make_train_function = make_train_function
    else:
        STATE.keras_untimed = f"Keras {major}: its compiled step reads the batch itself"

    def fit(self, *args, **kwargs):
        callbacks = list(kwargs.get("callbacks") or [])
        callbacks.append(_StepCallback())
        kwargs["callbacks"] = callbacks
        STATE.keras_active += 1
        try:
            return original_fit(self, *args, **kwargs)
        finally:
            STATE.keras_active -= 1

    functools.update_wrapper(fit, original_fit, assigned=(), updated=())  # only __wrapped__
    model_class.fit = fit
    STATE.instrumented.append(f"keras {getattr(keras, '__version__', '?')} fit callback")


def _timed_train_function(model: Any, function: Callable) -> Callable:
    """Keras fit's train function (TensorFlow backend), with the batch fetched and timed before the
    compiled step.  Keras compiles `iterator.get_next()` into the step for a tf.data iterator, where
    no Python timer sees it; given a list of batches instead it runs the same compiled one-batch
    step on each.  So for one step per execution on one device, this reads the batch from the
    iterator eagerly (the wait for the input pipeline, prefetch buffer included) and hands Keras
    that batch.  Anything else is left as Keras runs it, and data wait is not measured.

    An eager read has a fixed cost of its own (about half a millisecond on a CPU) that the compiled
    step does not pay: it is measured once, on the first batch held in memory, and taken off every
    read, so a pipeline that keeps up reads as no wait."""
    from tensorflow.python.data.ops import iterator_ops

    floor: list[float] = []  # the fixed cost of one eager read, once measured

    def train_function(iterator):
        if not isinstance(iterator, iterator_ops.OwnedIterator):
            STATE.keras_untimed = STATE.keras_untimed or "the input is not a tf.data iterator on one device"
            return function(iterator)
        if getattr(model, "steps_per_execution", 1) != 1:
            STATE.keras_untimed = "steps_per_execution > 1 runs several batches in one compiled call"
            return function(iterator)
        import tensorflow as tf

        STATE.fetching = "train"
        start = clock()
        try:
            batch = iterator.get_next()
        except tf.errors.OutOfRangeError:
            raise StopIteration from None  # what Keras's own train function raises at the end of the data
        finally:
            end = clock()
            STATE.fetching = None
        if not floor:
            floor.append(_eager_read_cost(tf, batch))
            STATE.notes.append(
                f"Keras fit: its batches are read before the compiled step to time the wait for input; the "
                f"{1000 * floor[0]:.2f} ms an eager read of a batch in memory takes is not counted as wait"
            )
        if not STATE.stopping:
            STATE.fetch(start, max(start, end - floor[0]), _batch_samples(batch), "Keras fit input")
            STATE.keras_timed += 1
        return function([batch])

    train_function.__gpulint_timed__ = True  # type: ignore[attr-defined]
    return train_function


def _eager_read_cost(tf, batch, reads: int = 21) -> float:
    """Median seconds of an eager `get_next` that waits for nothing: a dataset repeating `batch`."""
    try:
        probe = iter(tf.data.Dataset.from_tensors(batch).repeat())
        times = []
        for _ in range(reads):
            start = clock()
            probe.get_next()
            times.append(clock() - start)
        return sorted(times)[reads // 2]
    except Exception as exc:  # a batch structure from_tensors refuses: count every read whole
        STATE.notes.append(f"Keras fit: the cost of an eager read not measured ({exc.__class__.__name__})")
        return 0.0


# -- post-import hooks ---------------------------------------------------------------------
HOOKS = {"torch": instrument_torch, "tensorflow": instrument_tensorflow, "keras": instrument_keras}


def _run_hook(name: str, module) -> None:
    try:
        HOOKS[name](module)
    except Exception as exc:  # never break the user's script: say what is not measured instead
        STATE.notes.append(f"could not instrument {name}: {exc.__class__.__name__}: {exc}")


class PostImportFinder(importlib.abc.MetaPathFinder):
    """Runs a hook right after a watched top-level package finishes importing."""

    def __init__(self) -> None:
        self.busy: set[str] = set()  # packages being looked up: the find_spec below must not loop

    def find_spec(self, name, path=None, target=None):
        if name not in HOOKS or name in self.busy:
            return None
        self.busy.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            _run_hook(name, module)

        spec.loader.exec_module = exec_module
        return spec


# -- main ----------------------------------------------------------------------------------
def _run_source_as(path: str, script: str) -> None:
    """Run the code in `path` as `__main__` with `__file__` = `script` (runpy.run_path reads the
    code from the file it names, so it cannot do this)."""
    with open(path, "rb") as handle:
        source = handle.read()
    code = compile(source, script, "exec")
    # Tracebacks show the lines that ran, not the script's (an entry without mtime is kept).
    text = source.decode("utf-8", errors="replace")
    linecache.cache[script] = (len(text), None, text.splitlines(keepends=True), script)
    module = types.ModuleType("__main__")
    module.__file__ = script
    previous = sys.modules["__main__"]  # always there: this file runs as __main__
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    finally:
        sys.modules["__main__"] = previous


def _error_info(exc: BaseException) -> dict:
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if f.filename != THIS_FILE and "runpy" not in f.filename]
    where = f"{user[-1].filename}:{user[-1].lineno}" if user else None
    return {"type": exc.__class__.__name__, "message": str(exc), "where": where}


def main(argv) -> int:
    global STATE
    if not argv:
        print("gpulint bootstrap: usage: bootstrap.py (SCRIPT | -m MODULE) ARGS...", file=sys.stderr)
        return 2
    STATE = State(json.loads(os.environ.pop("GPULINT_RT_CONFIG")))
    watch_parent(STATE.config.get("parent"))
    for name in HOOKS:
        if name in sys.modules:
            _run_hook(name, sys.modules[name])
    sys.meta_path.insert(0, PostImportFinder())

    status, exit_code, error = "finished", 0, None
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = STATE.config.get("sys_path0") or os.getcwd()
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            script = os.path.abspath(argv[0])
            sys.argv = [argv[0], *argv[1:]]
            sys.path[0] = STATE.config.get("sys_path0") or os.path.dirname(script)
            if STATE.config.get("source"):
                _run_source_as(STATE.config["source"], script)
            else:
                runpy.run_path(script, run_name="__main__")
    except StopProfiling:
        status = "stopped"
    except SystemExit as exc:
        code = exc.code
        exit_code = code if isinstance(code, int) else (0 if code is None else 1)
        status = "exit" if exit_code else "finished"
        if exit_code:
            error = {"type": "SystemExit", "message": str(code), "where": None}
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
    except BaseException as exc:  # the script raised: show its traceback as Python would
        status, exit_code, error = "error", 1, _error_info(exc)
        traceback.print_exception(type(exc), exc, exc.__traceback__)
        if isinstance(exc, KeyboardInterrupt):
            exit_code = 130
    finally:
        if os.getpid() == STATE.pid:  # not in a forked worker that unwinds through here
            _write_json(STATE.out, STATE.result(status, exit_code, error))
    if status == "stopped":
        # The stopped script's objects (its frames went with the exception) are collected now,
        # while threads still run: a tf.data iterator over a Python generator left for the
        # interpreter's shutdown waits there for its producer thread, which can no longer take
        # the GIL, and the process never exits.
        gc.collect()
    sys.stdout.flush()
    sys.stderr.flush()
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
