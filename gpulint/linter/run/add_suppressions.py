"""`gpulint --add-suppressions PATHS`: silence every current finding with a comment (ruff's
`--add-noqa`), so a team can turn gpulint on today and fail only on new problems.

Each finding gets `# gpulint: ignore[ID]` on its reported line, or on the first line of its
statement when a comment cannot go on the reported line (the line ends inside a multi-line string,
or with a backslash continuation) -- the engine honours both.  Codes are merged into a
`# gpulint: ignore[...]` comment already on that line, whose entries stay as written (a rule name
stays a name).  The result must parse and is written atomically; a second run finds nothing left
to silence and writes nothing.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.linter.analysis.parse import SyntaxErrorInSource, UndecodableSource, parse
from gpulint.linter.analysis.parse_guard import UnanalysableSource
from gpulint.linter.findings import SYNTAX_ERROR_CODE, Finding
from gpulint.linter.run.files import read_source
from gpulint.linter.run.outcome import RunResult, read_problem, write_problem
from gpulint.linter.run.safe_files import WriteScope, write_atomic
from gpulint.linter.suppressions import UNUSED_SUPPRESSION, normalized_entry

_EXISTING = re.compile(r"#\s*gpulint\s*:\s*ignore\[(?P<codes>[^\]]*)\]", re.IGNORECASE)
_CODE_SORT = re.compile(r"(\D*)(\d*)")
# Python's own line breaks (str.splitlines also splits on form feeds and other separators, which
# would shift rows against the tokenizer's).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where Python splits them."""
    return _LINE.findall(text)


@dataclass
class AddResult:
    added: int = 0  # codes written
    files: int = 0  # files changed
    errors: list[str] = field(default_factory=list)  # files that could not be read or written
    left: list[str] = field(default_factory=list)  # findings that could not be silenced, and why


def comment_rows(text: str) -> set[int] | None:
    """Rows whose end a comment may follow: not inside a string, not after a backslash.  None when
    the text does not tokenize."""
    lines = [line.rstrip("\r\n") for line in split_lines(text)]
    allowed = set(range(1, len(lines) + 1))
    fstring_start = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+ splits f-strings
    fstring_end = getattr(tokenize, "FSTRING_END", None)
    open_fstrings: list[int] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING:
                allowed -= set(range(token.start[0], token.end[0]))  # every row but the last
            elif fstring_start is not None and token.type == fstring_start:
                open_fstrings.append(token.start[0])
            elif fstring_end is not None and token.type == fstring_end and open_fstrings:
                allowed -= set(range(open_fstrings.pop(), token.end[0]))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    for row, line in enumerate(lines, start=1):
        if line.rstrip().endswith("\\"):  # an explicit line continuation
            allowed.discard(row)
    return allowed


def _sorted_codes(codes: set[str]) -> list[str]:
    return sorted(codes, key=lambda c: tuple((a, int(b) if b else -1) for a, b in _CODE_SORT.findall(c) if a or b))


def _with_codes(line: str, codes: set[str]) -> str:
    """`line` (without its newline) with `codes` added to its gpulint comment (or a new one)."""
    match = _EXISTING.search(line)
    if match:
        present = {normalized_entry(c) for c in re.split(r"[\s,]+", match.group("codes")) if c.strip()}
        merged = ", ".join(_sorted_codes(present | codes))
        return line[: match.start()] + f"# gpulint: ignore[{merged}]" + line[match.end() :]
    stripped = line.rstrip()
    return f"{stripped}  # gpulint: ignore[{', '.join(_sorted_codes(codes))}]"


def suppress_source(text: str, findings: list[Finding]) -> tuple[str, int, list[int]]:
    """Add the comments to `text`; returns the new text, the number of codes added and the rows of
    findings that could not be silenced (no line of their statement takes a comment)."""
    allowed = comment_rows(text)
    if allowed is None:
        return text, 0, [f.location.row for f in findings]
    wanted: dict[int, set[str]] = {}
    skipped = []
    for finding in findings:
        if finding.code == SYNTAX_ERROR_CODE:
            continue
        candidates = [finding.location.row, finding.statement_row or finding.location.row]
        row = next((r for r in candidates if r in allowed), None)
        if row is None:
            skipped.append(finding.location.row)
            continue
        wanted.setdefault(row, set()).add(finding.code)
    lines = split_lines(text)
    added = 0
    for row, codes in wanted.items():
        line = lines[row - 1]
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        lines[row - 1] = _with_codes(body, codes) + ending
        added += len(codes)
    return "".join(lines), added, skipped


def _encoding(source: bytes) -> str:
    try:
        return tokenize.detect_encoding(io.BytesIO(source).readline)[0]
    except SyntaxError:
        return "utf-8"


def add_suppressions(result: RunResult, scope: WriteScope, size_limit: Callable[[Path], int]) -> AddResult:
    """Silence the findings of a lint run in the files they are reported in, writing in place.
    `result` is the run `gpulint check` makes over the same paths (with the project index, so a
    finding that another module's training loop explains is silenced in the helper it is reported
    in), which is why a second `gpulint check` then reports nothing.  A file whose findings stay
    (a notebook, one that does not parse, a statement no line of which takes a comment) is named
    in `left`; files with nothing to silence are not mentioned.  `size_limit(path)`: the most
    bytes read of a file, as the run read it."""
    outcome = AddResult()
    for file in result.outcomes:
        findings = [f for f in file.result.findings if f.code != UNUSED_SUPPRESSION]
        if not findings:
            continue
        name = file.result.path
        count = f"{len(findings)} finding{'s' if len(findings) != 1 else ''}"
        if name.endswith(".ipynb"):
            outcome.left.append(
                f"{name}: {count} not suppressed: --add-suppressions does not edit notebooks "
                "(add `# gpulint: ignore[ID]` to the line in its cell)"
            )
            continue
        if any(f.code == SYNTAX_ERROR_CODE for f in findings):
            outcome.left.append(f"{name}: {count} not suppressed: the file does not parse")
            continue
        path = Path(name)  # (the run names each file by its path from the working folder)
        try:
            source = read_source(path, size_limit(path))
        except OSError as exc:
            outcome.errors.append(read_problem(name, exc))
            continue
        encoding = _encoding(source)
        try:
            text = source.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            text = None
        if text is None or not _lines_match(text, findings):
            outcome.errors.append(f"{name}: changed while it was linted; left unchanged")
            continue
        new_text, added, skipped = suppress_source(text, findings)
        for row in skipped:
            outcome.left.append(f"{name}:{row}: no line of this statement can take a comment; not suppressed")
        if not added:
            continue
        new_source = new_text.encode(encoding)
        try:
            parse(new_source)  # never write a file that does not parse
        except (SyntaxErrorInSource, UndecodableSource, UnanalysableSource, RecursionError) as exc:
            outcome.errors.append(f"{name}: adding suppressions would break the file ({exc}); left unchanged")
            continue
        try:
            write_atomic(path, new_source, scope)
        except OSError as exc:
            outcome.errors.append(write_problem(name, exc, "suppressions"))
            continue
        outcome.added += added
        outcome.files += 1
    return outcome


def _lines_match(text: str, findings: list[Finding]) -> bool:
    """Whether the lines the findings were located on still read as they did when linted (the
    file was read again to be edited: a comment must not land on a line that moved)."""
    lines = split_lines(text)
    for finding in findings:
        row, shown = finding.location.row, finding.source_line
        if row > len(lines):
            return False
        if shown is None or "…" in shown.text:
            continue
        if lines[row - 1].rstrip("\r\n") != shown.text:
            return False
    return True
