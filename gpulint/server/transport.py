"""The language server's stdio transport: reading LSP frames (`Content-Length: N` headers, a blank
line, N bytes of JSON) so that one bad frame never leaves the server deaf.

pygls's own reader waits for a `Content-Length` header before it reads anything else, so one frame
without it (or with a value that is not a number) makes it skip every later frame as well, until
stdin closes.  Here a malformed frame costs one line in the log and the frame itself: the reader
looks for the next `Content-Length:` header (as tower-lsp's codec does) and goes on from there.
"""

from __future__ import annotations

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
