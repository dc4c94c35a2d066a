"""From measurements to a diagnosis, with the thresholds of docs/method.md.

Pure functions on plain numbers, so every threshold is tested on synthetic measurements.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# The thresholds of docs/method.md (anchored on the TF Profiler and the PyTorch TensorBoard plugin).
INPUT_MODERATE = 0.05  # share of step time waiting for input
INPUT_HIGH = 0.20
FIX_CODE_FIRST = 0.60  # effective compute share below this: fix the code before adding GPUs
GPU_STARVED = 80.0  # mean utilization below this: the GPU is starved
GPU_SCALES = 95.0  # above this (with little data wait) more GPUs can help
GPU_MEMORY_FULL = 0.90
# Share of step time ranks wait for collectives: from this, waiting alone puts a 1 -> 2 scaling run
# under the 90% efficiency line (scale.py), so more GPUs would mostly wait longer.
COLLECTIVE_HIGH = 0.10
MIN_STEPS = 3  # fewer measured steps than this is no measurement
# Share of the step taken by one kind of host work between the steps' device work (checkpoint
# writes, logging, validation, host reads, ...; attribution.py): from this it names the bottleneck.
HOST_WORK_HIGH = 0.10
# Looks at the stack that must have seen a kind of host work before it names the bottleneck.  Each
# look carries the time since the one before; on a loaded machine the system can hold the looking
# thread back for tens of milliseconds, and one late look then puts a short run's 10% wherever the
# training thread happened to be (a CPU step's own compute line, seen as "other host work").
MIN_PHASE_LOOKS = 3
# A rank doing this much more work per step than the others (median) makes them all wait for it.
STRAGGLER_HIGH = 0.05
NOISY_CV = 0.5  # step-time coefficient of variation above this: say the figures are noisy
BUSY_CORES = 0.5  # cores kept busy by other processes from which the machine counts as loaded

# The rules to run for each bottleneck, in the order they usually pay off.
INPUT_RULES = {
    "torch": [
        ("GL101", "load batches in worker processes (num_workers)"),
        ("GL103", "keep workers alive between epochs (persistent_workers=True)"),
        ("GL102", "pin host memory (pin_memory=True)"),
        ("GL104", "copy batches with non_blocking=True"),
        ("GL105", "do not re-read the loader to count it"),
    ],
    "tf": [
        ("GL701", "parallel map (num_parallel_calls=tf.data.AUTOTUNE)"),
        ("GL702", "prefetch (dataset.prefetch(tf.data.AUTOTUNE))"),
        ("GL703", "replace py_function/numpy_function in map with TF ops"),
        ("GL708", "feed fit a tf.data pipeline, not a Python generator"),
    ],
}
SYNC_RULES = [
    ("GL201", "keep values on the device; read them at logging intervals"),
    ("GL204", "drop torch.cuda.synchronize() from the step loop"),
    ("GL706", "no .numpy()/float(loss) per TF step"),
    ("GL302", "log at intervals, not every step"),
]
# Fixes whose effect needs a CUDA device: on a run without one they change nothing measurable,
# so profile does not suggest them there and verify refuses to A/B them.
NEEDS_DEVICE = {
    "GL102": "pinned memory speeds up host-to-GPU copies",
    "GL104": "non_blocking copies overlap host-to-GPU transfers",
    "GL203": "building tensors on the device saves a host-to-GPU copy",
    "GL401": "mixed precision runs on GPU tensor cores",
    "GL402": "the AMP API drives GPU mixed precision",
    "GL404": "TF32 is a GPU matmul mode",
    "GL602": "NCCL moves gradients between GPUs",
    "GL803": "mixed precision runs on GPU tensor cores",
}
COMPUTE_RULES = {
    "torch": [("GL401", "mixed precision (torch.autocast)"), ("GL404", "TF32 matmuls"), ("GL403", "torch.compile")],
    "tf": [("GL704", "XLA (jit_compile)"), ("GL705", "steps_per_execution")],
}


@dataclass
class Measurements:
    """What a verdict is made from; None means not measured."""

    framework: str  # "torch" or "tf"
    steps: int
    step_median: float | None
    step_cv: float | None = None  # spread of step times (stdev / mean)
    data_share: float | None = None
    # Half-width of the data share's confidence interval (stats.mean_noise of the per-step waits
    # over the mean step): a wait within it could be chance; None when the series is too short.
    data_noise: float | None = None
    sync_share: float | None = None  # time in host-device syncs (not measurable by host timers)
    syncs_per_step: float | None = None
    gpu_util: float | None = None  # mean percent
    gpu_idle_fraction: float | None = None
    gpu_memory: float | None = None  # peak fraction
    collective_share: float | None = None  # time ranks wait for all-reduce (launched runs with DDP)
    main_cores: float | None = None
    worker_cores: float | None = None
    other_cores: float | None = None
    # Host work between the device work, by phase (HOST_PHASE_RULES), share of step time,
    # from the sampled stacks; empty when the stack was not sampled.
    host_shares: dict[str, float] = field(default_factory=dict)
    host_lines: dict[str, str] = field(default_factory=dict)  # phase -> "line N: text" that takes most of it
    host_looks: dict[str, int] = field(default_factory=dict)  # phase -> looks that saw it, where counted
    straggler_rank: int | None = None
    straggler_share: float | None = None  # its extra own work per step, share of the step
    straggler_note: str = ""  # where its extra time goes
    loader: dict | None = None  # the training DataLoader's settings (num_workers, persistent_workers, ...)
    # Whether the run read more training batches than an epoch of that loader holds (None: not
    # known): only then did a new epoch start its workers again, which persistent workers save.
    epoch_turned: bool | None = None
    # What the steps waited on for batches (measure.StepStats.data_source): a DataLoader, tf.data,
    # Keras fit's input, or the user's batch function, named with its line ("get_batch at train.py:40")
    data_source: str | None = None
    data_function: str | None = None  # "get_batch at train.py:40" when a user function made the batches
    data_function_line: str | None = None  # its "path:row", for the fix's line
    cores: int | None = None  # CPU cores of the machine


@dataclass
class Recommendation:
    code: str
    action: str
    expected_gain: str
    line: str | None = None  # where this run spends the time the fix removes ("path:row"), when measured
    secondary: bool = False  # a fix of a secondary phase: tried after the named phase's own


@dataclass
class Verdict:
    # input-bound | communication-bound | straggler | host-bound | sync-bound | compute-bound | inconclusive
    kind: str
    severity: str | None  # high | moderate (input-bound), the phase (host-bound), the rank (straggler)
    advice: str  # "fix the code first", "more GPUs can help", ...
    compute_share: float | None
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)
    # The phases over their own threshold that the verdict does not name: (label, share of the step)
    secondary: list[tuple[str, float]] = field(default_factory=list)

    @property
    def headline(self) -> str:
        named = f"{self.kind} ({self.severity})" if self.severity else self.kind
        if not self.secondary:
            return named
        return f"{named}; secondary: {', '.join(f'{label} {pct(share)}' for label, share in self.secondary)}"


def pct(value: float) -> str:
    return f"{100 * value:.0f}%"


# The host phases of attribution.py (what the thread does between the steps' device work), each
# with the rule that flags it and the fix.
HOST_PHASE_RULES = {
    "validation": ("GL301", "validate at intervals (every N steps or once per epoch), not every step"),
    "checkpoint writes": ("GL303", "save checkpoints at intervals (every N steps or at the end of an epoch)"),
    "logging": ("GL302", "log at intervals, and do not flush or fsync every step"),
    "host sync": ("GL201", "keep values on the device; read them on the host at logging intervals"),
    "loader start-up": ("GL103", "keep loader workers alive between epochs (persistent_workers=True)"),
    "host-to-device copies": ("GL104", "copy batches with non_blocking=True from pinned memory"),
    "other host work": ("", "move this per-step host work out of the step, or do it at intervals"),
}


# The verdicts about time ranks lose to each other.  They are named over a larger compute share:
# their thresholds are set against scaling efficiency (COLLECTIVE_HIGH, STRAGGLER_HIGH), and that
# loss grows with every rank added, where compute per rank does not.
BETWEEN_RANKS = ("straggler", "communication-bound")


@dataclass
class _Candidate:
    share: float
    kind: str
    severity: str | None
    reason: str

    @property
    def label(self) -> str:
        """How the headline lists it as secondary: "input 7%", "checkpoint writes 12%"."""
        if self.kind == "input-bound":
            return "input"
        if self.kind == "communication-bound":
            return "communication"
        if self.kind == "sync-bound":
            return "host sync"
        if self.kind == "straggler":
            return f"straggler {self.severity}"
        return self.severity or self.kind


def _candidates(m: Measurements, data: float, collective: float) -> list[_Candidate]:
    """Every cause whose share of the step passes its threshold, with the reason it is there.  A
    data wait must also be larger than its own noise: a share that chance could make is no cause."""
    found = []
    if data >= INPUT_MODERATE and (m.data_noise is None or data > m.data_noise):
        found.append(
            _Candidate(
                data,
                "input-bound",
                "high" if data >= INPUT_HIGH else "moderate",
                f"{pct(data)} of step time waits for {_waited_on(m)} "
                f"(moderate from {pct(INPUT_MODERATE)}, high from {pct(INPUT_HIGH)})",
            )
        )
    straggler = m.straggler_share or 0.0
    if m.straggler_rank is not None and straggler >= STRAGGLER_HIGH:
        found.append(
            _Candidate(
                straggler,
                "straggler",
                f"rank {m.straggler_rank}",
                f"rank {m.straggler_rank} works {_per_step(straggler, m)}longer than the other ranks, "
                f"which wait for it at the all-reduce{': ' + m.straggler_note if m.straggler_note else ''}",
            )
        )
    # The wait for a slower rank shows as collective wait: what the straggler explains is its own.
    exchange = collective - (straggler if m.straggler_rank is not None else 0.0)
    if exchange >= COLLECTIVE_HIGH:
        found.append(
            _Candidate(
                exchange,
                "communication-bound",
                None,
                f"ranks wait {pct(exchange)} of each step for all-reduce (from {pct(COLLECTIVE_HIGH)} "
                "a 1->2 scaling run falls under 90% efficiency)",
            )
        )
    for phase, share in _host_work_over_threshold(m):
        if not _too_few_looks(m, phase):
            where = m.host_lines.get(phase)
            found.append(
                _Candidate(
                    share,
                    "sync-bound" if phase == "host sync" else "host-bound",
                    None if phase == "host sync" else phase,
                    f"{pct(share)} of step time is {phase}{' at ' + where if where else ''} "
                    f"(sampled stacks; named from {pct(HOST_WORK_HIGH)})",
                )
            )
    return sorted(found, key=lambda c: -c.share)


def _host_work_over_threshold(m: Measurements) -> list[tuple[str, float]]:
    """The kinds of host work (HOST_PHASE_RULES) that take HOST_WORK_HIGH of the step or more."""
    return [
        (phase, share)
        for phase, share in m.host_shares.items()
        if share >= HOST_WORK_HIGH and phase in HOST_PHASE_RULES
    ]


def _too_few_looks(m: Measurements, phase: str) -> bool:
    """Too few looks at the stack saw the phase to name it (no count: a report from before)."""
    return m.host_looks.get(phase, MIN_PHASE_LOOKS) < MIN_PHASE_LOOKS


def _named(candidates: list[_Candidate], compute: float) -> _Candidate | None:
    """The candidate the verdict names: the largest one, if it dominates the step.  A phase of
    the process's own step (input, host work, syncs) is named only when it is at least as large
    as the compute share: a 7% data wait beside 92% compute is a secondary finding, not what
    bounds the step.  A loss between ranks (BETWEEN_RANKS) is named whenever it is the largest
    candidate."""
    if not candidates:
        return None
    largest = candidates[0]
    return largest if largest.kind in BETWEEN_RANKS or largest.share >= compute else None


def decide(m: Measurements) -> Verdict:
    """The dominant phase of the step names the bottleneck (docs/runtime.md, "Verdict"): the
    largest phase over its threshold when it is at least the compute share (or a loss between
    ranks), else compute.  The other phases over their thresholds are listed as secondary."""
    warnings = _warnings(m)
    if m.steps < MIN_STEPS or m.step_median is None:
        return Verdict(
            "inconclusive",
            None,
            "run more steps (--steps) before deciding anything",
            None,
            [f"only {m.steps} measured step{'s' if m.steps != 1 else ''}; {MIN_STEPS} at least are needed"],
            warnings,
        )
    data = m.data_share or 0.0
    sync = m.sync_share or 0.0
    collective = m.collective_share or 0.0
    host = sum(m.host_shares.values())
    compute = max(0.0, 1.0 - data - sync - collective - host)
    reasons: list[str] = []
    if m.data_share is None:
        reasons.append("data wait not measured")
    gpu_measured = m.gpu_util is not None
    candidates = _candidates(m, data, collective)
    top_candidate = _named(candidates, compute)
    secondary = [c for c in candidates if c is not top_candidate]
    # Host work over the threshold that too few looks saw to name (MIN_PHASE_LOOKS): said, not named.
    unnamed = [
        f"{pct(share)} of step time looked like {phase}"
        f"{' at ' + m.host_lines[phase] if phase in m.host_lines else ''} in only {m.host_looks[phase]} "
        f"look{'s' if m.host_looks[phase] != 1 else ''} at the stack: too few to name it "
        f"(from {MIN_PHASE_LOOKS}; more steps give more looks)"
        for phase, share in _host_work_over_threshold(m)
        if _too_few_looks(m, phase)
    ]
    recommendations: list[Recommendation]
    if top_candidate is not None:
        top = top_candidate
        kind, severity = top.kind, top.severity
        reasons.append(top.reason)
        reasons += [f"also: {c.reason}" for c in secondary]
        recommendations = _recommendations_for(top, m, data)
        if kind == "input-bound":
            # Workers a loader starts again every epoch can live between two looks of the CPU
            # sampler and read as no CPU at all: the loader's own settings say whether it has any.
            configured_workers = (m.loader or {}).get("num_workers")
            no_workers = not configured_workers if configured_workers is not None else (m.worker_cores or 0) < 0.1
            if m.main_cores is not None and m.main_cores >= 0.9 and no_workers:
                reasons.append(
                    f"the main process keeps one core busy ({m.main_cores:.2f} cores) with no loader workers: "
                    "the input pipeline is serial"
                )
            if gpu_measured and m.gpu_idle_fraction:
                reasons.append(f"GPU at 0% in {pct(m.gpu_idle_fraction)} of samples: it waits for batches")
            if m.syncs_per_step:
                recommendations += _sync_recommendations(m)
    elif m.syncs_per_step and m.syncs_per_step >= 1 and (m.gpu_util is None or m.gpu_util < GPU_STARVED):
        severity = None
        kind = "sync-bound"
        reasons.append(f"{m.syncs_per_step:.1f} host-device syncs per step stall the host while the GPU drains")
        if gpu_measured:
            reasons.append(f"GPU utilization {m.gpu_util:.0f}% (< {GPU_STARVED:.0f}%)")
        recommendations = _sync_recommendations(m)
    elif m.gpu_util is not None and m.gpu_util < GPU_STARVED and not secondary:
        severity = None
        kind = "inconclusive"
        reasons.append(
            f"GPU utilization {m.gpu_util:.0f}% (< {GPU_STARVED:.0f}%) with little data wait and no sync found: "
            "look at per-step Python work and small kernels"
        )
        recommendations = [Recommendation(c, a, "unknown") for c, a in SYNC_RULES[3:]] + _compute_recommendations(m)
    elif m.data_share is None and not gpu_measured and not m.host_shares:
        severity = None
        kind = "inconclusive"
        reasons.append("neither data wait nor GPU utilization could be measured for this loop")
        recommendations = [Recommendation(c, a, "unknown") for c, a in INPUT_RULES[m.framework]]
        if m.framework == "torch" and m.loader is None:  # no DataLoader in play: its fixes cannot act
            recommendations = [Recommendation("", NAME_THE_BATCH_FUNCTION, "unknown")]
    else:
        severity = None
        kind = "compute-bound"
        if secondary:
            reasons.append(
                f"compute is the largest part of the step ({pct(compute)}); "
                f"smaller, over their own thresholds: {', '.join(f'{c.label} {pct(c.share)}' for c in secondary)}"
            )
        elif data >= INPUT_MODERATE:
            reasons.append(f"data wait {pct(data)} of step time is within its noise (+-{pct(m.data_noise or 0.0)})")
        else:
            reasons.append(f"data wait {pct(data)} of step time (< {pct(INPUT_MODERATE)})")
        if m.host_shares:
            reasons.append(
                f"host work between the steps' compute {pct(host)} of step time "
                f"(no kind of it reaches {pct(HOST_WORK_HIGH)}{f' in {MIN_PHASE_LOOKS} looks' if unnamed else ''})"
            )
        if gpu_measured:
            reasons.append(f"GPU utilization {m.gpu_util:.0f}%")
        recommendations = _compute_recommendations(m)
        reasons += [f"also: {c.reason}" for c in secondary]
    if secondary and kind != "communication-bound":
        # the fixes of the largest secondary phase follow the named one's (communication's come
        # from the DDP settings: distributed.communication_advice)
        recommendations += [
            dataclasses.replace(r, secondary=True)
            for r in _recommendations_for(secondary[0], m, data)
            if r not in recommendations
        ]
    reasons += unnamed

    if kind == "straggler":
        advice = (
            f"balance the work: {severity} does {_per_step(m.straggler_share or 0.0, m)}more work than the "
            "others, and every rank waits for it; more GPUs would wait too"
        )
    elif kind == "host-bound":
        advice = (
            f"fix the code first: {pct(top_candidate.share if top_candidate else 0.0)} of each step is {severity}, "
            "host work that more "
            "GPUs would not shorten"
        )
    elif kind == "sync-bound" and top_candidate is not None:
        advice = (
            f"fix the code first: {pct(top_candidate.share)} of each step reads tensors on the host; "
            "more GPUs would not shorten it"
        )
    elif compute < FIX_CODE_FIRST:
        advice = (
            f"fix the code first: effective compute share {pct(compute)} (< {pct(FIX_CODE_FIRST)}); "
            "more GPUs would wait too"
        )
    elif kind == "input-bound":
        advice = f"fix the input pipeline first: {pct(data)} of each step waits for data, and more GPUs would wait too"
    elif kind == "communication-bound":
        advice = (
            f"fix communication first: {pct(collective)} of each step waits for other ranks; "
            "more GPUs would wait longer"
        )
    elif kind == "compute-bound" and secondary:
        advice = (
            f"compute bounds the step ({pct(compute)}); next is {secondary[0].label} "
            f"({pct(secondary[0].share)}): removing all of it gives at most {ceiling(secondary[0].share).split()[1]}"
        )
    elif kind == "compute-bound" and m.gpu_util is not None and m.gpu_util >= GPU_SCALES:
        advice = (
            f"more GPUs can help: GPU busy {m.gpu_util:.0f}% (>= {GPU_SCALES:.0f}%) and little data wait; "
            "confirm with a 1->2 GPU scaling run"
        )
    elif kind == "compute-bound" and gpu_measured and m.gpu_memory is not None and m.gpu_memory >= GPU_MEMORY_FULL:
        advice = (
            f"memory is {pct(m.gpu_memory)} of the card: mixed precision or more GPUs (sharding) for a larger batch"
        )
    elif kind == "inconclusive" and not gpu_measured:
        advice = "not enough was measurable here: profile on the training machine (with NVML) before deciding"
    elif kind == "compute-bound" and not gpu_measured:
        advice = (
            f"the step is compute ({pct(compute)} of it); GPU utilization not measured here: "
            "measure it before buying GPUs"
        )
    else:
        advice = "fix the code first: the GPU is not kept busy"
    return Verdict(
        kind, severity, advice, compute, reasons, warnings, recommendations, [(c.label, c.share) for c in secondary]
    )


def _per_step(share: float, m: Measurements) -> str:
    """'24.0 ms a step (31%) ' or '31% of a step '."""
    if m.step_median is None:
        return f"{pct(share)} of a step "
    return f"{1000 * share * m.step_median:.1f} ms a step ({pct(share)}) "


def _recommendations_for(top: _Candidate, m: Measurements, data: float) -> list[Recommendation]:
    if top.kind == "input-bound":
        return _input_recommendations(m, data)
    if top.kind == "straggler":
        return [
            Recommendation(
                "",
                f"balance the work across ranks: {top.severity} does more per step"
                f"{' (' + m.straggler_note + ')' if m.straggler_note else ''}; give it less data, or move its "
                "extra work out of the step or onto every rank",
                ceiling(top.share),
            )
        ]
    if top.kind == "communication-bound":
        return []  # they depend on the DDP settings: distributed.communication_advice
    phase = "host sync" if top.kind == "sync-bound" else top.severity or ""
    code, action = HOST_PHASE_RULES[phase]
    return [Recommendation(code, action, ceiling(top.share))]


def _waited_on(m: Measurements) -> str:
    if m.data_function:
        return f"the batch function {m.data_function}"
    if m.data_source in ("tf.data", "Keras fit input"):
        return "the input pipeline" if m.data_source == "tf.data" else "Keras fit's input pipeline"
    return "the training loader"


NAME_THE_BATCH_FUNCTION = (
    "name the function that makes the batches with --data-fn NAME, so its time is measured as data wait"
)


def _input_recommendations(m: Measurements, data: float) -> list[Recommendation]:
    """The input fixes that can act on this run, the one with the most evidence first: loader
    workers when the training loader has fewer than the machine's cores; persistent workers only
    where there are workers to keep.  Batches made by the user's own function with no DataLoader
    in play get the fix for that function, at its line, not DataLoader settings."""
    loader = m.loader
    if m.data_function and m.framework == "torch" and loader is None:
        return [
            Recommendation(
                "",
                f"make the batches ahead of the step: {m.data_function} runs in the training loop, so the step "
                "waits for it; prepare them in a background thread or a DataLoader with workers, "
                "or make the function cheaper",
                ceiling(data),
                line=m.data_function_line,
            )
        ]
    out = []
    for code, action in INPUT_RULES[m.framework]:
        gain: str | None = "a share of the same wait"
        if code == "GL101":
            gain = _workers_gain(data, m)
        elif code == "GL103" and loader is not None and not loader.get("num_workers"):
            continue  # no workers to keep alive: it cannot act on this loader
        elif code == "GL103" and loader is not None and loader.get("persistent_workers"):
            continue
        elif code == "GL103" and m.epoch_turned is False:
            continue  # no epoch began again in the run: the wait is not the workers' start-up
        if gain is not None:  # None: the loader already has a worker per core
            out.append(Recommendation(code, action, gain))
    workers_fixes = {r.code for r in out} & {"GL101", "GL103"}
    if not workers_fixes and m.framework == "torch" and loader is not None and loader.get("num_workers"):
        # A worker on every core already, and no epoch start to save: each batch costs what it
        # costs (pinned memory and non-blocking copies act on the copy to the device, not on this).
        out.insert(
            0,
            Recommendation(
                "",
                "make each sample cheaper to load: the workers already have every core (decode once and "
                "cache, or store the data nearer the form the model takes)",
                ceiling(data),
            ),
        )
    return out


def _workers_gain(data: float, m: Measurements) -> str | None:
    """At most what loading in worker processes can give: the workers share the cores the step
    leaves idle -- the machine's cores less those other processes kept busy and those the step's
    own compute takes in the main process (idle_cores) -- each taking the cores the loading took
    in the main process (its load, at most one core: loading that waits on files or sleeps takes
    less), so the wait shrinks at best to wait x (workers now, at least 1) / (workers that fit,
    at most one a core), and never below the rest of the step.  Where the profile saw too few idle
    cores the workers would take the cores the step uses, and no gain is expected.  Without a CPU
    sample the machine's cores bound it.  None when the loader already has a worker per core."""
    loader, cores = m.loader, m.cores
    if loader is None or cores is None or loader.get("num_workers") is None:
        return ceiling(data)
    now = max(1, loader["num_workers"])
    if loader["num_workers"] >= cores:
        return None
    idle = idle_cores(m)
    rest = 1.0 - data
    if idle is None:
        bound = 1.0 / max(rest, data * now / cores, 1e-9)
        return f"at most {bound:.1f}x ({loader['num_workers']} workers now; {cores} cores split the {pct(data)} wait)"
    each = min(1.0, max(m.main_cores or 0.0, MIN_LOADING_CORES))
    fit = min(float(cores), idle / each)
    bound = 1.0 / max(rest, data * now / max(fit, 1e-9), 1e-9)
    seen = f"{idle:.1f} of {cores} cores idle"
    if (m.other_cores or 0.0) >= BUSY_CORES:
        seen += f", {m.other_cores:.1f} kept busy by other processes"
    if each < 1.0:
        seen += f"; loading took {each:.1f} core"
    if bound < 1.0 + MIN_WORKERS_GAIN:
        return f"none expected here ({seen}): workers would take the cores the step uses"
    return f"at most {bound:.1f}x ({loader['num_workers']} workers now; {seen}: they split the {pct(data)} wait)"


# The least a worker is taken to load with, in cores: a main process seen nearly idle still does
# some of the loading's work, and the bound must not divide by nothing.
MIN_LOADING_CORES = 0.1
# A workers gain under this (10%) is within the noise of a loaded machine: said as none.
MIN_WORKERS_GAIN = 0.1


def idle_cores(m: Measurements) -> float | None:
    """Cores loader workers could use without taking the step's or other processes': the
    machine's, less other processes' load, less the main process's compute (its share of the step
    that is not the data wait) and the workers it has; None when the CPU was not sampled."""
    if m.cores is None or m.other_cores is None or m.main_cores is None:
        return None
    compute = m.main_cores * (1.0 - (m.data_share or 0.0))
    return max(0.0, min(float(m.cores), m.cores - m.other_cores - compute))


def ceiling(share: float) -> str:
    """Removing all of a share of the step at best gives 1 / (1 - share): a ceiling, not a forecast."""
    bound = f"{1 / (1 - share):.1f}x" if share < 0.99 else "large"
    return f"ceiling {bound} (if all of the {pct(share)} went)"


def _sync_recommendations(m: Measurements) -> list[Recommendation]:
    codes = SYNC_RULES if m.framework == "torch" else [r for r in SYNC_RULES if r[0] in ("GL706", "GL302")]
    return [
        Recommendation(code, action, "unknown (sync time is not measured by host timers)") for code, action in codes
    ]


def _compute_recommendations(m: Measurements) -> list[Recommendation]:
    return [Recommendation(code, action, "model-dependent") for code, action in COMPUTE_RULES[m.framework]]


# How far from a whole number the batches per optimizer step may be and still read as gradient
# accumulation (a run's window can cut an accumulation cycle at either end).
ACCUMULATION_SLACK = 0.1


def micro_batches(batches: int | None, steps: int) -> int | None:
    """Batches each optimizer step accumulates (2 or more), or None: k batches a step is
    accumulation only when the ratio is close to a whole k >= 2.  A few extra batches -- a
    `next(iter(loader))` once an epoch to peek at a batch, a validation loader counted in -- make
    1.07, which is no accumulation."""
    if not batches or not steps:
        return None
    per = batches / steps
    k = round(per)
    return k if k >= 2 and abs(per - k) <= ACCUMULATION_SLACK else None


def busy_machine_warning(other_cores: float | None, during: str = "the run") -> str | None:
    """The warning for a machine that other processes kept busy (half a core or more)."""
    if other_cores is None or other_cores < BUSY_CORES:
        return None
    return (
        f"other processes kept {other_cores:.1f} cores busy during {during}: "
        "figures are slower and noisier than on an idle machine"
    )


def thread_contention(threads: int | None, workers: int, cores: int | None) -> str | None:
    """The warning for torch's intra-op threads and `workers` loader workers wanting more cores
    than the machine has: they take turns on the same cores, so workers added can slow the step."""
    if threads is None or cores is None or workers < 1 or threads + workers <= cores:
        return None
    fit = max(1, cores - workers)
    said = (
        f"torch runs {threads} intra-op thread{'s' if threads != 1 else ''} on {cores} cores beside "
        f"{workers} loader worker{'s' if workers != 1 else ''}: they compete for the same cores; "
    )
    if threads > fit:
        return (
            said + f"leave the workers theirs with torch.set_num_threads({fit}) in the script or "
            f"OMP_NUM_THREADS={fit} in the environment"
        )
    # One thread, and workers on every core (fit was held at 1): a thread setting changes nothing,
    # fewer workers leave the step its core.
    return said + f"one thread is the fewest torch runs: leave it a core with num_workers={cores - 1} at most"


def _warnings(m: Measurements) -> list[str]:
    out = []
    busy = busy_machine_warning(m.other_cores)
    if busy:
        out.append(busy)
    if m.loader is not None:
        workers = m.loader.get("num_workers") or 0
        if not workers and (m.data_share or 0.0) >= INPUT_MODERATE:
            workers = 1  # the workers fix adds one at least
        contention = thread_contention(m.loader.get("intra_op_threads"), workers, m.cores)
        if contention:
            out.append(contention)
    if m.step_cv is not None and m.step_cv > NOISY_CV:
        out.append(
            f"step times vary a lot (coefficient of variation {m.step_cv:.2f}): use more steps or a quieter machine"
        )
    return out
