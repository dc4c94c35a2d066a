"""`gpulint server` on a workspace built to hurt it, and on a client that sends a broken frame.

The real server process is driven over its stdio as an editor drives it (tests/lsp_client.py).
Every request is given a generous limit that only a hang runs out of: a server that hangs, or
that reads a FIFO or /dev/zero from disk, fails the test instead of the suite, and a slow machine
fails none.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the language server needs the `lsp` extra (pygls)")

from gpulint.linter.run.safe_files import DEFAULT_MAX_FILE_BYTES  # noqa: E402
from gpulint.server.lsp import ABANDON_AFTER_S  # noqa: E402
from tests.lsp_client import LspClient, LspError, cpu_seconds  # noqa: E402
from tests.server.test_lsp import TRAIN  # noqa: E402

# An answer, or the lint of a small text (its worker's start included), takes about a second on a
# loaded two-core machine: only a hang runs out of this.
ANSWER_S = 60.0
# 290 KiB of training code: libcst alone takes 1.5 s to parse it on a two-core machine (6 s when
# loaded), the whole lint 27 s and about 240 MB.
BIG = TRAIN * 600
# The worker's own limits are what some tests below reach, so the engine's budgets of work per file
# (which turn BIG away first) are lifted for them.
NO_BUDGETS = "[tool.gpulint]\nmax-syntax-nodes = 100000000\nmax-findings-per-file = 100000000\n"
NOWHERE = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}


def _server(root: Path, *options: str) -> LspClient:
    client = LspClient(command=[sys.executable, "-m", "gpulint.server", *options], cwd=root)
    try:
        client.initialize(root, {"notebookDocument": {"synchronization": {}}})
    except BaseException:
        client.close()
        raise
    return client


@pytest.fixture
def server(tmp_path):
    client = _server(tmp_path)
    yield client
    client.close()


def _code_actions(client: LspClient, uri: str) -> list[dict]:
    return client.request(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": NOWHERE, "context": {"diagnostics": []}},
        timeout=ANSWER_S,
    )


def _hover(client: LspClient, uri: str):
    return client.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}, timeout=ANSWER_S
    )


def _published(client: LspClient, uri: str) -> list[dict]:
    """The diagnostics notifications for `uri` received so far (the others are dropped)."""
    found = []
    while not client.notifications.empty():
        message = client.notifications.get_nowait()
        if message.get("method") == "textDocument/publishDiagnostics" and message["params"]["uri"] == uri:
            found.append(message["params"])
    return found


# -- the size limit -------------------------------------------------------------------------------
def test_a_document_over_max_file_size_is_one_diagnostic_and_no_lint(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nmax-file-size = "16KiB"\n')
    client = _server(tmp_path)
    try:
        big = TRAIN * 40  # 22 KiB of code with findings on every copy
        uri = client.open(tmp_path / "big.py", big)
        [diagnostic] = client.diagnostics(uri, version=1, timeout=ANSWER_S)
        size = f"{len(big.encode()) / 1024:.1f} KiB"
        assert diagnostic["message"] == f"gpulint: not linted: larger than max-file-size ({size} > 16.0 KiB); skipped"
        assert diagnostic["range"] == NOWHERE and "code" not in diagnostic
        assert _code_actions(client, uri) == []
        # back under the limit, it is linted again
        client.replace_text(uri, TRAIN, version=2)
        assert {"GL101", "GL102"} <= {d["code"] for d in client.diagnostics(uri, version=2, timeout=ANSWER_S)}
    finally:
        client.close()


@pytest.mark.slow
def test_a_20_mib_document_is_skipped_at_the_default_limit(server, tmp_path):
    uri = server.open(tmp_path / "huge.py", "x = 1\n" * (20 * 2**20 // 6))
    [diagnostic] = server.diagnostics(uri, version=1, timeout=ANSWER_S)
    limit_mib = DEFAULT_MAX_FILE_BYTES / 2**20
    assert f"larger than max-file-size (20.0 MiB > {limit_mib:.1f} MiB); skipped" in diagnostic["message"]
    assert _hover(server, uri) is None


# -- only open documents ----------------------------------------------------------------------------
def test_a_fifo_or_device_that_was_never_opened_is_not_read(server, tmp_path):
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    zero = tmp_path / "zero.py"
    zero.symlink_to("/dev/zero")  # reading it would fill the memory
    for path in (fifo, zero):
        uri = path.as_uri()
        assert _code_actions(server, uri) == []
        assert _hover(server, uri) is None
        assert _published(server, uri) == []


def test_a_closed_file_is_not_linted_again_from_disk(server, tmp_path):
    path = tmp_path / "closed.py"
    path.write_text(TRAIN)
    uri = server.open(path, TRAIN)
    assert server.diagnostics(uri, version=1, timeout=ANSWER_S)
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert server.diagnostics(uri, timeout=ANSWER_S) == []
    assert _code_actions(server, uri) == []
    assert _hover(server, uri) is None
    time.sleep(0.5)
    assert _published(server, uri) == []  # and no diagnostics from the file on disk


def test_a_closed_notebooks_cell_gets_an_empty_answer(server, tmp_path):
    notebook = (tmp_path / "train.ipynb").as_uri()
    cell = f"{notebook}#cell0"
    server.notify(
        "notebookDocument/didOpen",
        {
            "notebookDocument": {
                "uri": notebook,
                "notebookType": "jupyter-notebook",
                "version": 1,
                "cells": [{"kind": 2, "document": cell}],
            },
            "cellTextDocuments": [{"uri": cell, "languageId": "python", "version": 1, "text": TRAIN}],
        },
    )
    assert server.diagnostics(cell, timeout=ANSWER_S)
    server.notify(
        "notebookDocument/didClose",
        {"notebookDocument": {"uri": notebook}, "cellTextDocuments": [{"uri": cell}]},
    )
    assert server.diagnostics(cell, timeout=ANSWER_S) == []
    assert _code_actions(server, cell) == []  # was an error response carrying a traceback
    assert _hover(server, cell) is None


# -- broken frames ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "headers",
    [b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n", b"Content-Length: twelve\r\n"],
    ids=["no-content-length", "non-numeric-content-length"],
)
def test_a_malformed_frame_is_skipped_and_the_next_one_answered(server, tmp_path, headers):
    body = json.dumps({"jsonrpc": "2.0", "id": 999, "method": "shutdown"}).encode()
    server.send_raw(headers + b"\r\n" + body)
    uri = server.open(tmp_path / "after.py", TRAIN)
    assert {"GL101", "GL102"} <= {d["code"] for d in server.diagnostics(uri, version=1, timeout=ANSWER_S)}
    assert _hover(server, (tmp_path / "nowhere.py").as_uri()) is None
    assert server.stderr_so_far().count("skipped a message without a valid Content-Length header") == 1


def test_a_request_with_parameters_that_do_not_fit_gets_an_error_not_silence(server):
    with pytest.raises(LspError, match="-32602") as raised:
        server.request("textDocument/hover", {"textDocument": 3}, timeout=ANSWER_S)
    assert "traceback" not in str(raised.value).lower()


# -- the worker's limits ----------------------------------------------------------------------------
def test_a_lint_past_the_time_limit_is_one_diagnostic_and_the_next_edit_is_linted(tmp_path):
    (tmp_path / "pyproject.toml").write_text(NO_BUDGETS)
    # The small text's lint takes a fraction of a second even on a loaded machine; the big one's,
    # ten times the limit on a quiet one.
    client = _server(tmp_path, "--time-limit", "5")
    try:
        uri = client.open(tmp_path / "slow.py", BIG * 2)
        [diagnostic] = client.diagnostics(uri, version=1, timeout=ANSWER_S)
        assert diagnostic["message"] == "gpulint: not linted: linting took longer than 5 s; skipped"
        client.replace_text(uri, TRAIN, version=2)  # a fresh worker lints the small text
        assert {"GL101", "GL102"} <= {d["code"] for d in client.diagnostics(uri, version=2, timeout=ANSWER_S)}
    finally:
        client.close()


def test_a_lint_past_the_memory_limit_is_one_diagnostic_and_the_server_lives_on(tmp_path):
    (tmp_path / "pyproject.toml").write_text(NO_BUDGETS)
    client = _server(tmp_path, "--memory-limit", "120")
    try:
        uri = client.open(tmp_path / "greedy.py", BIG)
        [diagnostic] = client.diagnostics(uri, version=1, timeout=ANSWER_S)
        assert diagnostic["message"].startswith("gpulint: not linted: ")
        assert "memory" in diagnostic["message"] and diagnostic["message"].endswith("skipped")
        client.replace_text(uri, TRAIN, version=2)
        assert {"GL101", "GL102"} <= {d["code"] for d in client.diagnostics(uri, version=2, timeout=ANSWER_S)}
    finally:
        client.close()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the worker process through /proc")
def test_a_long_lint_of_an_old_text_is_abandoned_for_the_new_one(tmp_path):
    (tmp_path / "pyproject.toml").write_text(NO_BUDGETS)
    server = _server(tmp_path)
    try:
        uri = server.open(tmp_path / "long.py", TRAIN)
        assert server.diagnostics(uri, version=1, timeout=ANSWER_S)  # the worker is started, and idle
        worker = server.worker_pid()
        idle = cpu_seconds(worker)
        server.replace_text(uri, BIG * 2, version=2)
        # The worker's CPU time on version 2 is at most the time that lint has run, on any machine:
        # past twice the age at which the server abandons a stale lint, the next edit abandons it.
        deadline = time.monotonic() + ANSWER_S
        while cpu_seconds(worker) - idle < 2 * ABANDON_AFTER_S:
            assert time.monotonic() < deadline, "the worker never got to linting version 2"
            time.sleep(0.05)
        server.replace_text(uri, TRAIN, version=3)
        published = server.wait_for("textDocument/publishDiagnostics", lambda p: p["uri"] == uri, timeout=ANSWER_S)
        assert published["version"] == 3  # version 2 was never published
        assert {"GL101", "GL102"} <= {d["code"] for d in published["diagnostics"]}
        # killed in the middle of its lint (and reaped by the server), not left to finish it
        deadline = time.monotonic() + ANSWER_S
        while Path(f"/proc/{worker}").exists():
            assert time.monotonic() < deadline, "the worker linting version 2 was left to run"
            time.sleep(0.05)
    finally:
        server.close()
