"""One file with 1,000 fixable findings, in every output format and in `gpulint review`.

    .venv/bin/python benchmarks/many_findings.py
    .venv/bin/python benchmarks/many_findings.py --findings 400 --runs 3

The formats that carry fix edits (json, SARIF, rdjson) and the review bot's suggestions compute
each finding's edits; they used to cost a whole-module code generation and diff per finding,
quadratic in the findings of a file (400 findings: 0.8 s as text, 152 s as json).  Each run is a
fresh `gpulint` process (`--no-cache`) on the same generated file: a training step that logs a
synced loss on every line (each line a GL201 and a GL302 finding, both fixed by a guard); the
table gives the median time of each command and its ratio to `--format text` in the same run.
The file is linted with `max-findings-per-file` raised out of the way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpulint.linter.reporters import FORMATS  # noqa: E402 - after the path is set

HEADER = """import torch


def train(model, loader, optimizer):
    model.cuda()
    for step, batch in enumerate(loader):
        loss = model(batch.cuda())
        loss.backward()
        optimizer.step()
"""


def training_file(findings: int) -> str:
    """A training loop with about `findings` fixable findings (two per logging line)."""
    return HEADER + "".join(f"        print('loss {i}', loss.item())\n" for i in range(findings // 2))


def timed(command: list[str], cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if completed.returncode not in (0, 1) or completed.stderr.strip():
        raise SystemExit(f"{' '.join(command)} failed ({completed.returncode}): {completed.stderr.strip()[-500:]}")
    return elapsed


def git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--findings", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=1, help="rounds (medians over them)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "pyproject.toml").write_text("[tool.gpulint]\nmax-findings-per-file = 1000000\n")
        git(root, "init", "--quiet")
        git(root, "add", "pyproject.toml")
        git(root, "commit", "--quiet", "-m", "base")
        (root / "train.py").write_text(training_file(args.findings))
        git(root, "add", "train.py")  # in the change under review
        gpulint = [sys.executable, "-m", "gpulint"]
        commands = {name: [*gpulint, "check", "train.py", "--no-cache", "--format", name] for name in FORMATS}
        commands["review"] = [*gpulint, "review", "--base", "HEAD"]
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, command in commands.items():
                times[name].append(timed(command, root))
        text = statistics.median(times["text"])
        print(f"{args.findings} findings in one file; median of {args.runs} run(s)")
        print(f"{'command':<14} {'time':>8} {'/ text':>8}")
        for name in commands:
            median = statistics.median(times[name])
            label = name if name == "review" else f"--format {name}"
            print(f"{label:<14} {median:>7.2f}s {median / text:>7.1f}x")


if __name__ == "__main__":
    main()
