"""`--format json`: a list of findings shaped like ruff's JSON output, plus `name` and `severity`.

Tools that read ruff's JSON (editors, CI annotators) read ours: `code`, `message`, `filename`,
`location` / `end_location` ({`row`, `column`}, 1-based), `fix` ({`applicability`, `message`,
`edits`} or null), `noqa_row`, `url`, `cell`.  `related` lists, for a finding that another
module's training loop makes run every step, each call on the way from that loop: {`filename`,
`location`, `message`} (empty otherwise).  `hint` is why a finding is only a hint (no evidence of
a real cost; shown only with `--show-hints` or its rule selected by id), null for the others.
"""

from __future__ import annotations

import json
import os

from gpulint import docs_url
from gpulint.linter.findings import Finding
from gpulint.linter.reporters import ReportSettings
from gpulint.linter.run.outcome import RunResult


def finding_to_dict(finding: Finding) -> dict:
    fix = None
    if finding.fix is not None:
        fix = {
            "applicability": finding.fix.applicability.value,
            "message": finding.fix.message,
            "edits": [
                {
                    "content": edit.content,
                    "location": {"row": edit.location.row, "column": edit.location.column},
                    "end_location": {"row": edit.end_location.row, "column": edit.end_location.column},
                }
                for edit in finding.fix.edits
            ],
        }
    return {
        "cell": finding.extra.get("cell"),
        "code": finding.code,
        "name": finding.name,
        "severity": finding.severity,
        "message": finding.message,
        "filename": os.path.abspath(finding.path),
        "location": {"row": finding.location.row, "column": finding.location.column},
        "end_location": {"row": finding.end_location.row, "column": finding.end_location.column},
        "fix": fix,
        "noqa_row": finding.statement_row or finding.location.row,
        "url": docs_url(finding.code, finding.name),
        "hint": finding.hint,
        "related": [
            {
                "filename": os.path.abspath(related.path),
                "location": {"row": related.location.row, "column": related.location.column},
                "message": related.message,
            }
            for related in finding.related
        ],
    }


def render(result: RunResult, settings: ReportSettings) -> str:
    findings = sorted(result.findings, key=Finding.sort_key)
    return json.dumps([finding_to_dict(f) for f in findings], indent=2)
