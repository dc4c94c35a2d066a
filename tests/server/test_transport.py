"""The language server's frame reader (gpulint/server/transport.py), on byte streams, and its
reading of the JSON in a frame."""

from __future__ import annotations

import io
import logging

from gpulint.server.transport import read_frames, top_level_scalar


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


# -- the JSON in a frame ------------------------------------------------------------------------------
def _nested(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def test_a_too_deep_requests_id_and_method_are_found_wherever_they_are():
    deep = _nested(10_000).decode()
    data = f'{{"params": {{"id": 1, "x": {deep}, "method": "inner"}}, "id": "the \\"id\\"", "method": "m/x"}}'
    assert top_level_scalar(data.encode(), "id") == 'the "id"'
    assert top_level_scalar(data.encode(), "method") == "m/x"
    assert top_level_scalar(b'{"jsonrpc": "2.0", "id": 42, "params": ' + _nested(500) + b"}", "id") == 42
    assert top_level_scalar(b'{"params": {"id": 7}}', "id") is None  # not at the top level
    assert top_level_scalar(b'{"id": [1], "method": "x"}', "id") is None
    assert top_level_scalar(b'{"id": 0012}', "id") is None  # not a JSON number
