"""The terminal format: `path:line:col: GL101 [*] message`, then a summary line (as ruff).

Paths and messages are printed with control characters escaped (`printable`): a file name must
not be able to start a line of its own (a GitHub Actions workflow command) or drive the terminal.
"""

from __future__ import annotations

from collections import Counter

from gpulint.linter.findings import Applicability, Finding
from gpulint.linter.printable import printable
from gpulint.linter.reporters import ReportSettings
from gpulint.linter.run.outcome import RunResult

_BOLD, _RED, _CYAN, _DIM, _RESET = "\033[1m", "\033[31m", "\033[36m", "\033[2m", "\033[0m"


def fix_available(finding: Finding, unsafe_fixes: bool) -> bool:
    return finding.fix is not None and (finding.fix.applicability is Applicability.SAFE or unsafe_fixes)


def format_finding(finding: Finding, settings: ReportSettings) -> str:
    where = printable(finding.display_location or f"{finding.location.row}:{finding.location.column}")
    marker = " [*]" if fix_available(finding, settings.unsafe_fixes) else ""
    path, message = printable(finding.path), printable(finding.message)
    if settings.color:
        return (
            f"{_BOLD}{path}{_RESET}{_DIM}:{where}:{_RESET} "
            f"{_BOLD}{_RED}{finding.code}{_RESET}{_CYAN}{marker}{_RESET} {message}"
        )
    return f"{path}:{where}: {finding.code}{marker} {message}"


def summary(findings: list[Finding], settings: ReportSettings, fixed: int, errors: int = 0) -> str:
    """The closing lines; "All checks passed!" only when nothing was found and nothing failed
    (`errors`: the problems reported on standard error)."""
    lines = []
    count = len(findings)
    if fixed:
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


def statistics(findings: list[Finding], settings: ReportSettings) -> str:
    counts = Counter((f.code, f.name) for f in findings)
    fixable = {f.code for f in findings if fix_available(f, settings.unsafe_fixes)}
    rows = []
    for (code, name), count in sorted(counts.items(), key=lambda item: (-item[1], item[0][0])):
        rows.append(f"{count:>5}\t{code}\t{'[*]' if code in fixable else '   '} {name}")
    return "\n".join(rows)


def render(result: RunResult, settings: ReportSettings) -> str:
    findings = sorted(result.findings, key=Finding.sort_key)
    parts = []
    if settings.statistics:
        if findings:
            parts.append(statistics(findings, settings))
    else:
        parts.extend(format_finding(f, settings) for f in findings)
    fixed = sum(o.fixed for o in result.outcomes) if settings.fix_mode else 0
    parts.append(summary(findings, settings, fixed, len(result.errors)))
    return "\n".join(p for p in parts if p)
