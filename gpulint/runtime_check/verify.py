"""`gpulint verify`: is the fixed script faster?  Original (A) and fixed copy (B) run interleaved,
A B B A A B ..., R runs each, on the same machine in the same session (DESIGN §1.5, §3).

The fixed copy lives in a temporary folder; it imports its siblings from the original folder (the
bootstrap puts that first on sys.path).  The user's script is written only with `--write`, only
after a confirmed speedup, and atomically.
"""

from __future__ import annotations

import random
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.runtime_check.measure import Command, RunConfig, RunResult, run_once

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95


class VerifyError(Exception):
    """Cannot verify (nothing to fix, a fix that does not apply): one line for the user."""


@dataclass
class Arm:
    name: str  # "original" or "fixed"
    runs: list[RunResult] = field(default_factory=list)

    @property
    def run_times(self) -> list[float]:
        """Mean step time of each run (its measured window over its steps): throughput.  Not a
        per-step median: loader workers deliver batches in bursts (two workers, two batches at
        once, then a wait), so step times are bimodal and their median misleads."""
        return [r.steps.total_time / r.steps.count for r in self.runs if r.ok]

    @property
    def median(self) -> float:
        return statistics.median(self.run_times)

    @property
    def spread(self) -> tuple[float, float]:
        return min(self.run_times), max(self.run_times)


@dataclass
class Comparison:
    speedup: float  # original median / fixed median: > 1 is faster
    interval: tuple[float, float]  # bootstrap interval of the speedup
    ranges_clear: bool  # every fixed run faster than every original run (or the reverse)
    outcome: str  # confirmed | not confirmed | slowdown


@dataclass
class VerifyResult:
    script: str
    codes: list[str]
    applied: int
    diff: str
    original: Arm
    fixed: Arm
    order: list[str]
    comparison: Comparison | None = None
    failed: RunResult | None = None  # the run that failed, if one did
    failed_arm: str | None = None
    written: bool = False


def fix_script(script: Path, codes: list[str] | None) -> tuple[bytes, bytes, int]:
    """(original, fixed, fixes applied) using the linter's own fixer, unsafe fixes included."""
    from gpulint.linter.analysis.parse import SyntaxErrorInSource
    from gpulint.linter.config import ConfigError, Settings, validate
    from gpulint.linter.engine import Linter
    from gpulint.linter.fix.passes import fix_source

    settings = Settings(select=codes)
    try:
        validate(settings)
    except ConfigError as exc:
        raise VerifyError(str(exc)) from exc
    source = script.read_bytes()
    try:
        outcome = fix_source(Linter(settings), source, str(script), unsafe=True)
    except SyntaxErrorInSource as exc:
        raise VerifyError(f"{script} does not parse: {exc}") from exc
    if outcome.errors:
        raise VerifyError("; ".join(outcome.errors))
    return source, outcome.source, outcome.applied


def interleaved(runs: int) -> list[str]:
    """A B B A A B B A ...: each arm goes first as often as the other, so drift cancels."""
    order: list[str] = []
    for i in range(runs):
        order += ["A", "B"] if i % 2 == 0 else ["B", "A"]
    return order


def compare(a: list[float], b: list[float], seed: int = 0) -> Comparison:
    """Speedup of B over A from per-run step times (the median of each arm)."""
    speedup = statistics.median(a) / statistics.median(b)
    rng = random.Random(seed)
    ratios = sorted(
        statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b)))
        for _ in range(BOOTSTRAP_RESAMPLES)
    )
    tail = (1 - CONFIDENCE) / 2
    low = ratios[int(tail * (len(ratios) - 1))]
    high = ratios[int((1 - tail) * (len(ratios) - 1))]
    faster_clear = max(b) < min(a)
    slower_clear = min(b) > max(a)
    if faster_clear or low > 1:
        outcome = "confirmed"
    elif slower_clear or high < 1:
        outcome = "slowdown"
    else:
        outcome = "not confirmed"
    return Comparison(speedup, (low, high), faster_clear or slower_clear, outcome)


def verify(script: Path, args: list[str], codes: list[str] | None, runs: int, config: RunConfig,
           interpreter: str, write: bool = False, progress=None) -> VerifyResult:
    from gpulint.linter.fix.fixer import write_atomic
    from gpulint.linter.run.process import unified_diff

    if not script.is_file():
        raise VerifyError(f"script {script} does not exist")
    source, fixed, applied = fix_script(script, codes)
    if not applied:
        raise VerifyError(f"nothing to fix in {script} for {','.join(codes) if codes else 'the default rules'}")
    result = VerifyResult(str(script), codes or [], applied, unified_diff(source, fixed, str(script)),
                          Arm("original"), Arm("fixed"), interleaved(runs))
    original_dir = str(script.resolve().parent)
    with tempfile.TemporaryDirectory(prefix="gpulint-verify-") as folder:
        copy = Path(folder) / script.name
        copy.write_bytes(fixed)
        arms = {
            "A": (result.original, Command(interpreter, [], [str(script), *args]), config),
            "B": (result.fixed, Command(interpreter, [], [str(copy), *args]), _with_path(config, original_dir)),
        }
        for index, label in enumerate(result.order):
            arm, command, arm_config = arms[label]
            if progress is not None:
                progress(index, len(result.order), arm.name)
            run = run_once(command, arm_config)
            arm.runs.append(run)
            if not run.ok:
                result.failed, result.failed_arm = run, arm.name
                return result
    result.comparison = compare(result.original.run_times, result.fixed.run_times)
    if write and result.comparison.outcome == "confirmed":
        if script.read_bytes() != source:
            raise VerifyError(f"{script} changed while it was being verified; not written")
        write_atomic(script, fixed)
        result.written = True
    return result


def _with_path(config: RunConfig, directory: str) -> RunConfig:
    from dataclasses import replace

    return replace(config, sys_path0=directory)
