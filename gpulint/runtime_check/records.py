"""A finished `profile` or `verify` as the history stores it (history.RunRecord): what ran, on
which machine and commit, its figures (figures.Figure) with their noise, and its series (per step, and over
time from the start of the measured window: negative times are the warm-up).

Series are stored thinned to STORED_POINTS points (per-core CPU to fewer on machines with many
cores), which keeps a run to tens of kilobytes however long it was.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import socket
from pathlib import Path

import psutil

from gpulint import __version__
from gpulint.runtime_check import stats
from gpulint.runtime_check.compare import SPEEDUP, STEP_TIME
from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.history import RunRecord, Series, git_state, project_root
from gpulint.runtime_check.measure import Command, RunConfig, RunResult
from gpulint.runtime_check.profile import Profile
from gpulint.runtime_check.report import (
    NextCommand,
    next_for,
    profile_next,
    sweep_conclusion,
    sweep_json,
    verify_command,
    verify_next,
)
from gpulint.runtime_check.scale import ScaleResult, scale_record
from gpulint.runtime_check.sweep import SweepResult
from gpulint.runtime_check.verify import CONFIDENCE, VerifyResult, run_warnings

STORED_POINTS = 1000
CORE_POINTS_TOTAL = 20000  # points for all per-core series of a run together
GIB = 1024**3


def run_root(command: Command) -> Path:
    """The project a run belongs to: from the script's folder, or the working folder for -m."""
    return project_root(command.script.resolve().parent if command.script else Path.cwd())


def relative_to_project(path: Path, root: Path) -> str:
    """The path relative to the project root, or absolute when it is outside."""
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path.resolve())


def _sha256(path: Path | None) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path else None
    except OSError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(run: RunResult) -> dict:
    """The machine and software a run measured: what makes two runs comparable."""
    frameworks = {}
    for entry in run.instrumented:
        name, _, version = entry.partition(" ")
        if name in ("torch", "tensorflow", "keras") and version:
            frameworks[name] = version.split()[0]
    return {
        "cpu": _cpu_model(),
        "cores": psutil.cpu_count() or 1,
        "gpus": run.gpu.devices if run.gpu else [],
        "gpu_not_measured": None if run.gpu else run.gpu_unavailable,
        "driver": run.gpu.driver if run.gpu else None,
        "cuda": run.cuda,
        "python": run.python,
        "frameworks": frameworks,
        "platform": platform.platform(),
        "gpulint": __version__,
    }


def _base(
    kind: str, command_text: str, key: list, command: Command, run: RunResult | None, started_at: float, wall: float
) -> RunRecord:
    root = run_root(command)
    commit, dirty = git_state(root)
    return RunRecord(
        kind=kind,
        command=command_text,
        command_key=json.dumps([kind, *key]),
        status="",
        started_at=started_at,
        script=relative_to_project(command.script, root) if command.script else None,
        script_sha256=_sha256(command.script),
        wall_seconds=wall,
        git_commit=commit,
        git_dirty=dirty,
        host=socket.gethostname(),
        environment=environment(run) if run else {},
    )


def _target(command: Command, root: Path) -> list[str]:
    """The script (relative to the project) or -m module, and the arguments."""
    if command.script is None:
        return command.target
    return [relative_to_project(command.script, root), *command.target[1:]]


# -- profile ---------------------------------------------------------------------------------
def profile_record(result: Profile, config: RunConfig, started_at: float) -> RunRecord:
    run, command = result.run, result.command
    assert command is not None, "a profile that ran knows its command"
    record = _base(
        "profile",
        f"gpulint profile -- {run.command}",
        _target(command, run_root(command)),
        command,
        run,
        started_at,
        run.wall,
    )
    record.status = run.status
    record.verdict = result.verdict.headline if result.verdict else None
    record.figures = profile_figures(result)
    record.series = profile_series(run)
    steps = run.steps
    record.meta = {
        "config": {"steps": config.steps, "warmup": config.warmup, "seconds": config.seconds},
        "framework": result.framework,
        "step_source": steps.source if steps else None,
        "series_width": steps.width if steps else None,
        "verdict": None
        if result.verdict is None
        else {
            "headline": result.verdict.headline,
            "advice": result.verdict.advice,
            "reasons": result.verdict.reasons,
            "warnings": result.verdict.warnings,
            "recommendations": [
                {
                    "code": r.code,
                    "action": r.action,
                    "expected_gain": r.expected_gain,
                    "line": r.line,
                    "next": _next(next_for(result, r)),
                }
                for r in result.verdict.recommendations
            ],
        },
        "memory_advice": list(result.memory.advice) if result.memory else [],
        "lint": [{"code": h.code, "row": h.row, "message": h.message, "fixable": h.fixable} for h in result.lint],
        "syncs": [{"where": s.where, "per_step": s.per_step, "source": s.source, "rule": s.rule} for s in result.syncs],
        "notes": run.notes,
        "next_command": _next(profile_next(result)),
        "cost": result.cost.as_meta() if result.cost else None,
    }
    if result.ranks is not None:
        # each rank's own figures: what nodes.py merges across the runs of a multi-node job
        record.meta["ranks"] = [
            {
                "rank": r.rank,
                "node": r.node,
                "steps": r.steps,
                "step_time": r.step_time,
                "data_wait": r.data_wait,
                "collective_wait": r.collective_wait,
                "allreduce_time": r.allreduce_time,
            }
            for r in result.ranks.ranks
        ]
        if result.ranks.job is not None:
            record.meta["job"] = dataclasses.asdict(result.ranks.job)
    return record


def _next(suggestion: NextCommand | None) -> dict | None:
    return None if suggestion is None else dataclasses.asdict(suggestion)


def profile_figures(result: Profile) -> list[Figure]:
    """The run's figures, the capacity figures (ranks, memory, FLOPs) included."""
    run, steps, v = result.run, result.run.steps, result.verdict
    figures = [Figure("measured steps", steps.count if steps else 0, "count")]
    if steps and steps.count:
        noise = stats.mean_noise(steps.times)
        throughput = 1 / steps.mean
        waits = steps.data_waits
        figures += [
            Figure(STEP_TIME, steps.mean, "s", "over the measured window: 1 / throughput", "lower", noise),
            Figure(
                "throughput",
                throughput,
                "steps/s",
                better="higher",
                noise=None if noise is None else throughput * noise / steps.mean,
            ),
            Figure("step time (median)", steps.median, "s", better="lower"),
            Figure("step time (p10)", steps.quantile(0.1), "s", better="lower"),
            Figure("step time (p90)", steps.quantile(0.9), "s", better="lower"),
            Figure(
                "data wait (share of step time)",
                steps.data_share,
                "share",
                steps.data_note or "",
                "lower",
                None if waits is None or noise is None else _share_noise(waits, steps.mean),
            ),
        ]
        if steps.batches is not None:
            figures.append(Figure("batches per step", steps.batches / steps.count, "count"))
        if steps.samples_per_second is not None:
            figures.append(Figure("samples per second", steps.samples_per_second, "samples/s", better="higher"))
    if v is not None and result.measurements is not None and result.measurements.data_share is not None:
        figures.append(Figure("effective compute share", v.compute_share, "share", better="higher"))
    if run.cuda and steps and steps.count:
        figures.append(
            Figure("host-device syncs per step", sum(steps.syncs.values()) / steps.count, "count", better="lower")
        )
    if run.cpu:
        c = run.cpu
        figures += [
            Figure("CPU of the main process", c.main_cores, "cores"),
            Figure("CPU of the loader workers", c.worker_cores, "cores"),
            Figure("CPU of the machine", c.system_cores, "cores"),
            Figure("CPU of other processes", c.other_cores, "cores", better="lower"),
        ]
    if run.gpu:
        g = run.gpu
        figures += [
            Figure("GPU utilization (mean)", g.util_mean, "%", better="higher"),
            Figure("GPU utilization (p10)", g.util_p10, "%", better="higher"),
            Figure("GPU samples at 0%", g.idle_fraction, "share", better="lower"),
            Figure("GPU memory peak (share of the card)", g.mem_peak_fraction, "share"),
        ]
    else:
        figures.append(Figure("GPU utilization (mean)", None, "%", run.gpu_unavailable or "no samples", "higher"))
    for report in (result.ranks, result.memory, result.compute):
        if report is not None:
            figures += report.figures
    figures.append(Figure("wall time of the run", run.wall, "s"))
    return figures


def _share_noise(waits: list[float], mean_step: float) -> float | None:
    noise = stats.mean_noise(waits)
    return None if noise is None else noise / mean_step


def profile_series(run: RunResult) -> list[Series]:
    series: list[Series] = []
    steps = run.steps
    if steps and steps.series:
        starts, done = [], 0
        for n, _, _ in steps.series:
            starts.append(done + (n + 1) / 2)  # a point sits at the middle of the steps it covers
            done += n
        x, y = stats.thin(starts, steps.times, STORED_POINTS)
        series.append(Series("step_time", "step time", "step time", "s", "step", x, y))
        if steps.data_waits is not None:
            x, y = stats.thin(starts, steps.data_waits, STORED_POINTS)
            series.append(Series("data_wait", "data wait per step", "data wait per step", "s", "step", x, y))
    t0 = steps.window[0] if steps and steps.window else None
    if run.gpu and run.gpu.times:
        g = run.gpu
        t0 = g.times[0] if t0 is None else t0
        times = [t - t0 for t in g.times]
        for i, name in enumerate(g.devices):
            x, y = stats.thin(times, g.util_series[i], STORED_POINTS)
            series.append(Series(f"gpu{i}_util", f"GPU {i} ({name})", "GPU utilization", "%", "s", x, y))
            x, y = stats.thin(times, [m / GIB for m in g.mem_series[i]], STORED_POINTS)
            series.append(Series(f"gpu{i}_memory", f"GPU {i} ({name})", "GPU memory", "GiB", "s", x, y))
    if run.cpu and run.cpu.times:
        c = run.cpu
        t0 = c.times[0] if t0 is None else t0
        times = [t - t0 for t in c.times]
        for name, label, values in (
            ("cpu_main", "main process", c.main_series),
            ("cpu_workers", "loader workers", c.worker_series),
        ):
            x, y = stats.thin(times, values, STORED_POINTS)
            series.append(Series(name, label, "CPU of the run", "cores", "s", x, y))
        per_core_points = max(50, min(STORED_POINTS, CORE_POINTS_TOTAL // max(1, len(c.core_series))))
        for i, values in enumerate(c.core_series):
            x, y = stats.thin(times, values, per_core_points)
            series.append(Series(f"cpu_core{i}", f"core {i}", "CPU per core", "%", "s", x, y))
    return series


# -- verify ----------------------------------------------------------------------------------
def verify_record(result: VerifyResult, command: Command, started_at: float, wall: float) -> RunRecord:
    """`command` is the original arm's command (the script and its arguments)."""
    runs = result.original.runs + result.fixed.runs
    text = verify_command(command.target[0], result.codes, command.target[1:])
    key = [*_target(command, run_root(command)), "--select", ",".join(result.codes)]
    record = _base("verify", text, key, command, runs[0] if runs else None, started_at, wall)
    c = result.comparison
    record.status = c.outcome if c else f"{result.failed_arm} failed"
    record.verdict = c.outcome if c else None
    figures = [Figure("runs of each arm", len(result.original.runs), "count")]
    for arm in (result.original, result.fixed):
        if arm.run_times:
            figures.append(Figure(f"step time, {arm.name} (median of runs)", arm.median, "s", better="lower"))
    if c:
        figures += [
            Figure(SPEEDUP, c.speedup, "x", c.reason, "higher"),
            Figure(f"speedup, low end of the {100 * CONFIDENCE:g}% interval", c.interval[0], "x"),
            Figure(f"speedup, high end of the {100 * CONFIDENCE:g}% interval", c.interval[1], "x"),
            Figure("typical difference between runs of the same script", c.noise - 1, "share"),
        ]
    record.figures = figures
    record.series = [
        Series(
            f"{arm.name}_runs",
            arm.name,
            "step time per run",
            "s",
            "run",
            [float(i + 1) for i in range(len(arm.run_times))],
            arm.run_times,
        )
        for arm in (result.original, result.fixed)
        if arm.run_times
    ]
    record.meta = {
        "codes": result.codes,
        "fixes_applied": result.applied,
        "diff": result.diff,
        "order": result.order,
        "warnings": result.warnings,
        "written": result.written,
        "next_command": _next(verify_next(result, command.target[1:], command.interpreter)),
        "cost": result.cost.as_meta() if result.cost else None,
    }
    return record


# -- verify --param ----------------------------------------------------------------------------
def sweep_record(result: SweepResult, command: Command, started_at: float, wall: float) -> RunRecord:
    """A sweep whose values ran: each value's throughput (median of runs) as a figure, the
    throughput of its runs as a series, the `--json` document in meta.  `command` is the script and
    its arguments as given."""
    param = f"{result.name}={','.join(c.value for c in result.candidates)}"
    text = verify_command(command.target[0], [], command.target[1:], None, "--param", param)
    key = [*_target(command, run_root(command)), "--param", param]
    runs = [run for c in result.candidates for run in c.runs]
    record = _base("sweep", text, key, command, runs[0] if runs else None, started_at, wall)
    conclusion = sweep_conclusion(result)
    best = f"{result.name}={result.best.value}" if result.best is not None else None
    record.status = "clearly best" if result.clearly_best else "measured"
    record.verdict = f"{best} clearly best" if result.clearly_best else best
    measured = [c for c in result.candidates if c.run_times]
    record.figures = [
        Figure(
            f"throughput, {result.name}={c.value} (median of runs)", result.throughput(c), result.unit, better="higher"
        )
        for c in measured
    ]
    record.series = [
        Series(
            f"throughput_{index}",
            f"{result.name}={c.value}",
            "throughput per run",
            result.unit,
            "run",
            [float(i + 1) for i in range(len(c.run_times))],
            c.throughputs(result.counts_samples),
        )
        for index, c in enumerate(result.candidates)
        if c.run_times
    ]
    lines = list(result.batch.lines) if result.batch is not None and not result.same_run else [conclusion]
    out_of_memory = [f"{result.name}={c.value} ran out of memory" for c in result.candidates if c.out_of_memory]
    record.meta = {
        **sweep_json(result),
        "verdict": {
            "headline": record.verdict or "no value ran",
            "advice": lines[0],
            "reasons": lines[1:] + out_of_memory,
            "warnings": run_warnings(runs),
        },
    }
    return record


# -- scale -----------------------------------------------------------------------------------
def scale_run_record(
    result: ScaleResult, command: Command, options: list[str], started_at: float, wall: float
) -> RunRecord:
    """A finished scaling run: its efficiencies and throughputs as figures, the throughput of every
    run at each size as series, the whole `--json` document in meta.  `options`: the command line's
    `--nproc` and `--strong` (what makes two scaling runs of a script comparable)."""
    text = " ".join(["gpulint scale", *options, "--", command.display()])
    runs = [run for size in result.sizes for run in size.runs]
    record = _base(
        "scale",
        text,
        [*_target(command, run_root(command)), *options],
        command,
        runs[0] if runs else None,
        started_at,
        wall,
    )
    record.status = result.kind or "failed"
    record.verdict = result.kind or None
    record.figures = result.figures
    record.series = [
        Series(
            f"throughput_{size.nproc}",
            f"{size.nproc} processes",
            "throughput per run",
            result.unit,
            "run",
            [float(i + 1) for i in range(len(size.runs))],
            size.throughputs(result.unit),
        )
        for size in result.sizes
        if size.runs
    ]
    record.meta = {
        **scale_record(result),
        "verdict": {"headline": result.kind, "advice": result.advice, "reasons": result.reasons, "warnings": []},
    }
    return record
