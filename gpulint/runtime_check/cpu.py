"""CPU of the process tree (main process versus DataLoader workers) and per-core system load,
sampled with psutil in a thread of the parent while the child runs.  Past SAMPLES_CAP samples,
neighbours are merged pairwise, so a long run keeps a bounded list at a coarser interval."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

import psutil

from gpulint.runtime_check import stats

SAMPLES_CAP = 2048
LIST_CHILDREN_EVERY = 8  # samples: every 2 s at the default interval


@dataclass
class CpuSample:
    t: float  # time.monotonic()
    main: float  # CPU seconds (user + system) of the main process so far
    children: dict[int, float]  # pid -> CPU seconds so far, every descendant (loader workers)
    per_core: list[float]  # percent busy per core since the previous sample
    # CPU seconds so far of the descendants listed (their own) and of every descendant that exited
    # and was waited for by the main process or one listed (the kernel adds an exited child's time
    # to its parent's children_user/children_system).  Unlike `children` it keeps counting a worker
    # that lived between two listings: a loader started again every epoch may have no other trace.
    # Where the kernel does not report children's time (macOS, Windows: psutil gives 0) it counts
    # only the listed ones, and the summary takes the larger of the two readings.
    descendants: float = 0.0


def _merge(a: CpuSample, b: CpuSample, share: float) -> CpuSample:
    """Two consecutive samples as one: the counters as of the later, the load over both intervals
    (b's interval is `share` of the two)."""
    per_core = [x + (y - x) * share for x, y in zip(a.per_core, b.per_core, strict=False)] if a.per_core else b.per_core
    return CpuSample(b.t, b.main, {**a.children, **b.children}, per_core, b.descendants)


@dataclass
class CpuSampler:
    pid: int
    interval: float = 0.25
    samples: stats.Bounded = field(default_factory=lambda: stats.Bounded(_merge, SAMPLES_CAP))
    cores: int = field(default_factory=lambda: psutil.cpu_count() or 1)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> CpuSampler:
        psutil.cpu_percent(percpu=True)  # the first call only sets the reference point
        self._thread = threading.Thread(target=self._run, name="gpulint-cpu", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            process = psutil.Process(self.pid)
        except psutil.Error:
            return
        descendants: list[psutil.Process] = []
        count = 0
        while not self._stop.wait(self.interval):
            try:
                main, reaped = _cpu_seconds(process)
                # Listing descendants scans every process of the machine (milliseconds): done every
                # LIST_CHILDREN_EVERY samples.  A worker's counters are cumulative, so one found late
                # still counts all its CPU time.
                if count % LIST_CHILDREN_EVERY == 0:
                    descendants = process.children(recursive=True)
                count += 1
            except psutil.Error:
                return  # the child exited
            children = {}
            for child in descendants:
                try:
                    children[child.pid], its_reaped = _cpu_seconds(child)
                except psutil.Error:
                    continue
                reaped += its_reaped
            descendants_seconds = sum(children.values()) + reaped
            self.samples.add(
                CpuSample(time.monotonic(), main, children, psutil.cpu_percent(percpu=True), descendants_seconds)
            )

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)


def _cpu_seconds(process: psutil.Process) -> tuple[float, float]:
    """(its own CPU seconds, those of its children that exited and it waited for)."""
    times = process.cpu_times()
    return times.user + times.system, getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0)


@dataclass
class CpuSummary:
    main_cores: float  # cores the main process kept busy on average
    worker_cores: float  # cores all descendants kept busy on average
    workers: int  # descendants seen in the window
    system_cores: float  # cores busy machine-wide
    other_cores: float  # busy cores not explained by the process tree: other load on the machine
    per_core: list[float]  # mean percent per core
    cores: int
    samples: int
    rank_cores: list[float] | None = None  # under a launcher: cores each rank kept busy (main_cores is the busiest)
    # Over the whole run, one entry per sample after the first (time.monotonic() at its end):
    times: list[float] = field(default_factory=list)
    main_series: list[float] = field(default_factory=list)  # cores
    worker_series: list[float] = field(default_factory=list)  # cores
    core_series: list[list[float]] = field(default_factory=list)  # per core: percent busy

    @property
    def main_pegged(self) -> bool:
        return self.main_cores >= 0.9


def summarize(
    sampler: CpuSampler, start: float | None, end: float | None, ranks: list[int] | None = None
) -> CpuSummary | None:
    """Averages over the window [start, end] (the whole run when not given); None with < 2 samples.
    Under a launcher `ranks` are the pids of the training processes: the launcher itself is then
    neither the main process nor a loader worker."""
    slack = sampler.interval * sampler.samples.stride
    samples = [
        s for s in sampler.samples if (start is None or s.t >= start - slack) and (end is None or s.t <= end + slack)
    ]
    if len(samples) < 2:
        return None
    first, last = samples[0], samples[-1]
    span = last.t - first.t
    if span <= 0:
        return None
    main = (last.main - first.main) / span
    # A worker first seen inside the window started there: all its CPU time counts.
    used = {
        pid: max(0.0, last_seen - first.children.get(pid, 0.0)) / span
        for pid, last_seen in _last_values(samples).items()
    }
    rank_cores = None
    # Two readings of the descendants' CPU, each short in its own way (CpuSample.descendants):
    # the processes seen, each to its last look; and the counter with the exited ones in it.
    descendant_cores = max(sum(used.values()), (last.descendants - first.descendants) / span)
    tree = main + descendant_cores  # everything the run keeps busy
    worker_cores = descendant_cores
    if ranks:
        rank_cores = [used.get(pid, 0.0) for pid in ranks]
        main = max(rank_cores)
        used = {pid: cores for pid, cores in used.items() if pid not in ranks}
        worker_cores = max(sum(used.values()), descendant_cores - sum(rank_cores))
    # cpu_percent of each sample covers the interval before it: skip the first sample's.
    busy = [s.per_core for s in samples[1:] if s.per_core]
    per_core = [sum(col) / len(col) for col in zip(*busy, strict=False)] if busy else []
    system = sum(per_core) / 100
    return CpuSummary(
        main_cores=main,
        worker_cores=worker_cores,
        workers=len(used),
        system_cores=system,
        other_cores=max(0.0, system - tree),
        per_core=per_core,
        cores=sampler.cores,
        samples=len(samples),
        rank_cores=rank_cores,
        **_timeline(sampler.samples),
    )


def _timeline(samples: list[CpuSample]) -> dict:
    """Cores used by the main process and by its descendants, and each core's load, per interval."""
    pairs = [(a, b) for a, b in itertools.pairwise(samples) if b.t > a.t]
    return {
        "times": [b.t for _, b in pairs],
        "main_series": [(b.main - a.main) / (b.t - a.t) for a, b in pairs],
        "worker_series": [
            max(
                0.0,
                sum(b.children.values()) - sum(a.children.get(pid, 0.0) for pid in b.children),
                b.descendants - a.descendants,
            )
            / (b.t - a.t)
            for a, b in pairs
        ],
        "core_series": [list(core) for core in zip(*(b.per_core for _, b in pairs if b.per_core), strict=False)],
    }


def _last_values(samples: list[CpuSample]) -> dict[int, float]:
    last: dict[int, float] = {}
    for sample in samples:
        last.update(sample.children)
    return last
