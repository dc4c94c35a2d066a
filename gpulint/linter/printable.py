"""Text from the tree (file names, messages quoting them) made safe to print.

A file name may hold a newline (then `::error ...` on the next line is a GitHub Actions workflow
command), a terminal escape sequence, bidirectional-override characters that make a line read
differently from what it says, or bytes that are not UTF-8 (Python keeps them as lone surrogates,
which stdout cannot encode).  Every line gpulint prints as text goes through `printable`; JSON
formats escape these themselves.  Diff headers are quoted as git quotes them, so `patch` and
`git apply` read the name back.

The Actions runner reads two shapes of line as a command, no newline needed: one that begins with
`::` once its leading whitespace is trimmed (a file named `::error::x.py` at the start of a finding
line), and one that holds `##[` followed by a command name and `]` anywhere (the older syntax).
`printable` breaks up every `##[`; `no_workflow_commands` puts `./` in front of a line that would
begin with `::`, which keeps a file name at the start of a line the same path;
`json_without_workflow_commands` does the same for JSON output; `fenced_from_the_runner` turns
command processing off around output that must stay verbatim (a diff).
"""

from __future__ import annotations

import re

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# C0 and C1 controls and DEL, line and paragraph separators, bidirectional formatting characters,
# lone surrogates (undecodable bytes of a file name), and the `[` of `##[`.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]|(?<=##)\\[")
# Where a line would begin with `::` once the runner trims its leading whitespace.  The runner
# reads lines ending at CR as well as LF; Python's whitespace takes in all of .NET's.
_COMMAND_START = re.compile(r"(?:^|(?<=[\r\n]))(?=[^\S\r\n]*::)")


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
    `\\x1b`, `\\u202e`, `\\xff`), and the `[` of `##[` (`##\\x5b`); other text, backslashes
    included, is unchanged."""
    return _UNSAFE.sub(_escape, text)


def no_workflow_commands(text: str) -> str:
    """`text` (lines already `printable`, or gpulint's own markup) with `./` at the start of each
    line that would begin with `::` once its leading whitespace is trimmed: `./::error::x.py:1:5:`
    (or `./  ::error::x.py`) names the same file, and the runner does not take it for a command."""
    return _COMMAND_START.sub("./", text)


def json_without_workflow_commands(text: str) -> str:
    """JSON text with the `[` of every `##[` written `\\u005b`: `##[` can only be inside a string
    (`#` is not JSON outside one), so the data reads back the same.  A JSON line cannot begin with
    `::`: `json.dumps` writes control characters and line breaks as escapes."""
    return text.replace("##[", "##\\u005b")


def fenced_from_the_runner(output: bytes) -> bytes:
    """Output that must be printed byte for byte (a diff quotes the file's lines, and must apply),
    between the runner's `stop-commands` and the unguessable token that resumes them, when it is
    printed in a GitHub Actions job; as is elsewhere.  `patch` and `git apply` skip both lines."""
    import os
    import secrets

    if not output or os.environ.get("GITHUB_ACTIONS") != "true":
        return output
    token = secrets.token_hex(16).encode()
    ending = b"" if output.endswith(b"\n") else b"\n"  # the token must be a line of its own
    return b"::stop-commands::" + token + b"\n" + output + ending + b"::" + token + b"::\n"


def quote_diff_path(name: str) -> str:
    """A path for a diff header, C-quoted in double quotes (as git does) when it holds a control
    character, a quote, a backslash, an undecodable byte or `##[` (its `[` in octal); as is
    otherwise."""
    if not _UNSAFE.search(name) and '"' not in name and "\\" not in name:
        return name
    raw = name.encode("utf-8", "surrogateescape")
    out = []
    for index, byte in enumerate(raw):
        char = chr(byte)
        if char == "[" and raw[max(index - 2, 0) : index] == b"##":
            out.append("\\133")  # octal, which git and patch read back: no `##[` on the line
        elif char in ('"', "\\"):
            out.append("\\" + char)
        elif char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif byte < 0x20 or byte >= 0x7F:
            out.append(f"\\{byte:03o}")  # git quotes every non-ASCII byte in octal
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
