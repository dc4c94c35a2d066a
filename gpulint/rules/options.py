"""Options that several rules read, declared once (a rule's own option is declared in its module)."""

from __future__ import annotations

from gpulint.linter.rule import RuleOption, positive_int, worker_expression

NUM_WORKERS = RuleOption(
    "num-workers",
    "min(8, os.cpu_count() or 1)",
    "Python expression the GL101 and GL801 fixes write as the number of loader worker processes.",
    check=worker_expression,
)
# The CPU cores of a node divided among its ranks (`torchrun` and `accelerate launch` set
# `LOCAL_WORLD_SIZE`; a single process reads 1): what one rank may give its loader workers.
CORES_PER_RANK = 'max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))'
# What the GL101 fix writes by default in a module that runs one process per GPU.
NUM_WORKERS_PER_RANK = f"min(8, {CORES_PER_RANK})"
LOG_EVERY = RuleOption(
    "log-every",
    100,
    "Interval (in steps) the GL302, GL201 and GL706 fixes guard logging with"
    " (at most: a loop of known length logs ten times a pass).",
    int,
    check=positive_int,
)
