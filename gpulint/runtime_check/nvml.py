"""GPU utilization and memory, sampled through NVML (pynvml from nvidia-ml-py) in a thread.

NVML refreshes utilization every 1/6 s to 1 s, so one read says little: the sampler keeps every
sample over the run and the report shows their distribution.  Where NVML or a driver is missing
the sampler says why and the report says "not measured"; no figure is ever made up.  Past
SAMPLES_CAP samples, neighbours are merged pairwise (mean utilization, peak memory), so a long
run keeps a bounded list at a coarser interval.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from gpulint.runtime_check import stats

SAMPLES_CAP = 2048


@dataclass
class GpuSample:
    t: float  # time.monotonic()
    util: list[int]  # percent, per device
    mem_used: list[int]  # bytes, per device


def _merge(a: GpuSample, b: GpuSample, share: float) -> GpuSample:
    """Two consecutive samples as one: mean utilization (b is `share` of the samples), peak memory."""
    return GpuSample(
        b.t, [x + (y - x) * share for x, y in zip(a.util, b.util)], [max(x, y) for x, y in zip(a.mem_used, b.mem_used)]
    )


@dataclass
class GpuSampler:
    interval: float = 0.2
    samples: stats.Bounded = field(default_factory=lambda: stats.Bounded(_merge, SAMPLES_CAP))
    devices: list[str] = field(default_factory=list)
    mem_total: list[int] = field(default_factory=list)
    driver: str | None = None
    unavailable: str | None = None  # why nothing is measured

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = None
        self._handles: list = []

    def start(self) -> "GpuSampler":
        try:
            import pynvml

            pynvml.nvmlInit()
        except ImportError:
            self.unavailable = "pynvml (nvidia-ml-py) is not installed"
            return self
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.unavailable = f"NVML unavailable ({exc.__class__.__name__.replace('NVMLError_', '')}: {exc})"
            return self
        self._nvml = pynvml
        try:
            indices = visible_device_indices(pynvml.nvmlDeviceGetCount())
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
            self.devices = [_text(pynvml.nvmlDeviceGetName(h)) for h in self._handles]
            self.mem_total = [pynvml.nvmlDeviceGetMemoryInfo(h).total for h in self._handles]
        except Exception as exc:
            self.unavailable = f"NVML could not list devices ({exc})"
            self._shutdown()
            return self
        try:
            self.driver = _text(pynvml.nvmlSystemGetDriverVersion())
        except Exception:  # only recorded with the run: its absence is no reason to stop
            self.driver = None
        if not self._handles:
            self.unavailable = "NVML sees no GPU"
            self._shutdown()
            return self
        self._thread = threading.Thread(target=self._run, name="gpulint-nvml", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        pynvml = self._nvml
        while not self._stop.is_set():
            try:
                util = [pynvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles]
                mem = [pynvml.nvmlDeviceGetMemoryInfo(h).used for h in self._handles]
            except Exception as exc:  # a device lost mid-run: keep what was sampled
                self.unavailable = f"NVML sampling stopped ({exc})"
                return
            self.samples.add(GpuSample(time.monotonic(), util, mem))
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._shutdown()

    def _shutdown(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
            self._nvml = None

    @property
    def measured(self) -> bool:
        return bool(self.samples)


def visible_devices() -> tuple[list[str], str | None]:
    """The GPUs this process can see (names), and why none when there are none."""
    sampler = GpuSampler()
    sampler.start()
    sampler.stop()
    return sampler.devices, sampler.unavailable


def visible_device_indices(count: int) -> list[int]:
    """The NVML indices CUDA_VISIBLE_DEVICES leaves visible (all when unset or not plain indices)."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return list(range(count))
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not parts:
        return []
    if all(p.isdigit() for p in parts):
        return [int(p) for p in parts if int(p) < count]
    return list(range(count))  # UUIDs / MIG names: sample every device rather than guess


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class GpuSummary:
    devices: list[str]
    samples: int
    util_mean: float  # percent, mean over devices and samples in the measurement window
    util_median: float
    util_p10: float
    idle_fraction: float  # share of samples at 0% utilization (data starvation shows up as drops to 0)
    mem_peak_fraction: float  # the fullest device's peak memory over its total
    series: list[float]  # utilization over the whole run (mean of the devices), for the sparkline
    # Over the whole run, one entry per sample (time.monotonic()); per device:
    times: list[float] = field(default_factory=list)
    util_series: list[list[float]] = field(default_factory=list)  # percent
    mem_series: list[list[float]] = field(default_factory=list)  # bytes used
    mem_total: list[int] = field(default_factory=list)  # bytes
    driver: str | None = None


def summarize(sampler: GpuSampler, start: float | None, end: float | None) -> GpuSummary | None:
    if not sampler.samples:
        return None
    window = [
        s for s in sampler.samples if (start is None or s.t >= start) and (end is None or s.t <= end)
    ] or sampler.samples
    utils = sorted(sum(s.util) / len(s.util) for s in window)
    peaks = [max(s.mem_used[i] for s in window) / total for i, total in enumerate(sampler.mem_total) if total]
    return GpuSummary(
        devices=sampler.devices,
        samples=len(window),
        util_mean=sum(utils) / len(utils),
        util_median=stats.quantile(utils, 0.5),
        util_p10=stats.quantile(utils, 0.1),
        idle_fraction=sum(1 for u in utils if u == 0) / len(utils),
        mem_peak_fraction=max(peaks) if peaks else 0.0,
        series=[sum(s.util) / len(s.util) for s in sampler.samples],
        times=[s.t for s in sampler.samples],
        util_series=[[s.util[i] for s in sampler.samples] for i in range(len(sampler.devices))],
        mem_series=[[s.mem_used[i] for s in sampler.samples] for i in range(len(sampler.devices))],
        mem_total=list(sampler.mem_total),
        driver=sampler.driver,
    )
