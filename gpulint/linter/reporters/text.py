"""The text formats, for people (as ruff's):

* `concise`: one line per finding, `path:line:col: GL101 [*] message`;
* `full`: that line, then the source line under a line-number gutter with `^` under the finding,
  and the fix's description (`= help: ...`), then a blank line;

in both, a finding that runs every step because another module calls it there is followed by
indented notes, one per call on the way from that training loop (`= note: called from train.py:42
in the training loop at train.py:40`, `= note: via utils.py:10 in `step()``);

then a summary line (and one that counts the findings held back as hints, when there are any).  With
`--show-fixes`, what `--fix` changed is listed per file and rule.

Paths, messages and source lines are printed with control characters escaped (`printable`): a file
name or a line of a file must not be able to start a line of its own (a GitHub Actions workflow
command) or drive the terminal.  A line that would begin with `::` anyway (a file named
`::error::x.py`) gets `./` in front where every reporter's output passes (`reporters.render`).
"""

from __future__ import annotations

from collections import Counter

from gpulint.linter.findings import Applicability, Finding, SourceLine
from gpulint.linter.printable import printable
from gpulint.linter.reporters import ReportSettings
from gpulint.linter.run.outcome import FileOutcome, RunResult

_BOLD, _RED, _CYAN, _BLUE, _DIM, _RESET = "\033[1m", "\033[31m", "\033[36m", "\033[34m", "\033[2m", "\033[0m"
_TAB_WIDTH = 4


def fix_available(finding: Finding, unsafe_fixes: bool) -> bool:
    return finding.fix is not None and (finding.fix.applicability is Applicability.SAFE or unsafe_fixes)


def format_finding(finding: Finding, settings: ReportSettings) -> str:
    where = printable(finding.display_location or f"{finding.location.row}:{finding.location.column}")
    marker = " [*]" if fix_available(finding, settings.unsafe_fixes) else ""
    path, message = printable(finding.path), printable(finding.shown_message)
    if settings.color:
        return (
            f"{_BOLD}{path}{_RESET}{_DIM}:{where}:{_RESET} "
            f"{_BOLD}{_RED}{finding.code}{_RESET}{_CYAN}{marker}{_RESET} {message}"
        )
    return f"{path}:{where}: {finding.code}{marker} {message}"


def chain_notes(finding: Finding, indent: str = "  ") -> list[str]:
    """The indented `= note:` lines that say how another module's training loop reaches the
    finding (none for a finding its own module explains)."""
    return [f"{indent}= note: {printable(related.message)}" for related in finding.related]


def summary(findings: list[Finding], settings: ReportSettings, fixed: int, errors: int = 0) -> str:
    """The closing lines; "All checks passed!" only when nothing was found and nothing failed
    (`errors`: the problems reported on standard error)."""
    lines = []
    count = len(findings)
    if fixed and not settings.show_fixes:  # (--show-fixes lists them instead, under the same heading)
        lines.append(f"Fixed {fixed} problem{'s' if fixed != 1 else ''}.")
    if count == 0:
        if errors:
            plural = "s" if errors != 1 else ""
            lines.append(f"No problems found, but {errors} error{plural} stopped some checks (see above).")
        elif not fixed:
            lines.append("All checks passed!")
        return "\n".join(lines)
    safe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.SAFE)
    unsafe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.UNSAFE)
    remaining = "remaining" if fixed else ""
    text = f"Found {count} {remaining + ' ' if remaining else ''}problem{'s' if count != 1 else ''}"
    fixable = safe + unsafe if settings.unsafe_fixes else safe
    hidden = 0 if settings.unsafe_fixes else unsafe
    details = []
    if fixable:
        details.append(
            f"{fixable} fixable with --fix" + (" --unsafe-fixes" if settings.unsafe_fixes and unsafe else "")
        )
    if hidden:
        details.append(f"{hidden} more with --unsafe-fixes")
    if details:
        text += f" ({', '.join(details)})"
    lines.append(text + ".")
    return "\n".join(lines)


def skipped_tests_note(count: int) -> str:
    """The line that says how many test files the performance rules were not run on, and why."""
    files = "test file" if count == 1 else "test files"
    return f"{count} {files} not linted for performance (test code is not training code; --lint-tests lints them)."


def held_back_note(count: int) -> str:
    """The line that says how many findings were held back as hints, and how to see them."""
    findings = "finding" if count == 1 else "findings"
    return f"{count} {findings} held back as hints (no evidence of a real cost); --show-hints shows them."


def statistics(findings: list[Finding], settings: ReportSettings) -> str:
    counts = Counter((f.code, f.name) for f in findings)
    fixable = {f.code for f in findings if fix_available(f, settings.unsafe_fixes)}
    rows = []
    for (code, name), count in sorted(counts.items(), key=lambda item: (-item[1], item[0][0])):
        rows.append(f"{count:>5}\t{code}\t{'[*]' if code in fixable else '   '} {name}")
    return "\n".join(rows)


def source_snippet(finding: Finding, color: bool = False) -> list[str]:
    """The lines `full` shows under a finding: its source line in a gutter with carets under the
    finding (to the end of the line when it goes on), and the fix's description."""
    source = finding.source_line
    if source is None:
        return []
    row = str(finding.location.row)
    blue, red, reset = (_BLUE, _RED, _RESET) if color else ("", "", "")
    gutter = f"{blue}{' ' * len(row)} |{reset}"
    shown, indent, width = _with_caret(source, finding)
    lines = [
        gutter,
        f"{blue}{row} |{reset} {shown}",
        f"{gutter} {' ' * indent}{red}{'^' * width} {finding.code}{reset}",
        gutter,
    ]
    if finding.fix is not None:
        lines.append(f"{blue}{' ' * len(row)} ={reset} help: {printable(finding.fix.message)}")
    lines.extend(f"{blue}{' ' * len(row)} ={reset} note: {printable(r.message)}" for r in finding.related)
    return lines


def _with_caret(source: SourceLine, finding: Finding) -> tuple[str, int, int]:
    """The line as printed (tabs expanded, control characters escaped), and where the carets go
    in it: how far in, and how many."""
    text = source.text
    start = min(max(finding.location.column - source.first_column, 0), len(text))
    if finding.end_location.row == finding.location.row:
        end = finding.end_location.column - source.first_column
    else:  # the finding goes on below: underline the rest of this line
        end = len(text.rstrip())
    end = min(max(end, start + 1), max(len(text), start + 1))

    def shown(part: str) -> str:
        return printable(part.expandtabs(_TAB_WIDTH))

    indent = len(shown(text[:start]))
    return shown(text), indent, max(len(shown(text[:end])) - indent, 1)


def fixes_listing(outcomes: list[FileOutcome], heading: str) -> str:
    """What the fixes changed, per file and rule (ruff's `--show-fixes`):

    Fixed 3 problems:
    - train.py:
        2 × GL102 (dataloader-unpinned)
        1 × GL104 (blocking-h2d-copy)
    """
    from gpulint.linter.catalog import by_code  # rule names, without the rule classes

    names = by_code()
    per_file = sorted((o.result.path, Counter(o.fixed_codes)) for o in outcomes if o.fixed_codes)
    total = sum(len(o.fixed_codes) for o in outcomes)
    if not total:
        return ""
    lines = [f"{heading} {total} problem{'s' if total != 1 else ''}:"]
    for path, counts in per_file:
        lines.append(f"- {printable(path)}:")
        for code, count in sorted(counts.items()):
            name = names[code].name if code in names else ""
            lines.append(f"    {count} × {code}" + (f" ({name})" if name else ""))
    return "\n".join(lines)


def _render(result: RunResult, settings: ReportSettings, full: bool) -> str:
    findings = sorted(result.findings, key=Finding.sort_key)
    parts = []
    if settings.statistics:
        if findings:
            parts.append(statistics(findings, settings))
    elif full:
        for finding in findings:
            snippet = source_snippet(finding, settings.color) if finding.source_line else chain_notes(finding)
            parts.append("\n".join([format_finding(finding, settings), *snippet, ""]))
    else:
        for finding in findings:
            parts.append("\n".join([format_finding(finding, settings), *chain_notes(finding)]))
    fixed = sum(len(o.fixed_codes) for o in result.outcomes) if settings.fix_mode else 0
    closing = summary(findings, settings, fixed, len(result.errors))
    skipped_tests = sum(o.result.skipped_as_test for o in result.outcomes)
    if skipped_tests:
        closing += "\n" + skipped_tests_note(skipped_tests)
    if result.held_back:
        closing += "\n" + held_back_note(result.held_back)
    if fixed and settings.show_fixes:
        parts.append(fixes_listing(result.outcomes, "Fixed") + ("\n" if closing else ""))
    parts.append(closing)
    return "\n".join(p for p in parts if p)


def render_concise(result: RunResult, settings: ReportSettings) -> str:
    return _render(result, settings, full=False)


def render_full(result: RunResult, settings: ReportSettings) -> str:
    return _render(result, settings, full=True)
