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
    return (
        slowest.rank,
        excess,
        f"rank {slowest.rank} works {1000 * excess:.1f} ms per step longer than the other ranks "
        "(median); they wait for it in all-reduce",
    )


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
def communication_advice(
    ddp_config: dict | None, accumulation: bool, data_share: float | None, cuda: bool
) -> list[Recommendation]:
    """Changes that cut the time ranks wait for each other, the ones this run's settings point at
    first.  The codes are gpulint's rules, so the report can show the script's lines."""
    config = ddp_config or {}
    first: list[Recommendation] = []
    if cuda and config.get("backend_name") == "gloo":
        first.append(
            Recommendation(
                "GL602", "use the nccl backend: gloo copies CUDA gradients through host memory", "large on GPUs"
            )
        )
    if accumulation:
        first.append(
            Recommendation(
                "GL603",
                "wrap the non-final micro-batches of an accumulation in model.no_sync()",
                "up to one all-reduce per optimizer step instead of one per micro-batch",
            )
        )
    if config.get("find_unused_parameters"):
        first.append(
            Recommendation(
                "GL604",
                "drop find_unused_parameters=True unless parameters are really unused",
                "one autograd-graph traversal per step",
            )
        )
    rest = [
        Recommendation(
            "",
            "tune bucket_cap_mb (default 25): bigger buckets mean fewer all-reduces, smaller ones "
            "start earlier and overlap more of the backward pass",
            "model-dependent",
        ),
        Recommendation(
            "",
            "compress gradients: model.register_comm_hook(None, default_hooks.bf16_compress_hook) "
            "halves the bytes sent (PowerSGD cuts more)",
            "up to 2x less all-reduce time",
        ),
    ]
    if config.get("gradient_as_bucket_view") == 0:
        rest.append(
            Recommendation(
                "", "gradient_as_bucket_view=True: gradients live in the buckets, one copy less per step", "small"
            )
        )
    if data_share is not None and data_share >= 0.05:
        rest.append(
            Recommendation(
                "GL605",
                "overlap the input pipeline: loader workers per rank (cores divided by ranks), pin_memory, prefetch",
                "the data wait",
            )
        )
    return first + rest
