"""`gpulint scale --nproc 1,2,4 -- train.py ARGS`: does the run get faster with more processes?

The script runs under `torchrun` at each size, in rotating order (a Latin square: every size takes
every position, so drift on the machine does not favour one), R runs each, every rank instrumented
as in `profile`.  Throughput of a run is samples per second summed over its ranks (the batch sizes
read from the DataLoader); where they cannot be read, per-rank batches per second (weak scaling) or
steps per second (strong scaling, the global batch being fixed).

Efficiency at N processes against the smallest size b is throughput_N / ((N / b) x throughput_b),
from the geometric means over runs, with a Student's t interval from the spread between runs of the
same size (stats.ratio_interval, as verify's: with two or three runs a size, a bootstrap of medians
is narrower than the run-to-run noise and calls noise a result).  The bar is the method's:
about 90% at 2x, 80% at 4x, i.e. 1 - 0.1 x log2(N / b).  A size is near linear when the whole
interval clears the bar, below when it lies under it, and within the noise otherwise.

Weak scaling (the default) keeps the per-rank batch: the script runs unchanged.  Strong scaling
(`--strong batch_size=256`) keeps the global batch: each size runs a copy that takes 256 / N
(script_params.py says where the value is set).  When a size is below the bar the per-rank figures
say what grew -- the wait for collectives, the wait for data, or the ranks' own work -- and the
advice follows from that.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from gpulint.runtime_check import attribution, distributed, stats
from gpulint.runtime_check.costs import CostBasis
from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.launchers import Launch, Rendezvous, torchrun_prefix
from gpulint.runtime_check.measure import Command, RunConfig, RunResult, run_once
from gpulint.runtime_check.script_params import ParamError, ParamSite, set_param
from gpulint.runtime_check.sweep import rotation
from gpulint.runtime_check.verdict import FIX_CODE_FIRST, HOST_PHASE_RULES, Recommendation, micro_batches, pct

CONFIDENCE = 0.95
_INPUT_PER_RANK = Recommendation(
    "GL605",
    "overlap the input pipeline: loader workers per rank (cores divided by ranks), pin_memory, prefetch",
    "the data wait",
)


class ScaleError(Exception):
    """Cannot run the scaling measurement: one line for the user."""


def threshold(ratio: float) -> float:
    """The efficiency a size `ratio` times the base must reach: 90% at 2x, 80% at 4x."""
    return 1.0 - 0.1 * math.log2(ratio)


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ScaleError(f"--nproc wants process counts such as 1,2,4, not {text!r}") from None
    if len(sizes) < 2 or sizes[0] < 1:
        raise ScaleError(f"--nproc wants two process counts at least, each 1 or more, not {text!r}")
    return sizes


def parse_strong(text: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip().isidentifier() or not value.strip().isdigit() or int(value) < 1:
        raise ScaleError(f"--strong wants NAME=GLOBAL_BATCH, e.g. batch_size=256, not {text!r}")
    return name.strip(), int(value)


def ratio_interval(base: list[float], scaled: list[float], factor: float) -> tuple[float, float, float]:
    """(point, low, high): the efficiency geomean(scaled) / (factor x geomean(base)) and its
    CONFIDENCE interval."""
    ratio, low, high, _spread = stats.ratio_interval(scaled, base, CONFIDENCE)
    return ratio / factor, low / factor, high / factor


@dataclass
class SizeRuns:
    nproc: int
    runs: list[RunResult] = field(default_factory=list)

    def throughputs(self, unit: str) -> list[float]:
        """Each run's throughput over all its ranks, in `unit`."""
        out: list[float] = []
        for run in self.runs:
            ranks = [p.steps for p in run.processes if p.steps and p.steps.count]
            if unit == "samples/s":
                rates = [s.samples_per_second for s in ranks]
                known = [rate for rate in rates if rate is not None]
                assert len(known) == len(rates), "samples/s is the unit only when every rank counts samples"
                out.append(sum(known))
            else:
                rate = stats.mean(s.count / s.total_time for s in ranks)  # ranks step together
                out.append(rate * self.nproc if unit == "rank batches/s" else rate)
        return out

    @property
    def counts_samples(self) -> bool:
        return bool(self.runs) and all(p.steps and p.steps.samples for r in self.runs for p in r.processes)

    def breakdown(self) -> dict[str, float | None]:
        """Median over runs of the rank-mean of step time, data wait, collective wait (per step)."""
        rows: dict[str, list[float]] = {"step_time": [], "data_wait": [], "collective_wait": []}
        for run in self.runs:
            report = distributed.rank_report(run)
            assert report is not None, "scale launches every run"
            for key in rows:
                values = [getattr(r, key) for r in report.ranks]
                if values and None not in values:
                    rows[key].append(stats.mean(values))
        return {key: stats.median(v) if len(v) == len(self.runs) else None for key, v in rows.items()}


@dataclass
class Efficiency:
    nproc: int
    value: float
    interval: tuple[float, float]
    threshold: float
    outcome: str  # near linear | below | within noise


@dataclass
class ScaleResult:
    script: str
    mode: str  # weak | strong
    sizes: list[SizeRuns]
    order: list[int]
    site: ParamSite | None = None  # strong scaling: where the per-rank batch is set
    global_batch: int | None = None
    efficiencies: list[Efficiency] = field(default_factory=list)
    kind: str = ""  # scales | communication-bound | input-bound | contention | below linear | inconclusive
    advice: str = ""
    reasons: list[str] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)
    failed: RunResult | None = None
    failed_size: int | None = None
    rendezvous: Rendezvous | None = None  # a multi-node sweep: the figures are this node's ranks'
    cost: CostBasis | None = None  # costs.CostBasis of the largest size's loss, set by the command

    def job_parts(self) -> list[dict]:
        """Each run of a multi-node sweep as a job of its own: its id and this node's rank in it
        (c10d numbers the nodes of every rendezvous anew)."""
        parts = []
        for size in self.sizes:
            for run in size.runs:
                report = distributed.rank_report(run) if run.ok else None
                job = report.job if report is not None else None
                parts.append({"nproc": size.nproc, "job": job.id if job else None, "node": job.node if job else None})
        return parts

    @property
    def unit(self) -> str:
        if all(s.counts_samples for s in self.sizes):
            return "samples/s"
        return "rank batches/s" if self.mode == "weak" else "steps/s"

    def throughput(self, size: SizeRuns) -> float:
        """The geometric mean over runs: the efficiency is the ratio of these."""
        return stats.geometric_mean(size.throughputs(self.unit))

    @property
    def figures(self) -> list[Figure]:
        out = [
            Figure(
                f"throughput at {s.nproc}",
                self.throughput(s),
                "samples/s" if self.unit == "samples/s" else "steps/s",
                f"geometric mean of {len(s.runs)} runs ({self.unit})",
            )
            for s in self.sizes
            if s.runs
        ]
        out += [
            Figure(
                f"efficiency at {e.nproc}",
                e.value,
                "share",
                f"95% interval {100 * e.interval[0]:.0f}%..{100 * e.interval[1]:.0f}%, bar "
                f"{100 * e.threshold:.0f}%: {e.outcome}",
            )
            for e in self.efficiencies
        ]
        return out


def scale_record(result: ScaleResult) -> dict:
    """Every figure of a scaling run as plain data: the `--json` document, and what a run history
    stores for it."""
    return {
        "kind": "scale",
        "script": result.script,
        "mode": result.mode,
        "cost": result.cost.as_meta() if result.cost else None,
        "global_batch": result.global_batch,
        "set_via": result.site.where if result.site else None,
        "order": result.order,
        "throughput_unit": result.unit if not result.failed else None,
        "sizes": [
            {
                "nproc": s.nproc,
                "run_throughputs": s.throughputs(result.unit) if not result.failed else None,
                "throughput": result.throughput(s) if s.runs and not result.failed else None,
                **(s.breakdown() if s.runs and not result.failed else {}),
            }
            for s in result.sizes
        ],
        "efficiencies": [
            {
                "nproc": e.nproc,
                "efficiency": e.value,
                "interval": list(e.interval),
                "threshold": e.threshold,
                "outcome": e.outcome,
            }
            for e in result.efficiencies
        ],
        "verdict": result.kind or None,
        "advice": result.advice or None,
        "reasons": result.reasons,
        "recommendations": [{"code": r.code or None, "action": r.action} for r in result.recommendations],
        "nodes": None
        if result.rendezvous is None
        else {
            "nnodes": result.rendezvous.nnodes,
            "rdzv_endpoint": result.rendezvous.endpoint(0),
            "rdzv_id": result.rendezvous.job,
            "runs": result.job_parts(),
            "scope": "processes and throughput are this node's; every node runs the same sizes",
        },
        "failed_nproc": result.failed_size,
        "failure": None
        if result.failed is None
        else {"status": result.failed.status, "exit_code": result.failed.exit_code, "error": result.failed.error},
    }


def scale(
    command: Command,
    sizes: list[int],
    runs: int,
    config: RunConfig,
    strong: str | None = None,
    progress=None,
    rendezvous: Rendezvous | None = None,
) -> ScaleResult:
    """Run `command` (a script, not a launcher) under torchrun at each size and judge the scaling.
    With `rendezvous`, this node's part of a multi-node sweep: every node runs the same command,
    the sizes are processes per node, and the same rotation makes the nodes' runs meet."""
    if command.launch is not None:
        raise ScaleError("scale starts the ranks itself: give the script (`-- train.py ARGS`), not a launcher")
    if config.seconds is not None:
        raise ScaleError("ranks must stop at the same step: scale measures by --steps")
    script = command.script
    result = ScaleResult(
        str(script or command.target[1]),
        "strong" if strong else "weak",
        [SizeRuns(n) for n in sizes],
        rotation(sizes, runs),
        rendezvous=rendezvous,
    )
    targets = {n: command.target for n in sizes}
    run_config = config
    with tempfile.TemporaryDirectory(prefix="gpulint-scale-") as folder:
        if strong:
            if script is None:
                raise ScaleError("--strong sets the batch in the script's source: give a script, not -m module")
            name, global_batch = parse_strong(strong)
            uneven = [n for n in sizes if global_batch % n]
            if uneven:
                raise ScaleError(f"--strong {name}={global_batch} does not divide evenly over {uneven} processes")
            result.global_batch = global_batch
            source = script.read_bytes()
            for n in sizes:
                try:
                    copy = set_param(source, command.target[1:], name, str(global_batch // n))
                except cst.ParserSyntaxError as exc:
                    raise ScaleError(f"{script} does not parse: {exc}") from None
                except ParamError as exc:
                    raise ScaleError(f"{script}: {exc}") from None
                path = Path(folder) / f"n{n}" / script.name
                path.parent.mkdir()
                path.write_bytes(copy.source)
                targets[n] = [str(path), *copy.args]
                result.site = copy.site
            run_config = RunConfig(**{**config.__dict__, "sys_path0": str(script.resolve().parent)})
        by_size = {s.nproc: s for s in result.sizes}
        for index, n in enumerate(result.order):
            if progress is not None:
                progress(index, len(result.order), f"{n} process{'es' if n > 1 else ''}")
            launch = Launch("torchrun", torchrun_prefix(n, command.interpreter, rendezvous, index), n)
            run = run_once(Command(command.interpreter, [], targets[n], launch), run_config)
            by_size[n].runs.append(run)
            if not run.ok:
                result.failed, result.failed_size = run, n
                return result
    judge(result)
    return result


def judge(result: ScaleResult) -> None:
    """Efficiencies, the verdict and what to change, from the measured runs."""
    base = result.sizes[0]
    base_rates = base.throughputs(result.unit)
    for size in result.sizes[1:]:
        ratio = size.nproc / base.nproc
        point, low, high = ratio_interval(base_rates, size.throughputs(result.unit), ratio)
        bar = threshold(ratio)
        outcome = "near linear" if low >= bar else "below" if high < bar else "within noise"
        result.efficiencies.append(Efficiency(size.nproc, point, (low, high), bar, outcome))
    below = [e for e in result.efficiencies if e.outcome == "below"]
    if below:
        worst = min(below, key=lambda e: e.value)
        _explain(result, next(s for s in result.sizes if s.nproc == worst.nproc), worst)
    elif all(e.outcome == "near linear" for e in result.efficiencies):
        top = result.efficiencies[-1]
        if not _starved(result, top):
            result.kind = "scales"
            result.advice = (
                f"more GPUs will help: {100 * top.value:.0f}% efficiency at {top.nproc} processes "
                f"(bar {100 * top.threshold:.0f}%), near linear at every size measured"
            )
    else:
        result.kind = "inconclusive"
        result.advice = "the efficiency is within the noise of the bar: run more repeats (--runs) on a quieter machine"


def _starved(result: ScaleResult, top: Efficiency) -> bool:
    """Near-linear throughput from ranks that mostly wait is no case for more GPUs: each rank
    starves alone, and more of them multiply the waste.  True (with the verdict set) when at some
    size the ranks' own compute -- the step less the waits for data and for the other ranks and
    rank 0's named host work between the steps (its sampled stacks: validation, checkpoints,
    logging, syncs) -- is under the method's
    FIX_CODE_FIRST share of their step."""
    for size in result.sizes:
        parts = size.breakdown()
        step = parts["step_time"]
        if not step:
            continue
        run = size.runs[-1]
        found = attribution.attribute(run.processes[0].report) if run.processes else None
        # Host work the sampler cannot name is left out: it is no evidence of waiting, and may be the
        # ranks' own work itself (a CPU job's compute in the user's code, a simulated step).
        host = {k: v for k, v in found.host_shares.items() if k != attribution.OTHER} if found else {}
        shares = {
            "data": (parts["data_wait"] or 0.0) / step,
            "the other ranks (all-reduce)": (parts["collective_wait"] or 0.0) / step,
            **host,
        }
        own = max(0.0, 1.0 - sum(shares.values()))
        if own >= FIX_CODE_FIRST:
            continue
        what, waits = max(shares.items(), key=lambda kv: kv[1])
        result.kind = {"data": "input-bound", "the other ranks (all-reduce)": "communication-bound"}.get(
            what, "host-bound"
        )
        result.advice = (
            f"throughput scales ({100 * top.value:.0f}% efficiency at {top.nproc} processes) only because each "
            f"rank waits alone: fix the code before adding GPUs, which would multiply the wait"
        )
        if what in host:
            doing = f"spend {pct(waits)} of every step on {what}"
        else:
            doing = f"wait {pct(waits)} of every step for {what}"
        result.reasons.append(
            f"at {size.nproc} process{'es' if size.nproc > 1 else ''} the ranks {doing}; their own work is "
            f"{pct(own)} of it (under {pct(FIX_CODE_FIRST)}: fix the code first)"
        )
        report = distributed.rank_report(run)
        assert run.steps is not None and report is not None, "a launched run that is ok"
        advice = distributed.communication_advice(
            report.ddp_config, micro_batches(run.steps.batches, run.steps.count) is not None, shares["data"], run.cuda
        )
        if result.kind == "input-bound":
            result.recommendations = [r for r in advice if r.code == "GL605"] or [_INPUT_PER_RANK]
        elif result.kind == "communication-bound":
            result.recommendations = advice
        else:
            code, action = HOST_PHASE_RULES[what]
            result.recommendations = [Recommendation(code, action, "the host work's share of each rank's step")]
        return True
    return False


def _explain(result: ScaleResult, size: SizeRuns, efficiency: Efficiency) -> None:
    """Say what grew between the base size and `size`: collective wait, data wait or own work."""
    base = result.sizes[0]
    before, after = base.breakdown(), size.breakdown()
    result.reasons.append(
        f"{100 * efficiency.value:.0f}% efficiency at {size.nproc} processes "
        f"(interval {100 * efficiency.interval[0]:.0f}%..{100 * efficiency.interval[1]:.0f}%, "
        f"bar {100 * efficiency.threshold:.0f}%)"
    )
    lost = None
    if before["step_time"] is None or after["step_time"] is None:  # a rank of a run measured no step
        result.reasons.append("step time not measured on every rank of every run")
    else:
        ideal = before["step_time"] * (base.nproc / size.nproc if result.mode == "strong" else 1.0)
        lost = after["step_time"] - ideal
        result.reasons.append(
            f"step time {1000 * after['step_time']:.1f} ms at {size.nproc} against {1000 * ideal:.1f} ms "
            "for linear scaling"
        )
    parts: dict[str, float] = {}
    if after["collective_wait"] is not None and before["collective_wait"] is not None:
        parts["collective wait"] = after["collective_wait"] - before["collective_wait"]
    if after["data_wait"] is not None and before["data_wait"] is not None:
        parts["data wait"] = after["data_wait"] - before["data_wait"]
    if lost is not None and (len(parts) == 2 or ("collective wait" in parts and after["data_wait"] is None)):
        parts["ranks' own work"] = lost - sum(parts.values())
    for name, grew in parts.items():
        result.reasons.append(f"{name}: {'+' if grew >= 0 else ''}{1000 * grew:.1f} ms per step")
    if after["collective_wait"] is None:
        result.reasons.append("collective wait not measured (no DistributedDataParallel model)")
    cause = max(parts, key=parts.__getitem__) if parts else None
    run = size.runs[-1]
    steps = run.steps
    report = distributed.rank_report(run)
    assert steps is not None and report is not None, "a launched run that is ok"
    advice = distributed.communication_advice(
        report.ddp_config, micro_batches(steps.batches, steps.count) is not None, steps.data_share, run.cuda
    )
    if cause == "collective wait" or cause is None:
        result.kind = "communication-bound" if cause else "below linear"
        result.advice = (
            "fix communication before adding GPUs: ranks wait for each other's gradients"
            if cause
            else "fix scaling before adding GPUs"
        )
        result.recommendations = advice
    elif cause == "data wait":
        result.kind = "input-bound"
        result.advice = "fix the input pipeline before adding GPUs: ranks wait longer for data as they multiply"
        result.recommendations = [r for r in advice if r.code == "GL605"] or [_INPUT_PER_RANK]
    else:
        result.kind = "contention"
        result.advice = (
            "the ranks' own work slows as they multiply: they share something (CPU cores, host memory "
            "bandwidth, a GPU) or, in strong scaling, each does too little work per step"
        )
