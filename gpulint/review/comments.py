"""Review comments for findings: the rule's explanation, a docs link, a ```suggestion block when the
fix's lines can be shown as one, and a hidden marker that identifies the finding across runs."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulint.linter.findings import Applicability, Edit, Finding

MARKER = "<!-- gpulint:{code}:{fingerprint} -->"
MARKER_RE = re.compile(r"<!-- gpulint:(?P<code>[A-Z]+\d+):(?P<fingerprint>[0-9a-f]+) -->")
MAX_SUGGESTION_LINES = 30
# GitHub refuses a review comment's body (and a review's) longer than this many characters.
MAX_BODY_CHARS = 65_536
_IMPORT = re.compile(r"^\s*(import|from)\s+\S")


@dataclass(frozen=True)
class Suggestion:
    start: int  # first row the suggestion replaces
    end: int  # last row (inclusive)
    text: str  # the replacement for rows start..end, without the final newline
    extra_imports: tuple[str, ...] = ()  # import lines the fix also adds elsewhere in the file


@dataclass(frozen=True)
class Comment:
    path: str
    finding: Finding
    fingerprint: str
    body: str
    line: int
    start_line: int | None = None

    def payload(self) -> dict:
        entry = {"path": self.path, "body": self.body, "line": self.line, "side": "RIGHT"}
        if self.start_line is not None and self.start_line != self.line:
            entry["start_line"] = self.start_line
            entry["start_side"] = "RIGHT"
        return entry


def _covered(edit: Edit) -> tuple[int, int]:
    """The rows a whole-line edit touches (an insertion touches the row before it, or the first)."""
    start, end = edit.location.row, edit.end_location.row
    if end > start:
        return start, end - 1
    return (start - 1, start - 1) if start > 1 else (start, start)


def _is_import_insertion(edit: Edit) -> bool:
    lines = [line for line in edit.content.splitlines() if line.strip()]
    return edit.location.row == edit.end_location.row and bool(lines) and all(_IMPORT.match(line) for line in lines)


def suggestion(finding: Finding, lines: tuple[str, ...], commentable: set[int]) -> Suggestion | None:
    """The fix as one block of replacement lines around the finding, or None when it cannot be one
    (edits far apart, lines outside the diff, or no edits)."""
    if finding.fix is None or not finding.fix.edits or not lines:
        return None
    row = finding.location.row
    start = end = row
    local: list[Edit] = []
    extra_imports: list[str] = []
    # Grow a block from the finding's row over the edits that touch or adjoin it.
    pending = sorted(finding.fix.edits, key=lambda e: e.location.row)
    changed = True
    while changed:
        changed = False
        for edit in list(pending):
            low, high = _covered(edit)
            if low <= end + 1 and high >= start - 1:
                start, end = min(start, low), max(end, high)
                local.append(edit)
                pending.remove(edit)
                changed = True
    for edit in pending:  # edits away from the finding: only added imports can be described in words
        if not _is_import_insertion(edit):
            return None
        extra_imports.extend(line.strip() for line in edit.content.splitlines() if line.strip())
    if not local or end - start + 1 > MAX_SUGGESTION_LINES or end > len(lines):
        return None
    if any(r not in commentable for r in range(start, end + 1)):
        return None
    insertions = {e.location.row: e.content for e in local if e.end_location.row == e.location.row}
    replacements = {e.location.row: e for e in local if e.end_location.row > e.location.row}
    out: list[str] = []
    r = start
    while r <= end:
        if r in insertions:
            out.append(insertions[r])
        if r in replacements:
            out.append(replacements[r].content)
            r = replacements[r].end_location.row
            continue
        out.append(lines[r - 1] + "\n")
        r += 1
    if end + 1 in insertions:
        out.append(insertions[end + 1])
    text = "".join(out).replace("\r\n", "\n")
    return Suggestion(start, end, text[:-1] if text.endswith("\n") else text, tuple(extra_imports))


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def comment_body(
    finding: Finding, fingerprint: str, proposal: Suggestion | None, suggestion_too_long: bool = False
) -> str:
    """The comment's Markdown, within GitHub's limit (see `_fit`)."""
    return _fit(*_body_parts(finding, fingerprint, proposal, suggestion_too_long))


def _body_parts(
    finding: Finding, fingerprint: str, proposal: Suggestion | None, suggestion_too_long: bool
) -> tuple[str, str]:
    """The comment's text (explanation, fix) and its footer (docs link, marker)."""
    from gpulint import docs_url
    from gpulint.rules import rules_by_code

    rule = rules_by_code().get(finding.code)
    summary = rule.summary() if rule is not None else ""
    url = docs_url(finding.code, finding.name)
    parts = [f"**gpulint {finding.code}** (`{finding.name}`): {finding.message}"]
    if finding.related:  # another module's training loop is why it runs every step: say where
        parts.append("Runs every step: " + "; ".join(related.message for related in finding.related) + ".")
    if summary and summary != finding.message:
        parts.append(summary)
    if finding.fix is not None:
        unsafe = finding.fix.applicability is Applicability.UNSAFE
        caution = " (unsafe: it may change behaviour, review it)" if unsafe else ""
        if proposal is not None:
            fence = _fence(proposal.text)
            parts.append(
                f"Suggested fix{caution}: {finding.fix.message}\n\n{fence}suggestion\n{proposal.text}\n{fence}"
            )
            if proposal.extra_imports:
                imports = ", ".join(f"`{i}`" for i in proposal.extra_imports)
                parts.append(f"The fix also needs {imports} at the top of the file.")
        else:
            flag = "gpulint --fix --unsafe-fixes" if unsafe else "gpulint --fix"
            parts.append(f"Fix{caution}: {finding.fix.message} (apply with `{flag}`).")
            if suggestion_too_long:
                parts.append(
                    f"(The fix's lines are too long to show as a suggestion: GitHub takes at most "
                    f"{MAX_BODY_CHARS:,} characters in a comment.)"
                )
    footer = [
        f"[{finding.code} documentation]({url}) · silence with `# gpulint: ignore[{finding.code}]`",
        MARKER.format(code=finding.code, fingerprint=fingerprint),
    ]
    return "\n\n".join(parts), "\n\n" + "\n\n".join(footer)


def _fit(text: str, footer: str) -> str:
    """`text` then `footer` within GitHub's limit: the text is cut (saying so) when the whole is
    longer, the footer, with the marker that identifies the finding, is always kept whole."""
    if len(text) + len(footer) <= MAX_BODY_CHARS:
        return text + footer
    notice = f"\n\n(Cut here: GitHub takes at most {MAX_BODY_CHARS:,} characters in a comment.)"
    return text[: MAX_BODY_CHARS - len(notice) - len(footer)] + notice + footer


def make_comment(
    path: str, finding: Finding, fingerprint: str, lines: tuple[str, ...], commentable: set[int]
) -> Comment:
    proposal = suggestion(finding, lines, commentable)
    too_long = (
        proposal is not None and sum(map(len, _body_parts(finding, fingerprint, proposal, False))) > MAX_BODY_CHARS
    )
    if too_long:
        proposal = None  # a suggestion cut short would replace the lines with half of them
    body = comment_body(finding, fingerprint, proposal, suggestion_too_long=too_long)
    if proposal is not None:
        return Comment(path, finding, fingerprint, body, line=proposal.end, start_line=proposal.start)
    return Comment(path, finding, fingerprint, body, line=finding.location.row)


def existing_keys(comments: list[dict]) -> tuple[set[tuple[str, str]], set[tuple[str, int, str]]]:
    """From review comments already on the pull request: the (code, fingerprint) markers gpulint
    left, and (path, line, code) of those comments (a fallback when a line's text changed)."""
    markers: set[tuple[str, str]] = set()
    places: set[tuple[str, int, str]] = set()
    for comment in comments:
        body = comment.get("body") or ""
        for match in MARKER_RE.finditer(body):
            markers.add((match.group("code"), match.group("fingerprint")))
            for key in ("line", "original_line"):
                if isinstance(comment.get(key), int):
                    places.add((comment.get("path") or "", comment[key], match.group("code")))
    return markers, places


def is_duplicate(comment: Comment, markers: set[tuple[str, str]], places: set[tuple[str, int, str]]) -> bool:
    if (comment.finding.code, comment.fingerprint) in markers:
        return True
    return (comment.path, comment.finding.location.row, comment.finding.code) in places or (
        comment.path,
        comment.line,
        comment.finding.code,
    ) in places
