"""GL9xx: findings about gpulint's own comments rather than about training code.

GL900 is not a tree rule: it has nothing to visit, and the engine leaves it out of the rules it
runs on the tree (so selecting it never makes a file be parsed).  After the other rules ran and
their findings were matched against suppression comments, `Linter.lint_source` asks
`unused_suppression_findings` which comments suppressed nothing.
"""

from __future__ import annotations

import re

from gpulint.linter.findings import Finding, Location
from gpulint.linter.rule import Rule
from gpulint.linter.suppressions import ALL, Suppression, find_suppressions

UNUSED_SUPPRESSION = "GL900"
_GL_CODE = re.compile(r"^GL\d+$")
_COMMENT = re.compile(r"#\s*(gpulint\s*:\s*ignore|noqa)", re.IGNORECASE)


class UnusedSuppression(Rule):
    """
    ## What it finds
    A `# gpulint: ignore[GL...]` or `# noqa: GL...` comment whose gpulint codes suppress no finding
    on its line: the code was fixed, moved, or the comment names the wrong rule.  Only gpulint's
    own codes (GL...) are reported, and only those of rules enabled for the file: a `# noqa: E501`
    belongs to another tool, and a code left out by `--select` may still be needed by a full run.
    A bare `# gpulint: ignore` that suppresses nothing is reported too; a bare `# noqa` is not
    (other tools read it).

    ## Why it is slow
    It is not slow; it keeps the suppression list honest.  A stale suppression hides the next
    real problem written on that line, and a team adopting gpulint with `--add-suppressions`
    wants the list to shrink as the code is fixed.

    ## Example
    ```python
    loader = DataLoader(ds, batch_size=64, num_workers=8, pin_memory=True)  # gpulint: ignore[GL101]
    ```
    Use instead: delete the comment (or the codes that no longer apply).

    ## Fix (none)
    Remove the comment by hand; `gpulint --report-unused-suppressions` lists them.
    """

    code = UNUSED_SUPPRESSION
    name = "unused-suppression"
    message = "Suppression comment suppresses nothing"
    default = "hint"
    severity = "warning"


def _comment_column(line: str) -> int:
    match = _COMMENT.search(line)
    return match.start() + 1 if match else 1


def _unused_codes(suppression: Suppression, enabled: frozenset[str]) -> list[str] | None:
    """The codes to report for one comment, or None when there is nothing to report."""
    if ALL in suppression.codes:
        if suppression.kind == "gpulint" and not suppression.used:
            return []  # a bare `# gpulint: ignore` that silenced nothing
        return None
    unused = sorted(
        code
        for code in suppression.codes
        if _GL_CODE.match(code) and code not in suppression.used and (code in enabled or code not in _known())
    )
    return unused or None


def _known() -> frozenset[str]:
    from gpulint.linter.rule import rules_by_code

    return frozenset(rules_by_code())


def unused_suppression_findings(
    text: str, path: str, suppressions: dict[int, list[Suppression]] | None, enabled: frozenset[str]
) -> list[Finding]:
    """GL900 findings for the comments in `text` that suppressed nothing.  `suppressions` are the
    comments the engine matched findings against (their `used` sets filled in); None when the
    engine did not look (no finding in the file), in which case every comment is unused."""
    if suppressions is None or not suppressions:
        suppressions = find_suppressions(text)
    if not suppressions:
        return []
    lines = text.splitlines()
    known = _known()
    findings = []
    for row in sorted(suppressions):
        for suppression in suppressions[row]:
            codes = _unused_codes(suppression, enabled)
            if codes is None:
                continue
            line = lines[row - 1] if row <= len(lines) else ""
            column = _comment_column(line)
            if codes:
                unknown = [c for c in codes if c not in known]
                what = ", ".join(codes)
                message = f"Unused suppression of {what}: nothing to suppress on this line"
                if unknown:
                    message += f" ({', '.join(unknown)} is not a gpulint rule)" if len(unknown) == 1 else f" ({', '.join(unknown)} are not gpulint rules)"
            else:
                message = "Unused `# gpulint: ignore`: nothing to suppress on this line"
            findings.append(
                Finding(
                    code=UnusedSuppression.code,
                    name=UnusedSuppression.name,
                    message=message,
                    path=path,
                    location=Location(row, column),
                    end_location=Location(row, len(line) + 1),
                    severity=UnusedSuppression.severity,
                    statement_row=row,
                    extra={"codes": codes},
                )
            )
    return findings
