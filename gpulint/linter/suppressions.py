"""Suppression comments.

* `# gpulint: ignore[GL201]` or `# gpulint: ignore[GL201, GL302]` on the reported line;
* `# noqa: GL201` (flake8/ruff spelling) and a bare `# noqa` (everything on that line);
* for a multi-line statement, the same comment on the statement's first line;
* `# gpulint: ignore-file` in the comment block at the top of a file skips the file.

Comments are found with the tokenizer, so the text inside a string literal never counts.  This runs
only for files that have findings.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

_GPULINT = re.compile(r"#\s*gpulint\s*:\s*ignore(?:\[(?P<codes>[^\]]*)\])?(?!-)", re.IGNORECASE)
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_IGNORE_FILE = re.compile(rb"#\s*gpulint\s*:\s*ignore-file\b", re.IGNORECASE)

ALL = "*"


@dataclass
class Suppression:
    row: int
    codes: frozenset[str]  # {"*"} for every code
    kind: str  # "gpulint" or "noqa"
    used: set[str] = field(default_factory=set)


def file_is_ignored(source: bytes) -> bool:
    """`# gpulint: ignore-file` among the comment lines that open the file."""
    for line in source.splitlines()[:50]:
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith(b"#"):
            return False
        if _IGNORE_FILE.search(stripped):
            return True
    return False


def _parse_codes(text: str | None) -> frozenset[str]:
    if text is None or not text.strip():
        return frozenset({ALL})
    return frozenset(code.strip().upper() for code in re.split(r"[\s,]+", text) if code.strip())


def find_suppressions(text: str) -> dict[int, list[Suppression]]:
    """Suppression comments by 1-based row."""
    found: dict[int, list[Suppression]] = {}
    # Tokenizing the whole file is the costly part; a file that never spells either marker
    # (case-insensitively) has no suppression comment to find.
    lowered = text.lower()
    if "noqa" not in lowered and "gpulint" not in lowered:
        return found
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return found
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        row = token.start[0]
        for match in _GPULINT.finditer(token.string):
            found.setdefault(row, []).append(Suppression(row, _parse_codes(match.group("codes")), "gpulint"))
        for match in _NOQA.finditer(token.string):
            found.setdefault(row, []).append(Suppression(row, _parse_codes(match.group("codes")), "noqa"))
    return found


def matching_suppression(
    suppressions: dict[int, list[Suppression]], code: str, rows: tuple[int, ...]
) -> Suppression | None:
    for row in rows:
        for suppression in suppressions.get(row, ()):
            if ALL in suppression.codes or code in suppression.codes:
                return suppression
    return None
