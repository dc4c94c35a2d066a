"""What linting one file costs when the project index reads its whole project.

    .venv/bin/python benchmarks/project_scope.py --project /tmp/nnproj --file /tmp/nnproj/nn/modules/linear.py

`--project` is a copy of a tree with a pyproject.toml at its top (the project root); `--file` is
one of its files.  Fresh processes, `gpulint check FILE` with a result cache in a temporary
folder: cold (empty cache: every module of the project summarized), then warm (`--runs` times: the
summaries and the file's outcome from the cache), each beside the same with `--no-project-index`
(the file alone) as the baseline; medians and their ratios.  The target: a warm run with the index
within 2x of the warm baseline on a mid-size tree (a few hundred files).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARM_TARGET = 2.0


def wall(arguments: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gpulint", "check", "--exit-zero", *arguments],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, required=True, help="a tree with a pyproject.toml at its top")
    parser.add_argument("--file", type=Path, required=True, help="one Python file of it")
    parser.add_argument("--runs", type=int, default=3, help="warm runs; medians over them")
    args = parser.parse_args()
    if not (args.project / "pyproject.toml").is_file():
        print(f"project_scope: error: no pyproject.toml in {args.project}", file=sys.stderr)
        return 2
    python_files = sum(1 for _ in args.project.rglob("*.py"))
    results: dict[str, tuple[float, float]] = {}
    for label, extra in (("project index", []), ("file alone", ["--no-project-index"])):
        with tempfile.TemporaryDirectory() as cache:
            command = [str(args.file.resolve()), "--cache-dir", cache, *extra]
            cold = wall(command, args.project)
            warm = statistics.median(wall(command, args.project) for _ in range(args.runs))
        results[label] = (cold, warm)
        print(f"{label:14} cold {cold:6.2f} s   warm {warm:6.2f} s (median of {args.runs})")
    (cold, warm), (base_cold, base_warm) = results["project index"], results["file alone"]
    print(f"{python_files} Python files under {args.project}")
    print(f"ratio to the file alone: cold {cold / base_cold:.1f}x, warm {warm / base_warm:.1f}x")
    print(f"warm target <= {WARM_TARGET}x: {'met' if warm / base_warm <= WARM_TARGET else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
