"""What linting one file costs when the project index reads its whole project.

    .venv/bin/python benchmarks/project_scope.py --project /tmp/nnproj --file /tmp/nnproj/nn/modules/linear.py

`--project` is a copy of a tree with a pyproject.toml at its top (the project root); `--file` is
one of its files.  Fresh processes, `gpulint check FILE` with a result cache in a temporary
folder: cold (empty cache: every module of the project summarized), then warm (`--runs` times:
nothing changed), then after an edit of the file before each run (a pre-commit run), once an edit
that changes no summary (a comment) and once one that changes the file's summary (a call), each
beside the same with `--no-project-index` (the file alone) as the baseline; medians and their
ratios.  The file is edited in place and put back as it was at the end.  The target: a warm run with the index
within 2x of the warm baseline on a mid-size tree (a few hundred files).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
    original = args.file.read_bytes()
    edits = iter(range(10**6))

    def edit(text: str) -> Callable[[], None]:
        def apply() -> None:
            args.file.write_bytes(original + text.format(next(edits)).encode())

        return apply

    # Before each of these runs the file is edited, as before a commit: a comment at its end
    # (every summary stays the same), or a call of another name each time (its summary changes).
    changes = {"edited, same summaries": edit("\n# edit {}\n"), "edited, summary changed": edit("\nedit_{}()\n")}
    results: dict[str, dict[str, float]] = {}
    try:
        for label, extra in (("project index", []), ("file alone", ["--no-project-index"])):
            with tempfile.TemporaryDirectory() as cache:
                command = [str(args.file.resolve()), "--cache-dir", cache, *extra]
                times = results[label] = {"cold": wall(command, args.project)}
                times["warm"] = statistics.median(wall(command, args.project) for _ in range(args.runs))
                for change, apply in changes.items():
                    samples = []
                    for _ in range(args.runs):
                        apply()
                        samples.append(wall(command, args.project))
                    times[change] = statistics.median(samples)
                    args.file.write_bytes(original)
                    wall(command, args.project)  # (back to the unchanged tree's entry)
            shown = ", ".join(f"{case} {value:.2f} s" for case, value in times.items())
            print(f"{label:14} {shown} (medians of {args.runs}, but cold)")
    finally:
        args.file.write_bytes(original)
    ours, alone = results["project index"], results["file alone"]
    print(f"{python_files} Python files under {args.project}; load average {os.getloadavg()[0]:.1f}")
    print("ratio to the file alone: " + ", ".join(f"{case} {ours[case] / alone[case]:.1f}x" for case in ours))
    warm = ours["warm"] / alone["warm"]
    print(f"warm target <= {WARM_TARGET}x: {'met' if warm <= WARM_TARGET else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
