"""Suppression comments.

* `# gpulint: ignore[GL201]` or `# gpulint: ignore[GL201, GL302]` on the reported line, rule names
  too (`# gpulint: ignore[host-sync-in-loop]`);
* `# noqa: GL201` (flake8/ruff spelling) and a bare `# noqa` (everything on that line);
* for a multi-line statement, the same comment on the statement's first line;
* `# gpulint: ignore-file` in the comment block at the top of a file skips the file.

Comments are found with the tokenizer, so the text inside a string literal never counts.  The
engine looks for them only in files that have findings.  Each comment records the codes it
silenced; the comments that silenced nothing are rule GL900's findings (`unused_suppression_findings`).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpulint.linter.findings import Finding, Location

_GPULINT = re.compile(r"#\s*gpulint\s*:\s*ignore(?:\[(?P<codes>[^\]]*)\])?(?!-)", re.IGNORECASE)
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_IGNORE_FILE = re.compile(rb"#\s*gpulint\s*:\s*ignore-file\b", re.IGNORECASE)

ALL = "*"

# Rule GL900 is this module's: its class (gpulint/rules/meta/) documents it.
UNUSED_SUPPRESSION = "GL900"
UNUSED_SUPPRESSION_NAME = "unused-suppression"
_GL_CODE = re.compile(r"^GL\d+$")
_CODE = re.compile(r"^[A-Za-z]+[0-9]+$")  # a rule code (gpulint's or a local rule's); anything else is a name
_COMMENT = re.compile(r"#\s*(gpulint\s*:\s*ignore|noqa)", re.IGNORECASE)


@dataclass
class Suppression:
    row: int
    codes: frozenset[str]  # rule codes (upper case) and names (as written); {"*"} for every code
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


def normalized_entry(entry: str) -> str:
    """A code as the engine spells it (`gl201` -> `GL201`); a rule name as written."""
    entry = entry.strip()
    return entry.upper() if _CODE.match(entry) else entry


def _parse_codes(text: str | None) -> frozenset[str]:
    if text is None or not text.strip():
        return frozenset({ALL})
    return frozenset(normalized_entry(code) for code in re.split(r"[\s,]+", text) if code.strip())


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


def silenced(suppressions: dict[int, list[Suppression]], code: str, name: str, rows: tuple[int, ...]) -> bool:
    """Whether a comment on one of `rows` silences the rule `code` (named `name`); the comment
    records the entry that did (the code or the name, as it lists them)."""
    for row in rows:
        for suppression in suppressions.get(row, ()):
            if ALL in suppression.codes or code in suppression.codes:
                suppression.used.add(code)
                return True
            if name in suppression.codes:
                suppression.used.add(name)
                return True
    return False


def unused_suppression_findings(
    text: str,
    path: str,
    suppressions: dict[int, list[Suppression]] | None,
    enabled: frozenset[str],
    known: frozenset[str],
    names: Mapping[str, str] | None = None,
) -> list[Finding]:
    """GL900 findings for the comments in `text` that silenced nothing.  `suppressions` are the
    comments findings were matched against (their `used` sets filled in); None or empty when no
    finding was (then every comment is unused).  Only gpulint's own codes (and the `known` local
    rules') are reported, and only those `enabled` for the file or not `known` at all (a code left
    out by `--select` may still be needed by a full run).  `names` maps the rule names a comment
    may list instead of codes to their codes."""
    if not suppressions:
        suppressions = find_suppressions(text)
    if not suppressions:
        return []
    lines = text.splitlines()
    findings = []
    for row in sorted(suppressions):
        for suppression in suppressions[row]:
            codes = _unused_codes(suppression, enabled, known, names or {})
            if codes is None:
                continue
            line = lines[row - 1] if row <= len(lines) else ""
            match = _COMMENT.search(line)
            column = match.start() + 1 if match else 1
            if codes:
                unknown = [c for c in codes if (names or {}).get(c, c) not in known]
                message = f"Unused suppression of {', '.join(codes)}: nothing to suppress on this line"
                if unknown:
                    message += (
                        f" ({', '.join(unknown)} is not a gpulint rule)"
                        if len(unknown) == 1
                        else f" ({', '.join(unknown)} are not gpulint rules)"
                    )
            else:
                message = "Unused `# gpulint: ignore`: nothing to suppress on this line"
            findings.append(
                Finding(
                    code=UNUSED_SUPPRESSION,
                    name=UNUSED_SUPPRESSION_NAME,
                    message=message,
                    path=path,
                    location=Location(row, column),
                    end_location=Location(row, len(line) + 1),
                    severity="warning",
                    statement_row=row,
                    extra={"codes": codes},
                )
            )
    return findings


def _unused_codes(
    suppression: Suppression, enabled: frozenset[str], known: frozenset[str], names: Mapping[str, str]
) -> list[str] | None:
    """The entries (codes, or rule names as written) to report for one comment, or None when there
    is nothing to report."""
    if ALL in suppression.codes:
        if suppression.kind == "gpulint" and not suppression.used:
            return []  # a bare `# gpulint: ignore` that silenced nothing (a bare noqa is other tools' too)
        return None
    unused = sorted(
        entry
        for entry, code in ((entry, names.get(entry, entry)) for entry in suppression.codes)
        if (_GL_CODE.match(code) or code in known)  # (another tool's code is not ours to judge)
        and entry not in suppression.used
        and (code in enabled or code not in known)
    )
    return unused or None
