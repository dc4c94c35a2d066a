"""Load a page in real headless Chromium and see what a person would: console errors and failed
loads, values computed in the page, and a screenshot (decoded here to check it is not blank).

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON
messages ending in NUL on file descriptors 3 and 4), which needs only the standard library.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import zlib

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in (os.environ.get("CHROMIUM"), *CANDIDATES):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class Page:
    """One page of a fresh headless Chromium; use as a context manager."""

    def __init__(self, binary: str, width: int = 1000, height: int = 900) -> None:
        self.profile = tempfile.TemporaryDirectory(prefix="gpulint-chromium-", ignore_cleanup_errors=True)
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def descriptors() -> None:  # the browser reads commands on fd 3 and answers on fd 4
            commands, answers = fcntl.fcntl(to_browser, fcntl.F_DUPFD, 10), fcntl.fcntl(from_browser, fcntl.F_DUPFD, 10)
            os.dup2(commands, 3)
            os.dup2(answers, 4)

        self.process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-extensions",
                "--remote-debugging-pipe",
                f"--user-data-dir={self.profile.name}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            preexec_fn=descriptors,
            pass_fds=(3, 4),
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        try:
            self._open_page(width, height)
        except BaseException:
            self.__exit__()  # (a browser that did not answer is not left running)
            raise

    def _open_page(self, width: int, height: int) -> None:
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc_info) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)  # the browser and its renderer processes
        self.process.wait()
        os.close(self._write)
        os.close(self._read)
        self.profile.cleanup()

    def call(self, method: str, session: bool = False, timeout: float = 60.0, **params) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            readable, _, _ = select.select([self._read], [], [], max(0.0, deadline - time.monotonic()))
            if not readable:  # (a browser that hangs fails the test at the deadline)
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def load(self, url: str, timeout: float = 60.0) -> None:
        self.call("Page.navigate", session=True, url=url)
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._receive(deadline))

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        return result["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads (network, CSP) seen so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                found.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(params["entry"].get("text", ""))
        return found

    def screenshot(self) -> bytes:
        """The whole page as PNG."""
        result = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True)
        return base64.b64decode(result["data"])


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat, header = 8, b"", None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and not interlace, header
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line) if channels == 3 else bytes(b for i, b in enumerate(line) if i % 4 != 3))
        previous = line
    return width, height, rows


# What the DevTools Performance panel does with a trace file it is given (Load profile): its trace
# engine (models/trace, bundled in every Chromium) parses the events, builds each thread's call
# tree, and reports every process and thread it would draw, with the slices on each.
_DEVTOOLS = "devtools://devtools/bundled/devtools_app.html"
_LOAD_TRACE = """
(async () => {
  const Trace = await import('./models/trace/trace.js');
  const file = JSON.parse(%s);
  const model = Trace.TraceModel.Model.createWithAllHandlers();
  await model.parse(file.traceEvents, {metadata: {}, isFreshRecording: false});
  const data = model.parsedTrace(0).data;
  const threads = [];
  for (const [pid, process] of data.Renderer.processes) {
    for (const [tid, thread] of process.threads) {
      threads.push({
        pid, tid, name: thread.name,
        roots: thread.tree ? thread.tree.roots.size : 0,
        slices: thread.entries.map(e => ({name: e.name, ts: e.ts, dur: e.dur || 0})),
      });
    }
  }
  const bounds = data.Meta.traceBounds;
  return JSON.stringify({generic: data.Meta.traceIsGeneric, min: bounds.min, max: bounds.max, threads});
})()
"""


def load_trace(binary: str, trace: str) -> dict:
    """Load a Chrome trace (the JSON text) as the DevTools Performance panel does, in headless
    Chromium: {"generic", "min", "max" (the trace's bounds, microseconds), "threads": [{"pid",
    "tid", "name", "roots", "slices": [{"name", "ts", "dur"}]}], "errors": [...]}."""
    with Page(binary) as page:
        page.load(_DEVTOOLS)
        reply = page.call(
            "Runtime.evaluate",
            session=True,
            expression=_LOAD_TRACE % json.dumps(trace),
            awaitPromise=True,
            returnByValue=True,
            timeout=120.0,
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"the trace engine failed: {reply['exceptionDetails']}")
        loaded = json.loads(reply["result"]["value"])
        loaded["errors"] = page.errors()
        return loaded
