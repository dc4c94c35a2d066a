"""What one large training file costs `gpulint check`, and where the budgets of work per file stop it.

    .venv/bin/python benchmarks/work_per_file.py                     # 0.25, 0.5, 1 and 2 MiB
    .venv/bin/python benchmarks/work_per_file.py --sizes 0.0625 0.125 --budgets-off

Each size is a generated training-dense file: training functions like the bundled fixtures', one
after another, each with a dozen findings (DataLoader settings, blocking copies, per-step syncs,
logging and checkpoints).  Each file is linted by a fresh `gpulint check` (`--no-cache`), with the
default settings, or with `--budgets-off` with every budget raised out of the way (what main did).
The table gives the file's CPython syntax nodes, the wall time, the process's peak RSS and how the
run ended (its summary line, or the reason of the skip line).  See docs/safety.md, "Work per file".
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

HEADER = """import logging

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

logger = logging.getLogger(__name__)
"""

UNIT = """

def train_{n}(model, train_set, device, epochs):
    loader = DataLoader(train_set, batch_size=128, shuffle=True, num_workers=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    weights = torch.ones(10).to(device)
    for epoch in range(epochs):
        for step, (images, labels) in enumerate(loader):
            images = images.to(device)
            labels = labels.cuda()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels, weight=weights)
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()
            print(f"step {{step}} loss {{loss.item():.4f}}")
            logger.info("loss %s", float(loss))
            torch.save(model.state_dict(), "last_{n}.pt")
"""

NO_BUDGETS = (
    '[tool.gpulint]\nmax-file-size = "1GiB"\nmax-syntax-nodes = 1000000000\nmax-findings-per-file = 1000000000\n'
)


def training_dense(size: int) -> str:
    """A training file of about `size` bytes."""
    parts, length, n = [HEADER], len(HEADER), 0
    while length < size:
        unit = UNIT.format(n=n)
        parts.append(unit)
        length += len(unit)
        n += 1
    return "".join(parts)


def lint(path: Path, cwd: Path) -> tuple[float, int, str]:
    """(seconds, peak RSS in bytes, the last line of the output) of one `gpulint check`."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "gpulint", "check", str(path), "--no-cache"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = process.stdout.read() if process.stdout is not None else ""
    _, _, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = 0  # reaped by wait4
    lines = [line for line in output.splitlines() if line.strip()]
    skipped = [line.split(": ", 2)[-1] for line in lines if line.startswith("gpulint: error:")]
    return elapsed, usage.ru_maxrss * 1024, (skipped or lines or [""])[-1]


def count_nodes(path: Path) -> int:
    """The file's CPython syntax nodes, counted in a process of its own (a tree built here would
    count in the peak RSS of the next `gpulint` this process starts)."""
    script = "import ast, sys; print(sum(1 for _ in ast.walk(ast.parse(open(sys.argv[1], 'rb').read()))))"
    return int(subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.25, 0.5, 1, 2], help="MiB")
    parser.add_argument("--budgets-off", action="store_true", help="raise every budget out of the way")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        if args.budgets_off:
            (root / "pyproject.toml").write_text(NO_BUDGETS)
        print(f"{'size':>8} {'nodes':>9} {'time':>8} {'peak RSS':>9}  outcome")
        for mib in args.sizes:
            text = training_dense(int(mib * 2**20))
            path = root / f"dense_{mib}MiB.py"
            path.write_text(text)
            seconds, rss, last = lint(path, root)
            nodes = count_nodes(path)
            print(f"{mib:>5} MiB {nodes:>9,} {seconds:>7.1f}s {rss / 2**20:>6.0f} MB  {last[-90:]}")


if __name__ == "__main__":
    main()
