"""Device memory headroom and batch size: how far the batch can grow, what a batch-size sweep
recommends, and what to do when memory is the limit.

Headroom from a profile: torch's peak allocated bytes on the device, its allocation between steps
at the end of warm-up (weights, gradients, optimizer state: what does not grow with the batch) and
the device's total.  Activations grow about linearly with the batch, so the batch fits about
(usable - steady) / (peak - steady) times larger, usable being 90% of the device (the allocator
fragments, and peaks vary from step to step).  Without the steady figure (TensorFlow, NVML only)
usable / peak is a lower bound: it treats all memory as growing with the batch.

A sweep (`verify --param batch_size=...`) measures instead: out-of-memory is a result of the size
that hit it, and the recommendation is the largest size whose throughput is within 5% of the best
one, with the learning-rate rule stated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.measure import RunResult
from gpulint.runtime_check.verdict import GPU_MEMORY_FULL

USABLE = 0.90  # plan batches to fill at most this share of the device
EFFICIENT = 0.95  # a batch size is efficient when its throughput is at least this share of the best one
OOM_TYPES = {"OutOfMemoryError", "ResourceExhaustedError", "MemoryError"}
OOM_MESSAGE = re.compile(r"out of memory|can't allocate memory|RESOURCE_EXHAUSTED|OOM when allocating", re.IGNORECASE)
CPU_REASON = "the training ran on the CPU: there is no device memory to measure"
LR_RULE = ("scale the learning rate with the batch: multiply it by new batch / old batch (linear scaling rule) and "
           "ramp it up to that value over the first few epochs (warm-up), as large-batch training needs")
MEMORY_FIXES = ("memory is the limit: reach a larger effective batch with gradient accumulation (k micro-batches per "
                "optimizer step; under DDP wrap the first k-1 in model.no_sync()), free activation memory with "
                "activation checkpointing (torch.utils.checkpoint), or halve it with bf16 autocast")


def is_out_of_memory(run: RunResult) -> bool:
    error = run.error or {}
    return error.get("type") in OOM_TYPES or bool(OOM_MESSAGE.search(error.get("message") or ""))


@dataclass
class MemoryReport:
    figures: list[Figure]
    growth: float | None  # how many times larger the batch fits; None: not measured
    growth_is_lower_bound: bool
    memory_bound: bool  # the peak fills GPU_MEMORY_FULL of the device or more
    advice: list[str] = field(default_factory=list)


def _fullest(run: RunResult) -> dict | None:
    """The device memory figures of the rank whose device is fullest (it limits the batch)."""
    reports = [p.report.get("memory") for p in run.processes]
    usable = [m for m in reports if m and m.get("peak_allocated") and m.get("total")]
    if usable:
        return max(usable, key=lambda m: m["peak_allocated"] / m["total"])
    return next((m for m in reports if m), None)


def memory_report(run: RunResult) -> MemoryReport:
    memory = _fullest(run)
    steps = run.steps
    samples = steps.samples / steps.count if steps and steps.count and steps.samples else None
    peak = total = steady = None
    lower_bound = False
    if memory and "error" not in memory and memory.get("total"):
        peak, total, steady = memory["peak_allocated"], memory["total"], memory.get("steady_allocated")
        source = f"{memory['source']} peak allocated" + (f", {_gib(memory['peak_reserved'])} reserved"
                                                         if memory.get("peak_reserved") else "")
        fraction = peak / total
    elif run.gpu is not None and run.gpu.mem_peak_fraction:
        fraction, lower_bound = run.gpu.mem_peak_fraction, True
        source = "NVML: the whole device, every process on it"
    else:
        reason = memory["error"] if memory and "error" in memory else \
            "TensorFlow gives no device total and NVML is unavailable" if memory else \
            CPU_REASON if not run.gpu else "no device memory figure for this run"
        figures = [Figure(name, None, unit, reason) for name, unit in
                   (("device memory peak", "bytes"), ("memory headroom", "share"), ("batch can grow", "x"))]
        return MemoryReport(figures, None, False, False)
    if steady is None:
        lower_bound = True
        growth = USABLE / fraction
        how = f"at least: {USABLE:.0%} of the device over the peak, as if all memory grew with the batch"
    elif peak > steady:
        growth = (USABLE * total - steady) / (peak - steady)
        how = (f"estimate: {_gib(peak - steady)} grows with the batch, {_gib(steady)} (weights, gradients, optimizer "
               f"state) does not; {USABLE:.0%} of the device usable")
    else:
        growth, how = None, "no memory grows with the batch between steps"
    figures = [
        Figure("device memory peak", peak if peak is not None else fraction, "bytes" if peak is not None else "share",
               source),
        Figure("memory headroom", max(0.0, 1 - fraction), "share", f"of the device at the peak ({source})"),
        Figure("batch can grow", growth, "x", how),
    ]
    if growth is not None and samples:
        figures.append(Figure("largest batch (estimate)", int(samples * growth), "count",
                              f"samples per step per device; now {samples:g}"))
    report = MemoryReport(figures, growth, lower_bound, fraction >= GPU_MEMORY_FULL)
    if report.memory_bound:
        report.advice.append(f"peak memory {fraction:.0%} of the device: " + MEMORY_FIXES)
    elif growth is not None and growth >= 2:
        report.advice.append(f"the batch fits {'at least ' if lower_bound else 'about '}{growth:.1f}x larger: "
                             "measure larger sizes with `gpulint verify SCRIPT --param batch_size=B1,B2,B3` before "
                             "changing it, and " + LR_RULE)
    return report


def _gib(value: float) -> str:
    return f"{value / 2**30:.2f} GiB"


# -- batch-size sweeps -----------------------------------------------------------------------
@dataclass
class SizeResult:
    value: str  # the batch size as given
    throughput: float | None  # median over runs (samples/s, or steps/s when sizes were unreadable); None: out of memory
    out_of_memory: bool


@dataclass
class BatchAdvice:
    recommended: str | None
    lines: list[str]


def is_batch_param(name: str) -> bool:
    return "batch" in name.lower()


def batch_advice(sizes: list[SizeResult], current: str | None, unit: str = "samples/s") -> BatchAdvice:
    """The largest size that ran and is within (1 - EFFICIENT) of the best throughput: past the
    knee a larger batch buys no speed, only a different optimisation."""
    fitted = [s for s in sizes if not s.out_of_memory and s.throughput is not None]
    failed = [s.value for s in sizes if s.out_of_memory]
    lines: list[str] = []
    if unit != "samples/s":
        # steps per second times the size given: samples per second, if a step is one batch
        fitted = [SizeResult(s.value, s.throughput * _number(s.value), False) for s in fitted if _number(s.value)]
        lines.append("batch sizes were not readable from the batches: samples per step taken as the value given")
    if not fitted:
        return BatchAdvice(None, lines + [f"no size ran ({', '.join(failed)} out of memory): " + MEMORY_FIXES])
    best = max(s.throughput for s in fitted)
    efficient = [s for s in fitted if s.throughput >= EFFICIENT * best]
    recommended = max(efficient, key=lambda s: _number(s.value))
    lines.append(f"recommended: {recommended.value}, the largest size within {1 - EFFICIENT:.0%} of the best "
                 f"throughput ({best:.1f} samples/s)")
    if recommended is max(fitted, key=lambda s: _number(s.value)) and not failed:
        lines.append("throughput may still grow past the largest size tried: try larger ones")
    if current is not None and current != recommended.value and _number(current) and _number(recommended.value):
        ratio = _number(recommended.value) / _number(current)
        lines.append(f"learning rate: multiply it by {ratio:g} ({recommended.value}/{current}, linear scaling rule) "
                     "and ramp it up to that value over the first few epochs (warm-up)")
    else:
        lines.append(LR_RULE)
    if failed:
        lines.append(f"out of memory at {', '.join(failed)} (measured): " + MEMORY_FIXES)
    return BatchAdvice(recommended.value, lines)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0
