"""What a long `gpulint profile --seconds S` costs: the parent's sampling CPU (target: under 1% of
a core), the memory of the parent and of the training process over the run (bounded: the same
after one minute as after ten), and the history: seconds to record the run and megabytes of
database per 1,000 steps.

The training script is fixtures/runtime/torch_step_sleep.py: steps of `--step-ms` milliseconds of
sleep, so the figures are the checker's, not the model's, and hold on a busy machine.

    .venv/bin/python benchmarks/long_run.py [--seconds 600] [--step-ms 2]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpulint.runtime_check import records  # noqa: E402
from gpulint.runtime_check.history import History  # noqa: E402
from gpulint.runtime_check.measure import Command, RunConfig  # noqa: E402
from gpulint.runtime_check.profile import profile  # noqa: E402
from gpulint.runtime_check.report import Progress  # noqa: E402

SCRIPT = ROOT / "fixtures" / "runtime" / "torch_step_sleep.py"


class MemoryWatch:
    """Resident memory of this process and of its children, and this process's CPU seconds,
    every `interval` seconds."""

    def __init__(self, interval: float = 5.0) -> None:
        self.interval, self.samples, self._stop = interval, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me, start = psutil.Process(), time.monotonic()
        while not self._stop.wait(self.interval):
            children = 0
            for child in me.children(recursive=True):
                try:
                    children += child.memory_info().rss
                except psutil.Error:
                    pass
            cpu = me.cpu_times()
            self.samples.append((time.monotonic() - start, me.memory_info().rss, children, cpu.user + cpu.system))

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--step-ms", type=float, default=2.0)
    args = parser.parse_args()
    command = Command(sys.executable, [], [str(SCRIPT), "--step-ms", str(args.step_ms), "--steps", str(10**9)])
    config = RunConfig(steps=None, warmup=5, seconds=args.seconds, timeout=args.seconds + 300)
    wall_before = time.monotonic()
    with MemoryWatch() as memory:
        result = profile(command, config, Progress(io.StringIO()))  # the command line's progress, off a terminal
    wall = time.monotonic() - wall_before
    steps = result.run.steps
    assert result.run.ok, result.run.output_tail
    print(
        f"run: {steps.count} measured steps in {args.seconds:g} s ({steps.count / args.seconds:.0f} steps/s), "
        f"wall {wall:.0f} s, series of {len(steps.series)} points of {steps.width} step(s)"
    )
    # While the script trains (from 30 s, after start-up, to the last sample with the child alive):
    # the samplers and the progress polling, not the analysis at the end.
    training = [s for s in memory.samples if s[0] >= 30 and s[2] > 0]
    if len(training) >= 2:
        (t0, *_, cpu0), (t1, *_, cpu1) = training[0], training[-1]
        print(
            "parent while the script trains (CPU sampled every 0.25 s, NVML every 0.2 s, progress polled every 0.2 s): "
            f"{cpu1 - cpu0:.2f} CPU s over {t1 - t0:.0f} s = {100 * (cpu1 - cpu0) / (t1 - t0):.2f}% of a core "
            "(target < 1%)"
        )
    else:
        print("parent CPU: not measured (the run ends before 40 s; it is sampled from 30 s on, after start-up)")
    for label, index in (("parent", 1), ("training process", 2)):
        early = [s[index] for s in memory.samples if 50 <= s[0] <= 70]
        late = [s[index] for s in memory.samples if s[0] >= wall - 30]
        peak = max(s[index] for s in memory.samples)
        if early and late:
            print(
                f"{label} RSS: {early[0] / 2**20:.0f} MiB after one minute, {late[-1] / 2**20:.0f} MiB at the end, "
                f"peak {peak / 2**20:.0f} MiB"
            )
    copies = 10
    with tempfile.TemporaryDirectory(prefix="gpulint-bench-") as folder:
        path = Path(folder) / "history.db"
        with History.open(path) as history:
            history.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            before = path.stat().st_size
            start = time.perf_counter()
            for _ in range(copies):
                record = records.profile_record(result, config, time.time())
                history.record(record)
            took = (time.perf_counter() - start) / copies
            history.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            size = (path.stat().st_size - before) / copies
    per_thousand = 1000 / steps.count
    print(
        f"history: {size / 2**20:.3f} MB and {took:.3f} s to build and record this run ({len(record.figures)} figures, "
        f"{len(record.series)} series, {sum(len(s.y) for s in record.series)} points; mean of {copies}): "
        f"{size / 2**20 * per_thousand:.4f} MB and {took * per_thousand:.4f} s per 1,000 steps"
    )
    print(f"machine: {psutil.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
