"""`gpulint profile`: one measured run, a verdict, and the lint findings that match it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpulint.runtime_check import compute as compute_mod
from gpulint.runtime_check import distributed, stats
from gpulint.runtime_check import memory as memory_mod
from gpulint.runtime_check import verdict as verdict_mod
from gpulint.runtime_check.measure import Command, RunConfig, RunResult, run_once

# Sync lines are mapped to the rule that flags that kind of code; the first match wins.
SYNC_PATTERNS = [
    ("torch.cuda.synchronize", "GL204"),
    (".item(", "GL201"), (".cpu(", "GL201"), (".numpy(", "GL201"), (".tolist(", "GL201"), ("float(", "GL201"),
    ("isnan", "GL201"), ("print(", "GL302"), ("logging.", "GL302"), ("logger.", "GL302"), (".log(", "GL302"),
    ("add_scalar", "GL302"),
    (".to(", "GL104"), (".cuda(", "GL104"),
]


@dataclass
class SyncLine:
    where: str  # file:line
    count: int
    per_step: float
    source: str  # the line's text
    rule: str | None


@dataclass
class LintHit:
    code: str
    row: int
    message: str
    fixable: bool


@dataclass
class Profile:
    run: RunResult
    framework: str
    measurements: verdict_mod.Measurements | None = None
    verdict: verdict_mod.Verdict | None = None
    syncs: list[SyncLine] = field(default_factory=list)
    lint: list[LintHit] = field(default_factory=list)
    command: Command | None = None  # what ran (None in tests that build a Profile by hand)
    # Capacity figures (distributed.py, memory.py, compute.py): what more GPUs or a larger batch would give.
    ranks: distributed.RankReport | None = None  # launched runs only
    memory: memory_mod.MemoryReport | None = None
    compute: compute_mod.ComputeReport | None = None


def framework_of(run: RunResult) -> str:
    if run.steps is not None and run.steps.source != "optimizer steps":
        return "tf"
    if not any(i.startswith("torch") for i in run.instrumented) and any(i.startswith("tensorflow") for i in run.instrumented):
        return "tf"
    return "torch"


def measurements_of(run: RunResult, framework: str,
                    ranks: distributed.RankReport | None = None) -> verdict_mod.Measurements:
    steps = run.steps
    sample = steps.sample if steps else []
    syncs = sum(steps.syncs.values()) / steps.count if steps and steps.count and run.cuda else None
    return verdict_mod.Measurements(
        framework=framework,
        steps=steps.count if steps else 0,
        step_median=steps.median if sample else None,
        step_cv=stats.variation(sample),
        data_share=steps.data_share if steps else None,
        syncs_per_step=syncs,
        gpu_util=run.gpu.util_mean if run.gpu else None,
        gpu_idle_fraction=run.gpu.idle_fraction if run.gpu else None,
        gpu_memory=run.gpu.mem_peak_fraction if run.gpu else None,
        collective_share=ranks.collective_share if ranks else None,
        main_cores=run.cpu.main_cores if run.cpu else None,
        worker_cores=run.cpu.worker_cores if run.cpu else None,
        other_cores=run.cpu.other_cores if run.cpu else None,
    )


def sync_lines(run: RunResult) -> list[SyncLine]:
    if run.steps is None or not run.steps.syncs:
        return []
    lines = []
    for where, count in sorted(run.steps.syncs.items(), key=lambda kv: -kv[1]):
        path, _, row = where.rpartition(":")
        text = _source_line(path, int(row)) if row.isdigit() else ""
        rule = next((code for pattern, code in SYNC_PATTERNS if pattern in text), None)
        lines.append(SyncLine(where, count, count / max(1, run.steps.count), text, rule))
    return lines


def _source_line(path: str, row: int) -> str:
    try:
        return Path(path).read_text(errors="replace").splitlines()[row - 1].strip()
    except (OSError, IndexError):
        return ""


def lint_hits(script: Path | None, codes: list[str]) -> list[LintHit]:
    """The static findings of the recommended rules in the profiled script (selected explicitly,
    hints included), so the report can point at lines."""
    if script is None or not codes or not script.is_file():
        return []
    from gpulint.linter.analysis.parse import SyntaxErrorInSource, UndecodableSource
    from gpulint.linter.analysis.parse_guard import UnanalysableSource
    from gpulint.linter.config import ConfigError, Settings
    from gpulint.linter.engine import Linter

    try:
        result = Linter(Settings(select=codes)).lint_source(script.read_bytes(), str(script))
    except (SyntaxErrorInSource, UndecodableSource, UnanalysableSource, ConfigError, UnicodeDecodeError, ValueError):
        return []
    order = {code: i for i, code in enumerate(codes)}
    hits = [LintHit(f.code, f.location.row, f.message, f.fix is not None) for f in result.findings if f.code in order]
    return sorted(hits, key=lambda h: (order[h.code], h.row))


def profile(command: Command, config: RunConfig, progress=None, flops_per_step: float | None = None,
            peak_tflops: float | None = None) -> Profile:
    run = run_once(command, config, progress)
    framework = framework_of(run)
    result = Profile(run, framework, command=command)
    if run.status not in ("stopped", "finished") or run.steps is None:
        return result
    result.ranks = distributed.rank_report(run)
    result.memory = memory_mod.memory_report(run)
    result.compute = compute_mod.compute_report(run, flops_per_step, peak_tflops)
    result.measurements = measurements_of(run, framework, result.ranks)
    result.verdict = verdict_mod.decide(result.measurements)
    if result.verdict.kind == "communication-bound":
        steps = run.steps
        result.verdict.recommendations = distributed.communication_advice(
            result.ranks.ddp_config, bool(steps.batches and steps.batches > steps.count), steps.data_share, run.cuda)
    result.syncs = sync_lines(run)
    if not run.cuda:  # what only a GPU can show is not suggested from a run without one
        result.verdict.recommendations = [
            r for r in result.verdict.recommendations if r.code not in verdict_mod.NEEDS_DEVICE
        ]
    codes = [r.code for r in result.verdict.recommendations if r.code]
    codes += [s.rule for s in result.syncs if s.rule and s.rule not in codes]
    result.lint = lint_hits(command.script, codes)
    # What the script actually has comes first; the order among them is the expected-gain order.
    found = {h.code for h in result.lint}
    result.verdict.recommendations.sort(key=lambda r: r.code not in found)
    return result
