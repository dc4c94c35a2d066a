"""`--format gitlab`: a GitLab Code Quality report (the `artifacts:reports:codequality` file).

A JSON array of issues with `description`, `check_name`, `fingerprint` (unique per issue and stable
across runs: the same fingerprint as SARIF), `severity` and `location.path` / `location.lines.begin`.
"""

from __future__ import annotations

import json

from gpulint.linter.findings import Finding
from gpulint.linter.reporters import ReportSettings
from gpulint.linter.reporters.sarif import fingerprints
from gpulint.linter.run.outcome import RunResult


def _severity(finding: Finding) -> str:
    from gpulint.linter.catalog import by_code  # not the rule classes: a cached run need not import libcst

    if finding.severity == "error":
        return "critical"
    rule = by_code().get(finding.code)
    return "info" if rule is not None and rule.default == "hint" or finding.hint is not None else "major"


def to_gitlab(result: RunResult) -> list[dict]:
    findings = sorted(result.findings, key=Finding.sort_key)
    return [
        {
            "type": "issue",
            "description": f"{finding.code} {finding.shown_message}",
            "check_name": finding.code,
            "categories": ["Performance"],
            "fingerprint": fingerprint,
            "severity": _severity(finding),
            "location": {
                "path": finding.path.replace("\\", "/"),
                "lines": {"begin": finding.location.row, "end": max(finding.end_location.row, finding.location.row)},
            },
        }
        for finding, fingerprint in zip(findings, fingerprints(findings), strict=True)
    ]


def render(result: RunResult, settings: ReportSettings) -> str:
    return json.dumps(to_gitlab(result), indent=2)
