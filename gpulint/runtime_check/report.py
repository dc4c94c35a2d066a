"""Terminal reports of `profile`, `verify` and `scale` (plain text) and their `--json` documents.

Anything not measured is printed as "not measured" (with the reason where there is one) and is
null in JSON: never a number.  Lines are never wrapped, at a terminal or in a pipe, so a printed
diff applies and a table stays one row per line in a CI log; colour only at a terminal without
NO_COLOR.  Commands printed for the user are runnable as they stand.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import TextIO

import libcst as cst

from gpulint.linter.printable import printable
from gpulint.linter.run.safe_files import OutputFile, read_regular_file
from gpulint.runtime_check import stats
from gpulint.runtime_check.attribution import Attribution, Line
from gpulint.runtime_check.costs import CostBasis, cost_lines, money
from gpulint.runtime_check.distributed import RankReport
from gpulint.runtime_check.figures import NOT_MEASURED, Figure, format_value
from gpulint.runtime_check.measure import Command, RunResult, StepStats
from gpulint.runtime_check.nodes import JobReport
from gpulint.runtime_check.operators import KINDS, OpsReport, table_rows
from gpulint.runtime_check.profile import Profile, data_function_label
from gpulint.runtime_check.scale import ScaleResult
from gpulint.runtime_check.script_params import RULE_SETTINGS, ParamError, set_param
from gpulint.runtime_check.sweep import SweepResult
from gpulint.runtime_check.verdict import BUSY_CORES, NEEDS_DEVICE, Recommendation, idle_cores, micro_batches
from gpulint.runtime_check.verify import CONFIDENCE, VerifyResult

SPARK = "▁▂▃▄▅▆▇█"
_STYLES = {"bold": "1", "red": "1;31", "green": "1;32", "yellow": "33"}


class Output:
    """Where a report goes: lines on a stream, styled only at a terminal without NO_COLOR."""

    def __init__(self, stream: TextIO | None = None, color: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        if color is None:
            color = self.stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"
        self.color = color

    def style(self, text: str, style: str) -> str:
        return f"\033[{_STYLES[style]}m{text}\033[0m" if self.color else text

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")

    def table(self, title: str | None, header: list[str], rows: list[list[str]], right: tuple[int, ...] = ()) -> None:
        for text in table_lines(title, header, rows, right):
            self.line(text)


class Progress:
    """Progress of a profiled run on standard error, fed the child's progress file: one line
    redrawn in place at a terminal; in a log (CI), a line every LOG_EVERY seconds, so that a
    ten-minute run shows it is alive without flooding the log."""

    LOG_EVERY = 30.0

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.terminal = self.stream.isatty() and os.environ.get("TERM") != "dumb"
        self.last = time.monotonic()
        self.drawn = False

    def __call__(self, state: dict) -> None:
        now = time.monotonic()
        if now - self.last < (0.1 if self.terminal else self.LOG_EVERY):
            return
        self.last = now
        done, warmup = state.get("steps", 0), state.get("warmup", 0)
        if done < warmup or state.get("measure_start") is None:
            text = f"warm-up: step {done} of {warmup}"
        else:
            elapsed = now - state["measure_start"]
            measured = done - warmup
            if state.get("steps_wanted"):
                text = f"measuring: step {measured} of {state['steps_wanted']}, {elapsed:.0f} s"
            else:
                text = f"measuring: {measured} steps, {elapsed:.0f} of {state.get('seconds') or 0:g} s"
        if self.terminal:
            self.stream.write(f"\r\033[Kgpulint profile: {text}")
            self.drawn = True
        else:
            self.stream.write(f"gpulint profile: {text}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()


def table_lines(title: str | None, header: list[str], rows: list[list[str]], right: tuple[int, ...] = ()) -> list[str]:
    """A plain table: columns two spaces apart, as wide as their widest cell, a dashed rule under
    the header; the last column is not padded (no trailing spaces)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def render(cells: list[str]) -> str:
        parts = [
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=False))
        ]
        return "  ".join(parts).rstrip()

    lines = [title] if title else []
    lines += [render(header), "  ".join("-" * w for w in widths)]
    lines += [render(r) for r in rows]
    return lines


def sparkline(values: list[float], width: int = 60, top: float = 100.0) -> str:
    """Values (0..top) in `width` bins, each bin's mean as one block character."""
    if not values:
        return ""
    bins = min(width, len(values))
    out = []
    for i in range(bins):
        chunk = values[i * len(values) // bins : (i + 1) * len(values) // bins] or [values[-1]]
        level = sum(chunk) / len(chunk) / top
        out.append(SPARK[min(len(SPARK) - 1, max(0, round(level * (len(SPARK) - 1))))])
    return "".join(out)


def ms(seconds: float | None) -> str:
    return format_value(seconds, "s")


def pct(share: float | None) -> str:
    return format_value(share, "share")


def verify_command(script: str, select: list[str], args: list[str], interpreter: str | None = None, *extra: str) -> str:
    """`gpulint verify SCRIPT --select ... [-- ARGS]` as one runnable shell line: the real
    arguments, quoted, or none."""
    words = ["gpulint", "verify", script]
    if select:
        words += ["--select", ",".join(select)]
    if interpreter and os.path.realpath(interpreter) != os.path.realpath(sys.executable):
        words += ["--python", interpreter]
    words += list(extra)
    if args:
        words += ["--", *args]
    return shlex.join(words)


# -- profile -------------------------------------------------------------------------------
def print_failure(out: Output, run: RunResult) -> None:
    what = {
        "timeout": "the script did not finish or reach its steps in time",
        "error": "the script raised an exception",
        "exit": f"the script exited with code {run.exit_code}",
        "no-report": "the script ended without the profiler's report",
    }.get(run.status, run.status)
    out.line(out.style(f"gpulint profile: {what}", "red"))
    if run.error:
        where = f" at {run.error['where']}" if run.error.get("where") else ""
        out.line(f"  {run.error['type']}: {run.error['message']}{where}")
    if run.output_tail:
        out.line("  last lines of its output:")
        for line in run.output_tail.splitlines():
            out.line(f"    {line}")


# What a training script imports from the environment it was written for: a script that cannot
# import one of these was most likely run by another interpreter (`python` on PATH, outside the
# virtual environment gpulint was installed in).
_FRAMEWORKS = frozenset(
    {"torch", "tensorflow", "keras", "jax", "lightning", "pytorch_lightning", "transformers", "accelerate", "deepspeed"}
)


def print_interpreter_hint(out: Output, run: RunResult, command: Command) -> None:
    """After a run that failed importing a framework: which interpreter ran the script, and how
    to run it with one that has the framework (gpulint's own, when that one has it)."""
    import importlib.util
    import re

    error = run.error or {}
    missing = re.fullmatch(r"No module named '([\w.]+)'", str(error.get("message", "")))
    if error.get("type") != "ModuleNotFoundError" or missing is None or command.launch is not None:
        return
    module = missing[1].split(".")[0]
    if module not in _FRAMEWORKS:
        return
    interpreter = command.interpreter
    out.line(f"  hint: the script ran under {interpreter}, which cannot import {module}")
    own = sys.executable
    # (not by real path: a virtual environment's python is a link to the interpreter it was made from)
    if os.path.abspath(own) != os.path.abspath(interpreter) and importlib.util.find_spec(module) is not None:
        again = shlex.join(["gpulint", "profile", "--", own, *command.options, *command.target])
        out.line(f"  gpulint's own interpreter has {module}: {again}")
    else:
        example = shlex.join(["gpulint", "profile", "--", "/path/to/env/bin/python", *command.options, *command.target])
        out.line(
            f"  activate the environment that has {module} before running gpulint (`python` is looked up on PATH), "
            f"or name its interpreter: {example}"
        )


def print_no_steps(out: Output, run: RunResult) -> None:
    out.line(out.style("gpulint profile: the script never made a training step", "yellow"))
    out.line(
        "  No optimizer step (torch.optim), Keras fit batch or tf.data batch was seen, so there is nothing to "
        "time. Profile the training entry point, and check it trains with the given arguments."
    )
    if run.instrumented:
        out.line(f"  instrumented: {', '.join(run.instrumented)}")
    else:
        out.line("  neither torch nor TensorFlow/Keras was imported")


def how_it_ended(run: RunResult, steps: StepStats) -> str:
    if run.status == "stopped":
        return f"stopped after {steps.count} measured step{'s' if steps.count != 1 else ''}"
    return "the script ended by itself"


def print_costs(out: Output, basis: CostBasis | None, price: float | None, missing: str) -> None:
    """What the waste costs (costs.py), with a price only; `missing` says why there is no
    estimate when `basis` is None."""
    if price is None:
        return
    out.line()
    if basis is None:
        out.line(f"What it costs: not estimated ({missing})")
        return
    out.line(out.style(f"What it costs (an estimate, at {money(price)} per GPU-hour)", "bold"))
    for line in cost_lines(basis, price):
        out.line(f"  {line}")


def data_source_note(steps: StepStats) -> str:
    """', in get_batch at train.py:40 (found in the training loop)' for the data wait row."""
    if steps.data_function:
        return f", in {data_function_label(steps.data_function)}"
    return f", in {steps.data_source}" if steps.data_source else ""


def print_profile(out: Output, result: Profile) -> None:
    run, steps, m, v = result.run, result.run.steps, result.measurements, result.verdict
    assert steps is not None, "a profile is printed for a run that is ok (measured)"
    out.line(f"{out.style('gpulint profile', 'bold')} {run.command}")
    skipped = f"{steps.warmup} warm-up step(s) skipped"
    rows = [["steps", f"{steps.count} measured", f"{steps.source}; {skipped}; {how_it_ended(run, steps)}"]]
    if steps.optimizers and len(steps.optimizers) > 1:
        rows.append(
            [
                "optimizers",
                ", ".join(f"{k}: {n}" for k, n in steps.optimizers.items()),
                "the most frequent paces the step",
            ]
        )
    if steps.count:
        rows.append(
            [
                "step time (mean)",
                ms(steps.mean),
                f"median {ms(steps.median)}, p10 {ms(steps.quantile(0.1))}, p90 {ms(steps.quantile(0.9))}",
            ]
        )
        if steps.batches is not None:
            per = steps.batches / steps.count
            if abs(per - 1) > 0.01:
                k = micro_batches(steps.batches, steps.count)
                why = (
                    f"gradient accumulation ({k} batches per optimizer step)"
                    if k
                    else "batches read outside the steps (a next(iter(loader)), a second loader): no accumulation"
                )
                rows.append(["batches per step", f"{per:.2f}", why])
    rows.append(
        [
            "data wait",
            pct(steps.data_share),
            steps.data_note
            or (
                f"{ms(steps.waited / steps.count)} per step{data_source_note(steps)}"
                if steps.waited is not None and steps.count
                else ""
            ),
        ]
    )
    rows.append(
        ["sync wait", NOT_MEASURED, "host timers cannot see it" + ("; sync lines below" if result.syncs else "")]
    )
    rows.append(
        [
            "effective compute share",
            pct(v.compute_share) if v and m and m.data_share is not None else NOT_MEASURED,
            "step time less the waits for data, syncs, other ranks and host work (table below), over step time",
        ]
    )
    rows += figure_rows(result.compute.figures if result.compute else [])
    cpu = run.cpu
    if cpu:
        main = "CPU busiest rank" if cpu.rank_cores else "CPU main process"
        rows.append([main, f"{cpu.main_cores:.2f} cores", "pegged" if cpu.main_pegged else ""])
        rows.append(["CPU loader workers", f"{cpu.worker_cores:.2f} cores", f"{cpu.workers} process(es) seen"])
        rows.append(
            [
                "CPU machine",
                f"{cpu.system_cores:.2f} of {cpu.cores} cores",
                "per core: " + " ".join(f"{p:.0f}%" for p in cpu.per_core),
            ]
        )
        rows.append(
            [
                "CPU other processes",
                f"{cpu.other_cores:.2f} cores",
                "busy machine" if cpu.other_cores >= BUSY_CORES else "",
            ]
        )
    else:
        rows.append(["CPU", NOT_MEASURED, "run too short for two samples"])
    if run.gpu:
        g = run.gpu
        rows.append(
            [
                "GPU utilization",
                f"{g.util_mean:.0f}%",
                f"median {g.util_median:.0f}%, p10 {g.util_p10:.0f}%, "
                f"at 0%: {100 * g.idle_fraction:.0f}% of {g.samples} samples",
            ]
        )
        rows.append(["GPU memory peak", f"{100 * g.mem_peak_fraction:.0f}%", ", ".join(g.devices)])
    else:
        rows.append(["GPU utilization", NOT_MEASURED, run.gpu_unavailable or "no samples"])
        rows.append(["GPU memory", NOT_MEASURED, ""])
    rows += figure_rows(result.memory.figures if result.memory else [])
    out.table("Measured", ["figure", "value", "note"], rows, right=(1,))
    if result.attribution:
        print_attribution(out, result.attribution, steps.mean)
    if result.ops is not None:
        print_ops(out, result.ops)
    if result.ranks:
        print_ranks(out, result.ranks)
    if run.gpu and run.gpu.series:
        out.line(f"GPU utilization over the run: {sparkline(run.gpu.series)}")
    if result.syncs:
        out.table(
            "Host-device syncs in the measured steps",
            ["where", "per step", "line", "rule"],
            [[s.where, f"{s.per_step:.1f}", s.source, s.rule or "-"] for s in result.syncs],
            right=(1,),
        )
    elif run.cuda:
        out.line("No host-device sync in the measured steps.")
    else:
        out.line("Host-device syncs: not measured (no CUDA device).")
    for note in run.notes:
        out.line(f"note: {note}")
    if v is None:
        return
    for warning in v.warnings:
        out.line(f"{out.style('warning:', 'yellow')} {warning}")
    out.line()
    out.line(f"{out.style(f'Verdict: {v.headline}', 'bold')} -- {v.advice}")
    for reason in v.reasons:
        out.line(f"  - {reason}")
    for advice in result.memory.advice if result.memory else []:
        out.line(f"Memory: {advice}")
    if v.recommendations:
        rows = []
        for r in v.recommendations:
            lines = [str(row) for row in dict.fromkeys(h.row for h in result.lint if h.code == r.code)]
            measured = f"{Path(r.line).name} (measured)" if r.line else ""
            found = ("line " + ", ".join(lines)) if lines else ""
            rows.append([r.code or "-", r.action, r.expected_gain, "; ".join(filter(None, [measured, found])) or "-"])
        out.table("Fixes to try, in order of expected gain", ["rule", "fix", "expected gain", "in this script"], rows)
    suggestion = profile_next(result)
    if suggestion:
        out.line(suggestion.line)
    others = [(r, next_for(result, r)) for r in v.recommendations[1:]]
    for r, then in others:
        if then is not None:
            out.line(f"  then {r.code or r.action}: {then.why[0].lower()}{then.why[1:]}: {then.command}")


def print_attribution(out: Output, attribution: Attribution, step: float) -> None:
    """Where the whole step goes, by phase, with the lines of the script that take the time."""
    rows = []
    for phase in attribution.phases:
        lines: list[Line | None] = [*phase.lines[:1]] or [None]
        for i, line in enumerate(lines):
            where = "-"
            if line is not None:
                where = f"{Path(line.where).name} `{line.text}`"
                if line.inner:
                    where += f" -> {Path(line.inner).name} `{line.inner_text}`"
            rows.append(
                [
                    phase.name if i == 0 else "",
                    pct(phase.share) if i == 0 else "",
                    ms(phase.share * step) if i == 0 else "",
                    phase.rule or "-" if i == 0 else "",
                    where,
                ]
            )
    out.table(
        f"Where the step goes ({attribution.note})",
        ["phase", "share", "per step", "rule", "the line that takes most of it"],
        rows,
        right=(1, 2),
    )


def print_ops(out: Output, ops: OpsReport) -> None:
    """The top operators of the profiled steps by self time, their kinds' shares, and the method's
    two readings."""
    if not ops.steps:
        out.line(f"Operators: no step was profiled after the measured ones ({ops.note or 'the script ended'})")
        return
    which = f"step {ops.steps[0]}" if len(ops.steps) == 1 else f"steps {ops.steps[0]}-{ops.steps[-1]}"
    title = (
        f"Operators of {which} (profiled after the {ops.measured} measured steps and one profiler "
        f"warm-up step; {ms(ops.step_time)} a step with the profiler on)"
    )
    if not ops.operators:
        out.line(f"{title}: {ops.note or 'none recorded'}")
    else:
        header, rows = table_rows(ops)
        more = f"; top {len(rows)} of {ops.rows} by self time" if ops.rows > len(rows) else ""
        out.table(title + more, header, rows, right=tuple(range(1, len(header) - 1)))
        clocks = [("CPU", ops.kinds_cpu)] + ([("CUDA", ops.kinds_device)] if ops.device else [])
        for clock, shares in clocks:
            kinds = ", ".join(f"{kind} {pct(shares.get(kind, 0.0))}" for kind in KINDS)
            out.line(f"By kind, share of operator self {clock} time: {kinds}")
        if ops.outside_operators is not None:
            out.line(f"Host time in no operator (Python, waits): {pct(ops.outside_operators)} of the profiled steps")
    for reading in ops.readings:
        out.line(f"Reading: {reading}")


def figure_rows(figures: list[Figure]) -> list[list[str]]:
    return [[figure.name, figure.text, figure.note] for figure in figures]


def print_ranks(out: Output, ranks: RankReport) -> None:
    rows = [
        [
            str(r.rank),
            ms(r.step_time),
            ms(r.data_wait),
            ms(r.collective_wait),
            ms(r.allreduce_time),
            ms(r.own_time),
            NOT_MEASURED if r.cores is None else f"{r.cores:.2f}",
            NOT_MEASURED if r.samples_per_step is None else f"{r.samples_per_step:g}",
        ]
        for r in ranks.ranks
    ]
    title = f"Per rank ({len(ranks.ranks)} of world size {ranks.world_size})"
    job = ranks.job
    if job is not None:
        title = f"Per rank of node {job.node} of {job.nodes} ({len(ranks.ranks)} of world size {ranks.world_size})"
    out.table(
        title,
        ["rank", "step time", "data wait", "collective wait", "all-reduce", "own work", "CPU cores", "samples/step"],
        rows,
        right=tuple(range(8)),
    )
    out.line(f"collective wait: {ranks.collective_note}")
    out.line(f"slowest rank: {ranks.slowest_note}" + (" (of this node)" if job is not None else ""))
    if job is not None:
        out.line(
            f"job: {job.id} (node {job.node} of {job.nodes} on {job.host})" + (f"; {job.note}" if job.note else "")
        )


def print_nodes(out: Output, job: JobReport, missing_hint: str = "") -> None:
    """The merged view of a multi-node job (nodes.py): each node, the slowest, the collective split."""
    rows = [
        [
            str(node.node),
            printable(node.host) or "-",
            ", ".join(str(r.rank) for r in node.ranks) or "-",
            ms(node.step_time),
            ms(node.own_time),
            ms(node.collective_wait),
            "-" if node.run_id is None else str(node.run_id),
        ]
        for node in job.nodes
    ]
    out.table(
        f"Across nodes (job {printable(job.id)}: {len(job.nodes)} of {job.nodes_expected} nodes recorded)",
        ["node", "host", "ranks", "step time", "own work (slowest rank)", "collective wait", "run"],
        rows,
        right=(3, 4, 5, 6),
    )
    out.line(f"slowest node: {printable(job.slowest_note)}")  # it names a host: stored text
    if job.advice:
        out.line(f"across nodes: {job.advice}")
    if job.intra is not None and job.inter is not None and job.transfer is not None:
        out.line(
            f"collective wait per step (mean of ranks): intra-node {ms(job.intra)}, inter-node {ms(job.inter)}, "
            f"transfer {ms(job.transfer)} -- {job.split_note}"
        )
    else:
        out.line(f"collective wait split: {job.split_note}")
    if job.missing:
        missing = ", ".join(str(n) for n in job.missing)
        out.line(f"not recorded here: node{'s' if len(job.missing) > 1 else ''} {missing}{missing_hint}")


def ranks_json(ranks: RankReport | None) -> dict | None:
    if ranks is None:
        return None
    return {
        **dataclasses.asdict(ranks),
        "collective_share": ranks.collective_share,
        "ranks": [
            {**dataclasses.asdict(r), "own_time": r.own_time, "collective_share": r.collective_share}
            for r in ranks.ranks
        ],
    }


def suggested_verify(result: Profile) -> str | None:
    """The verify command for the first fixable finding that can show an effect on this run
    (none needing a device on a run without one; none for `-m` runs, which verify cannot take)."""
    acting = [r.code for r in result.verdict.recommendations] if result.verdict else []
    return next(filter(None, (_verify_select(result, code) for code in acting)), None)


def _verify_select(result: Profile, code: str) -> str | None:
    """`gpulint verify SCRIPT --select CODE ...` when the fixer applies CODE to the script (a
    fixable finding, profile.confirm_fixes) and its effect can show on this run."""
    command = result.command
    if command is None or command.script is None or not code:
        return None
    if not any(h.code == code and h.fixable for h in result.lint):
        return None
    if not result.run.cuda and code in NEEDS_DEVICE:
        return None
    if command.launch is not None:  # the launcher and its options, so every rank is measured as it ran
        extra = ["--launcher", shlex.join([Path(command.launch.prefix[0]).name, *command.launch.prefix[1:]])]
        return verify_command(str(command.script), [code], command.target[1:], None, *extra)
    return verify_command(str(command.script), [code], command.target[1:], command.interpreter)


def param_values(result: Profile, name: str) -> list[str]:
    """The values to sweep for a loader setting: what the loader has against what the fix sets;
    for workers, up to the cores the profile saw idle (verdict.idle_cores)."""
    if name != "num_workers":
        return ["False", "True"]
    m = result.measurements
    now = ((m.loader if m else None) or {}).get("num_workers") or 0
    idle = idle_cores(m) if m is not None else None
    room = int(idle) if idle is not None else (m.cores if m and m.cores else 4)
    return [str(v) for v in sorted({now, max(now + 1, min(room, 2)), max(now + 1, min(room, 4))})]


def _verify_param(result: Profile, code: str) -> str | None:
    """`gpulint verify SCRIPT --param NAME=V1,V2` for a loader fix, when the script takes the
    setting where script_params can set it (sweeps run one process: no launched runs)."""
    command, name = result.command, RULE_SETTINGS.get(code)
    if command is None or command.script is None or command.launch is not None or name is None:
        return None
    if not result.run.cuda and code in NEEDS_DEVICE:
        return None
    values = param_values(result, name)
    try:
        set_param(read_regular_file(command.script), command.target[1:], name, values[-1])
    except (ParamError, cst.ParserSyntaxError, OSError, ValueError):
        return None
    param = f"{name}={','.join(values)}"
    return verify_command(str(command.script), [], command.target[1:], command.interpreter, "--param", param)


def profile_again(command: Command, recorded: bool = True) -> str:
    """The profile of the same command, compared with this run when it is recorded (a run not in
    the history cannot be a baseline: `--baseline last` would name an older run, or none)."""
    words = [*command.launch.prefix, *command.target] if command.launch else [command.interpreter, *command.target]
    words[0] = Path(words[0]).name if os.path.realpath(words[0]) == os.path.realpath(sys.executable) else words[0]
    return shlex.join(["gpulint", "profile", *(["--baseline", "last"] if recorded else []), "--", *words])


def next_for(result: Profile, recommendation: Recommendation) -> NextCommand | None:
    """The command that answers one fix to try on this script: verify the linter's fix where the
    fixer applies it; else measure the loader setting the fix changes; else, after the change by
    hand, profile again against this run.  None for a `-m` run, which verify cannot take."""
    command = result.command
    if command is None or command.script is None:
        return None
    code = recommendation.code
    select = _verify_select(result, code)
    if select is not None:
        return NextCommand("Measure the fix before keeping it", select)
    param = _verify_param(result, code)
    if param is not None:
        return NextCommand(f"Measure the setting {RULE_SETTINGS[code]} it changes", param)
    # the line this run measured, else a sync line it counted, else the linter's line
    lines = [recommendation.line] if recommendation.line else []
    lines += [s.where for s in result.syncs if s.rule == code]
    lines += [f"{command.script}:{h.row}" for h in result.lint if h.code == code]
    where = Path(lines[0]).name if lines else Path(command.script).name
    if not result.recorded:
        why = f"Change {where} by hand, then profile it again and compare the step time with this run's (not recorded)"
        return NextCommand(why, profile_again(command, recorded=False))
    return NextCommand(f"Change {where} by hand, then measure it against this run", profile_again(command))


@dataclasses.dataclass(frozen=True)
class NextCommand:
    """The command a report ends with, and why: printed by the terminal report, stored with the
    run (records.py) and shown by the HTML report, in the same words."""

    why: str
    command: str

    @property
    def line(self) -> str:
        return f"{self.why}: {self.command}"


def profile_next(result: Profile) -> NextCommand | None:
    """After a profile with fixes to try: the command that answers the first one (next_for)."""
    if result.verdict is None or not result.verdict.recommendations:
        return None
    suggestion = next_for(result, result.verdict.recommendations[0])
    if suggestion is None:
        return None
    return dataclasses.replace(suggestion, why=suggestion.why.replace("the fix", "the first fix", 1))


def verify_next(result: VerifyResult, args: list[str], interpreter: str | None = None) -> NextCommand | None:
    """After a confirmed verify that left the script unchanged: the same verify with --write."""
    c = result.comparison
    if result.written or c is None or c.outcome != "confirmed":
        return None
    apply = verify_command(result.script, result.codes, args, interpreter, "--write")
    return NextCommand("the script is unchanged; to apply the fix", apply)


def profile_json(result: Profile) -> dict:
    run = result.run
    steps = run.steps
    return {
        "command": run.command,
        "status": run.status,
        "exit_code": run.exit_code,
        "error": run.error,
        "wall_seconds": run.wall,
        "framework": result.framework,
        "instrumented": run.instrumented,
        "notes": run.notes,
        "cost": result.cost.as_meta() if result.cost else None,
        "steps": None
        if steps is None
        else {
            "source": steps.source,
            "total": steps.total,
            "warmup": steps.warmup,
            "measured": steps.count,
            "times": steps.times,
            "series_width": steps.width,
            "mean": steps.mean if steps.count else None,
            "median": steps.median if steps.count else None,
            "p10": steps.quantile(0.1) if steps.count else None,
            "p90": steps.quantile(0.9) if steps.count else None,
            "data_waits": steps.data_waits,
            "data_share": steps.data_share,
            "data_note": steps.data_note,
            "data_source": steps.data_source,
            "data_function": steps.data_function,
            "batches": steps.batches,
            "samples": steps.samples,
            "optimizers": steps.optimizers,
        },
        "sync_wait": None,
        "syncs": [dataclasses.asdict(s) for s in result.syncs] if run.cuda else None,
        "cpu": dataclasses.asdict(run.cpu) if run.cpu else None,
        "gpu": dataclasses.asdict(run.gpu) if run.gpu else None,
        "gpu_not_measured": None if run.gpu else (run.gpu_unavailable or "no samples"),
        "measurements": dataclasses.asdict(result.measurements) if result.measurements else None,
        "attribution": dataclasses.asdict(result.attribution) if result.attribution else None,
        "rank_attributions": {str(rank): dataclasses.asdict(a) for rank, a in result.rank_attributions.items()},
        "verdict": None
        if result.verdict is None
        else {
            **dataclasses.asdict(result.verdict),
            "headline": result.verdict.headline,
        },
        "lint": [dataclasses.asdict(h) for h in result.lint],
        "ranks": ranks_json(result.ranks),
        "memory": dataclasses.asdict(result.memory) if result.memory else None,
        "compute": dataclasses.asdict(result.compute) if result.compute else None,
        "ops": dataclasses.asdict(result.ops) if result.ops else None,
    }


# -- verify --------------------------------------------------------------------------------
def print_verify(out: Output, result: VerifyResult, args: list[str], interpreter: str | None = None) -> None:
    """The diff, each arm's runs and the verdict; `args` and `interpreter` as verify was given
    them (for the `--write` command line)."""
    out.line(
        f"{out.style('gpulint verify', 'bold')} {result.script}: {result.applied} fix(es) from "
        f"{','.join(result.codes) or 'the default rules'}"
    )
    # The diff carries a non-UTF-8 script's bytes as lone surrogates: shown, they become U+FFFD.
    out.line(result.diff.encode("utf-8", "surrogateescape").decode("utf-8", "replace").rstrip())
    if result.failed is not None:
        out.line(out.style(f"the {result.failed_arm} script failed; no comparison", "red"))
        if result.failed.status in ("stopped", "finished"):
            out.line("  it made no measured step")
        else:
            print_failure(out, result.failed)
        return
    rows = []
    for arm in (result.original, result.fixed):
        low, high = arm.spread
        rows.append(
            [arm.name, ms(arm.median), f"{ms(low)} .. {ms(high)}", " ".join(f"{1000 * x:.1f}" for x in arm.run_times)]
        )
    out.table(
        f"Step time (mean per run, median of runs), {len(result.original.runs)} runs each, "
        f"order {' '.join(result.order)}",
        ["arm", "median", "range of runs", "runs (ms)"],
        rows,
        right=(1,),
    )
    for warning in result.warnings:
        out.line(f"{out.style('warning:', 'yellow')} {warning}")
    c = result.comparison
    assert c is not None  # verify() compares whenever no run failed
    colour = {"confirmed": "green", "slowdown": "red"}.get(c.outcome, "yellow")
    out.line(
        f"speedup {c.speedup:.2f}x ({100 * CONFIDENCE:g}% interval {c.interval[0]:.2f}..{c.interval[1]:.2f}; "
        f"runs of the same script differ by about {100 * (c.noise - 1):.1f}%): "
        f"{out.style(c.outcome, colour)} -- {c.reason}"
    )
    if c.outcome == "not confirmed":
        out.line(f"after {len(result.original.runs)} runs of each; more runs (--runs, --max-runs) narrow the interval")
    if result.written:
        out.line(f"wrote the fix to {result.script}")
    suggestion = verify_next(result, args, interpreter)
    if suggestion:
        out.line(suggestion.line)


def verify_json(result: VerifyResult) -> dict:
    def arm(a):
        return {
            "median": a.median if a.run_times else None,
            "run_mean_step_times": a.run_times,
            "runs": [
                {
                    "status": r.status,
                    "exit_code": r.exit_code,
                    "step_times": r.steps.times if r.steps else None,
                    "data_share": r.steps.data_share if r.steps else None,
                }
                for r in a.runs
            ],
        }

    return {
        "script": result.script,
        "select": result.codes,
        "cost": result.cost.as_meta() if result.cost else None,
        "fixes_applied": result.applied,
        "diff": result.diff,
        "order": result.order,
        "original": arm(result.original),
        "fixed": arm(result.fixed),
        "comparison": dataclasses.asdict(result.comparison) if result.comparison else None,
        "failed_arm": result.failed_arm,
        "failure": None
        if result.failed is None
        else {"status": result.failed.status, "exit_code": result.failed.exit_code, "error": result.failed.error},
        "written": result.written,
        "warnings": result.warnings,
    }


def print_sweep(out: Output, result: SweepResult) -> None:
    site = f" (set via {result.site.where})" if result.site else ""
    values = ", ".join(c.value for c in result.candidates)
    out.line(f"{out.style('gpulint verify --param', 'bold')} {result.script}: {result.name} = {values}{site}")
    if result.failed is not None:
        out.line(out.style(f"the run with {result.name}={result.failed_value} failed; no recommendation", "red"))
        print_failure(out, result.failed)
        return
    rows = []
    for c in result.candidates:
        if c.out_of_memory or not c.run_times:
            rows.append([c.value, "out of memory" if c.out_of_memory else NOT_MEASURED, "-", "-", "-"])
            continue
        rates = c.throughputs(result.counts_samples)
        shares = [r.steps.data_share for r in c.runs if r.steps and r.steps.data_share is not None]
        rows.append(
            [
                c.value,
                f"{result.throughput(c):.1f}",
                f"{min(rates):.1f} .. {max(rates):.1f}",
                ms(c.median),
                pct(stats.median(shares)) if shares else NOT_MEASURED,
            ]
        )
    runs = max(len(c.runs) for c in result.candidates)
    out.table(
        f"Throughput per value (median of runs), {runs} runs each, rotating order",
        [result.name, result.unit, "range of runs", "step time", "data wait"],
        rows,
        right=(1, 2, 3, 4),
    )
    if result.batch is not None and not result.same_run:
        for line in result.batch.lines:
            out.line(f"  - {line}")
    else:
        out.line(sweep_conclusion(result))


def sweep_conclusion(result: SweepResult) -> str:
    """What a sweep that ran found, in one line (a batch size's advice aside): printed, and
    recorded as the run's verdict (records.sweep_record)."""
    if result.best is not None and result.same_run:
        return (
            f"no difference: {result.name}={result.best.value} runs the same script with the same arguments as "
            "the runner-up; the spread of their runs is this machine's noise"
        )
    if result.best is not None:
        how = (
            "clearly best (faster than the runner-up beyond the noise between runs)"
            if result.clearly_best
            else "no difference beyond the noise between runs: best by median only"
        )
        return f"recommended: {result.name}={result.best.value} -- {how}"
    return "no value ran: every one ran out of memory"


def sweep_json(result: SweepResult) -> dict:
    return {
        "script": result.script,
        "param": result.name,
        "set_via": dataclasses.asdict(result.site) if result.site else None,
        "order": result.order,
        "throughput_unit": result.unit,
        "values": [
            {
                "value": c.value,
                "median": c.median if c.run_times else None,
                "run_mean_step_times": c.run_times,
                "throughput": result.throughput(c) if c.run_times else None,
                "run_throughputs": c.throughputs(result.counts_samples),
                "out_of_memory": c.out_of_memory,
                "data_shares": [r.steps.data_share if r.steps else None for r in c.runs],
            }
            for c in result.candidates
        ],
        "best": result.best.value if result.best else None,
        "clearly_best": result.clearly_best,
        "batch_advice": dataclasses.asdict(result.batch) if result.batch else None,
        "failed_value": result.failed_value,
    }


# -- scale ---------------------------------------------------------------------------------
def print_scale(out: Output, result: ScaleResult) -> None:
    if result.mode == "strong":
        assert result.site is not None, "strong scaling sets the per-rank batch at a site"
        how = f"strong scaling: global batch {result.global_batch} ({result.site.where} = {result.global_batch} / N)"
    else:
        how = "weak scaling: the per-rank batch is the script's"

    out.line(f"{out.style('gpulint scale', 'bold')} {result.script}: {how}")
    if result.rendezvous is not None:
        out.line(
            f"this node's part of {result.rendezvous.nnodes} nodes (c10d at {result.rendezvous.endpoint(0)} and the "
            "ports after it): processes are per node, throughput and waits are this node's ranks'; every node "
            "runs the same sizes, so the efficiency is the job's"
        )
    if result.failed is not None:
        out.line(out.style(f"the run with {result.failed_size} process(es) failed; no verdict", "red"))
        print_failure(out, result.failed)
        return
    runs = len(result.sizes[0].runs)
    order = " ".join(map(str, result.order))
    efficiency = {e.nproc: e for e in result.efficiencies}
    rows = []
    for size in result.sizes:
        rates = size.throughputs(result.unit)
        parts = size.breakdown()
        e = efficiency.get(size.nproc)
        rows.append(
            [
                str(size.nproc),
                f"{result.throughput(size):.1f}",
                f"{min(rates):.1f} .. {max(rates):.1f}",
                ms(parts["step_time"]),
                ms(parts["data_wait"]),
                ms(parts["collective_wait"]),
                f"{100 * e.value:.0f}% ({100 * e.interval[0]:.0f}%..{100 * e.interval[1]:.0f}%)" if e else "base",
                f"{100 * e.threshold:.0f}%" if e else "-",
                e.outcome if e else "-",
            ]
        )
    out.table(
        f"Throughput per size (geometric mean of {runs} runs, times their median; rotating order {order})",
        [
            "processes",
            result.unit,
            "range of runs",
            "step time",
            "data wait",
            "collective wait",
            "efficiency (95% interval)",
            "bar",
            "outcome",
        ],
        rows,
        right=tuple(range(9)),
    )
    out.line()
    out.line(f"{out.style(f'Verdict: {result.kind}', 'bold')} -- {result.advice}")
    for reason in result.reasons:
        out.line(f"  - {reason}")
    if result.recommendations:
        out.table(
            "What to change, the ones this run points at first",
            ["rule", "change", "expected gain"],
            [[r.code or "-", r.action, r.expected_gain] for r in result.recommendations],
        )


def write_json(target: OutputFile, payload: dict) -> None:
    """Write a --json document (WriteRefused, a sentence, when it cannot be written)."""
    target.write((json.dumps(payload, indent=2, default=str) + "\n").encode())
