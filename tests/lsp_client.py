"""A small Language Server Protocol client for tests and benchmarks: it starts the real server
process and speaks JSON-RPC to it over its stdin and stdout, as an editor does.

The server runs in a process group of its own, which its lint worker joins: `close` (or leaving
a `with` block) kills the whole group, so a test that fails midway leaves no worker linting on.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

SERVER_COMMAND = [sys.executable, "-m", "gpulint.server"]


class LspError(Exception):
    pass


class LspClient:
    def __init__(self, command: list[str] | None = None, cwd: Path | None = None) -> None:
        self.process = subprocess.Popen(
            command or SERVER_COMMAND,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=hasattr(os, "killpg"),
        )
        self._next_id = 0
        self._responses: dict[int, queue.Queue] = {}
        self._lock = threading.Lock()
        self.notifications: queue.Queue = queue.Queue()
        self.server_requests: list[dict] = []
        self._stderr: list[bytes] = []
        self._reader = threading.Thread(target=self._read_forever, daemon=True)
        self._reader.start()
        # Drained all along, so a chatty server never blocks on a full pipe.
        threading.Thread(
            target=lambda: self._stderr.extend(iter(self.process.stderr.readline, b"")), daemon=True
        ).start()

    def __enter__(self) -> LspClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- framing ----------------------------------------------------------------------------
    def _send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def send_raw(self, data: bytes) -> None:
        """Write bytes to the server as they are (a test's malformed frame)."""
        with self._lock:
            self.process.stdin.write(data)
            self.process.stdin.flush()

    def _read_message(self) -> dict | None:
        length = None
        while True:
            line = self.process.stdout.readline()
            if not line:
                return None
            line = line.strip()
            if not line:
                break
            name, _, value = line.decode("ascii").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        if length is None:
            raise LspError("a message without Content-Length")
        return json.loads(self.process.stdout.read(length))

    def _read_forever(self) -> None:
        while True:
            message = self._read_message()
            if message is None:
                return
            if "id" in message and "method" in message:  # a request from the server: answer it
                self.server_requests.append(message)
                self._send({"id": message["id"], "result": None})
            elif "id" in message:
                with self._lock:
                    box = self._responses.get(message["id"])
                if box is not None:
                    box.put(message)
            else:
                self.notifications.put(message)

    # -- the protocol -----------------------------------------------------------------------
    def request(self, method: str, params: dict | None = None, timeout: float = 60.0):
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            box: queue.Queue = queue.Queue()
            self._responses[request_id] = box
        self._send({"id": request_id, "method": method, "params": params})
        try:
            response = box.get(timeout=timeout)
        except queue.Empty:
            raise LspError(f"no answer to {method} within {timeout} s; stderr: {self.stderr_so_far()}") from None
        if "error" in response:
            raise LspError(f"{method}: {response['error']}")
        return response.get("result")

    def notify(self, method: str, params: dict | None = None) -> None:
        self._send({"method": method, "params": params})

    def wait_for(self, method: str, match=lambda params: True, timeout: float = 60.0) -> dict:
        """The params of the next notification `method` that `match`es (others are dropped)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LspError(f"no {method} notification within {timeout} s; stderr: {self.stderr_so_far()}")
            try:
                message = self.notifications.get(timeout=remaining)
            except queue.Empty:
                continue
            if message.get("method") == method and match(message.get("params")):
                return message["params"]

    def diagnostics(self, uri: str, version: int | None = None, timeout: float = 60.0) -> list[dict]:
        """The next diagnostics published for `uri` (for that document version, when given)."""
        params = self.wait_for(
            "textDocument/publishDiagnostics",
            lambda p: p["uri"] == uri and (version is None or p.get("version") == version),
            timeout,
        )
        return params["diagnostics"]

    def initialize(self, root: Path, capabilities: dict | None = None) -> dict:
        result = self.request(
            "initialize",
            {"processId": None, "rootUri": root.as_uri(), "capabilities": capabilities or {}},
        )
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: str, version: int = 1, language: str = "python") -> str:
        uri = path.as_uri()
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": language, "version": version, "text": text}},
        )
        return uri

    def replace_text(self, uri: str, text: str, version: int) -> None:
        """A didChange that sends the whole new text."""
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )

    def shutdown(self, timeout: float = 30.0) -> int:
        """shutdown, then exit: the server's exit code."""
        self.request("shutdown")
        self.notify("exit")
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self.close()

    def close(self) -> None:
        """Kill the server and every process it started (its lint worker, which a killed server
        would otherwise leave linting until its own limits end it)."""
        if hasattr(os, "killpg"):
            with contextlib.suppress(ProcessLookupError, PermissionError):  # (nothing of the group is left)
                os.killpg(self.process.pid, signal.SIGKILL)
        elif self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        try:
            self.process.stdin.close()
        except OSError:
            pass

    def stderr_so_far(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")[-2000:]

    def worker_pid(self) -> int:
        """The server's lint worker, its one child process (Linux: read from /proc)."""
        pid = self.process.pid
        [worker] = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        return worker


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used so far, user and system (Linux: read from /proc).  It never
    exceeds the time the process has been running, however loaded the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def apply_edits(text: str, edits: list[dict]) -> str:
    """Apply LSP TextEdits (UTF-16 positions, as the client advertised by default) to `text`."""

    def offset(position: dict) -> int:
        lines = text.splitlines(keepends=True)
        line = position["line"]
        if line >= len(lines):
            return len(text)
        start = sum(len(x) for x in lines[:line])
        units, index = 0, 0
        content = lines[line]
        while units < position["character"] and index < len(content):
            units += 2 if ord(content[index]) > 0xFFFF else 1
            index += 1
        return start + index

    for edit in sorted(
        edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]), reverse=True
    ):
        start, end = offset(edit["range"]["start"]), offset(edit["range"]["end"])
        text = text[:start] + edit["newText"] + text[end:]
    return text
