"""The language server's stdio transport: reading LSP frames (`Content-Length: N` headers, a blank
line, N bytes of JSON) so that one bad frame never leaves the server deaf, and reading their JSON
so that one deep message cannot end it.

pygls's own reader waits for a `Content-Length` header before it reads anything else, so one frame
without it (or with a value that is not a number) makes it skip every later frame as well, until
stdin closes.  Here a malformed frame costs one line in the log and the frame itself: the reader
looks for the next `Content-Length:` header (as tower-lsp's codec does) and goes on from there.

`json.loads`, and the protocol library that turns its result into typed messages, recurse once or
more per level of nesting: a 2.4 KB notification nesting arrays 1,000 deep raised RecursionError
and ended the server.  A message is read with `datajson.load_json`, which measures the nesting
first, without recursion, and refuses one deeper than MAX_JSON_DEPTH; `top_level_scalar` still
reads such a request's `id`, so that it can be answered.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import BinaryIO

# Headers are short ("Content-Length: 123", "Content-Type: ..."); a longer "line" is a body being
# skipped, which is read in pieces of this size, never as one line.
_MAX_HEADER_LINE = 64 * 1024
_MAX_HEADERS = 32
_BODY_CHUNK = 1 << 20
_CONTENT_LENGTH = re.compile(rb"content-length:", re.IGNORECASE)
_LENGTH_VALUE = re.compile(rb"\s*(\d{1,15})\s*")

# serde_json's default (the limit of the Rust language servers built on tower-lsp).  LSP's own
# messages nest a handful of levels; what they carry from the editor (notebook metadata,
# settings) a few dozen at most.  At 128 levels the protocol library still structures a message
# with room to spare on Python's default recursion limit.
MAX_JSON_DEPTH = 128
# A string (its escapes included) or a bracket: where a JSON text's members are, and how deep.
# UTF-8 bytes of other characters never equal a quote, a backslash or a bracket.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRUCTURE = re.compile(_STRING + rb"|[][{}]")
_OPENING, _CLOSING = frozenset(b"[{"), frozenset(b"]}")

log = logging.getLogger(__name__)


def read_frames(stream: BinaryIO) -> Iterator[bytes]:
    """The bodies of the frames on `stream`, until it ends.  A frame whose headers have no valid
    Content-Length is logged and skipped, with whatever follows it up to the next header."""
    pending: bytes | None = None  # a header line found while skipping, to be read first
    while True:
        headers: list[bytes] = []
        while True:
            line = pending if pending is not None else stream.readline(_MAX_HEADER_LINE)
            pending = None
            if not line:
                return
            if line in (b"\r\n", b"\n"):
                if headers:
                    break
                continue  # a blank line between frames
            headers.append(line)
            if len(headers) > _MAX_HEADERS:  # no blank line: not headers at all
                break
        length = _content_length(headers) if len(headers) <= _MAX_HEADERS else None
        if length is None:
            log.warning(
                "gpulint server: skipped a message without a valid Content-Length header (%s)",
                b" ".join(h.strip() for h in headers)[:200].decode("ascii", "backslashreplace"),
            )
            pending = _next_header(stream)
            continue
        body = _read_exactly(stream, length)
        if body is None:
            return
        yield body


def _content_length(headers: list[bytes]) -> int | None:
    for header in headers:
        name, colon, value = header.partition(b":")
        if colon and name.strip().lower() == b"content-length":
            match = _LENGTH_VALUE.fullmatch(value)
            return int(match[1]) if match else None
    return None


def _next_header(stream: BinaryIO) -> bytes | None:
    """Skip to the next `Content-Length:` header (the rest of the bad frame's body, which has no
    line end of its own, is read as part of its line); the header from there, or None at the end."""
    carried = b""  # the end of the last piece, in case a header starts in it
    while True:
        piece = stream.readline(_MAX_HEADER_LINE)
        if not piece:
            return None
        text = carried + piece
        match = _CONTENT_LENGTH.search(text)
        if match is not None:
            header = text[match.start() :]
            return header if header.endswith(b"\n") else header + stream.readline(_MAX_HEADER_LINE)
        carried = b"" if piece.endswith(b"\n") else text[-len(b"content-length:") :]


def _read_exactly(stream: BinaryIO, length: int) -> bytes | None:
    """`length` bytes, read in pieces (memory grows with what arrives, not with what the header
    announced); None when the stream ends first."""
    chunks, left = [], length
    while left > 0:
        chunk = stream.read(min(left, _BODY_CHUNK))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def top_level_scalar(data: bytes, name: str) -> str | int | float | None:
    """The value of the member `name` of the object in `data` when it is a string or a number (as a
    JSON-RPC message's `id` and `method` are), found without parsing the rest of `data`; None
    when there is no such member or it holds something else."""
    member = re.compile(re.escape(json.dumps(name).encode()) + rb"\s*:\s*(-?[0-9][-+.eE0-9]*|" + _STRING + rb")")
    for match, depth in _structure(data):
        found = member.match(data, match.start()) if depth == 1 else None
        if found is not None:
            try:
                value = json.loads(found[1])
            except ValueError:
                return None
            return value if isinstance(value, (str, int, float)) else None
    return None


def _structure(data: bytes) -> Iterator[tuple[re.Match[bytes], int]]:
    """Each string and bracket in `data`, with its depth: how many arrays and objects are open
    around it (a bracket's own not counted).  A loop, not a recursion, whatever the nesting."""
    depth = 0
    for match in _STRUCTURE.finditer(data):
        first = data[match.start()]
        if first in _CLOSING:
            depth -= 1
        yield match, depth
        if first in _OPENING:
            depth += 1
