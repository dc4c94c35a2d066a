"""From measurements to a diagnosis, with the thresholds of docs/method.md.

Pure functions on plain numbers, so every threshold is tested on synthetic measurements.
"""

from __future__ import annotations

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
NOISY_CV = 0.5  # step-time coefficient of variation above this: say the figures are noisy
BUSY_CORES = 0.5  # cores kept busy by other processes from which the machine counts as loaded

# The rules to run for each bottleneck, in the order they usually pay off.
INPUT_RULES = {
    "torch": [("GL101", "load batches in worker processes (num_workers)"),
              ("GL103", "keep workers alive between epochs (persistent_workers=True)"),
              ("GL102", "pin host memory (pin_memory=True)"),
              ("GL104", "copy batches with non_blocking=True"),
              ("GL105", "do not re-read the loader to count it")],
    "tf": [("GL701", "parallel map (num_parallel_calls=tf.data.AUTOTUNE)"),
           ("GL702", "prefetch (dataset.prefetch(tf.data.AUTOTUNE))"),
           ("GL703", "replace py_function/numpy_function in map with TF ops"),
           ("GL708", "feed fit a tf.data pipeline, not a Python generator")],
}
SYNC_RULES = [("GL201", "keep values on the device; read them at logging intervals"),
              ("GL204", "drop torch.cuda.synchronize() from the step loop"),
              ("GL706", "no .numpy()/float(loss) per TF step"),
              ("GL302", "log at intervals, not every step")]
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
    sync_share: float | None = None  # time in host-device syncs (not measurable by host timers)
    syncs_per_step: float | None = None
    gpu_util: float | None = None  # mean percent
    gpu_idle_fraction: float | None = None
    gpu_memory: float | None = None  # peak fraction
    collective_share: float | None = None  # time ranks wait for all-reduce (launched runs with DDP)
    main_cores: float | None = None
    worker_cores: float | None = None
    other_cores: float | None = None


@dataclass
class Recommendation:
    code: str
    action: str
    expected_gain: str


@dataclass
class Verdict:
    kind: str  # input-bound | communication-bound | sync-bound | compute-bound | inconclusive
    severity: str | None  # high | moderate (input-bound only)
    advice: str  # "fix the code first", "more GPUs can help", ...
    compute_share: float | None
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)

    @property
    def headline(self) -> str:
        return f"{self.kind} ({self.severity})" if self.severity else self.kind


def pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def decide(m: Measurements) -> Verdict:
    warnings = _warnings(m)
    if m.steps < MIN_STEPS or m.step_median is None:
        return Verdict("inconclusive", None, "run more steps (--steps) before deciding anything", None,
                       [f"only {m.steps} measured step{'s' if m.steps != 1 else ''}; {MIN_STEPS} at least are needed"], warnings)
    data = m.data_share or 0.0
    sync = m.sync_share or 0.0
    collective = m.collective_share or 0.0
    compute = max(0.0, 1.0 - data - sync - collective)
    reasons: list[str] = []
    if m.data_share is None:
        reasons.append("data wait not measured")
    gpu_measured = m.gpu_util is not None

    if data >= INPUT_MODERATE:
        severity = "high" if data >= INPUT_HIGH else "moderate"
        reasons.append(f"{pct(data)} of step time waits for input (moderate from {pct(INPUT_MODERATE)}, high from {pct(INPUT_HIGH)})")
        if m.main_cores is not None and m.main_cores >= 0.9 and (m.worker_cores or 0) < 0.1:
            reasons.append(f"the main process keeps one core busy ({m.main_cores:.2f} cores) with no loader workers: the input pipeline is serial")
        if gpu_measured and m.gpu_idle_fraction:
            reasons.append(f"GPU at 0% in {pct(m.gpu_idle_fraction)} of samples: it waits for batches")
        kind = "input-bound"
        recommendations = [Recommendation(code, action, _gain(data) if i == 0 else "a share of the same wait")
                           for i, (code, action) in enumerate(INPUT_RULES[m.framework])]
        if m.syncs_per_step:
            recommendations += _sync_recommendations(m)
    elif collective >= COLLECTIVE_HIGH:
        severity = None
        kind = "communication-bound"
        reasons.append(f"ranks wait {pct(collective)} of each step for all-reduce (from {pct(COLLECTIVE_HIGH)} "
                       "a 1->2 scaling run falls under 90% efficiency)")
        recommendations = []  # they depend on the DDP settings: distributed.communication_advice
    elif m.syncs_per_step and m.syncs_per_step >= 1 and (not gpu_measured or m.gpu_util < GPU_STARVED):
        severity = None
        kind = "sync-bound"
        reasons.append(f"{m.syncs_per_step:.1f} host-device syncs per step stall the host while the GPU drains")
        if gpu_measured:
            reasons.append(f"GPU utilization {m.gpu_util:.0f}% (< {GPU_STARVED:.0f}%)")
        recommendations = _sync_recommendations(m)
    elif gpu_measured and m.gpu_util < GPU_STARVED:
        severity = None
        kind = "inconclusive"
        reasons.append(f"GPU utilization {m.gpu_util:.0f}% (< {GPU_STARVED:.0f}%) with little data wait and no sync found: "
                       "look at per-step Python work and small kernels")
        recommendations = [Recommendation(c, a, "unknown") for c, a in SYNC_RULES[3:]] + _compute_recommendations(m)
    elif m.data_share is None and not gpu_measured:
        severity = None
        kind = "inconclusive"
        reasons.append("neither data wait nor GPU utilization could be measured for this loop")
        recommendations = [Recommendation(c, a, "unknown") for c, a in INPUT_RULES[m.framework]]
    else:
        severity = None
        kind = "compute-bound"
        reasons.append(f"data wait {pct(data)} of step time (< {pct(INPUT_MODERATE)})")
        if gpu_measured:
            reasons.append(f"GPU utilization {m.gpu_util:.0f}%")
        recommendations = _compute_recommendations(m)

    if compute < FIX_CODE_FIRST:
        advice = f"fix the code first: effective compute share {pct(compute)} (< {pct(FIX_CODE_FIRST)}); more GPUs would wait too"
    elif kind == "input-bound":
        advice = f"fix the input pipeline first: {pct(data)} of each step waits for data, and more GPUs would wait too"
    elif kind == "communication-bound":
        advice = (f"fix communication first: {pct(collective)} of each step waits for other ranks; "
                  "more GPUs would wait longer")
    elif kind == "compute-bound" and gpu_measured and m.gpu_util >= GPU_SCALES:
        advice = f"more GPUs can help: GPU busy {m.gpu_util:.0f}% (>= {GPU_SCALES:.0f}%) and little data wait; confirm with a 1->2 GPU scaling run"
    elif kind == "compute-bound" and gpu_measured and m.gpu_memory is not None and m.gpu_memory >= GPU_MEMORY_FULL:
        advice = f"memory is {pct(m.gpu_memory)} of the card: mixed precision or more GPUs (sharding) for a larger batch"
    elif kind == "inconclusive" and not gpu_measured:
        advice = "not enough was measurable here: profile on the training machine (with NVML) before deciding"
    elif kind == "compute-bound" and not gpu_measured:
        advice = "the host is not waiting; GPU utilization not measured here: measure it before buying GPUs"
    else:
        advice = "fix the code first: the GPU is not kept busy"
    return Verdict(kind, severity, advice, compute, reasons, warnings, recommendations)


def _gain(share: float) -> str:
    """Removing a wait of `share` of the step at best gives 1 / (1 - share)."""
    return f"up to {1 / max(1e-9, 1 - share):.1f}x" if share < 0.99 else "large"


def _sync_recommendations(m: Measurements) -> list[Recommendation]:
    codes = SYNC_RULES if m.framework == "torch" else [r for r in SYNC_RULES if r[0] in ("GL706", "GL302")]
    return [Recommendation(code, action, "unknown (sync time is not measured by host timers)") for code, action in codes]


def _compute_recommendations(m: Measurements) -> list[Recommendation]:
    return [Recommendation(code, action, "model-dependent") for code, action in COMPUTE_RULES[m.framework]]


def busy_machine_warning(other_cores: float | None, during: str = "the run") -> str | None:
    """The warning for a machine that other processes kept busy (half a core or more)."""
    if other_cores is None or other_cores < BUSY_CORES:
        return None
    return (f"other processes kept {other_cores:.1f} cores busy during {during}: "
            "figures are slower and noisier than on an idle machine")


def _warnings(m: Measurements) -> list[str]:
    out = []
    busy = busy_machine_warning(m.other_cores)
    if busy:
        out.append(busy)
    if m.step_cv is not None and m.step_cv > NOISY_CV:
        out.append(
            f"step times vary a lot (coefficient of variation {m.step_cv:.2f}): use more steps or a quieter machine"
        )
    return out
