"""CPU of the process tree (main process versus DataLoader workers) and per-core system load,
sampled with psutil in a thread of the parent while the child runs."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import psutil


@dataclass
class CpuSample:
    t: float  # time.monotonic()
    main: float  # CPU seconds (user + system) of the main process so far
    children: dict[int, float]  # pid -> CPU seconds so far, every descendant (loader workers)
    per_core: list[float]  # percent busy per core since the previous sample


@dataclass
class CpuSampler:
    pid: int
    interval: float = 0.25
    samples: list[CpuSample] = field(default_factory=list)
    cores: int = field(default_factory=lambda: psutil.cpu_count() or 1)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "CpuSampler":
        psutil.cpu_percent(percpu=True)  # the first call only sets the reference point
        self._thread = threading.Thread(target=self._run, name="gpulint-cpu", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            process = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._stop.wait(self.interval):
            try:
                main = _cpu_seconds(process)
                children = {}
                for child in process.children(recursive=True):
                    try:
                        children[child.pid] = _cpu_seconds(child)
                    except psutil.Error:
                        pass
            except psutil.Error:
                return  # the child exited
            self.samples.append(CpuSample(time.monotonic(), main, children, psutil.cpu_percent(percpu=True)))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


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

    @property
    def main_pegged(self) -> bool:
        return self.main_cores >= 0.9

    @property
    def machine_busy(self) -> bool:
        """Other processes kept at least half a core busy: the diagnosis may change."""
        return self.other_cores >= 0.5


def summarize(sampler: CpuSampler, start: float | None, end: float | None,
              ranks: list[int] | None = None) -> CpuSummary | None:
    """Averages over the window [start, end] (the whole run when not given); None with < 2 samples.
    Under a launcher `ranks` are the pids of the training processes: the launcher itself is then
    neither the main process nor a loader worker."""
    samples = [s for s in sampler.samples if (start is None or s.t >= start - sampler.interval) and (end is None or s.t <= end + sampler.interval)]
    if len(samples) < 2:
        return None
    first, last = samples[0], samples[-1]
    span = last.t - first.t
    if span <= 0:
        return None
    main = (last.main - first.main) / span
    # A worker first seen inside the window started there: all its CPU time counts.
    used = {pid: max(0.0, last_seen - first.children.get(pid, 0.0)) / span
            for pid, last_seen in _last_values(samples).items()}
    rank_cores = None
    tree = main + sum(used.values())  # everything the run keeps busy
    if ranks:
        rank_cores = [used.get(pid, 0.0) for pid in ranks]
        main = max(rank_cores)
        used = {pid: cores for pid, cores in used.items() if pid not in ranks}
    worker_cores = sum(used.values())
    # cpu_percent of each sample covers the interval before it: skip the first sample's.
    busy = [s.per_core for s in samples[1:] if s.per_core]
    per_core = [sum(col) / len(col) for col in zip(*busy)] if busy else []
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
    )


def _last_values(samples: list[CpuSample]) -> dict[int, float]:
    last: dict[int, float] = {}
    for sample in samples:
        last.update(sample.children)
    return last
