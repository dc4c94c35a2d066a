"""How fast gpulint starts: the runs a person waits for at every commit, next to ruff and Fixit.

    .venv/bin/python benchmarks/startup.py --corpus /path/to/training-scripts --runs 5

Four cases, each a fresh process (cold: no result cache), every tool interleaved round by round in
an order rotated each round, medians reported:

1. `--version`;
2. one ~300-line training file (`--file`, default the corpus file closest to 300 lines);
3. a pre-commit run on one changed file: the hook's own command line (`gpulint check FILE`), inside
   a project with `[tool.gpulint]` and the result cache on, the file changed since the last run --
   once for the training file, once for a file that names no framework (this script: most files a
   commit touches are not training code, and the prefilter rejects them without a parse);
4. the whole corpus (a set of real training scripts, ~60 files), all files named on the command line.

Beside them, in the same run: the libcst parse floor (a process that imports libcst and parses the
same files: what any libcst-based linter pays at least) and the ratios.  Targets: `--version` <= 0.1 s,
one 300-line file <= 0.35 s, pre-commit on one file <= 0.4 s, the corpus >= 10x faster than Fixit.
Fixit and ruff come with the `bench` extra; a tool that is missing is reported, not timed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOOR = "import sys, libcst\nfor name in sys.argv[1:]:\n    libcst.parse_module(open(name, 'rb').read())\n"
TARGETS = {"version": 0.1, "one file": 0.35, "pre-commit": 0.4, "pre-commit, other file": 0.4}
CORPUS_VS_FIXIT = 10.0


def wall(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def find_tool(name: str) -> str | None:
    return shutil.which(name, path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def ruff_all_rules(ruff: str, *paths: str) -> list[str]:
    """ruff with every rule and no cache: the far anchor the whole-tree ratios are measured against."""
    return [ruff, "check", "--select", "ALL", "--no-cache", "--exit-zero", "--quiet", *paths]


def print_medians(samples: dict[tuple[str, str], list[float]], digits: int) -> dict[tuple[str, str], float]:
    """The samples of each (case, tool) as a Markdown table of medians and ranges; the medians."""
    print("| case | tool | median s | min..max s |\n|---|---|---|---|")
    median = {}
    for (case, tool), values in samples.items():
        median[case, tool] = statistics.median(values)
        low, high = min(values), max(values)
        print(f"| {case} | {tool} | {median[case, tool]:.{digits}f} | {low:.{digits}f}..{high:.{digits}f} |")
    return median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus", type=Path, required=True, help="folder of real training scripts (searched recursively)"
    )
    parser.add_argument("--file", type=Path, help="the ~300-line file (default: the corpus file closest to 300 lines)")
    parser.add_argument("--runs", type=int, default=5, help="rounds; medians over them")
    args = parser.parse_args()

    files = sorted(p for p in args.corpus.rglob("*.py") if p.is_file())
    if not files:
        print(f"startup: error: no Python files under {args.corpus}", file=sys.stderr)
        return 2
    lengths = {p: p.read_bytes().count(b"\n") for p in files}
    one = args.file or min(files, key=lambda p: abs(lengths[p] - 300))
    one_lines = lengths.get(one) or one.read_bytes().count(b"\n")
    gpulint = find_tool("gpulint")
    ruff, fixit = find_tool("ruff"), find_tool("fixit")
    if gpulint is None:
        print("startup: error: no gpulint next to this interpreter or on PATH", file=sys.stderr)
        return 2

    env = {**os.environ, "NO_COLOR": "1"}
    work = Path(tempfile.mkdtemp(prefix="gpulint-startup-"))
    try:
        # The pre-commit case: a project with its configuration, a warm cache of the other files,
        # and one file just edited (a cache miss, as at a commit).
        project = work / "project"
        project.mkdir()
        (project / "pyproject.toml").write_text("[tool.gpulint]\nextend-select = []\n", encoding="utf-8")
        staged = project / one.name
        shutil.copyfile(one, staged)
        other = project / "helpers.py"
        shutil.copyfile(__file__, other)
        subprocess.run([gpulint, "check", "--exit-zero", "."], cwd=project, env=env, capture_output=True)
        floor = work / "floor.py"
        floor.write_text(FLOOR, encoding="utf-8")
        names = [str(p) for p in files]
        edits = iter(range(10**6))

        def precommit(path: Path):
            def command() -> list[str]:
                with open(path, "a", encoding="utf-8") as handle:  # a new edit before every commit
                    handle.write(f"# edit {next(edits)}\n")
                return [gpulint, "check", path.name]

            return command

        cases: dict[str, dict[str, object]] = {
            "version": {
                "gpulint": [gpulint, "--version"],
                "ruff": ruff and [ruff, "--version"],
                "fixit": fixit and [fixit, "--version"],
            },
            "one file": {
                "gpulint": [gpulint, "--no-cache", str(one)],
                "ruff": ruff and [ruff, "check", "--no-cache", "--quiet", str(one)],
                "fixit": fixit and [fixit, "lint", str(one)],
                "libcst parse floor": [sys.executable, str(floor), str(one)],
            },
            "pre-commit": {"gpulint": precommit(staged), "ruff": ruff and [ruff, "check", "--quiet", staged.name]},
            "pre-commit, other file": {
                "gpulint": precommit(other),
                "ruff": ruff and [ruff, "check", "--quiet", other.name],
            },
            "corpus": {
                "gpulint": [gpulint, "--no-cache", "--exit-zero", *names],
                "ruff": ruff and [ruff, "check", "--no-cache", "--quiet", "--exit-zero", *names],
                "fixit": fixit and [fixit, "lint", *names],
                "libcst parse floor": [sys.executable, str(floor), *names],
            },
        }
        samples: dict[tuple[str, str], list[float]] = {}
        entries = [(case, tool) for case, tools in cases.items() for tool, command in tools.items() if command]
        for round_index in range(args.runs):
            shift = round_index % len(entries)
            for case, tool in entries[shift:] + entries[:shift]:
                command = cases[case][tool]
                command = command() if callable(command) else command
                cwd = project if case.startswith("pre-commit") else work
                samples.setdefault((case, tool), []).append(wall(command, cwd, env))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"corpus: {args.corpus} ({len(files)} files, {sum(lengths.values()):,} lines)")
    print(f"one file: {one} ({one_lines} lines)")
    print(f"runs: {args.runs}; load average now: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print()
    median = print_medians(samples, 3)
    for case, tools in cases.items():
        missing = [tool for tool, command in tools.items() if not command]
        if missing:
            print(f"({case}: {', '.join(missing)} not installed; not measured)")
    print()
    print("| ratio | value | target | met |\n|---|---|---|---|")
    for case, limit in TARGETS.items():
        value = median[case, "gpulint"]
        print(f"| gpulint {case}, s | {value:.3f} | <= {limit} | {'yes' if value <= limit else 'no'} |")
    if ("corpus", "fixit") in median:
        speedup = median["corpus", "fixit"] / median["corpus", "gpulint"]
        met = "yes" if speedup >= CORPUS_VS_FIXIT else "no"
        print(f"| corpus: Fixit / gpulint | {speedup:.1f}x | >= {CORPUS_VS_FIXIT:.0f}x | {met} |")
    for case in ("one file", "corpus"):
        ours = median[case, "gpulint"]
        if (case, "libcst parse floor") in median:
            print(f"| {case}: gpulint / libcst parse floor | {ours / median[case, 'libcst parse floor']:.2f} | - | - |")
        if (case, "ruff") in median:
            print(f"| {case}: gpulint / ruff (far anchor) | {ours / median[case, 'ruff']:.1f} | - | - |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
