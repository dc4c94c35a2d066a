"""`gpulint verify`: is the fixed script faster?  Original (A) and fixed (B) run interleaved,
A B B A A B ..., R runs each, on the same machine in the same call (docs/method.md, "Measuring honestly").

Both arms run the script from its own folder: the fixed source is kept in a temporary folder
and the bootstrap runs it in place of the script (same `__file__`, sys.path and working
directory), so nothing is ever written next to the script.  The user's script is written only
with `--write`, only after a confirmed speedup, and atomically.
"""

from __future__ import annotations

import ast
import itertools
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import libcst as cst

from gpulint.runtime_check import nvml, stats
from gpulint.runtime_check.costs import CostBasis
from gpulint.runtime_check.launchers import Launch
from gpulint.runtime_check.measure import Command, RunConfig, RunResult, StepStats, run_once
from gpulint.runtime_check.verdict import NEEDS_DEVICE, busy_machine_warning, thread_contention

# The confidence a speedup or slowdown must reach at each look (two-sided), and the same side must
# come out at two consecutive looks (the second with a fresh A/B pair): a change is reported only
# when a new pair repeats it, whichever way it goes.  verify looks after R runs of each arm and
# after every pair it adds up to the maximum (3R), one pair more when the last look still awaits
# its repeat.  Over those looks, runs drawn from one distribution are called faster or slower in
# about 1 call of 2000 (normal noise between runs; 1 of 600 for uniform noise, simulated in
# tests/runtime/test_aa.py), where a single look at 99.5% a look did it in 1 call of 60; a 1.2x
# speedup under 8% noise is still confirmed in 2 calls of 3.
CONFIDENCE = 0.9995
MAX_RUNS_FACTOR = 3  # default --max-runs: this many times --runs


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
        return [steps.mean for steps in self.measured_steps]

    @property
    def measured_steps(self) -> list[StepStats]:
        """The steps of each run that is ok (measured)."""
        return [r.steps for r in self.runs if r.ok and r.steps is not None]

    @property
    def median(self) -> float:
        return stats.median(self.run_times)

    @property
    def spread(self) -> tuple[float, float]:
        return min(self.run_times), max(self.run_times)


@dataclass
class Comparison:
    speedup: float  # original over fixed (ratio of geometric means of run times): > 1 is faster
    interval: tuple[float, float]  # its CONFIDENCE interval
    noise: float  # typical factor between two runs of the same script here, now (the A/A spread)
    outcome: str  # confirmed | not confirmed | slowdown
    reason: str  # why, in one sentence
    # The interval cleared 1 at this look but the look before did not say the same: one more pair
    # decides (see CONFIDENCE).
    pending: bool = False


@dataclass
class VerifyResult:
    script: str
    codes: list[str]
    applied: int
    diff: str
    original: Arm
    fixed: Arm
    order: list[str]  # the runs made, "A" original and "B" fixed
    comparison: Comparison | None = None
    failed: RunResult | None = None  # the run that failed, if one did
    failed_arm: str | None = None
    written: bool = False
    warnings: list[str] = field(default_factory=list)  # the runs' notes, a loaded machine
    cost: CostBasis | None = None  # costs.CostBasis of a confirmed speed-up, set by the command


def fix_script(script: Path, codes: list[str] | None) -> tuple[bytes, bytes, int, list[str]]:
    """(original, fixed, fixes applied, rules with a fix in the original) using the linter's own
    fixer, unsafe fixes included."""
    from gpulint.linter.analysis.parse import SyntaxErrorInSource, UndecodableSource
    from gpulint.linter.analysis.parse_guard import UnanalysableSource
    from gpulint.linter.config import ConfigError, Settings, validate
    from gpulint.linter.engine import Linter
    from gpulint.linter.fix.passes import fix_source

    settings = Settings(select=codes)
    try:
        validate(settings)
    except ConfigError as exc:
        raise VerifyError(str(exc)) from exc
    source = script.read_bytes()
    linter = Linter(settings)
    try:
        fixable = sorted({f.code for f in linter.lint_source(source, str(script)).findings if f.fix is not None})
        outcome = fix_source(linter, source, str(script), unsafe=True)
    except SyntaxErrorInSource as exc:
        raise VerifyError(f"{script} does not parse: {exc}") from exc
    except (UndecodableSource, UnanalysableSource) as exc:
        raise VerifyError(f"{script}: {exc}") from exc
    if outcome.errors:
        raise VerifyError("; ".join(outcome.errors))
    return source, outcome.source, outcome.applied, fixable


def _setting_hint(source: bytes, args: list[str], codes: list[str]) -> str:
    """Where the linter's fix does not apply but the script takes the loader setting the rule
    changes (script_params.RULE_SETTINGS), the sweep that measures it instead."""
    from gpulint.runtime_check.script_params import RULE_SETTINGS, ParamError, set_param

    for code in codes:
        name = RULE_SETTINGS.get(code)
        if name is None:
            continue
        values = "0,2" if name == "num_workers" else "False,True"
        try:
            set_param(source, args, name, values.split(",")[-1])
        except (ParamError, ValueError, cst.ParserSyntaxError):
            continue
        return f"; the script sets {name} where the fix cannot: measure it with --param {name}={values}"
    return ""


def same_program(original: bytes, fixed: bytes) -> bool:
    """The two sources compile to the same syntax tree: nothing that runs differs."""
    try:
        return ast.dump(ast.parse(original)) == ast.dump(ast.parse(fixed))
    except (SyntaxError, ValueError):
        return False


def device_refusal(codes: list[str], where: str) -> str | None:
    """The sentence refusing to A/B fixes that need a CUDA device on a run without one (`where`
    says why there is none); None when no fix among `codes` needs one."""
    needing = [code for code in codes if code in NEEDS_DEVICE]
    if not needing:
        return None
    why = "; ".join(f"{code}: {NEEDS_DEVICE[code]}" for code in needing)
    others = [code for code in codes if code not in NEEDS_DEVICE]
    advice = (
        f"--select only the others ({', '.join(others)})" if others else "run verify where the script trains on a GPU"
    )
    return (
        f"cannot measure {', '.join(needing)} here: {where}, "
        f"and without a CUDA device the fix changes nothing ({why}); {advice}"
    )


def interleaved(pairs: int) -> list[str]:
    """A B B A A B B A ...: each arm goes first as often as the other, so drift cancels."""
    order: list[str] = []
    for i in range(pairs):
        order += ["A", "B"] if i % 2 == 0 else ["B", "A"]
    return order


def compare(a: list[float], b: list[float]) -> Comparison:
    """One look: is B faster than A, given per-run step times of each?  Calibrated on the runs
    themselves: the runs of one arm repeat the same script, so their spread is the noise of this
    machine in this call (an A/A comparison), and a change counts only when its CONFIDENCE
    interval, which that noise and the number of runs set, is clear of 1 -- on either side, the
    same test for a slowdown as for a speedup.  "Every fixed run faster than every original run"
    is no evidence alone: with 3 runs each it happens by chance 1 time in 10."""
    speedup, low, high, noise = stats.ratio_interval(a, b, CONFIDENCE)
    if low > 1:
        outcome, reason = "confirmed", "the interval is above 1"
    elif high < 1:
        outcome, reason = "slowdown", "the interval is below 1"
    else:
        outcome = "not confirmed"
        reason = "the interval includes 1: no difference beyond the noise between runs of the same script"
    return Comparison(speedup, (low, high), noise, outcome, reason)


def sequential(a: list[float], b: list[float], first: int) -> Comparison:
    """The verdict over looks at the first `first`, `first + 1`, ... runs of each arm (run in A/B
    pairs, in that order): a speedup or slowdown stands only when two consecutive looks find it
    (the later with one more pair); the comparison of the look that repeats it, else of the last
    look -- not confirmed, and pending when that look found a change the one before did not."""
    if len(a) != len(b) or len(a) < max(2, first):
        raise ValueError("sequential needs the same number of runs in each arm, `first` at least (2 at least)")
    looks = [(count, compare(a[:count], b[:count])) for count in range(max(2, first), len(a) + 1)]
    for (_, earlier), (count, look) in itertools.pairwise(looks):
        if look.outcome != "not confirmed" and look.outcome == earlier.outcome:
            look.reason += f" at {count - 1} and at {count} runs of each"
            return look
    look = looks[-1][1]
    if look.outcome == "not confirmed":
        return look
    side = "above" if look.outcome == "confirmed" else "below"
    return replace(
        look,
        outcome="not confirmed",
        reason=f"the interval is {side} 1 at the last look only: a change counts when the next pair repeats it",
        pending=True,
    )


def verify(
    script: Path,
    args: list[str],
    codes: list[str] | None,
    runs: int,
    config: RunConfig,
    interpreter: str,
    write: bool = False,
    progress=None,
    max_runs: int | None = None,
    launch: Launch | None = None,
) -> VerifyResult:
    """Runs of each arm: `runs` interleaved pairs, then one pair more at a time while the verdict
    is "not confirmed", up to `max_runs` (default MAX_RUNS_FACTOR times `runs`) of each, and one
    more when the last look awaits its repeat (`sequential`); under `launch` (torchrun,
    accelerate launch) when given, every rank running the arm's source."""
    from gpulint.linter.run.process import unified_diff
    from gpulint.linter.run.safe_files import WriteScope, write_atomic

    max_runs = max(runs, max_runs or MAX_RUNS_FACTOR * runs)
    if not script.is_file():
        raise VerifyError(f"script {script} does not exist")
    # As `--fix` does, `--write` writes the file named, never a link's target: refused before the runs.
    scope = WriteScope.of([script])
    if write and not scope.allows(script):
        raise VerifyError(f"{script} is a symbolic link; --write writes only the file itself (name its target)")
    source, fixed, applied, fixable = fix_script(script, codes)
    if not applied:
        raise VerifyError(
            f"nothing to fix in {script} for {','.join(codes) if codes else 'the default rules'}"
            + _setting_hint(source, args, codes or [])
        )
    if same_program(source, fixed):
        raise VerifyError(
            f"no difference to measure: the fixes change no executed line of {script} (comments or layout only)"
        )
    if any(code in NEEDS_DEVICE for code in fixable):
        devices, unavailable = nvml.visible_devices()
        if not devices:
            raise VerifyError(device_refusal(fixable, f"no GPU is visible ({unavailable})"))
    result = VerifyResult(
        str(script), codes or [], applied, unified_diff(source, fixed, str(script)), Arm("original"), Arm("fixed"), []
    )
    command = Command(interpreter, [], [str(script), *args], launch)
    schedule = interleaved(max_runs + 1)  # the last pair only to repeat a change found at max_runs
    with tempfile.TemporaryDirectory(prefix="gpulint-verify-") as folder:
        fixed_source = Path(folder) / script.name
        fixed_source.write_bytes(fixed)
        arms = {"A": (result.original, config), "B": (result.fixed, replace(config, source=str(fixed_source)))}
        for index, label in enumerate(schedule):
            arm, arm_config = arms[label]
            if progress is not None:
                progress(index, len(schedule), arm.name)
            run = run_once(command, arm_config)
            arm.runs.append(run)
            result.order.append(label)
            if not run.ok:
                result.failed, result.failed_arm = run, arm.name
                return result
            if not run.cuda and any(i.startswith("torch") for i in run.instrumented):
                refusal = device_refusal(fixable, "torch sees no CUDA device")
                if refusal:
                    raise VerifyError(refusal)
            pairs = len(result.order) // 2
            if len(result.order) % 2 == 0 and pairs >= max(2, runs):
                result.comparison = sequential(result.original.run_times, result.fixed.run_times, runs)
                if result.comparison.outcome != "not confirmed":
                    break
                if pairs >= max_runs and not result.comparison.pending:
                    break
    # No run failed, so every pair ran and the last one was compared (runs >= 1).
    assert result.comparison is not None
    result.warnings = run_warnings(result.original.runs + result.fixed.runs)
    if write and result.comparison.outcome == "confirmed":
        if script.read_bytes() != source:
            raise VerifyError(f"{script} changed while it was being verified; not written")
        try:
            write_atomic(script, fixed, scope)
        except OSError as exc:  # a read-only script, a full disk: the result stands, the file does not change
            raise VerifyError(f"the fix was confirmed but {script} was left unchanged ({exc})") from None
        result.written = True
    return result


def run_warnings(runs: list[RunResult]) -> list[str]:
    """What the runs' own notes say (each once), a loaded machine over the runs, and torch's
    intra-op threads competing with a run's loader workers for the cores."""
    notes = list(dict.fromkeys(note for run in runs for note in run.notes))
    loads = [run.cpu.other_cores for run in runs if run.cpu]
    busy = busy_machine_warning(stats.mean(loads), "the runs") if loads else None
    contention = [
        thread_contention(loader.get("intra_op_threads"), loader.get("num_workers") or 0, run.cpu.cores)
        for run in runs
        if run.cpu and run.processes and (loader := run.processes[0].report.get("loader"))
    ]
    return list(dict.fromkeys([*notes, *([busy] if busy else []), *filter(None, contention)]))
