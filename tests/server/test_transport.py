"""The language server's frame reader (gpulint/server/transport.py), on byte streams."""

from __future__ import annotations

import io
import logging

from gpulint.server.transport import read_frames


def frame(body: bytes, headers: bytes | None = None) -> bytes:
    return (headers if headers is not None else b"Content-Length: %d\r\n" % len(body)) + b"\r\n" + body


def test_frames_with_other_headers_any_case_and_blank_lines_between():
    stream = io.BytesIO(
        frame(b'{"a":1}')
        + b"\r\n"
        + frame(b'{"b":2}', b"Content-Type: application/vscode-jsonrpc\r\ncontent-length: 7\r\n")
        + frame(b'{"c":3}', b"Content-Length:7\r\n")
    )
    assert list(read_frames(stream)) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


def test_a_frame_without_a_valid_length_is_skipped_with_one_log_line(caplog):
    good = frame(b'{"ok":true}')
    stream = io.BytesIO(
        frame(b'{"lost":1}', b"Content-Type: x\r\n")
        + good
        + frame(b'{"lost":2}', b"Content-Length: -5\r\n")
        + good
        + frame(b'{"lost":3}', b"Content-Length: 99999999999999999999\r\n")
        + good
    )
    with caplog.at_level(logging.WARNING):
        assert list(read_frames(stream)) == [b'{"ok":true}'] * 3
    assert len(caplog.records) == 3


def test_the_next_header_is_found_across_a_long_body_without_line_ends():
    body = b'{"text": "' + b"x" * 200_000 + b'"}'  # several of the reader's pieces
    for cut in range(0, 20):  # the header may start anywhere relative to a piece's end
        junk = b"y" * (64 * 1024 - cut)
        stream = io.BytesIO(frame(junk, b"Content-Type: x\r\n") + frame(body))
        assert list(read_frames(stream)) == [body], cut


def test_a_stream_that_ends_inside_a_frame_ends_the_frames():
    assert list(read_frames(io.BytesIO(b"Content-Length: 100\r\n\r\n{"))) == []
    assert list(read_frames(io.BytesIO(b"Content-Length: 5\r\n"))) == []
    assert list(read_frames(io.BytesIO(b"Content-Type: x\r\n\r\n{}"))) == []


def test_an_endless_run_of_header_lines_is_not_kept():
    lines = b"X-Junk: 1\r\n" * 10_000
    stream = io.BytesIO(lines + frame(b"{}"))
    assert list(read_frames(stream)) == [b"{}"]
