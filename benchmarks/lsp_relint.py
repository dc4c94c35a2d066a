"""How long an editor waits for gpulint's diagnostics after an edit (`gpulint server`).

    .venv/bin/python benchmarks/lsp_relint.py                      # a ~300-line file made of fixtures
    .venv/bin/python benchmarks/lsp_relint.py --file train.py --edits 40

Starts the real server process, opens the file, then makes edits as a person typing would: each one
inserts or removes a comment line in the middle of the file (an incremental change), and the time
is from sending `textDocument/didChange` to receiving the `publishDiagnostics` of that version.
Beside it, in the same run: the bare `libcst.parse_module` of the file (the floor any libcst linter
pays per keystroke), gpulint's in-process lint of it (what the server adds on top is the protocol),
and the same edits in Fixit's language server (`fixit lsp`, from the `bench` extra, when present).
Target: median re-lint < 150 ms for a 300-line file.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.lsp_client import LspClient  # noqa: E402 - the tests' JSON-RPC client

# Real-looking PyTorch training code, joined into one ~300-line module when no --file is given.
DEFAULT_PARTS = ("pytorch_image_classification.py", "pytorch_ddp_training.py", "hf_lightning_finetune.py")
TARGET_MS = 150.0


def default_text() -> str:
    return "\n\n".join((REPO / "fixtures" / name).read_text(encoding="utf-8") for name in DEFAULT_PARTS)


def timed(function, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append((time.perf_counter() - start) * 1000)
    return times


def describe(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    median = statistics.median(times)
    return f"median {median:7.1f} ms   p90 {p90:7.1f} ms   min {ordered[0]:7.1f} ms   max {ordered[-1]:7.1f} ms"


def relint_times(command, root: Path, path: Path, text: str, line: int, edits: int) -> tuple[list[dict], list[float]]:
    """Open `path` in a language server started with `command` (None: gpulint's), then time `edits`
    round trips, each inserting or removing a comment line at `line`.  Returns the diagnostics
    published on open and the round trips in ms (the first 3 edits are not timed)."""
    client = LspClient(command, cwd=root)
    try:
        client.initialize(root)
        uri = client.open(path, text)
        first = client.diagnostics(uri, version=1)
        where = {"line": line, "character": 0}
        round_trips = []
        for version in range(2, edits + 5):
            if version % 2 == 0:  # insert the line
                change = {"range": {"start": where, "end": where}, "text": "# a comment typed in the editor\n"}
            else:  # and remove it again
                change = {"range": {"start": where, "end": {"line": line + 1, "character": 0}}, "text": ""}
            start = time.perf_counter()
            client.notify(
                "textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}
            )
            client.diagnostics(uri, version=version)
            if version > 4:  # the first edits warm the server's caches
                round_trips.append((time.perf_counter() - start) * 1000)
        client.shutdown()
    finally:
        client.close()
    return first, round_trips


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, help="the Python file to edit (default: ~300 lines of fixtures)")
    parser.add_argument("--edits", type=int, default=30, help="timed edits (after 3 untimed ones)")
    parser.add_argument("--no-fixit", action="store_true", help="leave out Fixit's language server")
    args = parser.parse_args()

    text = args.file.read_text(encoding="utf-8") if args.file else default_text()
    lines = text.splitlines(keepends=True)
    middle = len(lines) // 2
    print(f"file: {args.file or 'fixtures: ' + ', '.join(DEFAULT_PARTS)} ({len(lines)} lines)")
    print(f"load average at start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")

    import libcst

    from gpulint.server.engine_adapter import Projects

    with tempfile.TemporaryDirectory(prefix="gpulint-lsp-bench-") as folder:
        root = Path(folder)
        path = root / "train.py"
        path.write_text(text, encoding="utf-8")
        project = Projects().for_path(path)
        parse = timed(lambda: libcst.parse_module(text), max(5, args.edits // 3))
        lint = timed(lambda: project.lint(text, str(path)), max(5, args.edits // 3))

        first, round_trips = relint_times(None, root, path, text, middle, args.edits)
        fixit = shutil.which(
            "fixit", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        )
        fixit_trips = None
        if fixit and not args.no_fixit:
            # Fixit's own language server (pygls too), with its debounce off so it answers at once.
            _, fixit_trips = relint_times(
                [fixit, "lsp", "--debounce-interval", "0"], root, path, text, middle, args.edits
            )

    print(f"findings in the file: {len(first)}")
    print(f"libcst parse (in process)        {describe(parse)}")
    print(f"gpulint lint (in process)        {describe(lint)}")
    print(f"server re-lint after an edit     {describe(round_trips)}")
    if fixit_trips:
        print(f"fixit lsp re-lint (same edits)   {describe(fixit_trips)}")
        print(f"fixit lsp / gpulint server: {statistics.median(fixit_trips) / statistics.median(round_trips):.2f}x")
    elif not args.no_fixit:
        print("fixit lsp: not installed (pip install -e '.[bench]' and pygls); not measured")
    median = statistics.median(round_trips)
    print(
        f"re-lint / parse floor: {median / statistics.median(parse):.2f}x; "
        f"protocol overhead over the in-process lint: {median - statistics.median(lint):+.1f} ms"
    )
    print(f"target: median < {TARGET_MS:.0f} ms -> {'met' if median < TARGET_MS else 'NOT met'} ({median:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
