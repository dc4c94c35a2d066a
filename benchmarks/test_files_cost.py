"""What test files cost: this checkout against another (a baseline) over the same trees.

    git worktree add /tmp/baseline <commit>
    .venv/bin/python benchmarks/test_files_cost.py --baseline /tmp/baseline path/to/tree [another] --runs 5
    .venv/bin/python benchmarks/test_files_cost.py --baseline /tmp/baseline path/to/tree --select ALL --runs 1
    .venv/bin/python benchmarks/test_files_cost.py --baseline /tmp/baseline path/to/tree --path tests

Each timed run is a fresh process (`python -P`: the tree's modules shadow none) linting the
tree (`--no-cache --output-format json`, default jobs, the project index on), the two checkouts
interleaved round after round, the order swapped each round.  The table shows, per checkout, the
median wall-clock and CPU time (user + system, the process and its workers) and the libcst parses
of the process itself (workers parse too: run with `--jobs 1` to count them all).

Then, untimed, each checkout's JSON findings, `--diff` and full text output, compared byte for byte
outside test files (by the default test-file patterns, relative to the tree): they must be
identical.  The text output may differ only in the summary line about test files.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from parse_probe import PROBE  # noqa: E402  (beside this script, first on its path)

from gpulint.linter.analysis.test_files import is_test_path  # noqa: E402

# The summary lines about test files, before and after they stopped being linted.
TEST_FILES_NOTE = re.compile(r"^\d+ (findings? in test files not reported|test files? not linted for performance)")


def run(checkout: Path, tree: Path, args: list[str]) -> tuple[bytes, int, float, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-P", "-c", PROBE, "--no-cache", *args], capture_output=True, env=env, cwd=tree
    )
    wall = time.perf_counter() - started
    parses, cpu = json.loads(done.stderr.decode().rsplit("PROBE ", 1)[1])
    return done.stdout, parses, cpu, wall


def outside_tests(output: bytes, kind: str) -> bytes:
    """The part of an output about files that are not test code."""
    if kind == "json":
        findings = json.loads(output or b"[]")
        return json.dumps([f for f in findings if not is_test_path(f["filename"])], sort_keys=True).encode()
    if kind == "diff":
        sections = re.split(rb"(?m)^(?=--- a/)", output)
        return b"".join(s for s in sections if not is_test_path(s[6 : s.find(b"\n")].decode(errors="replace")))
    lines = output.decode(errors="replace").splitlines()
    kept, skipping = [], False
    for line in lines:
        if re.match(r"^\S+\.(py|ipynb):\d+:\d+: ", line):  # (a finding's first line: the ones under it follow)
            skipping = is_test_path(line.split(":", 1)[0])
        if not skipping and not TEST_FILES_NOTE.match(line):
            kept.append(line)
    return "\n".join(kept).encode()


def measure(tree: Path, checkouts: dict[str, Path], runs: int, extra: list[str]) -> bool:
    wall: dict[str, list[float]] = {name: [] for name in checkouts}
    cpu: dict[str, list[float]] = {name: [] for name in checkouts}
    parses: dict[str, int] = {}
    for round_ in range(runs):
        for name in list(checkouts) if round_ % 2 == 0 else list(reversed(checkouts)):
            _, parses[name], seconds, elapsed = run(checkouts[name], tree, ["--output-format", "json", *extra])
            cpu[name].append(seconds)
            wall[name].append(elapsed)
    files = sum(1 for p in tree.rglob("*.py"))
    tests = sum(1 for p in tree.rglob("*.py") if is_test_path(p.relative_to(tree).as_posix()))
    print(f"{tree}: {files} .py files, {tests} of them test files by the default patterns")
    for name in checkouts:
        print(
            f"  {name:<14} wall {statistics.median(wall[name]):6.2f} s  CPU {statistics.median(cpu[name]):6.2f} s"
            f" (medians of {runs})  libcst parses {parses[name]}"
        )
    same = True
    outputs = {
        "json": ["--output-format", "json"],
        "diff": ["--diff", "--unsafe-fixes"],
        "text": ["--output-format", "full", "--show-fixes"],
    }
    for kind, args in outputs.items():
        got = {name: run(checkout, tree, [*args, *extra])[0] for name, checkout in checkouts.items()}
        first, second = (outside_tests(got[name], kind) for name in checkouts)
        same &= first == second
        print(f"  {kind:<5} outside test files identical: {first == second} ({len(first)} bytes)")
        if first != second:
            lines = difflib.unified_diff(first.decode().splitlines(), second.decode().splitlines(), lineterm="", n=0)
            print("\n".join(f"    {line}" for line in list(lines)[2:12]))
    return same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the code to compare with")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--select", help="rules to select (default: gpulint's default set)")
    parser.add_argument("--jobs", help="worker processes (default: gpulint's)")
    parser.add_argument("--path", default=".", help="what to lint in each tree (default: all of it)")
    args = parser.parse_args()
    extra = [
        args.path,
        *(["--select", args.select] if args.select else []),
        *(["--jobs", args.jobs] if args.jobs else []),
    ]
    checkouts = {"baseline": args.baseline.resolve(), "this checkout": REPO}
    same = all([measure(tree.resolve(), checkouts, args.runs, extra) for tree in args.trees])
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
