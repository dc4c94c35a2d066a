"""Options that several rules read, declared once (a rule's own option is declared in its module)."""

from __future__ import annotations

from gpulint.linter.rule import RuleOption, positive_int, worker_expression

NUM_WORKERS = RuleOption(
    "num-workers",
    "min(8, os.cpu_count() or 1)",
    "Python expression the GL101 and GL801 fixes write as the number of loader worker processes.",
    check=worker_expression,
)
LOG_EVERY = RuleOption(
    "log-every",
    100,
    "Interval (in steps) the GL302, GL201 and GL706 fixes guard logging with"
    " (at most: a loop of known length logs ten times a pass).",
    int,
    check=positive_int,
)
