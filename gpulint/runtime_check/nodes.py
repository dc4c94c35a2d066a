"""Across nodes: the runs of one multi-node job merged into one view.

Under `torchrun --nnodes N` each node runs `gpulint profile -- torchrun ...` itself and sees the
ranks of its own node; it records them as one run whose meta holds the job's id (the same on every
node: bootstrap.JobAgreement), the node's rank in the job and each rank's figures (records.py).
`merge` takes the recorded runs of a job -- from one history, or from several (one per node,
`gpulint report RUN --merge FILE`) -- and gives each node's step time and own work, the slowest
node, and the ranks' collective wait split by what they wait for.

The split, per rank, from the ranks' own work (step time less DDP's all-reduce wait,
distributed.py): synchronised ranks leave the all-reduce together, so a rank waits there until the
slowest rank of the job is done.  With M the most own work of any rank and M_n the most of a rank
on the rank's own node n:
  - intra-node: min(wait, M_n - own) -- waiting for a slower rank of the same node;
  - inter-node: min(wait - intra, M - M_n) -- waiting for a slower node;
  - transfer: the rest -- the all-reduce moving the gradients.  It is not split by link: host
    clocks see one all-reduce, not its hops (a flat ring over several nodes is paced by its
    slowest link, the network between them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulint.runtime_check import stats
from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.history import RunRecord
from gpulint.runtime_check.verdict import STRAGGLER_HIGH

MAX_NODES = 65536  # more than any job's: a bound on what a stored run can make this list
SPLIT_NOTE = (
    "split by what the ranks wait for, from each rank's own work (step time less its all-reduce wait); "
    "the transfer itself is not split by link"
)


@dataclass
class RankTimes:
    """One rank's figures as its node's run recorded them (seconds per measured step)."""

    rank: int
    node: int
    step_time: float | None
    collective_wait: float | None
    data_wait: float | None

    @property
    def own_time(self) -> float | None:
        if self.step_time is None or self.collective_wait is None:
            return None
        return max(0.0, self.step_time - self.collective_wait)


@dataclass
class NodeFigures:
    node: int  # the node's rank in the job (torchrun's GROUP_RANK)
    host: str
    run_id: int | None  # its run in the history it came from
    ranks: list[RankTimes]

    @property
    def step_time(self) -> float | None:
        times = [r.step_time for r in self.ranks if r.step_time is not None]
        return stats.median(times) if times else None

    @property
    def own_time(self) -> float | None:
        """The most own work of its ranks: a node is as late as its slowest rank."""
        owns = [r.own_time for r in self.ranks]
        return max(own for own in owns if own is not None) if owns and None not in owns else None

    @property
    def collective_wait(self) -> float | None:
        waits = [r.collective_wait for r in self.ranks]
        return stats.mean(w for w in waits if w is not None) if waits and None not in waits else None


@dataclass
class JobReport:
    id: str
    nodes_expected: int
    nodes: list[NodeFigures]  # by node rank
    missing: list[int]  # node ranks with no recorded run among those merged
    slowest: int | None = None  # node called out as the slowest; None when none stands out or not measured
    slowest_excess: float | None = None  # seconds per step it works longer than the other nodes (median)
    slowest_note: str = ""
    advice: str = ""  # what to do about the slowest node: each node's own verdict cannot see it
    intra: float | None = None  # mean over ranks, seconds per step: waiting for a rank of the same node
    inter: float | None = None  # waiting for another node
    transfer: float | None = None  # the all-reduce itself
    split_note: str = SPLIT_NOTE
    figures: list[Figure] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing


def job_of(run: RunRecord) -> dict | None:
    """The multi-node job a recorded run is part of: {"id", "node", "nodes", "host", "note"}."""
    job = run.meta.get("job")
    return job if isinstance(job, dict) and isinstance(job.get("id"), str) else None


def merge(runs: list[RunRecord]) -> JobReport:
    """The merged view of the runs of one job (each node's; the first run of a node counts, so a
    history merged twice adds nothing).  The runs have passed html_report.check_run."""
    jobs = [job_of(run) for run in runs]
    first = jobs[0]
    assert first is not None and all(j is not None and j["id"] == first["id"] for j in jobs), "runs of one job"
    by_node: dict[int, NodeFigures] = {}
    for run, job in zip(runs, jobs, strict=True):
        assert job is not None
        node = int(job["node"])
        if node in by_node or not 0 <= node < MAX_NODES:  # a stored run is input: no node 10**300
            continue
        ranks = [
            RankTimes(int(r["rank"]), node, r.get("step_time"), r.get("collective_wait"), r.get("data_wait"))
            for r in run.meta.get("ranks") or []
        ]
        by_node[node] = NodeFigures(node, str(job.get("host") or run.host or ""), run.id, ranks)
    expected = max(min(int(first["nodes"]), MAX_NODES), max(by_node, default=-1) + 1)
    report = JobReport(
        first["id"],
        expected,
        [by_node[n] for n in sorted(by_node)],
        [n for n in range(expected) if n not in by_node],
    )
    _slowest(report)
    _split(report)
    _advise(report)
    report.figures = _figures(report)
    return report


def _slowest(report: JobReport) -> None:
    """The node whose slowest rank works longest, when it exceeds the other nodes' (median) by
    STRAGGLER_HIGH of a step -- the rule distributed.py applies to ranks."""
    if len(report.nodes) < 2:
        report.slowest_note = "one node recorded"
        return
    owns = [(node, node.own_time) for node in report.nodes]
    steps = [node.step_time for node in report.nodes if node.step_time is not None]
    if any(own is None for _, own in owns) or not steps:
        report.slowest_note = "not measured: needs the collective wait of every rank"
        return
    slowest, slowest_own = max(owns, key=lambda pair: pair[1] or 0.0)
    assert slowest_own is not None
    others = stats.median(own or 0.0 for node, own in owns if node is not slowest)
    step = stats.median(steps)
    excess = slowest_own - others
    if excess < STRAGGLER_HIGH * step:
        report.slowest_note = (
            f"none: no node's own work exceeds the other nodes' by {100 * STRAGGLER_HIGH:.0f}% of a step"
        )
        return
    report.slowest, report.slowest_excess = slowest.node, excess
    ranks = ", ".join(str(r.rank) for r in slowest.ranks)
    where = f" ({slowest.host}, rank{'s' if len(slowest.ranks) > 1 else ''} {ranks})" if slowest.host else ""
    report.slowest_note = (
        f"node {slowest.node}{where} works {1000 * excess:.1f} ms per step longer than the other nodes "
        "(median); their ranks wait for it in all-reduce"
    )


def _split(report: JobReport) -> None:
    ranks = [r for node in report.nodes for r in node.ranks]
    if report.missing:  # whom the ranks wait for may be on a node not recorded here
        report.split_note = "not measured: needs every node's ranks"
        return
    if not ranks or any(r.own_time is None for r in ranks):
        report.split_note = "not measured: needs the collective wait of every rank"
        return
    top = max(r.own_time or 0.0 for r in ranks)
    node_top = {node.node: node.own_time or 0.0 for node in report.nodes}
    intra, inter, transfer = [], [], []
    for r in ranks:
        wait, own = r.collective_wait or 0.0, r.own_time or 0.0
        mine = min(wait, max(0.0, node_top[r.node] - own))
        theirs = min(wait - mine, max(0.0, top - node_top[r.node]))
        intra.append(mine)
        inter.append(theirs)
        transfer.append(wait - mine - theirs)
    report.intra, report.inter, report.transfer = stats.mean(intra), stats.mean(inter), stats.mean(transfer)


def _advise(report: JobReport) -> None:
    """What to do about the slowest node: each node's own verdict cannot see it (a fast node's
    ranks read as waiting for communication there)."""
    if report.slowest is None:
        return
    waits = (report.intra, report.inter, report.transfer)
    if None in waits:
        why = "the other nodes' ranks wait for it in all-reduce"
    elif (report.inter or 0.0) >= (report.intra or 0.0) + (report.transfer or 0.0):
        why = "most of the ranks' collective wait is waiting for a slower node, not moving gradients"
    else:
        why = (
            f"{1000 * (report.inter or 0.0):.1f} ms of the ranks' collective wait a step is waiting for a "
            "slower node; the rest is not"
        )
    report.advice = (
        f"node {report.slowest} is the straggler: balance the work across nodes (its data shard, its machine, "
        f"what else runs there) before tuning communication -- {why}"
    )


def _figures(report: JobReport) -> list[Figure]:
    recorded = f"{len(report.nodes)} of {report.nodes_expected} recorded"
    return [
        Figure("nodes", len(report.nodes), "count", recorded),
        Figure("slowest node", report.slowest, "count", report.slowest_note),
        Figure("slowest node's extra work", report.slowest_excess, "s", "per step, against the other nodes (median)"),
        Figure("collective wait, intra-node", report.intra, "s", "per step, mean of ranks: a slower rank of the node"),
        Figure("collective wait, inter-node", report.inter, "s", "per step, mean of ranks: a slower node"),
        Figure("collective wait, transfer", report.transfer, "s", "per step, mean of ranks: the all-reduce itself"),
    ]
