"""How fast gpulint lints real code, next to Fixit, TorchFix, ruff and the bare libcst parse.

    .venv/bin/python benchmarks/lint_speed.py                       # installed packages + fixtures/
    .venv/bin/python benchmarks/lint_speed.py --corpus path/to/timm --runs 3

Every tool gets the same list of files (gpulint's own discovery of the corpus folders), named on its
command line.  The tools run interleaved: round after round, each tool once per round, the order
rotated each round, and the table shows medians.  Peak memory is the largest sum of RSS over the
tool's whole process tree (workers included; shared pages count once per process, so it errs high),
sampled every 20 ms.

Fixit, TorchFix and ruff are not gpulint's dependencies.  Fixit and ruff come with the `bench` extra
(`pip install -e '.[bench]'`), next to the interpreter running this script, where they are looked for
first; TorchFix pins an older libcst, so it goes into an environment of its own
(`python -m venv .venv-bench && .venv-bench/bin/pip install torchfix`), passed with
`--tools-bin .venv/bin .venv-bench/bin`.  A tool that is missing is reported as such, not timed.  Fixit
and TorchFix take about ten times the parse, so by default they run on a deterministic subset of the
files (every k-th file in sorted order) and their time is scaled by lines (subset lines -> all lines);
the output says so.  `--subset 1.0` runs them on everything.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402 - gpulint's own dependency

DEFAULT_PACKAGES = ("torch", "transformers", "keras", "timm")

FLOOR_SCRIPT = """
import sys, libcst
for name in open(sys.argv[1], encoding="utf-8").read().splitlines():
    with open(name, "rb") as handle:
        libcst.parse_module(handle.read())
"""


def package_dirs(names) -> list[Path]:
    """Folders of installed packages, found without importing them (torch takes seconds to import)."""
    found = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            found.append(Path(list(spec.submodule_search_locations)[0]))
    return found


def count_lines(paths) -> int:
    total = 0
    for path in paths:
        with open(path, "rb") as handle:
            total += handle.read().count(b"\n")
    return total


def parsed_by_gpulint(files: list[Path], select: str | None) -> list[Path]:
    """The files gpulint parses: those its prefilter lets through (the floor parses exactly these)."""
    from gpulint.linter.config import Settings
    from gpulint.linter.engine import Linter
    from gpulint.linter.suppressions import file_is_ignored

    linter = Linter(Settings(select=select.split(",") if select else None))
    chosen = []
    for path in files:
        source = path.read_bytes()
        if not file_is_ignored(source) and linter.candidate_rules(source, linter.entries_for(str(path))):
            chosen.append(path)
    return chosen


def measure(command: list[str], cwd: Path) -> tuple[float, float, int, float, float]:
    """(wall seconds, peak MB of the process tree's summed RSS, exit code, peak MB of its largest
    single process, peak MB of the tree's summed PSS).  RSS counts a page shared by forked workers
    once per process; PSS (the proportional set size) splits it among them, so the summed PSS is
    what the tree holds in all."""
    start = time.perf_counter()
    process = psutil.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    single = 0
    proportional = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, single, proportional
        while not done.is_set():
            try:
                tree = [process, *process.children(recursive=True)]
                total = 0
                total_pss = 0
                for proc in tree:
                    try:
                        memory = proc.memory_full_info()
                    except psutil.Error:
                        continue
                    total += memory.rss
                    total_pss += getattr(memory, "pss", memory.rss)  # (PSS where the system has it: Linux)
                    single = max(single, memory.rss)
                peak = max(peak, total)
                proportional = max(proportional, total_pss)
            except psutil.Error:
                pass
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = process.wait()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    return wall, peak / 2**20, code, single / 2**20, proportional / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus", nargs="+", type=Path, help="folders to lint (default: installed torch, transformers, keras, timm)"
    )
    parser.add_argument("--no-fixtures", action="store_true", help="leave the repository's fixtures/ out of the corpus")
    parser.add_argument("--runs", type=int, default=3, help="rounds (medians are taken over them)")
    parser.add_argument(
        "--jobs", type=int, default=None, help="gpulint's worker count for the cold/warm runs (default: its own)"
    )
    parser.add_argument(
        "--tools-bin",
        type=Path,
        nargs="+",
        default=[Path(sys.executable).parent],
        help="folders holding fixit, torchfix and ruff, searched in order, then PATH (default: this interpreter's)",
    )
    parser.add_argument(
        "--select", default=None, help="gpulint's rule selection (default: its default set, what users run)"
    )
    parser.add_argument(
        "--subset", type=float, default=0.1, help="share of the files Fixit and TorchFix run on (scaled by lines)"
    )
    args = parser.parse_args()

    from gpulint.linter.run.files import discover

    roots = args.corpus or package_dirs(DEFAULT_PACKAGES)
    if not args.no_fixtures:
        roots = [*roots, REPO / "fixtures"]
    missing = [str(r) for r in roots if not r.exists()]
    if missing:
        print(f"lint_speed: error: no such folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    files, _errors = discover([r.resolve() for r in roots])
    if not files:
        print("lint_speed: error: no Python files in the corpus", file=sys.stderr)
        return 2
    lines = count_lines(files)
    parsed = parsed_by_gpulint(files, args.select)
    parsed_lines = count_lines(parsed)
    step = max(1, round(1 / args.subset)) if args.subset > 0 else len(files)
    subset = files[::step]
    subset_lines = count_lines(subset)
    scale = lines / subset_lines if subset_lines else float("nan")

    print(f"corpus: {', '.join(str(r) for r in roots)}")
    print(
        f"files: {len(files)}, lines: {lines:,}; "
        f"gpulint parses {len(parsed)} files ({parsed_lines:,} lines) after its prefilter"
    )
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"cores available: {cores}; load average at start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")

    work = Path(tempfile.mkdtemp(prefix="gpulint-bench-"))
    try:
        file_list = work / "files.txt"
        file_list.write_text("\n".join(str(p) for p in files), encoding="utf-8")
        parse_list = work / "parsed.txt"
        parse_list.write_text("\n".join(str(p) for p in parsed), encoding="utf-8")
        floor_script = work / "floor.py"
        floor_script.write_text(FLOOR_SCRIPT, encoding="utf-8")
        cache_dir = work / "cache"
        select = ["--select", args.select] if args.select else []
        names = [str(p) for p in files]
        gpulint = [sys.executable, "-c", "from gpulint.cli import main; main()", "check", "--exit-zero", *select]
        jobs = ["--jobs", str(args.jobs)] if args.jobs else []

        tools: dict[str, tuple[list[str], float]] = {  # name -> (command, time scale)
            "gpulint cold (no cache)": ([*gpulint, *jobs, "--no-cache", *names], 1.0),
            "gpulint warm (cache)": ([*gpulint, *jobs, "--cache-dir", str(cache_dir), *names], 1.0),
            "gpulint --jobs 1 (no cache)": ([*gpulint, "--jobs", "1", "--no-cache", *names], 1.0),
            "libcst parse floor (1 process)": ([sys.executable, str(floor_script), str(parse_list)], 1.0),
        }
        notes = []
        # Absolute: the tools run from a scratch folder, where `.venv/bin` would name nothing.
        tool_folders = [str(folder.resolve()) for folder in args.tools_bin]
        search_path = os.pathsep.join([*tool_folders, os.environ.get("PATH", "")])
        for tool, command in (
            (
                "ruff --select ALL --no-cache",
                ["ruff", "check", "--select", "ALL", "--no-cache", "--exit-zero", "--quiet", *names],
            ),
            ("fixit lint", ["fixit", "lint", *[str(p) for p in subset]]),
            ("torchfix", ["torchfix", *[str(p) for p in subset]]),
        ):
            found = shutil.which(command[0], path=search_path)
            if found is None:
                folders = ", ".join(map(str, args.tools_bin))
                notes.append(f"{tool}: not installed (looked in {folders} and PATH); not measured")
                continue
            executable = Path(found)
            full = tool.startswith("ruff")
            tools[tool] = ([str(executable), *command[1:]], 1.0 if full else scale)
            if not full and step > 1:
                notes.append(
                    f"{tool}: ran on every {step}th file ({len(subset)} files, {subset_lines:,} lines); "
                    f"time scaled by lines x{scale:.2f}"
                )

        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in tools}
        order = list(tools)
        for round_index in range(args.runs):
            rotated = order[round_index % len(order) :] + order[: round_index % len(order)]
            for name in rotated:
                command, factor = tools[name]
                if name == "gpulint warm (cache)":
                    # Fill the cache right before (not timed): a warm run is one over a tree that has
                    # not changed since the last run -- and gpulint's own code counts, which other
                    # people editing the checkout during a benchmark would change.
                    subprocess.run(command, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
                wall, peak, code, _single, _proportional = measure(command, work)
                if code not in (0, 1):
                    notes.append(f"{name}: exit code {code} in round {round_index + 1}")
                samples[name].append((wall * factor, peak))
            print(f"round {round_index + 1}/{args.runs} done", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    median = {name: statistics.median(w for w, _ in runs) for name, runs in samples.items()}
    spread = {name: (min(w for w, _ in runs), max(w for w, _ in runs)) for name, runs in samples.items()}
    peak = {name: max(m for _, m in runs) for name, runs in samples.items()}
    print()
    print(f"{'run':<34} {'median s':>9} {'min..max s':>16} {'peak MB':>8} {'lines/s':>10}")
    for name in tools:
        low, high = spread[name]
        span = f"{low:.2f}..{high:.2f}"
        print(f"{name:<34} {median[name]:>9.2f} {span:>16} {peak[name]:>8.0f} {lines / median[name]:>10,.0f}")
    for note in notes:
        print(f"note: {note}")

    cold = median["gpulint cold (no cache)"]
    one = median["gpulint --jobs 1 (no cache)"]
    floor = median["libcst parse floor (1 process)"]
    gl_peak = max(peak[n] for n in tools if n.startswith("gpulint"))
    checks = [
        ("cold vs parse floor (1 job / 1 process)", one / floor, "<= 1.5", one / floor <= 1.5),
        ("cold (default jobs) vs parse floor (1 process)", cold / floor, "<= 1.5", cold / floor <= 1.5),
        (
            "warm speed-up over cold",
            cold / median["gpulint warm (cache)"],
            ">= 20",
            cold / median["gpulint warm (cache)"] >= 20,
        ),
        (f"{args.jobs or cores} jobs speed-up over 1 job", one / cold, ">= 1.7", one / cold >= 1.7),
        ("gpulint peak memory, MB", gl_peak, "< 300", gl_peak < 300),
    ]
    for tool in ("fixit lint", "torchfix"):
        if tool in median:
            checks.append((f"cold speed-up over {tool}", median[tool] / cold, ">= 20", median[tool] / cold >= 20))
    if "ruff --select ALL --no-cache" in median:
        ruff = median["ruff --select ALL --no-cache"]
        checks.append(("cold vs ruff (far anchor, no target)", cold / ruff, "-", None))
    print()
    print(f"{'ratio':<48} {'value':>8} {'target':>8}  met")
    for label, value, target, met in checks:
        verdict = "-" if met is None else ("yes" if met else "NO")
        print(f"{label:<48} {value:>8.2f} {target:>8}  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
