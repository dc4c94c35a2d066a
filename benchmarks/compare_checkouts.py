"""This checkout against another (a baseline) over the same trees: their results byte for byte,
and with `--runs` what each costs.

    .venv/bin/python benchmarks/compare_checkouts.py main --trees path/to/trees
    .venv/bin/python benchmarks/compare_checkouts.py <commit> path/to/tree [another] --runs 5
    .venv/bin/python benchmarks/compare_checkouts.py /tmp/baseline path/to/tree --path tests --outside-tests

The baseline is a git ref of this repository, checked out with `git worktree` into a temporary
folder (removed at the end), or a folder holding a checkout.  The trees are those named, and with
`--trees DIR` every `<owner>__<name>/` folder in DIR.

For each tree, each checkout lints it (`--no-cache`, from the tree's root, in a fresh process:
`python -P`, so the tree's modules shadow none) once per output, and the outputs are compared byte
for byte: the findings as JSON (the default rules, and `--select ALL`), the fixes
(`--diff --unsafe-fixes --select ALL`) and the text a user reads (`--output-format full
--show-fixes`: findings, notes and the summary), and what each run writes on standard error
(warnings, notes).  Any difference is printed (the first lines of a unified diff) and the exit
status is 1.  `--outside-tests` compares only what is about files that
are not test code (by the default test-file patterns, relative to the tree), the summary line about
test files left out: for a change to what test files cost.

With `--runs N`, before that, each tree is linted N times more per checkout (`--output-format json`),
the two checkouts interleaved round after round, the order swapped each round, and a table shows
per checkout the median wall-clock and CPU time (user + system, the process and its workers) and
the libcst parses of the process itself (workers parse too: `--jobs 1` counts them all).
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
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from parse_probe import PROBE  # noqa: E402  (beside this script, first on its path)

from gpulint.linter.analysis.test_files import is_test_path  # noqa: E402

# The outputs compared: (name, the arguments of `gpulint check` that make it).
OUTPUTS = [
    ("findings", ["--output-format", "json"]),
    ("findings, ALL", ["--output-format", "json", "--select", "ALL"]),
    ("fixes", ["--diff", "--unsafe-fixes", "--select", "ALL"]),
    ("text", ["--output-format", "full", "--show-fixes"]),
]
# The summary lines about test files, before and after they stopped being linted.
TEST_FILES_NOTE = re.compile(r"^\d+ (findings? in test files not reported|test files? not linted for performance)")

Runner = Callable[[Path, Path, list[str]], tuple[bytes, bytes]]


def run(checkout: Path, tree: Path, args: list[str]) -> tuple[bytes, bytes, int, float, float]:
    """(standard output, standard error less the probe's line, libcst parses, CPU seconds, wall
    seconds) of `gpulint check --no-cache ARGS` run by `checkout`'s code in `tree`."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-P", "-c", PROBE, "--no-cache", *args], capture_output=True, env=env, cwd=tree
    )
    wall = time.perf_counter() - started
    errors, _, probe = done.stderr.rpartition(b"\nPROBE ")
    parses, cpu = json.loads(probe)
    return done.stdout, errors, parses, cpu, wall


def output_of(checkout: Path, tree: Path, args: list[str]) -> tuple[bytes, bytes]:
    """(standard output, standard error: its warnings and notes) of a run (`run`)."""
    out, errors, *_ = run(checkout, tree, args)
    return out, errors


def outside_tests(output: bytes, kind: str) -> bytes:
    """The part of an output (`OUTPUTS`' kind) about files that are not test code."""
    if kind.startswith("findings"):
        findings = json.loads(output or b"[]")
        return json.dumps([f for f in findings if not is_test_path(f["filename"])], sort_keys=True).encode()
    if kind == "fixes":
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


def difference(first: bytes, second: bytes, names: tuple[str, str], shown: int = 12) -> list[str]:
    """The first lines of a unified diff between two outputs; [] when they are byte-identical (a
    difference no line shows, such as a last newline, is reported as such)."""
    if first == second:
        return []
    lines = list(
        difflib.unified_diff(
            first.decode(errors="replace").splitlines(),
            second.decode(errors="replace").splitlines(),
            *names,
            lineterm="",
            n=0,
        )
    )
    if not lines:
        return [
            f"--- {names[0]}",
            f"+++ {names[1]}",
            f"(same lines, different bytes: {len(first)} against {len(second)})",
        ]
    return lines[: shown + 2] + ([f"... {len(lines) - shown - 2} more lines"] if len(lines) > shown + 2 else [])


def compare(
    tree: Path,
    checkouts: dict[str, Path],
    extra: list[str],
    outside_test_files: bool = False,
    outputs: list[tuple[str, list[str]]] = OUTPUTS,
    runner: Runner = output_of,
) -> dict[str, list[str]]:
    """Each output of `outputs` made by the two checkouts over `tree` (with `extra` arguments),
    compared and printed; the differences by output, [] where it is byte-identical."""
    found = {}
    for kind, args in outputs:
        runs = [runner(checkout, tree, [*args, *extra]) for checkout in checkouts.values()]
        got, errors = [out for out, _ in runs], [error for _, error in runs]
        if outside_test_files:
            got = [outside_tests(output, kind) for output in got]
            errors = [outside_tests(error, "text") for error in errors]
        first, second = checkouts
        lines = difference(got[0], got[1], (first, second))
        lines += difference(errors[0], errors[1], (f"{first}, standard error", f"{second}, standard error"))
        print(f"  {kind:<14} {'DIFFERENT' if lines else 'identical'} ({len(got[0]):,} and {len(got[1]):,} bytes)")
        print("".join(f"    {line}\n" for line in lines), end="")
        found[kind] = lines
    return found


def measure(tree: Path, checkouts: dict[str, Path], runs: int, extra: list[str]) -> None:
    wall: dict[str, list[float]] = {name: [] for name in checkouts}
    cpu: dict[str, list[float]] = {name: [] for name in checkouts}
    parses: dict[str, int] = {}
    for round_ in range(runs):
        for name in list(checkouts) if round_ % 2 == 0 else list(reversed(checkouts)):
            _, _, parses[name], seconds, elapsed = run(checkouts[name], tree, ["--output-format", "json", *extra])
            cpu[name].append(seconds)
            wall[name].append(elapsed)
    for name in checkouts:
        print(
            f"  {name:<14} wall {statistics.median(wall[name]):6.2f} s  CPU {statistics.median(cpu[name]):6.2f} s"
            f" (medians of {runs})  libcst parses {parses[name]}"
        )


@contextmanager
def checkout_of(baseline: str) -> Iterator[Path]:
    """A folder holding the baseline's code: the folder named, or the git ref checked out (detached)
    into a temporary worktree of this repository, removed afterwards."""
    if Path(baseline, "gpulint").is_dir():
        yield Path(baseline).resolve()
        return
    with tempfile.TemporaryDirectory(prefix="gpulint-baseline-") as parent:
        folder = Path(parent) / "checkout"
        git = ["git", "-C", str(REPO), "worktree"]
        subprocess.run([*git, "add", "--detach", "--quiet", str(folder), baseline], check=True)
        try:
            yield folder
        finally:
            subprocess.run([*git, "remove", "--force", str(folder)], check=False)


def trees_of(named: list[Path], folder: Path | None) -> list[Path]:
    """The trees named, then the `<owner>__<name>/` folders of `folder`, sorted."""
    found = [tree.resolve() for tree in named]
    if folder is not None:
        found += sorted(p.resolve() for p in folder.iterdir() if p.is_dir() and "__" in p.name)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", help="a git ref of this repository, or a folder holding a checkout")
    parser.add_argument("trees", nargs="*", type=Path, help="folders to lint")
    parser.add_argument("--trees", dest="trees_folder", type=Path, help="a folder of <owner>__<name>/ trees")
    parser.add_argument("--runs", type=int, default=0, help="timed runs per checkout and tree (default: none)")
    parser.add_argument("--select", help="rules to select in the timed runs and the default-rule outputs")
    parser.add_argument("--jobs", help="worker processes (default: gpulint's)")
    parser.add_argument("--path", default=".", help="what to lint in each tree (default: all of it)")
    parser.add_argument("--outside-tests", action="store_true", help="compare only what is about non-test files")
    args = parser.parse_intermixed_args(argv)  # (trees before and after --trees)
    trees = trees_of(args.trees, args.trees_folder)
    missing = [str(tree) for tree in trees if not tree.is_dir()]
    if missing or not trees:
        print(f"compare_checkouts: error: no such tree: {', '.join(missing) or '(none named)'}", file=sys.stderr)
        return 2
    extra = [args.path, *(["--jobs", args.jobs] if args.jobs else [])]
    selected = ["--select", args.select] if args.select else []
    outputs = [(kind, own if "--select" in own else [*own, *selected]) for kind, own in OUTPUTS]
    same = True
    with checkout_of(args.baseline) as baseline:
        checkouts = {"baseline": baseline, "this checkout": REPO}
        for tree in trees:
            files = sum(1 for _ in tree.rglob("*.py"))
            print(f"{tree}: {files} .py files")
            if args.runs:
                measure(tree, checkouts, args.runs, [*selected, *extra])
            same &= not any(compare(tree, checkouts, extra, args.outside_tests, outputs).values())
    print("no difference" if same else "DIFFERENCES FOUND")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
