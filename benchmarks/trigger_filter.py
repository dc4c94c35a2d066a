"""What the trigger filter saves: gpulint over a tree with it and without it (GPULINT_IGNORE_TRIGGERS).

    .venv/bin/python benchmarks/trigger_filter.py path/to/tree [path/to/another] --runs 3
    .venv/bin/python benchmarks/trigger_filter.py path/to/tree --select ALL --runs 1   # hints too

Each run is a fresh process linting the tree (`--no-cache --format json --jobs 1`, the project index
on, as by default), the two modes interleaved round after round, the order swapped each round.  The
table shows, per mode, the median CPU time of the process (user + system: the machine's other load
moves the wall-clock time far more) and the libcst parses it made; and whether the two modes
reported the same findings, byte for byte (they must: the filter only leaves out files where no
rule can fire).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from parse_probe import PROBE  # beside this script, first on its path

REPO = Path(__file__).resolve().parent.parent


MODES = {"filter on": "", "filter off": "1"}


def run_once(tree: Path, ignore: str, output: Path, extra: list[str]) -> tuple[int, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPULINT_IGNORE_TRIGGERS": ignore}
    with output.open("wb") as out:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(tree), "--no-cache", "--format", "json", "--jobs", "1", *extra],
            stdout=out,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tree,
        )
    parses, cpu = json.loads(done.stderr.decode().rsplit("PROBE ", 1)[1])
    return parses, cpu


def measure(tree: Path, runs: int, extra: list[str]) -> None:
    cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    parses: dict[str, int] = {}
    outputs: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(runs):
            order = list(MODES) if round_ % 2 == 0 else list(reversed(MODES))
            for mode in order:
                output = Path(scratch) / f"{mode}.json"
                parses[mode], seconds = run_once(tree, MODES[mode], output, extra)
                cpu[mode].append(seconds)
                outputs[mode] = output.read_bytes()
    files = sum(1 for _ in tree.rglob("*.py"))
    findings = len(json.loads(outputs["filter on"] or b"[]"))
    same = outputs["filter on"] == outputs["filter off"]
    print(f"{tree.name}: {files} .py files, {findings} findings; identical with and without the filter: {same}")
    for mode in MODES:
        print(
            f"  {mode:<11} CPU {statistics.median(cpu[mode]):6.2f} s (median of {runs})  libcst parses {parses[mode]}"
        )
    ratio = statistics.median(cpu["filter off"]) / statistics.median(cpu["filter on"])
    print(f"  filter off / filter on: {ratio:.2f}x CPU")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--select", help="rules to select (default: gpulint's default set)")
    args = parser.parse_args()
    extra = ["--select", args.select] if args.select else []
    for tree in args.trees:
        measure(tree.resolve(), args.runs, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
