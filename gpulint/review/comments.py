"""Review comments for findings: what each finding says, a docs link, a ```suggestion block when
the fix's lines can be shown as one, and a hidden marker that identifies the finding across runs.

A line gets one comment, about every finding on it.  Its suggestion is that line with every fix
applied together, as `gpulint --fix` writes it (two suggestions for one line would each undo the
other when applied), and a suggestion replaces only rows the change adds: accepting it never
changes code the pull request did not touch.
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


def suggestion(finding: Finding, lines: tuple[str, ...], added: set[int]) -> Suggestion | None:
    """The fix as one block of replacement lines around the finding, or None when it cannot be one
    (edits far apart, rows the change does not add, or no edits)."""
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
    if not _showable(local, start, end, lines, added):
        return None
    return Suggestion(start, end, _replaced(local, start, end, lines), tuple(extra_imports))


def _showable(local: list[Edit], start: int, end: int, lines: tuple[str, ...], added: set[int]) -> bool:
    """Whether rows start..end, changed by `local`, can be one suggestion: some edit, not too many
    rows, every row in the file and added by the change.  (GitHub would take a suggestion over the
    diff's context rows too, but accepting it would change lines the pull request did not touch.)"""
    if not local or end - start + 1 > MAX_SUGGESTION_LINES or end > len(lines):
        return False
    return all(r in added for r in range(start, end + 1))


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
    added: set[int],
) -> Suggestion | None:
    """One suggestion in place of `proposals`, whose rows overlap: the rows they cover (grown over
    whatever else the fixer changed in them) as the whole file's fixes left them.  `fixed_edits`
    are the whole-line edits from the file to the file with every fix applied (`gpulint --fix`);
    None when fixing the file failed, and then so does this.  None too when the rows grow over one
    the change does not add (the fix of an untouched neighbour, in the same edit)."""
    if fixed_edits is None or not proposals:
        return None
    low = min(p.start for p in proposals)
    high = max(p.end for p in proposals)
    start, end, local, _elsewhere = grow_over(fixed_edits, low, high)
    if not _showable(local, start, end, lines, added):
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
    """The comment's text (what each finding says, the fix) and its footer (docs links, one
    marker per finding).  The text is the findings' own messages, short: the rule's docs page,
    linked, has the explanation and its edge cases."""
    from gpulint import docs_url

    codes: dict[str, str] = {}  # code -> docs address, in order
    said: list[tuple[str, str]] = []  # each finding's code and what it says; the same problem twice, once
    for finding, _fingerprint in findings:
        statement = f"(`{finding.name}`): {finding.message}"
        if finding.related:  # another module's training loop is why it runs every step: say where
            statement += "\nRuns every step: " + "; ".join(related.message for related in finding.related) + "."
        if (finding.code, statement) not in said:
            said.append((finding.code, statement))
        codes.setdefault(finding.code, docs_url(finding.code, finding.name))
    if len(said) == 1:
        ((code, statement),) = said
        parts = [f"**gpulint {code}** {statement}"]
    else:
        where = "on this line" if len({f.location.row for f, _ in findings}) == 1 else "on these lines"
        items = "\n".join(f"- **{code}** {statement}".replace("\n", "\n  ") for code, statement in said)
        parts = [f"**gpulint** found {len(said)} problems {where}:\n{items}"]
    fixed = [f for f, _ in findings if f.fix is not None]
    if fixed:
        unsafe = any(_is_unsafe(f) for f in fixed)
        caution = " (unsafe: it may change behaviour, review it)" if unsafe else ""
        # each fix once, with the rules it fixes (GL302 and GL201 both guard one print)
        by_message: dict[str, list[str]] = {}
        for finding in fixed:
            assert finding.fix is not None
            rules = by_message.setdefault(finding.fix.message, [])
            if finding.code not in rules:
                rules.append(finding.code)
        listed = "\n".join(f"- {', '.join(rules)}: {message}" for message, rules in by_message.items())
        flag = "gpulint --fix --unsafe-fixes" if unsafe else "gpulint --fix"
        only = next(iter(by_message)) if len(by_message) == 1 else None
        if proposal is not None:
            what = f": {only}" if only else f", the fixes applied together as `{flag}` applies them:\n{listed}"
            fence = _fence(proposal.text)
            parts.append(f"Suggested fix{caution}{what}\n\n{fence}suggestion\n{proposal.text}\n{fence}")
            if proposal.extra_imports:
                imports = ", ".join(f"`{i}`" for i in proposal.extra_imports)
                parts.append(f"The fix also needs {imports} at the top of the file.")
        else:
            if only:
                parts.append(f"Fix{caution}: {only} (apply with `{flag}`).")
            else:
                parts.append(f"Fixes{caution} (apply them together with `{flag}`):\n{listed}")
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
    added: set[int],
    fixed_edits: Callable[[bool], Sequence[Edit] | None],
) -> list[Comment]:
    """The comments for one file's findings (with their fingerprints), which are on rows the
    change adds (`added`), in line order: one per line, about every finding on it, with one
    suggestion for all their fixes (see `_shared_suggestion`).  Lines whose suggestions overlap
    share a comment whose suggestion applies all their fixes at once, or, when there is none,
    keep their comments without a suggestion (each would undo the other when applied).
    `fixed_edits(unsafe)` gives the whole-line edits `gpulint --fix` (with `--unsafe-fixes` when
    `unsafe`) makes to the file, or None when it cannot fix it."""
    proposals = [suggestion(finding, lines, added) for finding, _ in findings]

    def shared(members: list[int]) -> Suggestion | None:
        return _shared_suggestion(
            [findings[i][0] for i in members], [proposals[i] for i in members], fixed_edits, lines, added
        )

    rows: dict[int, list[int]] = {}  # row -> indices into `findings`
    for index, (finding, _fingerprint) in enumerate(findings):
        rows.setdefault(finding.location.row, []).append(index)
    # groups of indices into `findings`, each with its suggestion (None: no suggestion)
    groups: list[tuple[list[int], Suggestion | None]] = [(members, shared(members)) for members in rows.values()]
    merged = True
    while merged:  # a combined suggestion may grow over rows another suggestion replaces: merge again
        merged = False
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                first, second = groups[a][1], groups[b][1]
                if first is None or second is None or first.end < second.start or second.end < first.start:
                    continue
                members = sorted(groups[a][0] + groups[b][0])
                combined = shared(members)
                if combined is None:
                    groups[a], groups[b] = (groups[a][0], None), (groups[b][0], None)
                else:
                    groups[a] = (members, combined)
                    del groups[b]
                merged = True
                break
            if merged:
                break
    comments = [_comment(path, [findings[i] for i in members], proposal) for members, proposal in groups]
    return sorted(comments, key=lambda c: (c.start_line or c.line, c.line, c.finding.location.column))


def _shared_suggestion(
    findings: Sequence[Finding],
    proposals: Sequence[Suggestion | None],
    fixed_edits: Callable[[bool], Sequence[Edit] | None],
    lines: tuple[str, ...],
    added: set[int],
) -> Suggestion | None:
    """One suggestion for the fixes of `findings` (each with its own suggestion, or None): the
    one fix's own; for several, their rows as the whole file's fixes leave them, when those stay
    on added rows; failing that, the fixes' own suggestions when they are one and the same (GL302
    and GL201 guarding one print).  Otherwise none: a suggestion with some of the fixes would
    leave the others to a fixer that then sees another line."""
    own = [proposal for proposal in proposals if proposal is not None]
    fixable = [finding for finding in findings if finding.fix is not None and finding.fix.edits]
    if not own:
        return None
    if len(fixable) == 1:
        return own[0]
    combined = _combined_suggestion(own, fixed_edits(any(_is_unsafe(f) for f in fixable)), lines, added)
    if combined is not None:
        return combined
    if len(own) == len(fixable) and all(proposal == own[0] for proposal in own):
        return own[0]
    return None


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
