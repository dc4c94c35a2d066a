"""`--format github`: GitHub Actions workflow commands, one per finding.

    ::warning file=train.py,line=57,endLine=57,col=20,endColumn=71,title=GL101 dataloader-serial::message

Printed in a workflow step, each line becomes an annotation on the pull request's diff.  Opt-in
("hint") rules and shown hints (findings.py) are `notice`s, syntax errors `error`s.  Values are
escaped as the Actions runner expects (`%`, CR and LF everywhere; `:` and `,` too inside properties), and other control
characters as everywhere gpulint prints (`printable`).
"""

from __future__ import annotations

from gpulint.linter.findings import Finding
from gpulint.linter.printable import printable
from gpulint.linter.reporters import ReportSettings
from gpulint.linter.run.outcome import RunResult


def escape_data(text: str) -> str:
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _command(finding: Finding) -> str:
    from gpulint.linter.catalog import by_code  # not the rule classes: a cached run need not import libcst

    rule = by_code().get(finding.code)
    if finding.severity == "error":
        command = "error"
    elif rule is not None and rule.default == "hint" or finding.hint is not None:
        command = "notice"
    else:
        command = "warning"
    return command


def format_finding(finding: Finding) -> str:
    properties = [("file", finding.path.replace("\\", "/")), ("line", str(finding.location.row))]
    if finding.end_location.row >= finding.location.row:
        properties.append(("endLine", str(finding.end_location.row)))
    properties.append(("col", str(finding.location.column)))
    if finding.end_location.row == finding.location.row and finding.end_location.column > finding.location.column:
        properties.append(("endColumn", str(finding.end_location.column)))
    properties.append(("title", f"{finding.code} {finding.name}"))
    where = f" ({finding.display_location})" if finding.display_location else ""
    fix = f" [fix: {finding.fix.message}]" if finding.fix is not None else ""
    # An annotation is one message: the chain from another module's loop goes on lines of its own.
    chain = "".join(f"\n{related.message}" for related in finding.related)
    body = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    return f"::{_command(finding)} {body}::{escape_data(f'{finding.code} {finding.shown_message}{where}{fix}{chain}')}"


def render(result: RunResult, settings: ReportSettings) -> str:
    return "\n".join(format_finding(f) for f in sorted(result.findings, key=Finding.sort_key))
