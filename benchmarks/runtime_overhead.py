"""The runtime checker's own overhead on step time.  Target: under 3% (ratio < 1.03).

Two measurements, both printed:

1. In one process (the primary figure, robust to a busy machine): the same training loop runs in
   alternating blocks of steps with the bootstrap's hooks installed (optimizer step hook, timed
   DataLoader `__next__`, progress file, the stack sampler's thread) and removed; the ratio of
   median step times of the two.
2. End to end: the same script run plainly and under `run_once` (bootstrap in a child, the
   parent's CPU and NVML samplers), interleaved A B B A ... in the same benchmark run; each run
   times its own steps.  Whole processes on a shared machine are noisier: read its spread.

    .venv/bin/python benchmarks/runtime_overhead.py [--runs 5] [--steps 300] [--blocks 40] [--block-steps 40]
        [--intervals 0.01,0.02]   (the in-process figure for each stack-sampling interval, in seconds;
                                   0 runs the hooks without the sampler, as --no-attribution does)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpulint.runtime_check import bootstrap, stats  # noqa: E402
from gpulint.runtime_check.measure import Command, RunConfig, run_once  # noqa: E402

SCRIPT = """
import json, os, sys, time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)

class Synthetic(Dataset):
    def __len__(self):
        return 100000
    def __getitem__(self, i):
        return torch.full((64,), float(i % 7)), i % 10

steps = int(sys.argv[1])
model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Synthetic(), batch_size=64)
times = []
last = time.perf_counter()
for step, (x, y) in enumerate(loader):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    now = time.perf_counter()
    times.append(now - last)
    last = now
    if step + 1 == steps:
        break
warm = times[10:]
with open(os.environ["BENCH_OUT"], "w") as f:
    json.dump({"median": sorted(warm)[len(warm) // 2]}, f)
"""


def plain(script: Path, steps: int, out: Path) -> float:
    subprocess.run([sys.executable, str(script), str(steps)], check=True, env=dict(os.environ, BENCH_OUT=str(out)))
    return json.loads(out.read_text())["median"]


def instrumented(script: Path, steps: int, out: Path) -> float:
    os.environ["BENCH_OUT"] = str(out)
    # More steps wanted than the script makes: it ends by itself, fully instrumented throughout.
    result = run_once(Command(sys.executable, [], [str(script), str(steps)]), RunConfig(steps=steps * 2, warmup=5))
    if result.status != "finished":
        raise SystemExit(f"instrumented run ended as {result.status}: {result.output_tail}")
    return json.loads(out.read_text())["median"]


def in_process(blocks: int, interval: float, block_steps: int) -> tuple[float, float]:
    """Median step time with the hooks off and on, alternating blocks in this process; the stack
    sampler looks every `interval` seconds (0: no sampler)."""
    import time

    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)

    class Synthetic(Dataset):
        def __len__(self):
            return 10**7

        def __getitem__(self, i):
            return torch.full((64,), float(i % 7)), i % 10

    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = iter(DataLoader(Synthetic(), batch_size=64))
    times: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="gpulint-bench-") as folder:
        bootstrap.STATE = bootstrap.State(
            {
                "out": f"{folder}/out.json",
                "progress": f"{folder}/progress.json",
                "steps": None,
                "warmup": 1,
                "seconds": None,
                "stacks": False,  # the sampler is started and stopped with the hooks below
            }
        )
        for block in range(2 * blocks):
            on = block % 4 in (1, 2)  # off on on off ...: each arm first as often
            sampler = None
            if on:
                bootstrap.instrument_torch(torch)
                if interval:
                    sampler = bootstrap.StackSampler(threading.get_ident(), interval).start()
            last = time.perf_counter()
            for _ in range(block_steps):
                x, y = next(batches)
                nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()
                now = time.perf_counter()
                times[on].append(now - last)
                last = now
            if sampler is not None:
                sampler.stop()
            for undo in bootstrap.STATE.uninstall:
                undo()
            bootstrap.STATE.uninstall.clear()
    return stats.median(times[False]), stats.median(times[True])


def hook_cost(repeat: int = 20000) -> float:
    """Seconds the instrumentation adds to one step: the step hook plus one timed batch fetch,
    against a fetch with nothing around it (no torch work at all, so only the hooks are timed)."""
    import time

    with tempfile.TemporaryDirectory(prefix="gpulint-bench-") as folder:
        bootstrap.STATE = bootstrap.State(
            {
                "out": f"{folder}/out.json",
                "progress": f"{folder}/progress.json",
                "steps": None,
                "warmup": 1,
                "seconds": None,
            }
        )

        class Iterator:
            def __next__(self):
                return 1

        plain = Iterator()
        grad_on = types.SimpleNamespace(is_grad_enabled=lambda: True)  # what the timed fetch asks of torch
        Timed = type("Timed", (), {"__next__": bootstrap._timed_loader_next(Iterator.__next__, grad_on)})
        timed, optimizer = Timed(), object()
        start = time.perf_counter()
        for _ in range(repeat):
            next(plain)
        bare = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(repeat):
            next(timed)
            bootstrap.STATE.optimizer_step(optimizer)
        return (time.perf_counter() - start - bare) / repeat


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--blocks", type=int, default=300)
    # A block starts the sampler's thread anew, as a run does once: blocks of a few steps would
    # measure thread start-ups, and no look at all when the interval is longer than the block.
    parser.add_argument("--block-steps", type=int, default=40, help="steps per block of each arm")
    parser.add_argument("--intervals", default=str(bootstrap.SAMPLE_INTERVAL), help="seconds, comma-separated")
    args = parser.parse_args()
    for interval in (float(value) for value in args.intervals.split(",")):
        off, on = in_process(args.blocks, interval, args.block_steps)
        sampler = f"stack sampler every {1e3 * interval:g} ms" if interval else "no stack sampler"
        print(
            f"in-process ({sampler}): hooks off median {1e3 * off:.4f} ms, on {1e3 * on:.4f} ms; "
            f"overhead ratio {on / off:.4f} ({100 * (on / off - 1):+.2f}%); "
            f"target < 1.03: {'met' if on / off < 1.03 else 'NOT met'}",
            flush=True,
        )
    print(f"in-process: the hooks' own cost is {1e6 * hook_cost():.2f} us per step (one optimizer step, one batch)")
    if args.runs < 1:
        return
    with tempfile.TemporaryDirectory(prefix="gpulint-bench-") as folder:
        script = Path(folder) / "train.py"
        script.write_text(SCRIPT)
        out = Path(folder) / "out.json"
        arms: dict[str, list[float]] = {"plain": [], "instrumented": []}
        for i in range(args.runs):
            for arm in ("plain", "instrumented") if i % 2 == 0 else ("instrumented", "plain"):
                value = (plain if arm == "plain" else instrumented)(script, args.steps, out)
                arms[arm].append(value)
                print(f"run {i + 1} {arm:<12} median step {1e3 * value:.3f} ms", flush=True)
    a, b = stats.median(arms["plain"]), stats.median(arms["instrumented"])
    print(f"plain        median {1e3 * a:.3f} ms  (runs: {' '.join(f'{1e3 * x:.3f}' for x in arms['plain'])})")
    print(f"instrumented median {1e3 * b:.3f} ms  (runs: {' '.join(f'{1e3 * x:.3f}' for x in arms['instrumented'])})")
    ratio = b / a
    print(f"end to end: overhead ratio {ratio:.4f} ({100 * (ratio - 1):+.2f}%) (spread of runs above)")


if __name__ == "__main__":
    main()
