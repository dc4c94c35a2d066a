"""Model FLOPs utilization: how much of the device's peak arithmetic the training step uses.

FLOPs of one step come from torch's FlopCounterMode, run by the bootstrap over the second warm-up
step (forward, backward and optimizer step), tallied by the arithmetic the device runs (fp32, tf32,
bf16, fp16, fp8), or from the model's own estimate given with `--flops-per-step` (the usual
transformer estimate is 6 x parameters x tokens per step).  Achieved FLOP/s is FLOPs per step over
the mean measured step time; MFU is that over the device's dense peak for the arithmetic used
(gpu_peaks.py).  With several kinds of arithmetic in one step the peak is the one that would run
the whole mix in the same time: FLOPs / sum(FLOPs_k / peak_k).  Where the peak is unknown (a CPU,
an unlisted GPU) MFU is "not measured", with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulint.runtime_check import gpu_peaks
from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.measure import RunResult

IGNORED_MATH_SHARE = 0.01  # FLOPs in arithmetic without a listed peak, up to this share, are left out of the peak
CPU_REASON = ("the training ran on the CPU: gpulint lists GPU peaks only (a CPU's peak depends on its cores, vector "
              "units and clocks)")


@dataclass
class ComputeReport:
    flops_per_step: Figure
    achieved: Figure
    peak: Figure
    mfu: Figure
    by_math: dict[str, float] = field(default_factory=dict)  # FLOPs per step by arithmetic
    device: str | None = None

    @property
    def figures(self) -> list[Figure]:
        return [self.flops_per_step, self.achieved, self.peak, self.mfu]


def device_name(run: RunResult) -> tuple[str | None, str]:
    """(the GPU the first training process computed on, or None and why): torch names its device;
    for TensorFlow on a GPU, NVML does."""
    memory = (run.processes[0].report.get("memory") if run.processes else None) or {}
    if memory.get("device"):
        return memory["device"], ""
    if memory.get("source"):
        if run.gpu and run.gpu.devices:
            return run.gpu.devices[0], ""
        return None, "the GPU's name is unknown: TensorFlow does not give it and NVML is unavailable"
    if memory.get("error"):
        return None, memory["error"]
    return None, CPU_REASON


def combined_peak(by_math: dict[str, float], device: str) -> tuple[float | None, str]:
    """The peak for a mix of arithmetic: the time the device needs at peak for each part, summed."""
    total = sum(by_math.values())
    seconds, notes, missing = 0.0, [], []
    for math, flops in sorted(by_math.items(), key=lambda kv: -kv[1]):
        peak, note = gpu_peaks.peak_flops(device, math)
        if peak is None:
            missing.append((math, flops, note))
            continue
        seconds += flops / peak
        notes.append(note)
    unlisted = sum(flops for _, flops, _ in missing)
    if not notes or unlisted > IGNORED_MATH_SHARE * total:
        return None, missing[0][2] if missing else "no FLOPs counted"
    if missing:
        notes.append(f"{100 * unlisted / total:.1f}% of FLOPs in {', '.join(m for m, _, _ in missing)} left out")
    return (total - unlisted) / seconds, "; ".join(notes)


def compute_report(run: RunResult, flops_per_step: float | None = None,
                   peak_tflops: float | None = None) -> ComputeReport:
    steps = run.steps
    step_time = steps.total_time / steps.count if steps and steps.count else None
    counted = run.processes[0].report.get("flops") if run.processes else None
    pacing = max(steps.optimizers, key=steps.optimizers.get) if steps and steps.optimizers else None
    by_math: dict[str, float] = {}
    rank_note = " (rank 0, per device)" if run.launched else ""
    if flops_per_step is not None:
        flops = Figure("FLOPs per step", flops_per_step, "flop", "given with --flops-per-step")
    elif not counted:
        reason = "no torch optimizer step to count over" if steps is None or steps.source != "optimizer steps" \
            else "not counted"
        if run.processes and not any(i.startswith("torch") for i in run.instrumented):
            reason = "FLOPs are counted for torch only: give the model's own estimate with --flops-per-step"
        flops = Figure("FLOPs per step", None, "flop", reason)
    elif "error" in counted:
        flops = Figure("FLOPs per step", None, "flop", counted["error"])
    elif pacing is not None and counted.get("optimizer") != pacing:
        flops = Figure("FLOPs per step", None, "flop", f"counted over a {counted.get('optimizer')} step, but "
                                                         f"{pacing} paces the step: give --flops-per-step")
    else:
        by_math = {k: float(v) for k, v in counted["by_math"].items()}
        flops = Figure("FLOPs per step", float(counted["total"]), "flop",
                       "torch FlopCounterMode over warm-up step 2" + rank_note)
    achieved_value = flops.value / step_time if flops.value is not None and step_time else None
    achieved = Figure("achieved FLOP/s", achieved_value, "flop/s",
                      "FLOPs per step / mean step time" if achieved_value is not None else flops.note)
    device, no_device = device_name(run)
    if peak_tflops is not None:
        peak = Figure("peak FLOP/s", peak_tflops * gpu_peaks.TERA, "flop/s", "given with --peak-tflops")
    elif device is None:
        peak = Figure("peak FLOP/s", None, "flop/s", no_device)
    elif flops_per_step is not None:
        peak = Figure("peak FLOP/s", None, "flop/s", "the arithmetic (fp32, bf16, ...) of a given FLOP count is "
                                                     "unknown: give --peak-tflops")
    elif not by_math:
        peak = Figure("peak FLOP/s", None, "flop/s", "FLOPs not counted, so their arithmetic is unknown")
    else:
        value, note = combined_peak(by_math, device)
        peak = Figure("peak FLOP/s", value, "flop/s", note)
    mfu_value = achieved.value / peak.value if achieved.value is not None and peak.value else None
    if mfu_value is not None:
        mfu_note = "achieved / peak" + rank_note
    else:
        mfu_note = next(f.note for f in (flops, peak) if f.value is None) if flops.value is None or peak.value is None \
            else "no measured step time"
    return ComputeReport(flops, achieved, peak, Figure("MFU", mfu_value, "share", mfu_note), by_math, device)
