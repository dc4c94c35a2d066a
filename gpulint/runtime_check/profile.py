"""`gpulint profile`: one measured run, a verdict, and the lint findings that match it."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

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


CUDA_ONLY = {"GL102", "GL104"}


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
    script: str | None = None


def framework_of(run: RunResult) -> str:
    if run.steps is not None and run.steps.source != "optimizer steps":
        return "tf"
    if not any(i.startswith("torch") for i in run.instrumented) and any(i.startswith("tensorflow") for i in run.instrumented):
        return "tf"
    return "torch"


def measurements_of(run: RunResult, framework: str) -> verdict_mod.Measurements:
    steps = run.steps
    times = steps.times if steps else []
    cv = statistics.pstdev(times) / statistics.mean(times) if len(times) >= 2 and statistics.mean(times) > 0 else None
    syncs = sum(steps.syncs.values()) / steps.count if steps and steps.count and run.cuda else None
    return verdict_mod.Measurements(
        framework=framework,
        steps=len(times),
        step_median=statistics.median(times) if times else None,
        step_cv=cv,
        data_share=steps.data_share if steps else None,
        syncs_per_step=syncs,
        gpu_util=run.gpu.util_mean if run.gpu else None,
        gpu_idle_fraction=run.gpu.idle_fraction if run.gpu else None,
        gpu_memory=run.gpu.mem_peak_fraction if run.gpu else None,
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
    from gpulint.linter.analysis.parse import SyntaxErrorInSource
    from gpulint.linter.config import ConfigError, Settings
    from gpulint.linter.engine import Linter

    try:
        result = Linter(Settings(select=codes)).lint_source(script.read_bytes(), str(script))
    except (SyntaxErrorInSource, ConfigError, UnicodeDecodeError, ValueError):
        return []
    order = {code: i for i, code in enumerate(codes)}
    hits = [LintHit(f.code, f.location.row, f.message, f.fix is not None) for f in result.findings if f.code in order]
    return sorted(hits, key=lambda h: (order[h.code], h.row))


def profile(command: Command, config: RunConfig, progress=None) -> Profile:
    run = run_once(command, config, progress)
    framework = framework_of(run)
    result = Profile(run, framework, script=str(command.script) if command.script else None)
    if run.status not in ("stopped", "finished") or run.steps is None:
        return result
    result.measurements = measurements_of(run, framework)
    result.verdict = verdict_mod.decide(result.measurements)
    result.syncs = sync_lines(run)
    if not run.cuda:  # pinned memory and non_blocking copies only matter with a GPU
        result.verdict.recommendations = [r for r in result.verdict.recommendations if r.code not in CUDA_ONLY]
    codes = [r.code for r in result.verdict.recommendations]
    codes += [s.rule for s in result.syncs if s.rule and s.rule not in codes]
    result.lint = lint_hits(command.script, codes)
    # What the script actually has comes first; the order among them is the expected-gain order.
    found = {h.code for h in result.lint}
    result.verdict.recommendations.sort(key=lambda r: r.code not in found)
    return result
