"""How long an editor waits for gpulint's diagnostics after an edit (`gpulint server`).

    .venv/bin/python benchmarks/lsp_relint.py                      # a ~300-line file made of fixtures
    .venv/bin/python benchmarks/lsp_relint.py --file train.py --edits 40
    .venv/bin/python benchmarks/lsp_relint.py --file repo/pkg/train.py --in-project --no-fixit --burst 0

Starts the real server process, opens the file, then makes edits as a person typing would: each one
inserts or removes a comment line in the middle of the file (an incremental change), and the time
is from sending `textDocument/didChange` to receiving the `publishDiagnostics` of that version.
Beside it, in the same run: the bare `libcst.parse_module` of the file (the floor any libcst linter
pays per keystroke), gpulint's in-process lint of it (what the server adds on top is the protocol),
and the same edits in Fixit's language server (`fixit lsp`, from the `bench` extra, when present).
Target: median re-lint < 150 ms for a 300-line file.

By default the file is copied alone into a temporary folder.  With `--in-project` it is opened where
it is, so that every re-lint also builds the project index of its repository, as in an editor (the
file on disk is not changed: the edits are the editor's, in memory; the server keeps the modules'
summaries in a `.gpulint_cache` folder of the workspace, the project's root, as it does for an
editor).

Then a burst: `--burst` edits (default 1,000) sent as fast as the client can write them, and the
time from the last one to the diagnostics of the final version (the lag an editor shows after a
paste, a search-and-replace or fast typing), with how many versions were published on the way.
Without coalescing a server lints every version in turn, so the lag is about burst x re-lint.  With
it, the lag is what pygls takes to apply the burst's changes to the document (measured in process
in the same run: the floor of any pygls server) plus a re-lint or two.  Target: lag < that floor
plus 3 re-lints.
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
BURST_TARGET_RELINTS = 3.0


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


def burst_changes(text: str, line: int, edits: int) -> list[dict]:
    """`edits` didChange params for `uri` "URI": insert a comment line at `line`, remove it, ..."""
    where = {"line": line, "character": 0}
    inserted = {"range": {"start": where, "end": where}, "text": "# a comment typed in the editor\n"}
    removed = {"range": {"start": where, "end": {"line": line + 1, "character": 0}}, "text": ""}
    return [
        {"textDocument": {"uri": "URI", "version": v}, "contentChanges": [inserted if v % 2 == 0 else removed]}
        for v in range(2, edits + 2)
    ]


def sync_floor_ms(text: str, line: int, edits: int) -> float:
    """What pygls takes to take in the burst's didChange messages (structure them, apply the
    changes to the document) when nothing is linted: in process, with gpulint's handler a no-op."""
    import asyncio
    import json

    from gpulint.server import lsp

    server = lsp.create_server()
    server.changed = lambda owner: None  # type: ignore[method-assign]
    protocol = server.protocol

    def handle(method: str, params: dict, **extra) -> None:
        protocol.handle_message(
            protocol.structure_message({"jsonrpc": "2.0", "method": method, "params": params, **extra})
        )

    async def run() -> float:
        root = {"processId": None, "rootUri": "file:///nowhere", "capabilities": {}}
        handle("initialize", root, id=1)
        uri = "file:///nowhere/train.py"
        handle(
            "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}
        )
        bodies = [json.dumps(p).replace('"URI"', json.dumps(uri)) for p in burst_changes(text, line, edits)]
        start = time.perf_counter()
        for body in bodies:
            handle("textDocument/didChange", json.loads(body))
        return (time.perf_counter() - start) * 1000

    protocol.set_writer(_Discard())
    return asyncio.run(run())


class _Discard:
    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


def burst_lag(root: Path, path: Path, text: str, line: int, edits: int) -> tuple[float, float, int]:
    """Open `path` in gpulint's server, send `edits` changes at once (each inserting or removing a
    comment line at `line`), and wait for the diagnostics of the last one.  Returns the ms from
    the first change and from the last change to those diagnostics, and how many diagnostics
    notifications the file got on the way."""
    client = LspClient(None, cwd=root)
    try:
        client.initialize(root)
        uri = client.open(path, text)
        client.diagnostics(uri, version=1)
        first = time.perf_counter()
        for params in burst_changes(text, line, edits):
            client.notify("textDocument/didChange", {**params, "textDocument": {**params["textDocument"], "uri": uri}})
        last = time.perf_counter()
        published = 0
        while True:
            params = client.wait_for("textDocument/publishDiagnostics", lambda p: p["uri"] == uri, timeout=600)
            published += 1
            if params.get("version") == edits + 1:
                break
        done = time.perf_counter()
        client.shutdown()
    finally:
        client.close()
    return (done - first) * 1000, (done - last) * 1000, published


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, help="the Python file to edit (default: ~300 lines of fixtures)")
    parser.add_argument("--edits", type=int, default=30, help="timed edits (after 3 untimed ones)")
    parser.add_argument("--no-fixit", action="store_true", help="leave out Fixit's language server")
    parser.add_argument("--burst", type=int, default=1000, help="edits sent at once (0: no burst)")
    parser.add_argument(
        "--in-project", action="store_true", help="open --file where it is, in its project (not a copy alone)"
    )
    args = parser.parse_args()
    if args.in_project and not args.file:
        parser.error("--in-project needs --file")

    text = args.file.read_text(encoding="utf-8") if args.file else default_text()
    lines = text.splitlines(keepends=True)
    middle = len(lines) // 2
    print(f"file: {args.file or 'fixtures: ' + ', '.join(DEFAULT_PARTS)} ({len(lines)} lines)")
    print(f"load average at start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")

    import libcst

    from gpulint.server.engine_adapter import Projects

    with tempfile.TemporaryDirectory(prefix="gpulint-lsp-bench-") as folder:
        if args.in_project:
            from gpulint.linter.project import project_root

            path = args.file.resolve()
            root = project_root(path.parent) or path.parent  # (the workspace an editor would open)
        else:
            root = Path(folder)
            path = root / "train.py"
            path.write_text(text, encoding="utf-8")
        project = Projects().for_path(path)
        parse = timed(lambda: libcst.parse_module(text), max(5, args.edits // 3))
        lint = timed(lambda: project.lint(text, str(path)), max(5, args.edits // 3))

        first, round_trips = relint_times(None, root, path, text, middle, args.edits)
        burst = burst_lag(root, path, text, middle, args.burst) if args.burst else None
        floor = sync_floor_ms(text, middle, args.burst) if args.burst else 0.0
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
    if burst is not None:
        from_first, from_last, published = burst
        print(
            f"burst of {args.burst} edits: final diagnostics {from_last:.0f} ms after the last edit "
            f"({from_first:.0f} ms after the first); {published} versions published"
        )
        relints = (from_first - floor) / median
        print(
            f"pygls applying the burst (in process, nothing linted): {floor:.0f} ms; the rest of the lag is "
            f"{relints:.1f} re-lints (linting every version would be {args.burst})"
        )
        verdict = "met" if relints < BURST_TARGET_RELINTS else "NOT met"
        print(f"target: lag < floor + {BURST_TARGET_RELINTS:.0f} re-lints -> {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
