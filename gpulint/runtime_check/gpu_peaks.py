"""Peak dense throughput of common data-centre and workstation GPUs, per kind of arithmetic, for
model FLOPs utilization (MFU = achieved FLOP/s over this peak).

Source: NVIDIA's product datasheets (one per GPU, linked below).  Datasheets give tensor-core
figures "with sparsity" (2:4 structured sparsity, marked with an asterisk); training runs dense, so
the table holds the dense figures: half the starred ones, or the unstarred figure where the
datasheet prints both.  `fp32` is the non-tensor (CUDA core) peak; `tf32`, `bf16`, `fp16` and `fp8`
are tensor-core peaks.  A GPU or a kind of arithmetic that is not here has no peak: MFU is then
"not measured", never guessed.  Devices are recognised by the name torch and NVML report
(`torch.cuda.get_device_name()`, `nvmlDeviceGetName`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TERA = 1e12


@dataclass(frozen=True)
class GpuPeak:
    model: str
    pattern: str  # regular expression searched in the device name
    tflops: dict[str, float]  # arithmetic -> dense peak in TFLOP/s
    source: str


def _datasheet(page: str) -> str:
    return f"NVIDIA datasheet, https://www.nvidia.com/en-us/data-center/{page}/"


# Order matters: the first pattern that matches a name wins (H100 NVL before the other H100s).
# An entry without figures is a device gpulint recognises but has no trustworthy peak for.
PEAKS = (
    GpuPeak("GH200", r"GH200", {}, _datasheet("grace-hopper-superchip")),  # not listed
    GpuPeak("H100 NVL", r"H100.*NVL", {}, _datasheet("h100")),  # NVL figures are per pair: not listed
    GpuPeak("H200 NVL", r"H200.*NVL", {}, _datasheet("h200")),  # differs from the SXM part: not listed
    GpuPeak("H100 PCIe", r"H100.*PCIe", {"fp32": 51, "tf32": 378, "bf16": 756.5, "fp16": 756.5, "fp8": 1513},
            _datasheet("h100")),
    GpuPeak("H100 SXM", r"H100", {"fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979},
            _datasheet("h100")),
    GpuPeak("H200 SXM", r"H200", {"fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979},
            _datasheet("h200")),
    GpuPeak("A100", r"A100", {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}, _datasheet("a100")),
    GpuPeak("A40", r"\bA40\b", {"fp32": 37.4, "tf32": 74.8, "bf16": 149.7, "fp16": 149.7}, _datasheet("a40")),
    GpuPeak("A30", r"\bA30\b", {"fp32": 10.3, "tf32": 82, "bf16": 165, "fp16": 165}, _datasheet("products/a30-gpu")),
    GpuPeak("A10", r"\bA10\b", {"fp32": 31.2, "tf32": 62.5, "bf16": 125, "fp16": 125},
            _datasheet("products/a10-gpu")),
    GpuPeak("L40S", r"\bL40S\b", {"fp32": 91.6, "tf32": 183, "bf16": 362.05, "fp16": 362.05, "fp8": 733},
            _datasheet("l40s")),
    GpuPeak("L40", r"\bL40\b", {"fp32": 90.5, "tf32": 90.5, "bf16": 181.05, "fp16": 181.05, "fp8": 362},
            _datasheet("l40")),
    GpuPeak("L4", r"\bL4\b", {"fp32": 30.3, "tf32": 60, "bf16": 121, "fp16": 121, "fp8": 242.5}, _datasheet("l4")),
    GpuPeak("V100S PCIe", r"V100S", {"fp32": 16.4, "fp16": 130}, _datasheet("v100")),
    GpuPeak("V100 PCIe", r"V100.*PCIE", {"fp32": 14, "fp16": 112}, _datasheet("v100")),
    GpuPeak("V100 SXM2", r"V100.*SXM2", {"fp32": 15.7, "fp16": 125}, _datasheet("v100")),
    GpuPeak("T4", r"\bT4\b", {"fp32": 8.1, "fp16": 65}, _datasheet("tesla-t4")),
)


def find(device_name: str | None) -> GpuPeak | None:
    if not device_name:
        return None
    return next((peak for peak in PEAKS if re.search(peak.pattern, device_name, re.IGNORECASE)), None)


def peak_flops(device_name: str | None, math: str) -> tuple[float | None, str]:
    """(peak FLOP/s, where it comes from) or (None, why there is none)."""
    if not device_name:
        return None, "no GPU name known for this run"
    peak = find(device_name)
    if peak is None:
        return None, f"{device_name} is not in gpulint's table of GPU peaks (give --peak-tflops)"
    if math not in peak.tflops:
        listed = ", ".join(peak.tflops) or "none"
        return None, f"no {math} peak listed for {peak.model} (listed: {listed}; give --peak-tflops)"
    return peak.tflops[math] * TERA, f"{peak.model} {math} dense peak {peak.tflops[math]:g} TFLOP/s ({peak.source})"
