"""Per-rank figures of a launched run (`torchrun`, `accelerate launch`): step time, data wait and
the time each rank waits for collectives, the slowest rank, and what to change when communication
is what limits scaling.

Collective wait comes from DistributedDataParallel's own timers, which the bootstrap switches on for
every iteration: per iteration DDP measures the all-reduce from its first bucket to the last
(`backward_comm_time`) and the part of it that overlaps the backward pass
(`backward_compute_comm_overlap_time`); the rest is time the rank waits for gradients from the
others after its own backward is done -- the all-reduce wait, which also holds the wait for a
slower rank.  DDP keeps running means; a mean times the iteration count read at the start and at
the end of the measured window gives the window's total.  CUDA events time it on GPUs, host clocks
on CPUs.  Collectives outside DDP (FSDP, hand-written all_reduce) are not timed: "not measured".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulint.runtime_check import stats
from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.measure import ProcessRun, RunResult
from gpulint.runtime_check.verdict import STRAGGLER_HIGH, Recommendation

NS = 1e-9


@dataclass
class RankFigures:
    rank: int
    steps: int
    step_time: float | None  # mean seconds per measured step
    data_wait: float | None  # mean seconds per step waiting for input
    collective_wait: float | None  # mean seconds per step waiting for all-reduce (not overlapped)
    allreduce_time: float | None  # mean seconds per step of all-reduce, overlapped or not
    samples_per_step: float | None
    cores: float | None  # CPU cores the rank's process kept busy
    node: int | None = None  # the node's rank in a multi-node job (torchrun's GROUP_RANK)
    # Half-width of the confidence interval of its mean step time (stats.mean_noise of the step
    # series); None when the series is too short to tell.
    step_noise: float | None = None
    # Its own work in each measured step (step time less that step's all-reduce wait), when DDP's
    # timers were read at every step end; None otherwise.
    own_times: list[float] | None = None

    @property
    def own_time(self) -> float | None:
        """Step time less the collective wait: the rank's own compute and input work."""
        if self.step_time is None or self.collective_wait is None:
            return None
        return max(0.0, self.step_time - self.collective_wait)

    @property
    def collective_share(self) -> float | None:
        if self.collective_wait is None or not self.step_time:
            return None
        return min(1.0, self.collective_wait / self.step_time)


@dataclass
class JobPart:
    """The ranks of one node of a multi-node job, as the node's own run sees them; nodes.py merges
    the runs of every node."""

    id: str  # the same on every node of the job (bootstrap.JobAgreement)
    node: int  # the node's rank in the job
    nodes: int  # nodes in the job
    host: str
    note: str  # how the id was agreed on, when not through the launcher's store


@dataclass
class RankReport:
    world_size: int | None
    ranks: list[RankFigures]
    slowest: int | None  # rank called out as the straggler; None when none stands out or not measurable
    slowest_note: str
    ddp_config: dict | None  # DDP's settings as it logs them (backend, bucket size, find_unused_parameters, ...)
    collective_note: str  # how collective wait was measured, or why not
    figures: list[Figure] = field(default_factory=list)
    slowest_excess: float | None = None  # seconds per step the slowest rank works longer than the others (median)
    job: JobPart | None = None  # a multi-node job (torchrun --nnodes N): which part of it these ranks are

    @property
    def step_time(self) -> float | None:
        """Median over ranks of the mean step time."""
        times = [r.step_time for r in self.ranks if r.step_time is not None]
        return stats.median(times) if times else None

    @property
    def collective_share(self) -> float | None:
        """Mean over ranks of the share of step time spent waiting for collectives."""
        shares = [r.collective_share for r in self.ranks]
        known = [share for share in shares if share is not None]
        return stats.mean(known) if shares and len(known) == len(shares) else None


def collective_times(process: ProcessRun) -> tuple[float | None, float | None, str]:
    """(all-reduce wait, all-reduce time) per measured step of one rank, with a note."""
    report, steps = process.report, process.steps
    models = report.get("ddp") or []
    if not models:
        return None, None, "no DistributedDataParallel model: collectives outside DDP are not timed"
    if steps is None or steps.window is None or not steps.count:
        return None, None, "no measured window"
    start, end = steps.window
    wait = total = 0.0
    for model in models:
        reads = [r for r in model["reads"] if start <= r[0] <= end]
        if len(reads) < 2:
            return None, None, "DDP timers were not read inside the measured window"
        first, last = reads[0], reads[-1]
        wait += (_exposed(last) - _exposed(first)) * NS
        total += (_comm(last) - _comm(first)) * NS
    return wait / steps.count, total / steps.count, "DDP's all-reduce timers, every iteration"


def own_times(process: ProcessRun) -> list[float] | None:
    """The rank's own work in each measured step: its step time less the all-reduce wait DDP's
    timers grew by over that step; None unless they were read at every step end of the window."""
    models, steps = process.report.get("ddp") or [], process.steps
    if not models or steps is None or steps.window is None or not steps.count or steps.width != 1:
        return None
    start, end = steps.window
    waits = [0.0] * steps.count
    for model in models:
        reads = [w for w in model.get("waits") or [] if start <= w[0] <= end]
        if len(reads) != steps.count + 1:
            return None
        for i in range(steps.count):
            waits[i] += (reads[i + 1][1] - reads[i][1]) * NS
    return [step - wait for step, wait in zip(steps.times, waits, strict=True)]


def _comm(read: list) -> float:
    _, iterations, comm, _ = read
    return (comm or 0) * (iterations or 0)


def _exposed(read: list) -> float:
    _, iterations, comm, overlap = read
    return max(0, (comm or 0) - (overlap or 0)) * (iterations or 0)


def rank_report(run: RunResult) -> RankReport | None:
    """The per-rank figures of a launched run; None for a single process."""
    if not run.launched:
        return None
    cores = run.cpu.rank_cores if run.cpu and run.cpu.rank_cores else [None] * len(run.processes)
    ranks: list[RankFigures] = []
    notes = set()
    for process, busy in zip(run.processes, cores, strict=True):
        steps = process.steps
        wait, allreduce, note = collective_times(process)
        notes.add(note)
        measured = steps if steps is not None and steps.count > 0 else None
        data_waits = measured.data_waits if measured else None
        ranks.append(
            RankFigures(
                rank=process.rank or 0,
                steps=measured.count if measured else 0,
                step_time=measured.total_time / measured.count if measured else None,
                data_wait=sum(data_waits) / measured.count if measured and data_waits is not None else None,
                collective_wait=wait,
                allreduce_time=allreduce,
                samples_per_step=measured.samples / measured.count if measured and measured.samples else None,
                cores=busy,
                node=process.report.get("node"),
                step_noise=stats.mean_noise(measured.times) if measured else None,
                own_times=own_times(process) if measured else None,
            )
        )
    first = run.processes[0].report
    config = next((m["config"] for p in run.processes for m in p.report.get("ddp") or [] if m["config"]), None)
    slowest, excess, slowest_note = _straggler(ranks)
    report = RankReport(first.get("world_size"), ranks, slowest, slowest_note, config, "; ".join(sorted(notes)))
    report.slowest_excess = excess
    report.job = _job_part(first)
    report.figures = _figures(report)
    return report


def clear_straggler(report: RankReport, note: str) -> None:
    """No rank is called out after all (its excess is not work of the measured steps): `note` says why."""
    report.slowest, report.slowest_excess, report.slowest_note = None, None, note
    report.figures = _figures(report)


def _job_part(report: dict) -> JobPart | None:
    """The node's part of a multi-node job, from a rank's report; None on one node."""
    job, node, nodes = report.get("job"), report.get("node"), report.get("nodes")
    if not job or node is None or not nodes or nodes < 2:
        return None
    return JobPart(job["id"], node, nodes, report.get("host") or "", job.get("note") or "")


def _straggler(ranks: list[RankFigures]) -> tuple[int | None, float | None, str]:
    """(rank, seconds of extra own work per step, note).  Synchronised ranks all take as long as
    the slowest; the slowest is the one that waits least for the others, so it is found by its own
    time (step time less collective wait)."""
    if len(ranks) < 2:
        return None, None, "one rank"
    # (rank, own time, step time); own time is known only where step time is
    timed = [(r, r.own_time, r.step_time) for r in ranks if r.own_time is not None and r.step_time is not None]
    if len(timed) < len(ranks):
        return None, None, "not measured: needs the collective wait of every rank"
    slowest, slowest_own, _ = max(timed, key=lambda t: t[1])
    others = stats.median(own for r, own, _ in timed if r is not slowest)
    step = stats.median(step_time for _, _, step_time in timed)
    excess = slowest_own - others
    if excess < STRAGGLER_HIGH * step:
        return None, None, f"none: no rank's own work exceeds the others' by {100 * STRAGGLER_HIGH:.0f}% of a step"
    noise, of_what = _excess_noise(slowest, ranks)
    if noise is None:
        return None, None, "none: too few measured steps to tell a rank's extra work from the noise of its step times"
    if excess <= noise:
        return (
            None,
            None,
            f"none: rank {slowest.rank}'s {1000 * excess:.1f} ms per step over the others is within the noise "
            f"of {of_what} (+-{1000 * noise:.1f} ms)",
        )
    return (
        slowest.rank,
        excess,
        f"rank {slowest.rank} works {1000 * excess:.1f} ms per step longer than the other ranks "
        "(median); they wait for it in all-reduce",
    )


def _excess_noise(slowest: RankFigures, ranks: list[RankFigures]) -> tuple[float | None, str]:
    """The noise the slowest rank's excess must pass, and what it is the noise of; None when too
    few steps tell it.  Step by step where every rank's own work per step is known: synchronised
    ranks share each step's time, so what a busy machine adds to every rank cancels, while one slow
    step (a checkpoint once an epoch) stays one step.  Otherwise the excess is a difference of two
    ranks' means, and counts only beyond the noise of both."""
    others = [r.own_times for r in ranks if r is not slowest]
    if slowest.own_times is not None and all(o is not None and len(o) == len(slowest.own_times) for o in others):
        differences = [
            own - stats.median(o[i] for o in others if o is not None) for i, own in enumerate(slowest.own_times)
        ]
        return stats.mean_noise(differences), "its step-by-step difference from the other ranks"
    noises = [r.step_noise for r in ranks]
    if any(noise is None for noise in noises):
        return None, ""
    slowest_noise = slowest.step_noise or 0.0
    others_noise = max((r.step_noise or 0.0) for r in ranks if r is not slowest)
    return (slowest_noise**2 + others_noise**2) ** 0.5, "the per-rank step times"


def _figures(report: RankReport) -> list[Figure]:
    ranks = report.ranks
    waits = [r.collective_wait for r in ranks if r.collective_wait is not None]
    steps = [r.step_time for r in ranks if r.step_time is not None]
    figures = [
        Figure("ranks", len(ranks), "count", f"world size {report.world_size}" if report.world_size else ""),
        Figure("step time (slowest rank)", max(steps) if steps else None, "s", "mean per measured step"),
        Figure(
            "collective wait (mean of ranks)",
            stats.mean(waits) if len(waits) == len(ranks) else None,
            "s",
            report.collective_note,
        ),
        Figure("collective wait share", report.collective_share, "share", "of step time, mean of ranks"),
    ]
    slowest = next((r for r in ranks if r.rank == report.slowest), None)
    figures.append(Figure("slowest rank", slowest.rank if slowest else None, "count", report.slowest_note))
    return figures


# -- what to change when communication limits scaling ---------------------------------------
# Bytes in one all-reduce from which its time is mostly bandwidth rather than the fixed cost of a
# collective: about where the two meet (latency x bandwidth) for NCCL within a node (~20 us at
# tens of GB/s) and for gloo over TCP (~100 us at a few GB/s) -- a rough line, so messages far
# from it on either side are what it classifies.
LATENCY_BOUND_BYTES = 1 << 20


def message_bytes(ddp_config: dict | None) -> int | None:
    """Bytes in one of DDP's all-reduces: a gradient bucket (bucket_cap_bytes), or all the
    gradients when they fit in one; None when DDP did not log its sizes."""
    config = ddp_config or {}
    total, cap = config.get("total_parameter_size_bytes"), config.get("bucket_cap_bytes")
    if not total:
        return None
    return min(total, cap) if cap else total


def communication_kind(ddp_config: dict | None) -> str | None:
    """What bounds the time of one all-reduce, by its size: "bandwidth" or "latency" (None:
    unknown)."""
    size = message_bytes(ddp_config)
    if size is None:
        return None
    return "bandwidth" if size >= LATENCY_BOUND_BYTES else "latency"


def communication_advice(
    ddp_config: dict | None, accumulation: bool, data_share: float | None, cuda: bool
) -> list[Recommendation]:
    """Changes that cut the time ranks wait for each other, ordered by what acts on this run's
    all-reduces: fewer bytes when they are large (bandwidth-bound), fewer messages when they are
    small (latency-bound: the bytes are not what costs).  The codes are gpulint's rules, so the
    report can show the script's lines."""
    config = ddp_config or {}
    kind = communication_kind(config)
    nccl = (
        [
            Recommendation(
                "GL602", "use the nccl backend: gloo copies CUDA gradients through host memory", "large on GPUs"
            )
        ]
        if cuda and config.get("backend_name") == "gloo"
        else []
    )
    no_sync = (
        [
            Recommendation(
                "GL603",
                "wrap the non-final micro-batches of an accumulation in model.no_sync()",
                "up to one all-reduce per optimizer step instead of one per micro-batch",
            )
        ]
        if accumulation
        else []
    )
    compress = Recommendation(
        "",
        "compress gradients: model.register_comm_hook(None, default_hooks.bf16_compress_hook) "
        "halves the bytes sent (PowerSGD cuts more)",
        "up to 2x less all-reduce time",
    )
    bucket_view = (
        [
            Recommendation(
                "", "gradient_as_bucket_view=True: gradients live in the buckets, one copy less per step", "small"
            )
        ]
        if config.get("gradient_as_bucket_view") == 0
        else []
    )
    unused = (
        [
            Recommendation(
                "GL604",
                "drop find_unused_parameters=True unless parameters are really unused: it walks the autograd "
                "graph every step (compute, not bytes sent)",
                "one autograd-graph traversal per step",
            )
        ]
        if config.get("find_unused_parameters")
        else []
    )
    if kind == "latency":
        size = message_bytes(config) or 0
        fewer = Recommendation(
            "",
            f"send fewer, larger all-reduces: each carries only {format_bytes(size)}, so its fixed cost dominates; "
            "all-reduce once per optimizer step (accumulate micro-batches under no_sync) or take larger "
            "batches per rank; a larger bucket_cap_mb merges buckets where there are several",
            "the fixed cost of the all-reduces not made",
        )
        advice = nccl + no_sync + [fewer] + unused
    elif kind == "bandwidth":
        size = message_bytes(config) or 0
        compress.action += f" (each all-reduce carries {format_bytes(size)}: the bytes are the cost)"
        bucket = Recommendation(
            "",
            "tune bucket_cap_mb (default 25) for overlap: smaller buckets start sending earlier in the backward pass",
            "model-dependent",
        )
        advice = nccl + [compress] + no_sync + bucket_view + [bucket] + unused
    else:
        bucket = Recommendation(
            "",
            "tune bucket_cap_mb (default 25): bigger buckets mean fewer all-reduces, smaller ones "
            "start earlier and overlap more of the backward pass",
            "model-dependent",
        )
        advice = nccl + no_sync + [bucket, compress] + bucket_view + unused
    if data_share is not None and data_share >= 0.05:
        advice.append(
            Recommendation(
                "GL605",
                "overlap the input pipeline: loader workers per rank (cores divided by ranks), pin_memory, prefetch",
                "the data wait",
            )
        )
    return advice


def format_bytes(size: int) -> str:
    if size >= 1 << 20:
        return f"{size / (1 << 20):.1f} MiB"
    if size >= 1 << 10:
        return f"{size / (1 << 10):.1f} KiB"
    return f"{size} bytes"
