"""Two recorded runs side by side (`gpulint compare`), and the regression gate of `gpulint
profile --baseline REF --fail-on-regression PCT`.

Whether a difference is "beyond the noise" is judged on the noise of a difference between two
single runs, the larger of two measures (the output says which one it was):
- between runs, where the history holds at least MIN_RUNS_FOR_SPREAD runs of the baseline's
  command and script up to the baseline: the spread of the figure over them (a robust standard
  deviation, so one run slowed by another job does not blind the gate afterwards), which is what
  a rerun changes on this machine (t interval, 95%);
- within the runs: each figure's own noise (batch means over its steps), combined; a run with
  stalls (the machine taken by another job for seconds) has a wide one.

What the text output shows of a run (its command, host, commit, verdict, figure names and units)
comes from the history, which may come from someone else: it is printed through `printable`, so a
newline, a terminal escape or a bidi override in it is shown escaped, not obeyed, and no line
starts with stored text that GitHub Actions would read as a workflow command.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpulint.linter.printable import no_workflow_commands, printable
from gpulint.runtime_check import stats
from gpulint.runtime_check.figures import Figure, format_value
from gpulint.runtime_check.history import History, RunRecord, iso, when

MIN_RUNS_FOR_SPREAD = 3
SPREAD_RUNS = 20  # the latest runs that estimate the spread between runs
STEP_TIME = "step time (mean)"  # the figure the regression gate holds against a baseline
SPEEDUP = "speedup of the fix"  # a verify run's result
NOISE_NOTE = (
    "Noise: the half-width of the 95% interval of a difference between two runs, the larger of 'between "
    "N runs' (the spread over recorded runs of the same command and script) and 'within the runs' (each "
    f"run's own step-to-step noise). Until {MIN_RUNS_FOR_SPREAD} runs of a command are recorded only the "
    "second is known, and it is a lower bound: a change beyond it is 'not established', never better or worse."
)


@dataclass
class Difference:
    name: str
    unit: str
    better: str | None
    a: float | None
    b: float | None
    noise: float | None  # half-width of the noise of b - a, in the figure's unit
    basis: str  # how the noise was measured, for people

    @property
    def change(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def relative(self) -> float | None:
        return None if self.change is None or not self.a else self.change / abs(self.a)

    @property
    def beyond_noise(self) -> bool | None:
        if self.change is None or self.noise is None:
            return None
        return abs(self.change) > self.noise

    @property
    def established(self) -> bool:
        """The noise is the spread between runs: within-run noise alone is a lower bound of what a
        rerun changes, so a change beyond it says nothing about the code."""
        return self.basis.startswith("between")

    @property
    def direction(self) -> str:
        """better, worse, or '' (no direction, no change, within the noise, or only within-run
        noise known: not established)."""
        if not self.beyond_noise or not self.better or not self.change or not self.established:
            return ""
        return "better" if (self.change < 0) == (self.better == "lower") else "worse"

    @property
    def outcome(self) -> str:
        """What `compare` says of the change."""
        if self.direction:
            return self.direction
        if self.beyond_noise is None:
            return ""
        if not self.beyond_noise:
            return "within noise"
        if not self.established:
            return "not established"
        return "changed"


def spread_between_runs(history: History | None, baseline: RunRecord, name: str) -> tuple[float, int] | None:
    """(half-width of the 95% interval of the difference of two single runs, runs it is based
    on) for a figure, from the baseline and the runs of its command and script recorded before it:
    how much that command varies from run to run here (later runs may be the change under test)."""
    if history is None or baseline.id is None:
        return None
    runs = [
        r
        for r in history.runs(command_key=baseline.command_key, before=baseline.id + 1, limit=SPREAD_RUNS)
        if r.script_sha256 == baseline.script_sha256
    ]
    values = [f.value for r in runs if (f := r.figure(name)) is not None and f.value is not None]
    if len(values) < MIN_RUNS_FOR_SPREAD:
        return None
    return stats.t_critical(0.95, len(values) - 1) * stats.robust_sd(values) * math.sqrt(2), len(values)


def difference(a: Figure | None, b: Figure | None, spread: tuple[float, int] | None) -> Difference:
    """b against a; the noise is the larger of the spread between runs and the runs' own."""
    shown = b or a
    assert shown is not None, "a figure that one run at least has"
    measures: list[tuple[float, str]] = []
    if spread is not None:
        measures.append((spread[0], f"between {spread[1]} runs"))
    if a is not None and b is not None and a.noise is not None and b.noise is not None:
        measures.append((math.hypot(a.noise, b.noise), "within the runs"))
    noise, basis = max(measures) if measures else (None, "")
    return Difference(
        shown.name, shown.unit, shown.better, a.value if a else None, b.value if b else None, noise, basis
    )


def differences(history: History | None, a: RunRecord, b: RunRecord) -> list[Difference]:
    """Every figure of either run, in b's order (then a's), against each other."""
    names = list(dict.fromkeys([f.name for f in b.figures] + [f.name for f in a.figures]))
    return [difference(a.figure(name), b.figure(name), spread_between_runs(history, a, name)) for name in names]


# -- the regression gate -------------------------------------------------------------------
@dataclass
class Gate:
    failed: bool
    line: str  # one line for a CI log
    difference: Difference | None = None


def regression_gate(history: History | None, run: RunRecord, baseline: RunRecord, percent: float | None) -> Gate:
    """Fails when the mean step time grew by more than `percent` AND by more than the noise;
    with `percent` None it only says how the step time compares."""
    d = difference(baseline.figure(STEP_TIME), run.figure(STEP_TIME), spread_between_runs(history, baseline, STEP_TIME))
    where = f"run {baseline.id}" + (f" ({printable(baseline.git_commit[:10])})" if baseline.git_commit else "")
    if d.relative is None:
        return Gate(False, f"gpulint: no step time to compare with {where}", d)
    assert d.a is not None, "a relative change has a baseline value"
    change = (
        f"step time {format_value(d.b, d.unit)} vs {format_value(d.a, d.unit)} in {where}: {100 * d.relative:+.1f}%"
    )
    if d.noise is None:
        return Gate(
            False,
            f"gpulint: {change}; its noise is not measured (fewer than 10 steps in a run), so a "
            "regression cannot be told from noise",
            d,
        )
    noise = f"noise ±{100 * d.noise / d.a:.1f}% {d.basis}"
    if percent is None:
        return Gate(False, f"gpulint: compared: {change} ({noise})", d)
    change += f" (allowed +{percent:g}%, {noise})"
    if 100 * d.relative > percent and d.beyond_noise:
        return Gate(True, f"gpulint: REGRESSION: {change}", d)
    verdict = "within the allowance" if 100 * d.relative <= percent else "within the noise"
    return Gate(False, f"gpulint: no regression ({verdict}): {change}", d)


# -- text and JSON -------------------------------------------------------------------------
def format_change(d: Difference) -> str:
    if d.change is None:
        return "-"
    if d.unit in ("share", "%"):
        points = 100 * d.change if d.unit == "share" else d.change
        return f"{points:+.1f} pt"
    return f"{100 * d.relative:+.1f}%" if d.relative is not None else f"{d.change:+.3g}"


def format_noise(d: Difference) -> str:
    if d.noise is None:
        return "-"
    if d.unit in ("share", "%"):
        return f"±{100 * d.noise if d.unit == 'share' else d.noise:.1f} pt ({d.basis})"
    scale = abs(d.a) if d.a else None
    return f"±{100 * d.noise / scale:.1f}% ({d.basis})" if scale else f"±{d.noise:.3g} ({d.basis})"


def describe(run: RunRecord) -> str:
    commit = f", {printable(run.git_commit[:10])}{'+dirty' if run.git_dirty else ''}" if run.git_commit else ""
    return f"run {run.id} ({when(run.started_at)}{commit})"


def print_compare(out, a: RunRecord, b: RunRecord, rows: list[Difference]) -> None:
    out.line(f"{out.style('gpulint compare', 'bold')} {describe(a)} -> {describe(b)}")
    if a.command_key == b.command_key:
        out.line(f"  command: {printable(b.command)}")
    else:
        out.line(f"  note: different commands: {printable(a.command)}  vs  {printable(b.command)}")
    if a.script_sha256 and b.script_sha256 and a.script_sha256 != b.script_sha256:
        out.line("  the script changed between the runs")
    if a.host != b.host:
        out.line(f"  note: different hosts: {printable(str(a.host))} vs {printable(str(b.host))}")
    gpus_a, gpus_b = a.environment.get("gpus"), b.environment.get("gpus")
    if gpus_a != gpus_b:
        out.line(f"  note: different GPUs: {printable(str(gpus_a or 'none'))} vs {printable(str(gpus_b or 'none'))}")
    table = []
    for d in rows:
        status = d.outcome
        table.append(
            [
                no_workflow_commands(printable(d.name)),  # the first column starts the line
                printable(format_value(d.a, d.unit)),
                printable(format_value(d.b, d.unit)),
                format_change(d),
                format_noise(d),
                out.style(status, "green" if status == "better" else "red")
                if status in ("better", "worse")
                else status,
            ]
        )
    out.table(None, ["figure", f"run {a.id}", f"run {b.id}", "change", "noise", "outcome"], table, right=(1, 2, 3))
    out.line(NOISE_NOTE)
    if a.verdict or b.verdict:
        out.line(f"verdict: {printable(a.verdict or '-')} -> {printable(b.verdict or '-')}")


def compare_json(a: RunRecord, b: RunRecord, rows: list[Difference]) -> dict:
    return {
        "a": run_json(a),
        "b": run_json(b),
        "figures": [
            {
                "name": d.name,
                "unit": d.unit,
                "better": d.better,
                "a": d.a,
                "b": d.b,
                "change": d.change,
                "relative": d.relative,
                "noise": d.noise,
                "noise_basis": d.basis or None,
                "beyond_noise": d.beyond_noise,
                "direction": d.direction or None,
                "outcome": d.outcome or None,
            }
            for d in rows
        ],
    }


def run_json(run: RunRecord) -> dict:
    return {
        "id": run.id,
        "kind": run.kind,
        "command": run.command,
        "script": run.script,
        "script_sha256": run.script_sha256,
        "started_at": iso(run.started_at),
        "wall_seconds": run.wall_seconds,
        "status": run.status,
        "verdict": run.verdict,
        "git_commit": run.git_commit,
        "git_dirty": run.git_dirty,
        "host": run.host,
        "environment": run.environment,
        "figures": {f.name: f.value for f in run.figures},
    }


def print_history(out, runs: list[RunRecord], path) -> None:
    if not runs:
        out.line(f"no runs recorded in {printable(str(path))}")
        return
    rows = []
    for run in runs:
        commit = f"{run.git_commit[:10]}{'+' if run.git_dirty else ''}" if run.git_commit else "-"
        headline = run.figure(STEP_TIME) or run.figure(SPEEDUP)  # a profile's step time, a verify's speedup
        cells = [
            str(run.id),
            when(run.started_at),
            run.kind,
            commit,
            format_value(headline.value, headline.unit) if headline else "-",
            run.verdict or run.status,
            run.command,
        ]
        rows.append([printable(cell) for cell in cells])
    out.table(None, ["id", "when", "kind", "commit", "result", "verdict", "command"], rows, right=(0, 4))
