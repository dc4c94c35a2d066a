"""Review comments for findings: the rule's explanation, a docs link, a ```suggestion block when the
fix's lines can be shown as one, and a hidden marker that identifies the finding across runs.

Findings whose suggestions would replace the same lines share one comment: its suggestion is those
lines with every fix applied together, as `gpulint --fix` writes them (two suggestions for one line
would each undo the other when applied), and it names every rule it fixes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpulint.linter.findings import Applicability, Edit, Finding
from gpulint.linter.fix.line_fixes import grow_over

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
    finding: Finding  # the first finding it is about
    fingerprint: str
    body: str
    line: int
    start_line: int | None = None
    # The other findings on the same lines, with their fingerprints: one suggestion fixes them all.
    others: tuple[tuple[Finding, str], ...] = ()

    @property
    def findings(self) -> list[tuple[Finding, str]]:
        """Every finding the comment is about, with its fingerprint, in line order."""
        return [(self.finding, self.fingerprint), *self.others]

    def payload(self) -> dict:
        entry = {"path": self.path, "body": self.body, "line": self.line, "side": "RIGHT"}
        if self.start_line is not None and self.start_line != self.line:
            entry["start_line"] = self.start_line
            entry["start_side"] = "RIGHT"
        return entry


def _is_import_insertion(edit: Edit) -> bool:
    lines = [line for line in edit.content.splitlines() if line.strip()]
    return edit.location.row == edit.end_location.row and bool(lines) and all(_IMPORT.match(line) for line in lines)


def suggestion(finding: Finding, lines: tuple[str, ...], commentable: set[int]) -> Suggestion | None:
    """The fix as one block of replacement lines around the finding, or None when it cannot be one
    (edits far apart, lines outside the diff, or no edits)."""
    if finding.fix is None or not finding.fix.edits or not lines:
        return None
    row = finding.location.row
    # Grow a block from the finding's row over the edits that touch or adjoin it.
    start, end, local, pending = grow_over(finding.fix.edits, row, row, adjoining=True)
    extra_imports: list[str] = []
    for edit in pending:  # edits away from the finding: only added imports can be described in words
        if not _is_import_insertion(edit):
            return None
        extra_imports.extend(line.strip() for line in edit.content.splitlines() if line.strip())
    if not _showable(local, start, end, lines, commentable):
        return None
    return Suggestion(start, end, _replaced(local, start, end, lines), tuple(extra_imports))


def _showable(local: list[Edit], start: int, end: int, lines: tuple[str, ...], commentable: set[int]) -> bool:
    """Whether rows start..end, changed by `local`, can be one suggestion: some edit, not too many
    rows, every row in the file and in the diff (GitHub comments only on those)."""
    if not local or end - start + 1 > MAX_SUGGESTION_LINES or end > len(lines):
        return False
    return all(r in commentable for r in range(start, end + 1))


def _replaced(local: list[Edit], start: int, end: int, lines: tuple[str, ...]) -> str:
    """Rows start..end of `lines` with the whole-line edits `local` applied, without the final newline."""
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
    return text[:-1] if text.endswith("\n") else text


def _combined_suggestion(
    proposals: Sequence[Suggestion],
    fixed_edits: Sequence[Edit] | None,
    lines: tuple[str, ...],
    commentable: set[int],
) -> Suggestion | None:
    """One suggestion in place of `proposals`, whose rows overlap: the rows they cover (grown over
    whatever else the fixer changed in them) as the whole file's fixes left them.  `fixed_edits`
    are the whole-line edits from the file to the file with every fix applied (`gpulint --fix`);
    None when fixing the file failed, and then so does this."""
    if fixed_edits is None or not proposals:
        return None
    low = min(p.start for p in proposals)
    high = max(p.end for p in proposals)
    start, end, local, _elsewhere = grow_over(fixed_edits, low, high)
    if not _showable(local, start, end, lines, commentable):
        return None
    imports = dict.fromkeys(i for p in proposals for i in p.extra_imports)
    return Suggestion(start, end, _replaced(local, start, end, lines), tuple(imports))


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def comment_body(
    finding: Finding, fingerprint: str, proposal: Suggestion | None, suggestion_too_long: bool = False
) -> str:
    """The comment's Markdown, within GitHub's limit (see `_fit`)."""
    return _fit(*_body_parts([(finding, fingerprint)], proposal, suggestion_too_long))


def _body_parts(
    findings: Sequence[tuple[Finding, str]], proposal: Suggestion | None, suggestion_too_long: bool
) -> tuple[str, str]:
    """The comment's text (each finding's explanation, the fix) and its footer (docs links, one
    marker per finding)."""
    from gpulint import docs_url
    from gpulint.rules import rules_by_code

    parts: list[str] = []
    codes: dict[str, str] = {}  # code -> docs address, in order
    for finding, _fingerprint in findings:
        header = f"**gpulint {finding.code}** (`{finding.name}`): {finding.message}"
        if header in parts:  # the same problem twice on these lines: said once
            continue
        parts.append(header)
        if finding.related:  # another module's training loop is why it runs every step: say where
            parts.append("Runs every step: " + "; ".join(related.message for related in finding.related) + ".")
        rule = rules_by_code().get(finding.code)
        summary = rule.summary() if rule is not None else ""
        if summary and summary != finding.message and finding.code not in codes:
            parts.append(summary)
        codes.setdefault(finding.code, docs_url(finding.code, finding.name))
    fixes = [f.fix for f, _ in findings if f.fix is not None]
    if fixes:
        unsafe = any(fix.applicability is Applicability.UNSAFE for fix in fixes)
        caution = " (unsafe: it may change behaviour, review it)" if unsafe else ""
        # one fix: its message; several: one line each (two findings with the same fix, one line)
        listed = "\n".join(dict.fromkeys(f"- {f.code}: {f.fix.message}" for f, _ in findings if f.fix is not None))
        flag = "gpulint --fix --unsafe-fixes" if unsafe else "gpulint --fix"
        together = f"every fix on these lines applied together as `{flag}` applies them"
        if proposal is not None:
            what = f": {fixes[0].message}" if len(fixes) == 1 else f", {together}:\n\n{listed}"
            fence = _fence(proposal.text)
            parts.append(f"Suggested fix{caution}{what}\n\n{fence}suggestion\n{proposal.text}\n{fence}")
            if proposal.extra_imports:
                imports = ", ".join(f"`{i}`" for i in proposal.extra_imports)
                parts.append(f"The fix also needs {imports} at the top of the file.")
        else:
            if len(fixes) == 1:
                parts.append(f"Fix{caution}: {fixes[0].message} (apply with `{flag}`).")
            else:
                parts.append(f"Fixes{caution} (apply them together with `{flag}`):\n\n{listed}")
            if suggestion_too_long:
                parts.append(
                    f"(The fix's lines are too long to show as a suggestion: GitHub takes at most "
                    f"{MAX_BODY_CHARS:,} characters in a comment.)"
                )
    links = " · ".join(f"[{code} documentation]({url})" for code, url in codes.items())
    footer = [
        f"{links} · silence with `# gpulint: ignore[{', '.join(codes)}]`",
        *(MARKER.format(code=finding.code, fingerprint=fingerprint) for finding, fingerprint in findings),
    ]
    return "\n\n".join(parts), "\n\n" + "\n\n".join(footer)


def _fit(text: str, footer: str) -> str:
    """`text` then `footer` within GitHub's limit: the text is cut (saying so) when the whole is
    longer, the footer, with the marker that identifies the finding, is always kept whole."""
    if len(text) + len(footer) <= MAX_BODY_CHARS:
        return text + footer
    notice = f"\n\n(Cut here: GitHub takes at most {MAX_BODY_CHARS:,} characters in a comment.)"
    return text[: MAX_BODY_CHARS - len(notice) - len(footer)] + notice + footer


def make_comments(
    path: str,
    findings: Sequence[tuple[Finding, str]],
    lines: tuple[str, ...],
    commentable: set[int],
    fixed_edits: Callable[[bool], Sequence[Edit] | None],
) -> list[Comment]:
    """The comments for one file's findings (with their fingerprints), in line order.  Findings
    whose suggestions overlap share one comment, whose suggestion applies all their fixes at once:
    `fixed_edits(unsafe)` gives the whole-line edits `gpulint --fix` (with `--unsafe-fixes` when
    `unsafe`) makes to the file, or None when it cannot fix it."""
    proposals = [suggestion(finding, lines, commentable) for finding, _ in findings]
    # groups of indices into `findings`, each with the rows its suggestion replaces (None: no suggestion)
    groups: list[tuple[list[int], Suggestion | None]] = [([i], p) for i, p in enumerate(proposals)]
    merged = True
    while merged:  # a combined suggestion may grow over rows another suggestion replaces: merge again
        merged = False
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                first, second = groups[a][1], groups[b][1]
                if first is None or second is None or first.end < second.start or second.end < first.start:
                    continue
                members = sorted(groups[a][0] + groups[b][0])
                unsafe = any(_is_unsafe(findings[i][0]) for i in members)
                own = [p for i in members if (p := proposals[i]) is not None]
                combined = _combined_suggestion(own, fixed_edits(unsafe), lines, commentable)
                groups[a] = (members, combined)
                del groups[b]
                merged = True
                break
            if merged:
                break
    comments = [_comment(path, [findings[i] for i in members], proposal) for members, proposal in groups]
    return sorted(comments, key=lambda c: (c.start_line or c.line, c.line, c.finding.location.column))


def _is_unsafe(finding: Finding) -> bool:
    return finding.fix is not None and finding.fix.applicability is Applicability.UNSAFE


def _comment(path: str, findings: list[tuple[Finding, str]], proposal: Suggestion | None) -> Comment:
    findings = sorted(findings, key=lambda pair: (pair[0].location.row, pair[0].location.column, pair[0].code))
    too_long = proposal is not None and sum(map(len, _body_parts(findings, proposal, False))) > MAX_BODY_CHARS
    if too_long:
        proposal = None  # a suggestion cut short would replace the lines with half of them
    body = _fit(*_body_parts(findings, proposal, suggestion_too_long=too_long))
    (finding, fingerprint), others = findings[0], tuple(findings[1:])
    if proposal is not None:
        return Comment(path, finding, fingerprint, body, line=proposal.end, start_line=proposal.start, others=others)
    return Comment(path, finding, fingerprint, body, line=finding.location.row, others=others)


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
    """Whether every finding of `comment` has been commented on already."""
    return all(_commented(comment, finding, fingerprint, markers, places) for finding, fingerprint in comment.findings)


def _commented(
    comment: Comment,
    finding: Finding,
    fingerprint: str,
    markers: set[tuple[str, str]],
    places: set[tuple[str, int, str]],
) -> bool:
    if (finding.code, fingerprint) in markers:
        return True
    return (comment.path, finding.location.row, finding.code) in places or (
        comment.path,
        comment.line,
        finding.code,
    ) in places
