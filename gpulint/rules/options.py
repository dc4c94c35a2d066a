"""Options that several rules read, declared once (a rule's own option is declared in its module)."""

from __future__ import annotations

from gpulint.linter.rule import RuleOption, positive_int, worker_expression

NUM_WORKERS = RuleOption(
    "num-workers",
    "min(8, os.cpu_count() or 1)",
    "Python expression the GL101 and GL801 fixes write as the number of loader worker processes.",
    check=worker_expression,
)
# How many ranks share a node, as each launcher tells them: `torchrun` and `accelerate launch` set
# `LOCAL_WORLD_SIZE`; the `deepspeed` launcher sets `LOCAL_SIZE` instead; `mp.spawn` sets neither,
# and its scripts start one process per GPU of the node.  A single process reads 1.
LOCAL_RANKS_TORCHRUN = 'int(os.environ.get("LOCAL_WORLD_SIZE", "1"))'
LOCAL_RANKS_DEEPSPEED = 'int(os.environ.get("LOCAL_SIZE", "1"))'
LOCAL_RANKS_SPAWN = "max(1, torch.cuda.device_count())"


def cores_per_rank(local_ranks: str = LOCAL_RANKS_TORCHRUN) -> str:
    """The CPU cores of a node divided among its ranks: what one rank may give its loader workers."""
    return f"max(1, (os.cpu_count() or 1) // {local_ranks})"


CORES_PER_RANK = cores_per_rank()
LOG_EVERY = RuleOption(
    "log-every",
    100,
    "Interval (in steps) the GL302, GL201 and GL706 fixes guard logging with"
    " (at most: a loop of known length logs ten times a pass).",
    int,
    check=positive_int,
)
