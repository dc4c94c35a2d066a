"""Peak memory of `gpulint check TREE --no-cache` on whole trees, beside baselines from the same run.

    .venv/bin/python benchmarks/peak_memory.py TREE [TREE...] [--runs 1]

For each tree, fresh processes: gpulint with its default workers and with `--jobs 1`, ruff
`--select ALL --no-cache` on the same tree, and a bare `python -c pass` (what any Python process
costs).  Peak memory is the largest sum of RSS over the process tree (workers included; shared
pages count once per process, so it errs high), sampled every 20 ms (lint_speed.measure), and the
largest single process; and the largest sum of PSS (a page shared by several processes split among
them: what the tree holds in all, where RSS counts the pages forked workers share with the main
process once per process).  The target: gpulint's peak under 300 MB.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from lint_speed import measure
from startup import find_tool, ruff_all_rules

TARGET_MB = 300.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path, help="folders to lint")
    parser.add_argument("--runs", type=int, default=1, help="runs per command; the largest peak is kept")
    args = parser.parse_args()
    missing = [str(t) for t in args.trees if not t.is_dir()]
    if missing:
        print(f"peak_memory: error: no such folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    gpulint = [sys.executable, "-m", "gpulint", "check", "--exit-zero", "--no-cache"]
    ruff = find_tool("ruff")
    print(f"load average at start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(
        "| tree | Python files | command | wall s | peak MB (tree, RSS) | peak MB (one process) | peak MB (tree, PSS) |"
    )
    print("|---|---|---|---|---|---|---|")
    worst = worst_pss = 0.0
    for tree in args.trees:
        tree = tree.resolve()
        count = sum(1 for _ in tree.rglob("*.py"))
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "gpulint (default jobs)": [*gpulint, str(tree)],
            "gpulint --jobs 1": [*gpulint, "--jobs", "1", str(tree)],
        }
        if ruff is not None:
            commands["ruff --select ALL --no-cache"] = ruff_all_rules(ruff, str(tree))
        for label, command in commands.items():
            samples = [measure(command, tree) for _ in range(args.runs)]
            wall = min(s[0] for s in samples)
            total = max(s[1] for s in samples)
            single = max(s[3] for s in samples)
            proportional = max(s[4] for s in samples)
            if label.startswith("gpulint"):
                worst = max(worst, total)
                worst_pss = max(worst_pss, proportional)
            print(f"| {tree.name} | {count} | {label} | {wall:.1f} | {total:.0f} | {single:.0f} | {proportional:.0f} |")
    print()
    for what, value in (("summed RSS", worst), ("summed PSS", worst_pss)):
        verdict = "met" if value < TARGET_MB else "NOT met"
        print(f"gpulint's largest peak, {what}: {value:.0f} MB (target < {TARGET_MB:.0f} MB: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
