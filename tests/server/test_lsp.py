"""`gpulint server`, driven as an editor drives it: the real server process, JSON-RPC over its stdio.

One server per client kind (it takes a second to start); each test opens its own files.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the language server needs the `lsp` extra (pygls)")

from tests.lsp_client import SERVER_COMMAND, LspClient, apply_edits, cpu_seconds  # noqa: E402

TRAIN = textwrap.dedent(
    """\
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder  # (its items decode files: the loader's cost)

    def train(model, dataset, optimizer, device="cuda"):
        loader = DataLoader(dataset, batch_size=32, shuffle=True)
        model.to(device)
        for epoch in range(3):
            for x, y in loader:
                x = x.to(device)  # gpulint: ignore[GL104]
                y = y.to(device)
                loss = model(x, y)
                loss.backward()
                optimizer.step()
                print(loss.item())


    if __name__ == "__main__":
        model, optimizer = build()
        train(model, ImageFolder("data"), optimizer)
    """
)
NOTEBOOKS = {"notebookDocument": {"synchronization": {}}}  # notebook sync is only advertised to clients that have it
RESOLVING = {"textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}, "dataSupport": True}}}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project whose configuration shows hints (the script's loader findings, GL101 and GL102,
    are held back as hints by default) and turns GL302 off (the script's per-step print would be one)."""
    root = tmp_path_factory.mktemp("project")
    (root / "pyproject.toml").write_text('[tool.gpulint]\nshow-hints = true\nignore = ["GL302"]\n')
    return root


def _start(project: Path, capabilities: dict | None = None, *options: str):
    client = LspClient(command=[*SERVER_COMMAND, *options] if options else None, cwd=project)
    try:
        result = client.initialize(project, capabilities)
    except BaseException:
        client.close()
        raise
    return client, result


@pytest.fixture(scope="module")
def server(project):
    """A client that cannot resolve code actions (edits come with the actions) and syncs notebooks."""
    client, result = _start(project, NOTEBOOKS)
    client.capabilities = result["capabilities"]
    yield client
    client.close()


@pytest.fixture(scope="module")
def resolving_server(project):
    client, _ = _start(project, RESOLVING)
    yield client
    client.close()


def cli_findings(path: Path, *args: str) -> list[tuple[str, int, int]]:
    """(code, 0-based line, 0-based column) as `gpulint --format json` reports them."""
    run = subprocess.run(
        [sys.executable, "-m", "gpulint", str(path), "--format", "json", "--no-cache", *args],
        cwd=path.parent,
        capture_output=True,
        text=True,
    )
    assert run.returncode in (0, 1), run.stderr
    return sorted((f["code"], f["location"]["row"] - 1, f["location"]["column"] - 1) for f in json.loads(run.stdout))


def found(diagnostics: list[dict]) -> list[tuple[str, int, int]]:
    return sorted((d["code"], d["range"]["start"]["line"], d["range"]["start"]["character"]) for d in diagnostics)


def _actions(client: LspClient, uri: str, diagnostic: dict, only: list[str] | None = None) -> list[dict]:
    context = {"diagnostics": [diagnostic], **({"only": only} if only else {})}
    return client.request(
        "textDocument/codeAction", {"textDocument": {"uri": uri}, "range": diagnostic["range"], "context": context}
    )


def test_initialize_advertises_what_the_server_does(server):
    capabilities = server.capabilities
    assert capabilities["codeActionProvider"]["resolveProvider"] is True
    assert "quickfix" in capabilities["codeActionProvider"]["codeActionKinds"]
    assert "source.fixAll.gpulint" in capabilities["codeActionProvider"]["codeActionKinds"]
    assert capabilities["hoverProvider"]
    assert capabilities["textDocumentSync"]["change"] == 2  # incremental
    assert capabilities["notebookDocumentSync"]["notebookSelector"][0]["cells"] == [{"language": "python"}]


def test_diagnostics_match_the_command_line_with_config_and_suppressions(server, project):
    path = project / "same_as_cli.py"
    path.write_text(TRAIN)
    uri = server.open(path, TRAIN)
    diagnostics = server.diagnostics(uri, version=1)
    assert found(diagnostics) == cli_findings(path)
    codes = {d["code"] for d in diagnostics}
    assert {"GL101", "GL102", "GL104", "GL201"} <= codes
    assert "GL302" not in codes  # ignored by pyproject.toml
    assert all(d["range"]["start"]["line"] != 9 for d in diagnostics)  # the suppressed line
    by_code = {d["code"]: d for d in diagnostics}
    assert by_code["GL201"]["source"] == "gpulint" and by_code["GL201"]["severity"] == 2
    # (a shown hint is information, not a warning)
    assert by_code["GL102"]["source"] == "gpulint" and by_code["GL102"]["severity"] == 3
    assert by_code["GL102"]["codeDescription"]["href"].endswith("GL102.md")


def test_quick_fix_applies_and_the_finding_is_gone(server, project):
    path = project / "quick_fix.py"
    path.write_text(TRAIN)
    uri = server.open(path, TRAIN)
    diagnostic = next(d for d in server.diagnostics(uri, version=1) if d["code"] == "GL102")
    actions = _actions(server, uri, diagnostic)
    # GL101's fix is on the same line: GL102's own action is the one that names GL102 alone
    fix = next(a for a in actions if a["title"].endswith("(GL102)"))
    assert fix["kind"] == "quickfix" and "unsafe" not in fix["title"]
    fixed = apply_edits(TRAIN, fix["edit"]["changes"][uri])
    assert "pin_memory=True" in fixed

    # the same result as the command line's fix of this rule
    run = subprocess.run(
        [sys.executable, "-m", "gpulint", "-", "--stdin-filename", str(path), "--fix", "--select", "GL102"],
        input=TRAIN,
        capture_output=True,
        text=True,
        cwd=project,
    )
    assert run.stdout == fixed

    server.replace_text(uri, fixed, version=2)
    after = server.diagnostics(uri, version=2)
    assert "GL102" not in {d["code"] for d in after}
    assert {"GL101", "GL104", "GL201"} <= {d["code"] for d in after}


def test_unsafe_fix_is_labelled_and_not_preferred(server, project):
    path = project / "unsafe.py"
    uri = server.open(path, TRAIN)
    diagnostic = next(d for d in server.diagnostics(uri, version=1) if d["code"] == "GL101")
    fix = next(a for a in _actions(server, uri, diagnostic) if "(GL101)" in a["title"])
    assert "unsafe" in fix["title"] and not fix.get("isPreferred")
    fixed = apply_edits(TRAIN, fix["edit"]["changes"][uri])
    assert "num_workers=" in fixed and "import os" in fixed
    compile(fixed, "fixed.py", "exec")


def _fixes(actions: list[dict]) -> list[dict]:
    return [a for a in actions if a["kind"] == "quickfix" and "suppress" not in a["title"]]


@pytest.fixture(scope="module")
def every_rule(project) -> Path:
    """A folder of the project with its own configuration: every default rule, GL302 included, and
    hints shown (GL302's findings, and GL104's where the step reads the loss back anyway, are hints)."""
    folder = project / "every_rule"
    folder.mkdir()
    (folder / "pyproject.toml").write_text("[tool.gpulint]\nshow-hints = true\n")
    return folder


def test_fixes_of_one_line_are_one_action_and_never_repeated(server, every_rule):
    """`x, y = x.to(device), y.to(device)`: one GL104 finding for the statement's two copies, with one
    fix for both (two, each of half the line, would each lose the other): one action, written as
    `--fix` writes the line."""
    text = TRAIN.replace("            x = x.to(device)  # gpulint: ignore[GL104]\n", "").replace(
        "            y = y.to(device)\n", "            x, y = x.to(device), y.to(device)\n"
    )
    assert "x, y = x.to(device), y.to(device)" in text
    path = every_rule / "one_line.py"
    uri = server.open(path, text)
    copies = [d for d in server.diagnostics(uri, version=1) if d["code"] == "GL104"]
    assert len(copies) == 1
    actions = _fixes(_actions(server, uri, copies[0]))
    titles = [a["title"] for a in actions]
    assert len(actions) == 1 and "(GL104)" in titles[0], titles
    fixed = apply_edits(text, actions[0]["edit"]["changes"][uri])
    line = "            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
    assert line in fixed
    run = subprocess.run(
        [sys.executable, "-m", "gpulint", "-", "--stdin-filename", str(path), "--fix"],
        input=text,
        capture_output=True,
        text=True,
        cwd=every_rule,
    )
    assert line in run.stdout


def test_two_rules_with_the_same_fix_are_one_action(server, every_rule):
    """GL302 and GL201 on `print(loss.item())` both guard it: one action listing both, not two."""
    text = TRAIN.replace("        for x, y in loader:\n", "        for step, (x, y) in enumerate(loader):\n")
    assert text != TRAIN
    uri = server.open(every_rule / "same_fix.py", text)
    diagnostic = next(d for d in server.diagnostics(uri, version=1) if d["code"] == "GL201")
    actions = _fixes(_actions(server, uri, diagnostic))
    assert len(actions) == 1, [a["title"] for a in actions]
    assert "GL201" in actions[0]["title"] and "GL302" in actions[0]["title"]
    assert {d["code"] for d in actions[0]["diagnostics"]} == {"GL201", "GL302"}
    fixed = apply_edits(text, actions[0]["edit"]["changes"][uri])
    assert fixed.count("if step %") == 1 and "print(loss.item())" in fixed


def test_suppress_on_this_line(server, project):
    path = project / "suppress.py"
    uri = server.open(path, TRAIN)
    diagnostic = next(d for d in server.diagnostics(uri, version=1) if d["code"] == "GL201")
    action = next(a for a in _actions(server, uri, diagnostic) if a["title"] == "gpulint: suppress GL201 on this line")
    suppressed = apply_edits(TRAIN, action["edit"]["changes"][uri])
    assert "print(loss.item())  # gpulint: ignore[GL201]" in suppressed
    assert suppressed.count("\n") == TRAIN.count("\n")
    server.replace_text(uri, suppressed, version=2)
    assert "GL201" not in {d["code"] for d in server.diagnostics(uri, version=2)}


def test_incremental_change_relints(server, project):
    path = project / "incremental.py"
    uri = server.open(path, TRAIN)
    assert "GL102" in {d["code"] for d in server.diagnostics(uri, version=1)}
    # type `, pin_memory=True` before the closing parenthesis of line 6
    line = TRAIN.splitlines()[5]
    column = line.index("shuffle=True") + len("shuffle=True")
    server.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [
                {
                    "range": {"start": {"line": 5, "character": column}, "end": {"line": 5, "character": column}},
                    "text": ", pin_memory=True",
                }
            ],
        },
    )
    assert "GL102" not in {d["code"] for d in server.diagnostics(uri, version=2)}


def test_positions_are_utf16_code_units(server, project):
    text = TRAIN.replace("            print(loss.item())", '            print("🚀 loss", loss.item())')
    uri = server.open(project / "emoji.py", text)
    diagnostic = next(d for d in server.diagnostics(uri, version=1) if d["code"] == "GL201")
    line = text.splitlines()[diagnostic["range"]["start"]["line"]]
    column_in_code_points = line.index("loss.item()")
    assert diagnostic["range"]["start"]["character"] == column_in_code_points + 1  # the rocket is 2 UTF-16 units


def test_hover_explains_the_rule(server, project):
    uri = server.open(project / "hover.py", TRAIN)
    diagnostic = next(d for d in server.diagnostics(uri, version=1) if d["code"] == "GL102")
    hover = server.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": diagnostic["range"]["start"]}
    )
    assert hover["contents"]["kind"] == "markdown"
    sections = hover["contents"]["value"].split("\n---\n")  # GL101 and GL102 report the same call
    assert [s.strip().splitlines()[0] for s in sections] == ["# GL101 dataloader-serial", "# GL102 dataloader-unpinned"]
    assert "## Why it is slow" in sections[1] and "GL102.md" in sections[1]
    # on a rule id inside a suppression comment
    column = TRAIN.splitlines()[9].index("GL104") + 2
    hover = server.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 9, "character": column}}
    )
    assert hover["contents"]["value"].startswith("# GL104 blocking-h2d-copy")
    # on plain code: nothing
    assert (
        server.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 2}})
        is None
    )


def test_fix_all_on_request_matches_gpulint_fix(server, project):
    path = project / "fix_all.py"
    uri = server.open(path, TRAIN)
    server.diagnostics(uri, version=1)
    actions = server.request(
        "textDocument/codeAction",
        {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
            "context": {"diagnostics": [], "only": ["source.fixAll"]},
        },
    )
    assert [a["kind"] for a in actions] == ["source.fixAll.gpulint"]
    fixed = apply_edits(TRAIN, actions[0]["edit"]["changes"][uri])
    run = subprocess.run(
        [sys.executable, "-m", "gpulint", "-", "--stdin-filename", str(path), "--fix"],
        input=TRAIN,
        capture_output=True,
        text=True,
        cwd=project,
    )
    assert fixed == run.stdout and fixed != TRAIN


def test_resolving_client_gets_edits_on_resolve(resolving_server, project):
    client = resolving_server
    uri = client.open(project / "resolve.py", TRAIN)
    # (the only fix on its line: a line with several gets its fixes' edits with the actions)
    diagnostic = next(d for d in client.diagnostics(uri, version=1) if d["code"] == "GL104")
    actions = _actions(client, uri, diagnostic)
    fix = next(a for a in actions if "GL104" in a["title"] and "suppress" not in a["title"])
    assert "edit" not in fix or fix["edit"] is None
    resolved = client.request("codeAction/resolve", fix)
    assert "y = y.to(device, non_blocking=True)" in apply_edits(TRAIN, resolved["edit"]["changes"][uri])
    # fix-all is offered with the quick fixes when it costs nothing until chosen
    assert any(a["kind"] == "source.fixAll.gpulint" for a in actions)
    # an action for an older version of the document resolves to no edit
    client.replace_text(uri, TRAIN + "\n", version=2)
    client.diagnostics(uri, version=2)
    assert client.request("codeAction/resolve", fix).get("edit") is None


def test_notebook_cells_get_their_own_diagnostics_and_fixes(server, project):
    notebook_uri = (project / "train.ipynb").as_uri()
    cells = [
        (
            "import torch\nfrom torch.utils.data import DataLoader\nfrom torchvision.datasets import ImageFolder\n"
            'dataset = ImageFolder("data")\n',
            2,
        ),
        ("# Training\n", 1),  # markdown
        (
            "loader = DataLoader(dataset, batch_size=8)\nmodel.cuda()\nfor x, y in loader:\n"
            "    loss = model(x.cuda(), y)\n    loss.backward()\n    opt.step()\n",
            2,
        ),
    ]
    cell_uris = [f"{notebook_uri}#cell{i}" for i in range(len(cells))]
    server.notify(
        "notebookDocument/didOpen",
        {
            "notebookDocument": {
                "uri": notebook_uri,
                "notebookType": "jupyter-notebook",
                "version": 1,
                "cells": [{"kind": kind, "document": u} for (_, kind), u in zip(cells, cell_uris, strict=True)],
            },
            "cellTextDocuments": [
                {"uri": u, "languageId": "python" if kind == 2 else "markdown", "version": 1, "text": text}
                for (text, kind), u in zip(cells, cell_uris, strict=True)
                if kind == 2
            ],
        },
    )
    by_cell = {}
    for _ in range(2):
        params = server.wait_for("textDocument/publishDiagnostics", lambda p: p["uri"] in cell_uris)
        by_cell[params["uri"]] = params["diagnostics"]
    assert by_cell[cell_uris[0]] == []
    training = by_cell[cell_uris[2]]
    assert {"GL101", "GL102"} <= {d["code"] for d in training}
    gl102 = next(d for d in training if d["code"] == "GL102")
    assert gl102["range"]["start"]["line"] == 0  # relative to the cell
    fix = next(
        a for a in _actions(server, cell_uris[2], gl102) if "GL102" in a["title"] and "suppress" not in a["title"]
    )
    fixed = apply_edits(cells[2][0], fix["edit"]["changes"][cell_uris[2]])
    assert fixed.startswith("loader = DataLoader(dataset, batch_size=8, pin_memory=True)\n")


def test_bad_configuration_is_shown_once_and_said_on_the_document_instead_of_findings(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nselect = ["GL9999"]\n')
    client, _ = _start(tmp_path)
    try:
        uri = client.open(tmp_path / "train.py", TRAIN)
        message = client.wait_for("window/showMessage")
        assert message["type"] == 1 and "GL9999" in message["message"]
        [diagnostic] = client.diagnostics(uri, version=1)
        reason = f"{tmp_path / 'pyproject.toml'}: unknown rule selector 'GL9999' (see `gpulint rules`)"
        assert diagnostic["message"] == f"gpulint: not linted: {reason}"
    finally:
        client.close()


def test_close_clears_and_shutdown_exits_cleanly(project):
    client = LspClient(command=[sys.executable, "-m", "gpulint", "server"], cwd=project)  # as editors start it
    client.initialize(project)
    uri = client.open(project / "close.py", TRAIN)
    assert client.diagnostics(uri, version=1)
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri) == []
    assert client.shutdown() == 0


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the worker process through /proc")
def test_closing_the_client_ends_the_worker_in_the_middle_of_a_lint(tmp_path):
    """What a test that fails in the middle of a lint leaves behind: closing the client kills the
    server's worker with it, which would otherwise lint on, orphaned, to the end of its text."""
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\nmax-syntax-nodes = 100000000\n")
    client, _ = _start(tmp_path, None, "--allow-local-rules")  # trusted: the project may raise its budget
    try:
        uri = client.open(tmp_path / "train.py", TRAIN)
        assert client.diagnostics(uri, version=1)
        worker = client.worker_pid()
        idle = cpu_seconds(worker)
        client.replace_text(uri, TRAIN * 1200, version=2)  # a lint of about a minute on a quiet machine
        deadline = time.monotonic() + 60
        while cpu_seconds(worker) - idle < 1.0:  # it is linting version 2
            assert time.monotonic() < deadline, "the worker never got to linting version 2"
            time.sleep(0.05)
    finally:
        client.close()
    deadline = time.monotonic() + 30
    while _running(worker):
        assert time.monotonic() < deadline, "the worker outlived its server"
        time.sleep(0.05)


def test_without_pygls_the_command_says_which_extra_to_install(monkeypatch, capsys):
    import gpulint.server

    monkeypatch.delitem(sys.modules, "gpulint.server.lsp", raising=False)
    # What an install without the `lsp` extra has.  Submodules an earlier test imported are blocked
    # too: an import finds `pygls.lsp.server` in sys.modules without looking at `pygls`.
    for name in [name for name in sys.modules if name == "pygls" or name.startswith("pygls.")] or ["pygls"]:
        monkeypatch.setitem(sys.modules, name, None)
    assert gpulint.server.main() == 2
    assert "pip install 'gpulint[lsp]'" in capsys.readouterr().err


def test_documents_that_are_not_python_are_left_alone(server, project):
    text = "Training notes: torch DataLoader(dataset) without workers is slow.\n"
    uri = server.open(project / "notes.md", text, language="markdown")
    assert server.diagnostics(uri, version=1) == []


def test_rapid_edits_are_coalesced_and_only_the_last_text_is_published(server, project):
    """1,000 edits sent as fast as a client can: the server lints the latest text, not each
    version in turn (that took 15 s), and never publishes a result for a text already replaced."""
    uri = server.open(project / "typing.py", TRAIN)
    first = server.diagnostics(uri, version=1)
    where = {"line": 10, "character": 0}
    for version in range(2, 1002):  # insert a comment line, remove it again, ...
        if version % 2 == 0:
            change = {"range": {"start": where, "end": where}, "text": "# typed\n"}
        else:
            change = {"range": {"start": where, "end": {"line": 11, "character": 0}}, "text": ""}
        server.notify(
            "textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}
        )
    published = []
    while not published or published[-1]["version"] != 1001:
        published.append(server.wait_for("textDocument/publishDiagnostics", lambda p: p["uri"] == uri))
    assert len(published) <= 3, [p["version"] for p in published]
    assert found(published[-1]["diagnostics"]) == found(first)  # the last text is the first one again


def test_an_internal_error_is_answered_without_a_traceback(monkeypatch):
    import asyncio

    from gpulint.server import lsp

    def broken(self, params):
        raise RuntimeError("boom in /home/someone/secret_project/train.py")

    monkeypatch.setattr(lsp.GpulintServer, "hover", broken)
    server = lsp.create_server()
    sent: list[bytes] = []

    class Writer:
        def write(self, data: bytes) -> None:
            sent.append(data)

        def close(self) -> None:
            pass

    server.protocol.set_writer(Writer())
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "textDocument/hover",
        "params": {"textDocument": {"uri": "file:///x.py"}, "position": {"line": 0, "character": 0}},
    }

    async def ask() -> None:
        server.protocol.handle_message(server.protocol.structure_message(request))
        for _ in range(200):
            if sent:
                return
            await asyncio.sleep(0.01)

    asyncio.run(ask())
    [frame] = sent
    response = json.loads(frame.split(b"\r\n\r\n", 1)[1])
    assert response["id"] == 1 and response["error"]["code"] == -32603
    assert "data" not in response["error"] or response["error"]["data"] is None
    assert "secret_project" not in frame.decode() and "Traceback" not in frame.decode()


def test_a_lint_that_fails_is_one_diagnostic_and_the_requests_waiting_for_it_are_answered(monkeypatch, tmp_path):
    """A bug while linting one document (here: one planted in `_lint`) used to leave it without
    diagnostics, and its hover waiting for the time limit: now the document says so and the
    requests get their (empty) answers at once."""
    import asyncio

    from gpulint.server import lsp

    async def broken(self, owner):
        raise RuntimeError("boom")

    monkeypatch.setattr(lsp.GpulintServer, "_lint", broken)
    server = lsp.create_server()
    sent: list[dict] = []

    class Writer:
        def write(self, data: bytes) -> None:
            sent.append(json.loads(data.split(b"\r\n\r\n", 1)[1]))

        def close(self) -> None:
            pass

    server.protocol.set_writer(Writer())
    uri = (tmp_path / "train.py").as_uri()
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}},
        },
        {
            "jsonrpc": "2.0",
            "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": TRAIN}},
        },
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": {"line": 5, "character": 20}},
        },
    ]

    async def answer(request_id: int) -> None:
        for _ in range(6000):  # a condition, checked every 10 ms for up to a minute
            if any(m.get("id") == request_id for m in sent):
                return
            await asyncio.sleep(0.01)

    async def drive() -> None:
        for message in messages:
            server.protocol.handle_message(server.protocol.structure_message(message))
        await answer(1)
        # A request that comes after the failure is answered too, not kept waiting for a lint.
        server.protocol.handle_message(server.protocol.structure_message({**messages[2], "id": 2}))
        await answer(2)

    asyncio.run(drive())
    [published] = [m["params"] for m in sent if m.get("method") == "textDocument/publishDiagnostics"]
    assert published["uri"] == uri
    assert [d["message"] for d in published["diagnostics"]] == [f"gpulint: not linted: {lsp.INTERNAL_ERROR[9:]}"]
    answers = [m for m in sent if m.get("id") in (1, 2)]
    assert [(m["id"], m["result"]) for m in answers] == [(1, None), (2, None)]


def test_a_helper_opened_alone_gets_the_finding_its_projects_loop_gives_it(tmp_path):
    """The editor lints a document with its view of the whole project, as `gpulint .` does: a
    training loop in train.py (not open) makes helpers.py's print per-step."""
    # (GL302 is held back as a hint by default: this project shows hints)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n[tool.gpulint]\nshow-hints = true\n")
    helpers = "import torch\n\n\ndef log_loss(loss):\n    print(loss.item())\n"
    (tmp_path / "helpers.py").write_text(helpers)
    (tmp_path / "train.py").write_text(
        "from helpers import log_loss\n\nfor batch in loader:\n    loss = model(batch.cuda()).sum()\n"
        "    loss.backward()\n    optimizer.step()\n    log_loss(loss)\n"
    )
    client, _ = _start(tmp_path)
    try:
        uri = client.open(tmp_path / "helpers.py", helpers)
        diagnostics = client.diagnostics(uri, version=1)
        assert ("GL302", 4, 4) in found(diagnostics)
        assert found(diagnostics) == cli_findings(tmp_path / "helpers.py")
        # The document as the editor holds it, not as saved: the print gone, the finding gone.
        client.replace_text(uri, helpers.replace("print(loss.item())", "return loss"), version=2)
        assert client.diagnostics(uri, version=2) == []
    finally:
        client.close()
