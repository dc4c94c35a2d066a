"""Text from the tree (file names, messages quoting them) made safe to print.

A file name may hold a newline (then `::error ...` on the next line is a GitHub Actions workflow
command), a terminal escape sequence, bidirectional-override characters that make a line read
differently from what it says, or bytes that are not UTF-8 (Python keeps them as lone surrogates,
which stdout cannot encode).  Every line gpulint prints as text goes through `printable`; JSON
formats escape these themselves.  Diff headers are quoted as git quotes them, so `patch` and
`git apply` read the name back.
"""

from __future__ import annotations

import re

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# C0 and C1 controls and DEL, line and paragraph separators, bidirectional formatting characters,
# and lone surrogates (undecodable bytes of a file name).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    char = match.group()
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte os.fsdecode could not decode: show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with control, separator, bidi-override and undecodable characters escaped (`\\n`,
    `\\x1b`, `\\u202e`, `\\xff`); other text, backslashes included, is unchanged."""
    return _UNSAFE.sub(_escape, text)


def quote_diff_path(name: str) -> str:
    """A path for a diff header, C-quoted in double quotes (as git does) when it holds a control
    character, a quote, a backslash or an undecodable byte; as is otherwise."""
    if not _UNSAFE.search(name) and '"' not in name and "\\" not in name:
        return name
    raw = name.encode("utf-8", "surrogateescape")
    out = []
    for byte in raw:
        char = chr(byte)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif byte < 0x20 or byte >= 0x7F:
            out.append(f"\\{byte:03o}")  # git quotes every non-ASCII byte in octal
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
