"""The speed targets of a whole-repository run, as ratios against ruff and Fixit measured in the same run.

    .venv/bin/python benchmarks/ratios.py --library TREE --corpus SCRIPTS --runs 3
    .venv/bin/python benchmarks/ratios.py --library TREE/src TREE/tests TREE/examples --corpus SCRIPTS --burners 2

Fresh processes, every command once per round in an order rotated each round, medians:

* a torch-heavy library tree (`--library`: one folder, or several folders of one tree, linted
  together in one run), `gpulint check TREE` cold (`--no-cache`) against
  `ruff check --select ALL --no-cache` (target: at most 4x), and warm (the cache filled by an
  untimed run just before, nothing changed) against the same cold ruff run (target: at most 1x);
* a corpus of training scripts (`--corpus`, all files named on the command line), cold, against
  `fixit lint` (target: at least 10x faster);
* one file (`--file`, default the corpus file closest to 300 lines), cold, against `fixit lint`
  (target: at least 3x faster).

ruff and Fixit come with the `bench` extra (looked for next to this interpreter, then on PATH); a
tool that is missing is reported and its ratios are not measured.  Every command but Fixit over
the corpus runs once, untimed, before the rounds: the files in the system's cache, gpulint's
bytecode written (as pip writes it on install; PYTHONDONTWRITEBYTECODE is left out of the runs'
environment).

The targets must hold on a machine with other work running: `--burners N` keeps N processes
spinning on the CPU for the whole measurement (ended at the end), and the load average at the
start and the end is printed with the figures.

With `--bounds` each cold case also runs twice more (benchmarks/lint_bounds.py): linting only the
files a plain run reports in (libcst and the rules paid only where a finding is: the best rules
deciding on the CPython tree could do) and linting nothing (start-up, discovery and the project
index: the floor under any change to the rules); a second table gives the ratios those would reach.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from startup import find_tool, print_medians, ruff_all_rules, wall

# (label, what is compared, the other side, target, True when the ratio must be at most the target)
TARGETS = [
    ("library cold / ruff cold", "library cold", ("library", "ruff"), 4.0, True),
    ("library warm / ruff cold", "library warm", ("library", "ruff"), 1.0, True),
    ("Fixit / gpulint, corpus", "corpus", ("corpus", "fixit"), 10.0, False),
    ("Fixit / gpulint, one file", "one file", ("one file", "fixit"), 3.0, False),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--library", type=Path, nargs="+", required=True, help="a torch-heavy library tree (or several of its folders)"
    )
    parser.add_argument("--corpus", type=Path, required=True, help="a folder of training scripts")
    parser.add_argument("--file", type=Path, help="one file (default: the corpus file closest to 300 lines)")
    parser.add_argument("--runs", type=int, default=3, help="rounds; medians over them")
    parser.add_argument("--bounds", action="store_true", help="also time the runs that bound faster rules")
    parser.add_argument("--burners", type=int, default=0, help="processes kept busy on the CPU beside the runs")
    args = parser.parse_args()
    for folder in (*args.library, args.corpus):
        if not folder.is_dir():
            print(f"ratios: error: no such folder: {folder}", file=sys.stderr)
            return 2
    scripts = sorted(str(p.resolve()) for p in args.corpus.rglob("*.py") if p.is_file())
    if not scripts:
        print(f"ratios: error: no Python files under {args.corpus}", file=sys.stderr)
        return 2
    lengths = {p: Path(p).read_bytes().count(b"\n") for p in scripts}
    one = str(args.file.resolve()) if args.file else min(scripts, key=lambda p: abs(lengths[p] - 300))
    ruff, fixit = find_tool("ruff"), find_tool("fixit")
    gpulint = [sys.executable, "-m", "gpulint", "check", "--exit-zero"]
    library = [str(folder.resolve()) for folder in args.library]
    # Bytecode written (a machine that sets PYTHONDONTWRITEBYTECODE would have every run compile
    # gpulint's modules again, which an installed gpulint, compiled by pip, never does).
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["NO_COLOR"] = "1"
    work = Path(tempfile.mkdtemp(prefix="gpulint-ratios-"))
    warm_cache = ["--cache-dir", str(work / "cache")]
    commands: dict[tuple[str, str], list[str]] = {
        ("library cold", "gpulint"): [*gpulint, "--no-cache", *library],
        ("library warm", "gpulint"): [*gpulint, *warm_cache, *library],
        ("corpus", "gpulint"): [*gpulint, "--no-cache", *scripts],
        ("one file", "gpulint"): [*gpulint, "--no-cache", one],
    }
    if ruff is not None:
        commands["library", "ruff"] = ruff_all_rules(ruff, *library)
    if fixit is not None:
        commands["corpus", "fixit"] = [fixit, "lint", *scripts]
        commands["one file", "fixit"] = [fixit, "lint", one]
    if args.bounds:
        bounds = [sys.executable, str(Path(__file__).with_name("lint_bounds.py"))]
        for case in ("library cold", "corpus", "one file"):
            check = commands[case, "gpulint"][len(gpulint) :]
            listing = work / f"{case.replace(' ', '-')}-findings.txt"
            listing.write_text("\n".join(files_with_findings([*gpulint, *check], env)) + "\n")
            commands[case, BOUND_FINDINGS_ONLY] = [*bounds, "findings-only", str(listing), "--", "--exit-zero", *check]
            commands[case, BOUND_NO_LINT] = [*bounds, "no-lint", "--", "--exit-zero", *check]
    print(f"library: {' '.join(library)} ({sum(1 for f in args.library for _ in f.rglob('*.py'))} Python files)")
    print(f"corpus: {args.corpus} ({len(scripts)} files, {sum(lengths.values()):,} lines); one file: {one}")
    print(f"load average at start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    samples: dict[tuple[str, str], list[float]] = {entry: [] for entry in commands}
    entries = list(commands)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)]
    if burners:
        print(f"{len(burners)} processes spinning on the CPU beside the runs")
    try:
        for (case, tool), command in commands.items():
            if tool != "fixit" or case == "one file":  # (bytecode and the file cache, untimed)
                wall(command, work, env)
        for round_index in range(args.runs):
            shift = round_index % len(entries)
            for entry in entries[shift:] + entries[:shift]:
                if entry == ("library warm", "gpulint"):
                    wall(commands[entry], work, env)  # (fill the cache: a warm run follows an unchanged tree's run)
                samples[entry].append(wall(commands[entry], work, env))
            print(f"round {round_index + 1}/{args.runs} done", file=sys.stderr)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print()
    median = print_medians(samples, 2)
    print()
    print("| ratio | value | target | met |\n|---|---|---|---|")
    for label, case, other, target, at_most in TARGETS:
        if other not in median:
            print(f"| {label} | {other[1]} not installed: not measured | {'<=' if at_most else '>='} {target:g}x | - |")
            continue
        ours = median[case, "gpulint"]
        value = ours / median[other] if at_most else median[other] / ours
        met = value <= target if at_most else value >= target
        print(f"| {label} | {value:.2f}x | {'<=' if at_most else '>='} {target:g}x | {'yes' if met else 'no'} |")
    if args.bounds:
        print()
        print(f"| ratio | now | {BOUND_FINDINGS_ONLY} | {BOUND_NO_LINT} | target |\n|---|---|---|---|---|")
        for label, case, other, target, at_most in TARGETS:
            if other not in median or (case, BOUND_NO_LINT) not in median:
                continue
            values = [
                median[case, tool] / median[other] if at_most else median[other] / median[case, tool]
                for tool in ("gpulint", BOUND_FINDINGS_ONLY, BOUND_NO_LINT)
            ]
            row = " | ".join(f"{value:.2f}x" for value in values)
            print(f"| {label} | {row} | {'<=' if at_most else '>='} {target:g}x |")
    return 0


BOUND_FINDINGS_ONLY = "gpulint, lint only where a finding is"
BOUND_NO_LINT = "gpulint, no lint (the floor)"


def files_with_findings(check: list[str], env: dict[str, str]) -> list[str]:
    """The files a plain run of `check` (gpulint check ... PATHS) reports something in."""
    run = subprocess.run([*check, "--output-format", "json"], env=env, capture_output=True, text=True, check=False)
    return sorted({finding["filename"] for finding in json.loads(run.stdout)})


if __name__ == "__main__":
    sys.exit(main())
