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
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.linter.analysis.parse import SyntaxErrorInSource, UndecodableSource, parse
from gpulint.linter.analysis.parse_guard import UnanalysableSource
from gpulint.linter.engine import Linter
from gpulint.linter.findings import SYNTAX_ERROR_CODE, Finding
from gpulint.linter.run.files import discover, read_source
from gpulint.linter.run.outcome import read_problem, write_problem
from gpulint.linter.run.process import display_path
from gpulint.linter.run.safe_files import WriteScope, write_atomic
from gpulint.linter.suppressions import normalized_entry

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
    errors: list[str] = field(default_factory=list)


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


def add_suppressions(paths: list[Path], linter: Linter) -> AddResult:
    """Silence the current findings of `linter` in the files under `paths`, writing in place."""
    settings = linter.settings
    files, path_errors = discover(paths, settings.exclude, settings.root)
    scope = WriteScope.of(paths)
    outcome = AddResult(errors=[f"{e.path}: {e.reason}" for e in path_errors])
    for path in files:
        name = display_path(path)
        if path.suffix == ".ipynb":
            outcome.errors.append(f"{name}: --add-suppressions does not edit notebooks; skipped")
            continue
        try:
            source = read_source(path, settings.size_limit(path))
            findings = linter.lint_source(source, name).findings
        except OSError as exc:
            outcome.errors.append(read_problem(name, exc))
            continue
        except (UndecodableSource, SyntaxErrorInSource, RecursionError, UnanalysableSource) as exc:
            outcome.errors.append(f"{name}: {exc}")
            continue
        findings = [f for f in findings if f.code not in (SYNTAX_ERROR_CODE, "GL900")]
        if not findings:
            continue
        encoding = _encoding(source)
        text = source.decode(encoding)
        new_text, added, skipped = suppress_source(text, findings)
        for row in skipped:
            outcome.errors.append(f"{name}:{row}: no line of this statement can take a comment; not suppressed")
        if not added:
            continue
        new_source = new_text.encode(encoding)
        try:
            parse(new_source)  # never write a file that does not parse
        except (SyntaxErrorInSource, UndecodableSource, UnanalysableSource) as exc:
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
