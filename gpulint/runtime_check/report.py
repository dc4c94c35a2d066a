"""Terminal reports (rich) and the `--json` documents of `profile` and `verify`.

Anything not measured is printed as "not measured" (with the reason where there is one) and is
null in JSON: never a number.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

from rich.console import Console
from rich.table import Table

from gpulint.runtime_check.distributed import RankReport
from gpulint.runtime_check.figures import NOT_MEASURED, Figure, format_value
from gpulint.runtime_check.measure import RunResult
from gpulint.runtime_check.profile import Profile
from gpulint.runtime_check.scale import ScaleResult
from gpulint.runtime_check.sweep import SweepResult
from gpulint.runtime_check.verify import VerifyResult

SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int = 60, top: float = 100.0) -> str:
    """Values (0..top) in `width` bins, each bin's mean as one block character."""
    if not values:
        return ""
    bins = min(width, len(values))
    out = []
    for i in range(bins):
        chunk = values[i * len(values) // bins:(i + 1) * len(values) // bins] or [values[-1]]
        level = sum(chunk) / len(chunk) / top
        out.append(SPARK[min(len(SPARK) - 1, max(0, round(level * (len(SPARK) - 1))))])
    return "".join(out)


def ms(seconds: float | None) -> str:
    return format_value(seconds, "s")


def pct(share: float | None) -> str:
    return format_value(share, "share")


# -- profile -------------------------------------------------------------------------------
def print_failure(console: Console, run: RunResult) -> None:
    what = {
        "timeout": "the script did not finish or reach its steps in time",
        "error": "the script raised an exception",
        "exit": f"the script exited with code {run.exit_code}",
        "no-report": "the script ended without the profiler's report",
    }.get(run.status, run.status)
    console.print(f"[bold red]gpulint profile: {what}[/]", highlight=False)
    if run.error:
        where = f" at {run.error['where']}" if run.error.get("where") else ""
        console.print(f"  {run.error['type']}: {run.error['message']}{where}", highlight=False, markup=False)
    if run.output_tail:
        console.print("  last lines of its output:", highlight=False)
        for line in run.output_tail.splitlines():
            console.print(f"    {line}", highlight=False, markup=False)


def print_no_steps(console: Console, run: RunResult) -> None:
    console.print("[bold yellow]gpulint profile: the script never made a training step[/]", highlight=False)
    console.print(
        "  No optimizer step (torch.optim), Keras fit batch or tf.data batch was seen, so there is nothing to "
        "time. Profile the training entry point, and check it trains with the given arguments.",
        highlight=False,
    )
    if run.instrumented:
        console.print(f"  instrumented: {', '.join(run.instrumented)}", highlight=False)
    else:
        console.print("  neither torch nor TensorFlow/Keras was imported", highlight=False)


def print_profile(console: Console, result: Profile) -> None:
    run, steps, m, v = result.run, result.run.steps, result.measurements, result.verdict
    console.print(f"[bold]gpulint profile[/] {run.command}", highlight=False)
    table = Table(title="Measured", show_header=True, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("note")
    table.add_row("steps", f"{steps.count} measured", f"{steps.source}; {steps.warmup} warm-up step(s) skipped; stopped: {run.status}")
    if steps.optimizers and len(steps.optimizers) > 1:
        table.add_row("optimizers", ", ".join(f"{k}: {n}" for k, n in steps.optimizers.items()), "the most frequent paces the step")
    if steps.count:
        table.add_row("step time (mean)", ms(steps.total_time / steps.count), f"median {ms(steps.median)}, p10 {ms(steps.quantile(0.1))}, p90 {ms(steps.quantile(0.9))}")
        if steps.batches is not None and steps.count:
            per = steps.batches / steps.count
            if abs(per - 1) > 0.01:
                table.add_row("batches per step", f"{per:.2f}", "gradient accumulation")
    table.add_row("data wait", pct(steps.data_share), steps.data_note or (f"{ms(sum(steps.data_waits) / steps.count)} per step" if steps.data_waits and steps.count else ""))
    table.add_row("sync wait", NOT_MEASURED, "host timers cannot see it" + ("; sync lines below" if result.syncs else ""))
    table.add_row("effective compute share", pct(v.compute_share) if v and m and m.data_share is not None else NOT_MEASURED, "step time minus data wait, over step time")
    add_figures(table, result.compute.figures if result.compute else [])
    cpu = run.cpu
    if cpu:
        main = "CPU busiest rank" if cpu.rank_cores else "CPU main process"
        table.add_row(main, f"{cpu.main_cores:.2f} cores", "pegged" if cpu.main_pegged else "")
        table.add_row("CPU loader workers", f"{cpu.worker_cores:.2f} cores", f"{cpu.workers} process(es)")
        table.add_row("CPU machine", f"{cpu.system_cores:.2f} of {cpu.cores} cores", "per core: " + " ".join(f"{p:.0f}%" for p in cpu.per_core))
        table.add_row("CPU other processes", f"{cpu.other_cores:.2f} cores", "busy machine" if cpu.machine_busy else "")
    else:
        table.add_row("CPU", NOT_MEASURED, "run too short for two samples")
    if run.gpu:
        g = run.gpu
        table.add_row("GPU utilization", f"{g.util_mean:.0f}%", f"median {g.util_median:.0f}%, p10 {g.util_p10:.0f}%, at 0%: {100 * g.idle_fraction:.0f}% of {g.samples} samples")
        table.add_row("GPU memory peak", f"{100 * g.mem_peak_fraction:.0f}%", ", ".join(g.devices))
    else:
        table.add_row("GPU utilization", NOT_MEASURED, run.gpu_unavailable or "no samples")
        table.add_row("GPU memory", NOT_MEASURED, "")
    add_figures(table, result.memory.figures if result.memory else [])
    console.print(table)
    if result.ranks:
        print_ranks(console, result.ranks)
    if run.gpu and run.gpu.series:
        console.print(f"GPU utilization over the run: {sparkline(run.gpu.series)}", highlight=False)
    if result.syncs:
        syncs = Table(title="Host-device syncs in the measured steps", title_justify="left")
        for column in ("where", "per step", "line", "rule"):
            syncs.add_column(column)
        for s in result.syncs:
            syncs.add_row(s.where, f"{s.per_step:.1f}", s.source, s.rule or "-")
        console.print(syncs)
    elif run.cuda:
        console.print("No host-device sync in the measured steps.", highlight=False)
    else:
        console.print("Host-device syncs: not measured (no CUDA device).", highlight=False)
    for note in run.notes:
        console.print(f"note: {note}", highlight=False, markup=False)
    if v is None:
        return
    for warning in v.warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    console.print(f"\n[bold]Verdict: {v.headline}[/] -- {v.advice}", highlight=False)
    for reason in v.reasons:
        console.print(f"  - {reason}", highlight=False)
    for advice in result.memory.advice if result.memory else []:
        console.print(f"Memory: {advice}", highlight=False, markup=False)
    if v.recommendations:
        recs = Table(title="Fixes to try, in order of expected gain", title_justify="left")
        for column in ("rule", "fix", "expected gain", "in this script"):
            recs.add_column(column)
        for r in v.recommendations:
            lines = [str(row) for row in dict.fromkeys(h.row for h in result.lint if h.code == r.code)]
            recs.add_row(r.code or "-", r.action, r.expected_gain, ("line " + ", ".join(lines)) if lines else "-")
        console.print(recs)
        fixable = [h for h in result.lint if h.fixable]
        if fixable and result.script:
            console.print(f"Measure the first fix before keeping it: gpulint verify {result.script} --select {fixable[0].code} -- ARGS",
                          highlight=False, markup=False)


def add_figures(table: Table, figures: list[Figure]) -> None:
    for figure in figures:
        table.add_row(figure.name, figure.text, figure.note)


def print_ranks(console: Console, ranks: RankReport) -> None:
    table = Table(title=f"Per rank ({len(ranks.ranks)} of world size {ranks.world_size})", title_justify="left")
    for column in ("rank", "step time", "data wait", "collective wait", "all-reduce", "own work", "CPU cores",
                   "samples/step"):
        table.add_column(column, justify="right")
    for r in ranks.ranks:
        table.add_row(str(r.rank), ms(r.step_time), ms(r.data_wait), ms(r.collective_wait), ms(r.allreduce_time),
                      ms(r.own_time), NOT_MEASURED if r.cores is None else f"{r.cores:.2f}",
                      NOT_MEASURED if r.samples_per_step is None else f"{r.samples_per_step:g}")
    console.print(table)
    console.print(f"collective wait: {ranks.collective_note}", highlight=False, markup=False)
    console.print(f"slowest rank: {ranks.slowest_note}", highlight=False, markup=False)


def ranks_json(ranks: RankReport | None) -> dict | None:
    if ranks is None:
        return None
    return {**dataclasses.asdict(ranks), "collective_share": ranks.collective_share,
            "ranks": [{**dataclasses.asdict(r), "own_time": r.own_time, "collective_share": r.collective_share}
                      for r in ranks.ranks]}


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
        "steps": None if steps is None else {
            "source": steps.source, "total": steps.total, "warmup": steps.warmup, "measured": steps.count,
            "times": steps.times, "mean": steps.total_time / steps.count if steps.count else None,
            "median": steps.median if steps.count else None,
            "p10": steps.quantile(0.1) if steps.count else None, "p90": steps.quantile(0.9) if steps.count else None,
            "data_waits": steps.data_waits, "data_share": steps.data_share, "data_note": steps.data_note,
            "batches": steps.batches, "samples": steps.samples, "optimizers": steps.optimizers,
        },
        "sync_wait": None,
        "syncs": [dataclasses.asdict(s) for s in result.syncs] if run.cuda else None,
        "cpu": dataclasses.asdict(run.cpu) if run.cpu else None,
        "gpu": dataclasses.asdict(run.gpu) if run.gpu else None,
        "gpu_not_measured": None if run.gpu else (run.gpu_unavailable or "no samples"),
        "measurements": dataclasses.asdict(result.measurements) if result.measurements else None,
        "verdict": None if result.verdict is None else {
            **dataclasses.asdict(result.verdict), "headline": result.verdict.headline,
        },
        "lint": [dataclasses.asdict(h) for h in result.lint],
        "ranks": ranks_json(result.ranks),
        "memory": dataclasses.asdict(result.memory) if result.memory else None,
        "compute": dataclasses.asdict(result.compute) if result.compute else None,
    }


# -- verify --------------------------------------------------------------------------------
def print_verify(console: Console, result: VerifyResult) -> None:
    console.print(f"[bold]gpulint verify[/] {result.script}: {result.applied} fix(es) from {','.join(result.codes) or 'the default rules'}", highlight=False)
    # The diff carries a non-UTF-8 script's bytes as lone surrogates: shown, they become U+FFFD.
    shown = result.diff.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    console.print(shown.rstrip(), highlight=False, markup=False)
    if result.failed is not None:
        console.print(f"[bold red]the {result.failed_arm} script failed; no comparison[/]", highlight=False)
        if result.failed.ok is False and result.failed.status in ("stopped", "finished"):
            console.print("  it made no measured step", highlight=False)
        else:
            print_failure(console, result.failed)
        return
    table = Table(title=f"Step time (mean per run, median of runs), {len(result.original.runs)} runs each, order {' '.join(result.order)}", title_justify="left")
    for column in ("arm", "median", "range of runs", "runs (ms)"):
        table.add_column(column)
    for arm in (result.original, result.fixed):
        low, high = arm.spread
        table.add_row(arm.name, ms(arm.median), f"{ms(low)} .. {ms(high)}", " ".join(f"{1000 * x:.1f}" for x in arm.run_times))
    console.print(table)
    c = result.comparison
    colour = {"confirmed": "green", "slowdown": "red"}.get(c.outcome, "yellow")
    console.print(
        f"speedup {c.speedup:.2f}x (95% bootstrap interval {c.interval[0]:.2f}..{c.interval[1]:.2f}; "
        f"ranges {'clear of each other' if c.ranges_clear else 'overlap'}): [bold {colour}]{c.outcome}[/]",
        highlight=False,
    )
    if result.written:
        console.print(f"wrote the fix to {result.script}", highlight=False)
    elif c.outcome == "confirmed":
        console.print("the script is unchanged; --write applies the fix", highlight=False)


def verify_json(result: VerifyResult) -> dict:
    def arm(a):
        return {
            "median": a.median if a.run_times else None,
            "run_mean_step_times": a.run_times,
            "runs": [{"status": r.status, "exit_code": r.exit_code, "step_times": r.steps.times if r.steps else None,
                      "data_share": r.steps.data_share if r.steps else None} for r in a.runs],
        }

    return {
        "script": result.script,
        "select": result.codes,
        "fixes_applied": result.applied,
        "diff": result.diff,
        "order": result.order,
        "original": arm(result.original),
        "fixed": arm(result.fixed),
        "comparison": dataclasses.asdict(result.comparison) if result.comparison else None,
        "failed_arm": result.failed_arm,
        "failure": None if result.failed is None else {"status": result.failed.status, "exit_code": result.failed.exit_code, "error": result.failed.error},
        "written": result.written,
    }


def print_sweep(console: Console, result: SweepResult) -> None:
    site = f" (set via {result.site.where})" if result.site else ""
    values = ", ".join(c.value for c in result.candidates)
    console.print(f"[bold]gpulint verify --param[/] {result.script}: {result.name} = {values}{site}", highlight=False)
    if result.failed is not None:
        console.print(f"[bold red]the run with {result.name}={result.failed_value} failed; no recommendation[/]", highlight=False)
        print_failure(console, result.failed)
        return
    runs = max(len(c.runs) for c in result.candidates)
    table = Table(title=f"Throughput per value (median of runs), {runs} runs each, rotating order",
                  title_justify="left")
    for column in (result.name, result.unit, "range of runs", "step time", "data wait"):
        table.add_column(column)
    for c in result.candidates:
        if c.out_of_memory:
            table.add_row(c.value, "out of memory", "-", "-", "-")
            continue
        rates = c.throughputs(result.counts_samples)
        shares = [r.steps.data_share for r in c.runs if r.steps and r.steps.data_share is not None]
        table.add_row(c.value, f"{result.throughput(c):.1f}", f"{min(rates):.1f} .. {max(rates):.1f}", ms(c.median),
                      pct(statistics.median(shares)) if shares else NOT_MEASURED)
    console.print(table)
    if result.batch is not None:
        for line in result.batch.lines:
            console.print(f"  - {line}", highlight=False, markup=False)
    elif result.best is not None:
        how = ("clearly best (its range is clear of the runner-up's)" if result.clearly_best
               else "best by median, within the noise of the runner-up")
        console.print(f"recommended: {result.name}={result.best.value} -- {how}", highlight=False)
    else:
        console.print("no value ran: every one ran out of memory", highlight=False)


def sweep_json(result: SweepResult) -> dict:
    return {
        "script": result.script,
        "param": result.name,
        "set_via": dataclasses.asdict(result.site) if result.site else None,
        "order": result.order,
        "throughput_unit": result.unit,
        "values": [{"value": c.value, "median": c.median if c.run_times else None, "run_mean_step_times": c.run_times,
                    "throughput": result.throughput(c) if c.run_times else None,
                    "run_throughputs": c.throughputs(result.counts_samples), "out_of_memory": c.out_of_memory,
                    "data_shares": [r.steps.data_share if r.steps else None for r in c.runs]} for c in result.candidates],
        "best": result.best.value if result.best else None,
        "clearly_best": result.clearly_best,
        "batch_advice": dataclasses.asdict(result.batch) if result.batch else None,
        "failed_value": result.failed_value,
    }


# -- scale ---------------------------------------------------------------------------------
def print_scale(console: Console, result: ScaleResult) -> None:
    how = (f"strong scaling: global batch {result.global_batch} ({result.site.where} = {result.global_batch} / N)"
           if result.mode == "strong" else "weak scaling: the per-rank batch is the script's")
    console.print(f"[bold]gpulint scale[/] {result.script}: {how}", highlight=False)
    if result.failed is not None:
        console.print(f"[bold red]the run with {result.failed_size} process(es) failed; no verdict[/]", highlight=False)
        print_failure(console, result.failed)
        return
    runs = len(result.sizes[0].runs)
    order = " ".join(map(str, result.order))
    table = Table(title=f"Throughput per size (median of {runs} runs, rotating order {order})", title_justify="left")
    for column in ("processes", result.unit, "range of runs", "step time", "data wait", "collective wait",
                   "efficiency (95% interval)", "bar", "outcome"):
        table.add_column(column, justify="right")
    efficiency = {e.nproc: e for e in result.efficiencies}
    for size in result.sizes:
        rates = size.throughputs(result.unit)
        parts = size.breakdown()
        e = efficiency.get(size.nproc)
        table.add_row(str(size.nproc), f"{result.throughput(size):.1f}", f"{min(rates):.1f} .. {max(rates):.1f}",
                      ms(parts["step_time"]), ms(parts["data_wait"]), ms(parts["collective_wait"]),
                      f"{100 * e.value:.0f}% ({100 * e.interval[0]:.0f}%..{100 * e.interval[1]:.0f}%)" if e else "base",
                      f"{100 * e.threshold:.0f}%" if e else "-", e.outcome if e else "-")
    console.print(table)
    console.print(f"\n[bold]Verdict: {result.kind}[/] -- {result.advice}", highlight=False)
    for reason in result.reasons:
        console.print(f"  - {reason}", highlight=False, markup=False)
    if result.recommendations:
        recs = Table(title="What to change, the ones this run points at first", title_justify="left")
        for column in ("rule", "change", "expected gain"):
            recs.add_column(column)
        for r in result.recommendations:
            recs.add_row(r.code or "-", r.action, r.expected_gain)
        console.print(recs)


def write_json(path: Path, payload: dict) -> None:
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
