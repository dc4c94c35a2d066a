"""`gpulint server` on a workspace built to hurt it, and on a client that sends a broken frame.

The real server process is driven over its stdio as an editor drives it (tests/lsp_client.py).
Every request is given a generous limit that only a hang runs out of: a server that hangs, or
that reads a FIFO or /dev/zero from disk, fails the test instead of the suite, and a slow machine
fails none.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the language server needs the `lsp` extra (pygls)")

from gpulint.linter.run.safe_files import DEFAULT_MAX_FILE_BYTES  # noqa: E402
from gpulint.server.lsp import ABANDON_AFTER_S  # noqa: E402
from tests.lsp_client import LspClient, LspError, cpu_seconds  # noqa: E402
from tests.server.test_lsp import TRAIN  # noqa: E402

# TRAIN's loader findings (GL101, GL102), which the cases below look for, are hints by default: the
# projects show hints.
SHOW_HINTS = "[tool.gpulint]\nshow-hints = true\n"

# An answer, or the lint of a small text (its worker's start included), takes about a second on a
# loaded two-core machine: only a hang runs out of this.
ANSWER_S = 60.0
# 290 KiB of training code: libcst alone takes 1.5 s to parse it on a two-core machine (6 s when
# loaded), the whole lint 27 s and about 240 MB.
BIG = TRAIN * 600
# The worker's own limits are what some tests below reach, so the engine's budgets of work per file
# (which turn BIG away first) are lifted for them, by a configuration the server is told to trust.
NO_BUDGETS = SHOW_HINTS + "max-syntax-nodes = 100000000\nmax-findings-per-file = 100000000\n"
NOWHERE = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}


def _server(root: Path, *options: str) -> LspClient:
    if not (root / "pyproject.toml").exists():
        (root / "pyproject.toml").write_text(SHOW_HINTS)
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
    (tmp_path / "pyproject.toml").write_text(SHOW_HINTS + 'max-file-size = "16KiB"\n')
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
    client = _server(tmp_path, "--time-limit", "5", "--allow-local-rules")
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
    client = _server(tmp_path, "--memory-limit", "120", "--allow-local-rules")
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
    server = _server(tmp_path, "--allow-local-rules")
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


# -- messages built to end the server ---------------------------------------------------------------


def _deep(levels: int) -> str:
    """JSON arrays nested `levels` deep (as notebook metadata an editor forwards may be)."""
    return "[" * levels + "]" * levels


def _frame(text: str) -> bytes:
    body = text.encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _answer_to(client: LspClient, request_id, text: str) -> dict:
    """Send a request written out by hand, with an id of its own; the response to that id (the
    client's reader files responses by id, and JSON-RPC answers an unreadable id as null)."""
    box: queue.Queue = queue.Queue()
    with client._lock:
        client._responses[request_id] = box
    client.send_raw(_frame(text))
    try:
        return box.get(timeout=ANSWER_S)
    except queue.Empty:
        raise LspError(f"no answer to {text[:80]!r}; stderr: {client.stderr_so_far()}") from None
    finally:
        with client._lock:
            client._responses.pop(request_id, None)


def _hover_text(request_id: str, token: str = "", id_last: bool = False) -> str:
    """A hover request written out by hand: its id and a progress token to nest in its parameters
    as JSON text, the id before or after the parameters."""
    params = {"textDocument": {"uri": "file:///x.py"}, "position": {"line": 0, "character": 0}}
    written = json.dumps(params)[:-1] + (f', "workDoneToken": {token}' if token else "") + "}"
    members = ['"jsonrpc": "2.0"', f'"method": "textDocument/hover", "params": {written}']
    members.insert(len(members) if id_last else 1, f'"id": {request_id}')
    return "{" + ", ".join(members) + "}"


def _still_serving(client: LspClient, root: Path, name: str) -> None:
    """The server answers a request and lints a document opened now."""
    assert client.process.poll() is None, client.stderr_so_far()
    assert client.request("textDocument/hover", _at((root / "never-opened.py").as_uri(), 0), timeout=ANSWER_S) is None
    uri = client.open(root / name, TRAIN)
    assert {"GL101", "GL102"} <= {d["code"] for d in client.diagnostics(uri, version=1, timeout=ANSWER_S)}


def test_a_message_nested_too_deep_is_refused_and_the_server_lives_on(server, tmp_path):
    """One 2.4 KB notification nesting arrays 1,000 deep (notebook metadata) ended the server with
    a RecursionError.  Past 128 levels a message is refused before it is parsed: a notification is
    dropped, a request answered with an error under its id, wherever the id is in it."""
    notebook = (tmp_path / "deep.ipynb").as_uri()
    deep_notification = (
        '{"jsonrpc": "2.0", "method": "notebookDocument/didChange", "params": {"notebookDocument": '
        f'{{"uri": "{notebook}", "version": 2}}, "change": {{"metadata": {{"custom": {_deep(1000)}}}}}}}}}'
    )
    assert 2000 < len(deep_notification) < 2600
    server.send_raw(_frame(deep_notification))
    _still_serving(server, tmp_path, "after_notification.py")

    for request_id, text in [
        (9001, _hover_text("9001", token=_deep(1000))),
        ("last", _hover_text('"last"', token=_deep(5000), id_last=True)),  # the id after the depths
    ]:
        answer = _answer_to(server, request_id, text)
        assert answer["error"]["code"] == -32600, answer
        assert "JSON nested deeper than 128 levels" in answer["error"]["message"]
    _still_serving(server, tmp_path, "after_requests.py")
    assert server.stderr_so_far().count("JSON nested deeper than 128 levels") == 3

    # 120 levels of metadata are within the bound: the notebook is linted.
    cell = f"{notebook}#cell0"
    server.notify(
        "notebookDocument/didOpen",
        {
            "notebookDocument": {
                "uri": notebook,
                "notebookType": "jupyter-notebook",
                "version": 1,
                "metadata": {"custom": json.loads(_deep(120))},
                "cells": [{"kind": 2, "document": cell}],
            },
            "cellTextDocuments": [{"uri": cell, "languageId": "python", "version": 1, "text": TRAIN}],
        },
    )
    assert {"GL101", "GL102"} <= {d["code"] for d in server.diagnostics(cell, timeout=ANSWER_S)}


def test_no_single_malformed_message_ends_the_server(server, tmp_path):
    """Parameters of the wrong type, positions and ranges out of the document, ids that are not
    ids, actions that name nothing: each is answered (a request) or dropped (a notification)."""
    uri = server.open(tmp_path / "open.py", TRAIN)
    assert server.diagnostics(uri, version=1, timeout=ANSWER_S)
    position = {"textDocument": {"uri": uri}, "position": {"line": 10**6, "character": 10**6}}
    assert server.request("textDocument/hover", position, timeout=ANSWER_S) is None
    far = {"start": {"line": 10**6, "character": 0}, "end": {"line": 10**7, "character": 5}}
    actions = {"textDocument": {"uri": uri}, "range": far, "context": {"diagnostics": []}}
    assert server.request("textDocument/codeAction", actions, timeout=ANSWER_S) == []
    for params in (
        {"textDocument": {"uri": uri}, "position": {"line": -1, "character": 0}},
        {"textDocument": {"uri": uri}, "position": {"line": 2**40, "character": 0}},
        [1, 2],
    ):
        with pytest.raises(LspError, match="-32602"):
            server.request("textDocument/hover", params, timeout=ANSWER_S)
    resolve = {"title": "x", "data": {"uri": uri, "version": 1, "index": 10**30, "what": "fix"}}
    assert server.request("codeAction/resolve", resolve, timeout=ANSWER_S)["title"] == "x"

    for method, params in [
        (
            "textDocument/didOpen",
            {"textDocument": {"uri": (tmp_path / "n.py").as_uri(), "languageId": "python", "version": 1, "text": 5}},
        ),
        (
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"range": far, "text": "x"}]},
        ),
        ("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3}, "contentChanges": "all of it"}),
        ("textDocument/didSave", {"textDocument": {"uri": 3}}),
    ]:
        server.notify(method, params)
    unknown_cells = {"structure": {"array": {"start": 5, "deleteCount": 3}, "didClose": [{"uri": "x"}]}}
    for message in [
        {"jsonrpc": "2.0", "method": 7, "params": {}},
        {"jsonrpc": "1.0", "method": "textDocument/didClose", "params": {}},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": [1]}},
        {"jsonrpc": "2.0", "id": 123456, "result": {"unasked": True}},
        {"jsonrpc": "2.0", "id": [1], "result": None},
        {
            "jsonrpc": "2.0",
            "method": "notebookDocument/didChange",
            "params": {
                "notebookDocument": {"uri": "file:///none.ipynb", "version": 2},
                "change": {"cells": unknown_cells},
            },
        },
        [],
        3,
    ]:
        server.send_raw(_frame(json.dumps(message)))
    huge = 10**1000
    assert _answer_to(server, huge, _hover_text(str(huge)))["result"] is None
    for bad_id in ("1e400", "1.5", "true", "null", "[1]", '{"a": 1}'):
        answer = _answer_to(server, None, _hover_text(bad_id))
        assert answer["id"] is None and answer["error"]["code"] == -32600, (bad_id, answer)
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    _still_serving(server, tmp_path, "after.py")
    assert "Traceback" not in json.dumps(_published(server, uri))


# -- a configuration that cannot be loaded ----------------------------------------------------------
@pytest.mark.parametrize(
    "configuration",
    ["[tool.gpulint]\nbogus-key = 1\n", "[tool]\ngpulint = 3\n", "[tool.gpulint]\nselect = 3\n"],
    ids=["unknown-key", "gpulint-not-a-table", "select-not-a-list"],
)
def test_a_configuration_that_cannot_be_loaded_is_one_diagnostic_and_requests_are_answered(tmp_path, configuration):
    """Before, a broken `[tool.gpulint]` left the document without diagnostics (`gpulint = 3`: its
    hover unanswered too), and an unknown key left it silently unlinted."""
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(configuration)
    client = _server(tmp_path)
    try:
        uri = client.open(tmp_path / "train.py", TRAIN)
        [diagnostic] = client.diagnostics(uri, version=1, timeout=ANSWER_S)
        assert diagnostic["message"].startswith(f"gpulint: not linted: {pyproject}: "), diagnostic
        assert diagnostic["range"] == NOWHERE and diagnostic["severity"] == 2
        assert client.request("textDocument/hover", _at(uri, 5), timeout=ANSWER_S) is None
        actions = {"textDocument": {"uri": uri}, "range": NOWHERE, "context": {"diagnostics": []}}
        assert client.request("textDocument/codeAction", actions, timeout=ANSWER_S) == []
        # Repaired, the next edit is linted with it.
        pyproject.write_text(SHOW_HINTS)
        client.replace_text(uri, TRAIN, version=2)
        assert {"GL101", "GL102"} <= {d["code"] for d in client.diagnostics(uri, version=2, timeout=ANSWER_S)}
        assert client.request("textDocument/hover", _at(uri, 5), timeout=ANSWER_S) is not None
    finally:
        client.close()


def test_a_pyproject_whose_tool_is_not_a_table_is_linted_with_the_defaults(tmp_path):
    """`tool = 3` holds no `[tool.gpulint]` table, so, as with any pyproject.toml without one, the
    defaults apply (another tool's broken table is not gpulint's to refuse).  Before, the document
    got no diagnostics and its hover was never answered."""
    (tmp_path / "pyproject.toml").write_text("tool = 3\n")
    client = _server(tmp_path)
    try:
        uri = client.open(tmp_path / "train.py", TRAIN)
        # (the defaults: GL101 and GL102 held back as hints, the per-step `.item()` reported)
        diagnostics = client.diagnostics(uri, version=1, timeout=ANSWER_S)
        codes = {d["code"] for d in diagnostics}
        assert "GL201" in codes and not codes & {"GL101", "GL102"}
        item = next(d for d in diagnostics if d["code"] == "GL201")["range"]["start"]
        hover = {"textDocument": {"uri": uri}, "position": item}
        assert client.request("textDocument/hover", hover, timeout=ANSWER_S) is not None
    finally:
        client.close()


def test_a_configuration_that_fails_unforeseen_is_one_diagnostic_naming_the_folder(server, tmp_path):
    """A document in a folder whose name holds a NUL (`%00` in its uri) makes the configuration
    lookup itself fail (ValueError, not a ConfigError): before, no diagnostics and a hover left
    waiting; now one diagnostic says where and why, and the traceback is in the log."""
    uri = tmp_path.as_uri() + "/dir%00/train.py"
    server.notify(
        "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": TRAIN}}
    )
    [diagnostic] = server.diagnostics(uri, version=1, timeout=ANSWER_S)
    assert diagnostic["message"] == (
        f"gpulint: not linted: {tmp_path}/dir\x00: the configuration could not be read "
        "(internal error: ValueError: embedded null byte)"
    )
    assert server.request("textDocument/hover", _at(uri, 5), timeout=ANSWER_S) is None
    assert "Traceback" in server.stderr_so_far()
    _still_serving(server, tmp_path, "elsewhere.py")


def _at(uri: str, line: int) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": 20}}
