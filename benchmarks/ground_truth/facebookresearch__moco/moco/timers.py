# The script's own phase timers, added for gpulint's ground-truth suite (not in facebookresearch/moco):
# seconds per phase and per step, written as JSON to GT_TIMERS.rank<RANK> when the process exits.

import atexit
import json
import os
import time
from contextlib import contextmanager

PHASES = ("data", "compute", "collectives", "logging", "checkpoint", "straggle")
timers = dict.fromkeys(PHASES, 0.0)
timers["steps"] = 0
per_step = [{}]  # each step's phases, from one optimizer step to the next (the first: set-up)
running = []  # the phases being timed, innermost last: an inner phase's time is not its outer's


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


def write_timers():
    if os.environ.get("GT_TIMERS"):
        with open(f"{os.environ['GT_TIMERS']}.rank{os.environ.get('RANK', '0')}", "w") as handle:
            json.dump(dict(timers, per_step=per_step), handle)


atexit.register(write_timers)
