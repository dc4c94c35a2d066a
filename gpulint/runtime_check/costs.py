"""What the measured waste costs: a run's share of GPU time that does no useful work (profile:
the step less its effective compute; verify: what a confirmed speed-up saves; scale: what the
largest size loses against linear scaling) turned into GPU-hours and money per epoch and per
month of continuous training, and into "worth N of your M GPUs" -- the figure a team takes to a
budget meeting beside the scaling verdict.

Estimates, and labelled so: they assume the measured step and its shares hold for the whole
run, and that every GPU costs the same price an hour whether it computes or waits.  No money
figure is given without a price (--gpu-hour-price, or `gpu-hour-price` in [tool.gpulint]).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpulint.runtime_check.verdict import micro_batches

HOURS_PER_MONTH = 730.0  # 365 x 24 / 12: a month of continuous training

# What the share is, by the command that measured it: (what is wasted or saved, how it was measured).
KINDS = {
    "waste": ("wasted", "the waste is the share of each step not spent in compute (the effective compute share)"),
    "saving": ("saved by the fix", "the saving is 1 - 1/speedup of the original's GPU time (the confirmed speed-up)"),
    "scaling loss": ("lost to scaling", "the loss is what the largest size's throughput falls short of linear by"),
}


class CostError(ValueError):
    """A price or count that cannot be used: one line for the user."""


@dataclass
class CostBasis:
    """What a run measured that the cost is made of (stored in a recorded run's meta["cost"])."""

    kind: str  # a key of KINDS
    share: float  # of the GPU time, 0..1
    step_seconds: float  # the measured step (verify: the original's)
    gpus: int  # the GPUs the job trains on
    steps_per_epoch: int | None = None  # known (the training DataLoader's length) or given

    def as_meta(self) -> dict:
        return asdict(self)


def basis_from_meta(meta: Any) -> CostBasis | None:
    """The stored basis, or None when it is missing or not of the stored types (a history written
    by someone else: the HTML report never shows a figure it cannot check)."""
    if not isinstance(meta, dict) or meta.get("kind") not in KINDS:
        return None
    numbers = [meta.get("share"), meta.get("step_seconds"), meta.get("gpus")]
    epoch = meta.get("steps_per_epoch")
    if not all(_finite(v) for v in numbers) or not (epoch is None or _finite(epoch)):
        return None
    share, step, gpus = (float(v) for v in numbers if v is not None)
    if not (0 <= share <= 1 and step > 0 and gpus >= 1) or (epoch is not None and epoch < 1):
        return None
    return CostBasis(meta["kind"], share, step, int(gpus), None if epoch is None else int(epoch))


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_price(price: float | None, name: str = "--gpu-hour-price") -> float | None:
    if price is not None and not (math.isfinite(price) and 0 < price < 1e6):
        raise CostError(f"{name} must be a price in USD per GPU-hour above 0 (e.g. 2.50), not {price:g}")
    return price


def check_count(value: int | None, name: str) -> int | None:
    if value is not None and value < 1:
        raise CostError(f"{name} must be at least 1")
    return value


def configured_price(start: Path) -> float | None:
    """`gpu-hour-price` of the project's [tool.gpulint] (or gpulint.toml) above `start`."""
    from gpulint.linter.config import find_config, load_settings

    config = find_config(start)
    return None if config is None else load_settings(config).gpu_hour_price


def money(value: float) -> str:
    return f"${value:,.0f}" if value >= 100 else f"${value:,.2f}"


def hours(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}" if value >= 0.1 else f"{value:.3f}"


def cost_lines(basis: CostBasis, price: float) -> list[str]:
    """The estimate, one line each: the headline, per epoch (when its steps are known), per month,
    and the assumptions."""
    what, how = KINDS[basis.kind]
    worth = basis.share * basis.gpus
    plural = "s" if basis.gpus != 1 else ""
    lines = [f"{100 * basis.share:.0f}% of the GPU time is {what}: worth {worth:.2f} of your {basis.gpus} GPU{plural}"]
    if basis.steps_per_epoch:
        epoch_hours = basis.steps_per_epoch * basis.step_seconds * basis.gpus / 3600
        lines.append(
            f"per epoch ({basis.steps_per_epoch:,} steps of {1000 * basis.step_seconds:.1f} ms on {basis.gpus} "
            f"GPU{plural}): {hours(epoch_hours)} GPU-hours, {hours(basis.share * epoch_hours)} {what} = "
            f"{money(basis.share * epoch_hours * price)}"
        )
    month_hours = HOURS_PER_MONTH * basis.gpus
    lines.append(
        f"per month of continuous training ({HOURS_PER_MONTH:g} h on {basis.gpus} GPU{plural}): "
        f"{hours(month_hours)} GPU-hours, {hours(basis.share * month_hours)} {what} = "
        f"{money(basis.share * month_hours * price)}"
    )
    lines.append(
        f"assumptions: {how}; the measured step holds for the whole run; every GPU costs {money(price)} an hour "
        "whether it computes or waits"
        + ("" if basis.steps_per_epoch else "; steps per epoch not known (give --steps-per-epoch N)")
    )
    return lines


def epoch_steps(run, given: int | None) -> int | None:
    """Optimizer steps per epoch: given, or the training DataLoader's length over the batches each
    step reads (gradient accumulation reads several)."""
    if given is not None:
        return given
    steps = run.steps
    loader = run.processes[0].report.get("loader") if run.processes else None
    batches = loader.get("batches") if isinstance(loader, dict) else None
    if not isinstance(batches, int) or batches < 1 or steps is None or not steps.count:
        return None
    per_step = micro_batches(steps.batches, steps.count) or 1
    return max(1, round(batches / per_step))


def run_gpus(run, given: int | None) -> int:
    """The GPUs the job runs on: given, else its processes (a launched run's world size)."""
    if given is not None:
        return given
    world = run.processes[0].report.get("world_size") if run.processes else None
    return world if isinstance(world, int) and world >= 1 else 1


NO_ACCELERATOR = "no accelerator was measured: the run's time is CPU time, not GPU time"
INCONCLUSIVE_SCALING = "the scaling result is inconclusive: no loss measured to price"


def on_accelerator(run) -> bool:
    """The run trained on an accelerator: torch used CUDA, or the GPU was measured busy."""
    return bool(run.cuda or (run.gpu is not None and run.gpu.util_mean > 0))


def profile_basis(result, gpus: int | None = None, steps_per_epoch: int | None = None) -> CostBasis | None:
    """The share of the step not spent in compute, when the run measured it (data wait included)
    on an accelerator: a CPU-only run's time is not GPU time."""
    run, verdict = result.run, result.verdict
    if not on_accelerator(run) or verdict is None or verdict.compute_share is None:
        return None
    if run.steps is None or run.steps.data_share is None:
        return None
    return CostBasis(
        "waste",
        min(1.0, max(0.0, 1.0 - verdict.compute_share)),
        run.steps.mean,
        run_gpus(run, gpus),
        epoch_steps(run, steps_per_epoch),
    )


def verify_basis(result, gpus: int | None = None, steps_per_epoch: int | None = None) -> CostBasis | None:
    """What a confirmed speed-up saves of the original's GPU time."""
    comparison = result.comparison
    if comparison is None or comparison.outcome != "confirmed" or not result.original.run_times:
        return None
    first = next((r for r in result.original.runs if r.ok), None)
    if first is None or not on_accelerator(first):
        return None
    return CostBasis(
        "saving",
        max(0.0, 1.0 - 1.0 / comparison.speedup),
        result.original.median,
        run_gpus(first, gpus),
        epoch_steps(first, steps_per_epoch),
    )


def scale_basis(result, steps_per_epoch: int | None = None) -> CostBasis | None:
    """What the largest size loses against linear scaling, on its own GPUs: only for a decided
    result on accelerators (an inconclusive one has measured no loss), and only at a size whose
    own efficiency was decided -- with 2 processes below the bar and 4 within its noise, the loss
    at 4 is not measured, and the loss at 2 is what is priced."""
    if result.failed is not None or not result.efficiencies or result.kind == "inconclusive":
        return None
    if not any(on_accelerator(run) for size in result.sizes for run in size.runs if run.ok):
        return None
    decided = [e for e in result.efficiencies if e.outcome != "within noise"]
    if not decided:
        return None
    top = max(decided, key=lambda e: e.nproc)
    size = next((s for s in result.sizes if s.nproc == top.nproc), None)
    step = size.breakdown()["step_time"] if size is not None else None
    if step is None or step <= 0:
        return None
    return CostBasis("scaling loss", min(1.0, max(0.0, 1.0 - top.value)), step, top.nproc, steps_per_epoch)
