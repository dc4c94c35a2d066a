"""`gpulint profile`: one measured run, a verdict, and the lint findings that match it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpulint.runtime_check import attribution as attribution_mod
from gpulint.runtime_check import compute as compute_mod
from gpulint.runtime_check import distributed, stats
from gpulint.runtime_check import memory as memory_mod
from gpulint.runtime_check import operators as operators_mod
from gpulint.runtime_check import verdict as verdict_mod
from gpulint.runtime_check.costs import CostBasis
from gpulint.runtime_check.measure import Command, RunConfig, RunResult, run_once

# Sync lines are mapped to the rule that flags that kind of code; the first match wins.
SYNC_PATTERNS = [
    ("torch.cuda.synchronize", "GL204"),
    (".item(", "GL201"),
    (".cpu(", "GL201"),
    (".numpy(", "GL201"),
    (".tolist(", "GL201"),
    ("float(", "GL201"),
    ("isnan", "GL201"),
    ("print(", "GL302"),
    ("logging.", "GL302"),
    ("logger.", "GL302"),
    (".log(", "GL302"),
    ("add_scalar", "GL302"),
    (".to(", "GL104"),
    (".cuda(", "GL104"),
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
    # Where the whole step goes (sampled stacks) in the first process; by rank under a launcher.
    attribution: attribution_mod.Attribution | None = None
    rank_attributions: dict[int, attribution_mod.Attribution] = field(default_factory=dict)
    # The operator table of the steps profiled after the measured ones (--ops, --trace), first process.
    ops: operators_mod.OpsReport | None = None
    cost: CostBasis | None = None  # what the waste is made of (costs.py), when measured
    # Whether this run goes into the run history, so that a later `profile --baseline last` finds it
    # (not with --no-history): the next command compares with it only then.
    recorded: bool = True


def framework_of(run: RunResult) -> str:
    if run.steps is not None and run.steps.source != "optimizer steps":
        return "tf"
    if not any(i.startswith("torch") for i in run.instrumented) and any(
        i.startswith("tensorflow") for i in run.instrumented
    ):
        return "tf"
    return "torch"


def measurements_of(
    run: RunResult,
    framework: str,
    ranks: distributed.RankReport | None = None,
    attribution: attribution_mod.Attribution | None = None,
    straggler_note: str = "",
) -> verdict_mod.Measurements:
    steps = run.steps
    sample = steps.sample if steps else []
    syncs = sum(steps.syncs.values()) / steps.count if steps and steps.count and run.cuda else None
    host_lines = {}
    for phase in attribution.phases if attribution else []:
        if phase.lines:
            top = phase.lines[0]
            host_lines[phase.name] = f"{_short(top.where)} `{top.text}`"
    straggler = next((r for r in ranks.ranks if r.rank == ranks.slowest), None) if ranks else None
    return verdict_mod.Measurements(
        framework=framework,
        steps=steps.count if steps else 0,
        step_median=steps.median if steps and sample else None,
        step_cv=stats.variation(sample),
        data_share=steps.data_share if steps else None,
        data_noise=data_noise(steps),
        syncs_per_step=syncs,
        gpu_util=run.gpu.util_mean if run.gpu else None,
        gpu_idle_fraction=run.gpu.idle_fraction if run.gpu else None,
        gpu_memory=run.gpu.mem_peak_fraction if run.gpu else None,
        collective_share=ranks.collective_share if ranks else None,
        main_cores=run.cpu.main_cores if run.cpu else None,
        worker_cores=run.cpu.worker_cores if run.cpu else None,
        other_cores=run.cpu.other_cores if run.cpu else None,
        host_shares=host_work(attribution, run),
        host_lines=host_lines,
        host_looks=attribution.host_looks if attribution else {},
        straggler_rank=straggler.rank if straggler else None,
        straggler_share=_straggler_share(ranks) if straggler else None,
        straggler_note=straggler_note,
        loader=run.processes[0].report.get("loader") if run.processes else None,
        epoch_turned=epoch_turned(steps, run.processes[0].report.get("loader") if run.processes else None),
        cores=run.cpu.cores if run.cpu else None,
        data_source=steps.data_source if steps else None,
        data_function=data_function_label(steps.data_function) if steps and steps.data_function else None,
        data_function_line=steps.data_function["where"] if steps and steps.data_function else None,
    )


def epoch_turned(steps, loader: dict | None) -> bool | None:
    """Whether the run read more training batches, warm-up included, than one epoch of its loader
    holds (at the measured window's batches per step); None when either is not known."""
    per_epoch = loader.get("batches") if isinstance(loader, dict) else None
    if not isinstance(per_epoch, int) or steps is None or not steps.count or not steps.batches:
        return None
    return steps.batches / steps.count * steps.total > per_epoch


# Blocks of the wait series at least, for the data share's noise to decide the verdict: with fewer,
# Student's t is so wide (12.7 for two blocks at 95%) that a 95% wait of a 10-step run read "within
# its noise"; the threshold alone decides such a run, as it did before the noise test.
MIN_NOISE_BLOCKS = 4


def data_noise(steps) -> float | None:
    """Half-width of the data share's confidence interval: the noise of the mean wait per step
    (batch means of the series) over the mean step time; None for a series too short to tell."""
    waits = steps.data_waits if steps is not None and steps.count else None
    if not waits or len(stats.block_means(waits)) < MIN_NOISE_BLOCKS:
        return None
    noise = stats.mean_noise(waits)
    return None if noise is None else noise / steps.mean


def data_function_label(function: dict) -> str:
    """`get_batch` at train.py:40 (found in the loop)."""
    how = " (found in the training loop)" if function.get("how") == "found" else ""
    return f"`{function['name']}` at {_short(function['where'])}{how}"


def host_work(attribution: attribution_mod.Attribution | None, run: RunResult) -> dict[str, float]:
    """The host phases that are work the device does not wait on.  On CUDA the host reads a tensor
    (`.item()`) only when the device has finished computing it, so that wait is the device's
    compute unless the GPU is measured starved (under GPU_STARVED)."""
    if attribution is None:
        return {}
    shares = attribution.host_shares
    if run.cuda and (run.gpu is None or run.gpu.util_mean >= verdict_mod.GPU_STARVED):
        shares.pop(attribution_mod.HOST_SYNC, None)
    return shares


def _straggler_share(ranks: distributed.RankReport | None) -> float | None:
    if ranks is None or ranks.slowest_excess is None or not ranks.step_time:
        return None
    return ranks.slowest_excess / ranks.step_time


def _short(where: str) -> str:
    """`train.py:42` for a `file:line`: the report names the script's lines."""
    path, _, row = where.rpartition(":")
    return f"{Path(path).name}:{row}"


# The share of a straggler's excess (by the timers) that one phase of its measured steps must
# show grown (by the sampled stacks) for the excess to be work of those steps.
STRAGGLER_ATTRIBUTED = 0.5


def straggler_note(ranks: distributed.RankReport | None, by_rank: dict[int, attribution_mod.Attribution]) -> str:
    """Where the slowest rank's extra time goes: the phase (and its line) whose time per step grew
    most against the median of the other ranks.  When every rank's stack was sampled and no phase
    of the slowest rank's measured steps grew by STRAGGLER_ATTRIBUTED of its excess, the excess is
    not work of those steps (a wait outside them, noise): no straggler is called
    (distributed.clear_straggler), and the note says why."""
    if ranks is None or ranks.slowest is None or ranks.slowest not in by_rank:
        return ""
    step = {r.rank: r.step_time for r in ranks.ranks if r.step_time}
    mine_step = step.get(ranks.slowest)
    others = {rank: a for rank, a in by_rank.items() if rank != ranks.slowest and rank in step}
    if not others or mine_step is None:
        return ""
    best: tuple[float, attribution_mod.Phase] | None = None
    for phase in by_rank[ranks.slowest].phases:
        theirs = stats.median(a.share(phase.name) * step[rank] for rank, a in others.items())
        grew = phase.share * mine_step - theirs
        if best is None or grew > best[0]:
            best = (grew, phase)
    excess = ranks.slowest_excess or 0.0
    if len(others) + 1 == len(ranks.ranks) and (best is None or best[0] < STRAGGLER_ATTRIBUTED * excess):
        distributed.clear_straggler(
            ranks,
            f"none: rank {ranks.slowest} works {1000 * excess:.1f} ms per step longer by the timers, but no phase "
            f"of its measured steps grew by {100 * STRAGGLER_ATTRIBUTED:.0f}% of that (sampled stacks)",
        )
        return ""
    if best is None or best[0] <= 0:
        return ""
    grew, phase = best
    where = f" at {_short(phase.lines[0].where)} `{phase.lines[0].text}`" if phase.lines else ""
    return f"its {phase.name} takes {1000 * grew:.1f} ms a step more{where}"


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


def profile(
    command: Command,
    config: RunConfig,
    progress=None,
    flops_per_step: float | None = None,
    peak_tflops: float | None = None,
) -> Profile:
    run = run_once(command, config, progress)
    framework = framework_of(run)
    result = Profile(run, framework, command=command)
    if run.status not in ("stopped", "finished") or run.steps is None:
        return result
    result.ranks = distributed.rank_report(run)
    result.memory = memory_mod.memory_report(run)
    result.compute = compute_mod.compute_report(run, flops_per_step, peak_tflops)
    result.attribution = attribution_mod.attribute(run.processes[0].report) if run.processes else None
    if config.ops and run.processes:
        result.ops = operators_mod.ops_report(run.processes[0].report, run.steps.count)
    if result.ranks is not None:
        for process in run.processes:
            of_rank = attribution_mod.attribute(process.report)
            if of_rank is not None:
                result.rank_attributions[process.rank or 0] = of_rank
    note = straggler_note(result.ranks, result.rank_attributions)
    result.measurements = measurements_of(run, framework, result.ranks, result.attribution, note)
    result.verdict = verdict_mod.decide(result.measurements)
    _place(result.verdict.recommendations, result.attribution)
    if result.verdict.kind == "communication-bound":
        # collective wait is measured for launched runs only, so there is a rank report
        assert result.ranks is not None
        steps = run.steps
        result.verdict.recommendations = distributed.communication_advice(
            result.ranks.ddp_config,
            verdict_mod.micro_batches(steps.batches, steps.count) is not None,
            steps.data_share,
            run.cuda,
        )
        # bandwidth- or latency-bound, by the bytes in one all-reduce
        result.verdict.severity = distributed.communication_kind(result.ranks.ddp_config)
        size = distributed.message_bytes(result.ranks.ddp_config)
        if size is not None:
            result.verdict.reasons.append(
                f"each all-reduce carries about {distributed.format_bytes(size)}: "
                f"{'bandwidth' if size >= distributed.LATENCY_BOUND_BYTES else 'the fixed cost of a collective'} "
                f"sets its time (the line is {distributed.format_bytes(distributed.LATENCY_BOUND_BYTES)})"
            )
    result.syncs = sync_lines(run)
    settle_fixes(result)
    return result


def settle_fixes(result: Profile) -> None:
    """The verdict's fixes that can act on this run and this script, in the order to try them,
    with the script's findings of their rules (fixable where the fixer applies them)."""
    assert result.verdict is not None and result.command is not None
    if not result.run.cuda:  # what only a GPU can show is not suggested from a run without one
        result.verdict.recommendations = [
            r for r in result.verdict.recommendations if r.code not in verdict_mod.NEEDS_DEVICE
        ]
    codes = [r.code for r in result.verdict.recommendations if r.code]
    codes += [s.rule for s in result.syncs if s.rule and s.rule not in codes]
    result.lint = lint_hits(result.command.script, codes)
    confirm_fixes(result.command.script, result.lint)
    found = {h.code for h in result.lint}
    measured = found | {s.rule for s in result.syncs if s.rule}
    result.verdict.recommendations = [r for r in result.verdict.recommendations if in_script(r, measured)]
    # The named phase's fixes before a secondary phase's; within each, a fix measured on this run's
    # own lines comes first, then what the script has, in the expected-gain order.
    result.verdict.recommendations.sort(key=lambda r: (r.secondary, r.line is None, r.code not in found))


# Fixes whose runtime evidence does not show the script has what they change: recommended only
# where the static rule finds it (GL105: a loader read again to count it).
STATIC_ONLY = {"GL105"}
# The fixes of measured host work (HOST_PHASE_RULES; the loader's own fixes aside, which the
# loader's measured settings place) and of host-device syncs: recommended at the line this run
# spends the time on, at a sync line this run counted, or where the static rule finds the code.
PLACED_CODES = (
    {code for code, _action in verdict_mod.HOST_PHASE_RULES.values() if code}
    - {code for rules in verdict_mod.INPUT_RULES.values() for code, _action in rules}
) | {code for code, _action in verdict_mod.SYNC_RULES}


def in_script(recommendation: verdict_mod.Recommendation, found: set[str]) -> bool:
    """Whether the script has what the fix changes (`found`: the rules with a finding in the script
    or a sync line this run counted): a fix that only the static rule can place needs its finding;
    a fix of host work or syncs needs the line this run measured, or one found."""
    code = recommendation.code
    if code in STATIC_ONLY:
        return code in found
    if code in PLACED_CODES:
        return recommendation.line is not None or code in found
    return True


def confirm_fixes(script: Path | None, hits: list[LintHit]) -> None:
    """A finding counts as fixable only when the linter's fixer, run on the script as `verify
    --select` runs it, changes what the script executes: a fix it cannot apply here (overlapping
    another, refused as unsafe) would leave verify nothing to measure."""
    if script is None:
        return
    from gpulint.runtime_check.verify import VerifyError, fix_script, same_program

    for code in dict.fromkeys(h.code for h in hits if h.fixable):
        try:
            source, fixed, applied, _fixable = fix_script(script, [code])
            applies = applied > 0 and not same_program(source, fixed)
        except (VerifyError, OSError):
            applies = False
        if not applies:
            for hit in hits:
                if hit.code == code:
                    hit.fixable = False


def _place(recommendations: list[verdict_mod.Recommendation], attribution) -> None:
    """Give each host-work fix the line where this run spends the time it removes."""
    if attribution is None:
        return
    for recommendation in recommendations:
        for phase in attribution.phases:
            if phase.lines and verdict_mod.HOST_PHASE_RULES.get(phase.name) == (
                recommendation.code,
                recommendation.action,
            ):
                recommendation.line = phase.lines[0].where
                break
