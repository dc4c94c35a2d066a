"""Measured runs built by hand, for tests that stub the child process."""

from __future__ import annotations

from gpulint.runtime_check.measure import RunResult, StepStats


def step_stats(times: list[float], waits: list[float] | None = None, warmup: int = 1, **fields) -> StepStats:
    """StepStats of measured steps with these times (and data waits), one point per step."""
    series = [(1, t, w) for t, w in zip(times, waits or [0.0] * len(times), strict=True)]
    return StepStats(
        "optimizer steps",
        warmup + len(times),
        warmup,
        len(times),
        sum(times),
        None if waits is None else sum(waits),
        series,
        list(times),
        **fields,
    )


def measured_run(times: list[float], **fields) -> RunResult:
    """A run stopped after measuring steps of these times."""
    run = RunResult("cmd", "stopped", 0, 1.0, **fields)
    run.steps = step_stats(times)
    return run
