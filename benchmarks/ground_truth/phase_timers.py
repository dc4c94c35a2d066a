"""The phase timers that the ground-truth scripts beside this file time themselves with (gpulint's
own code, in none of the copied repositories).

A script names its phases once (`start`), wraps each piece of work in `with timed(phase):` and calls
`new_step()` at each optimizer step.  When the process exits the timers are written as JSON to
GT_TIMERS (or, with `per_rank`, to GT_TIMERS.rank<RANK>, one file per process under a launcher):
the seconds of each phase over the whole run, the number of steps, and `per_step`, a list of
{phase: seconds} from one optimizer step to the next (the first: the set-up before the first
step).  benchmarks/runtime_ground_truth.py reads `per_step` to know which phase dominated the
steps gpulint profiled, independently of gpulint; it puts this folder on the scripts' PYTHONPATH
(run a script by hand with PYTHONPATH=benchmarks/ground_truth).

Phases nest: time spent in an inner phase counts for it alone, not also for the phase around it,
so the phases of a step add up to the step.
"""

import atexit
import json
import os
import time
from contextlib import contextmanager

timers = {}  # seconds per phase over the run, and "steps"
per_step = [{}]  # each step's phases, from one optimizer step to the next (the first: set-up)
running = []  # the phases being timed, innermost last: an inner phase's time is not its outer's


def start(phases, per_rank=False):
    """Time `phases` (each starts at zero) and write the timers when the process exits."""
    timers.clear()
    timers.update(dict.fromkeys(phases, 0.0), steps=0)
    atexit.register(write_timers, per_rank)


def new_step():
    timers["steps"] += 1
    per_step.append({})


def _add(phase, seconds):
    timers[phase] += seconds
    per_step[-1][phase] = per_step[-1].get(phase, 0.0) + seconds


@contextmanager
def timed(phase):
    now = time.perf_counter()
    if running:
        _add(running[-1][0], now - running[-1][1])
    running.append([phase, now])
    try:
        yield
    finally:
        now = time.perf_counter()
        _add(phase, now - running.pop()[1])
        if running:
            running[-1][1] = now


def write_timers(per_rank):
    path = os.environ.get("GT_TIMERS")
    if path:
        if per_rank:
            path = f"{path}.rank{os.environ.get('RANK', '0')}"
        with open(path, "w") as handle:
            json.dump(dict(timers, per_step=per_step), handle)
