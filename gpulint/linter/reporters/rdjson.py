"""`--format rdjson`: reviewdog's Diagnostic Format (`reviewdog -f=rdjson`).

Positions are 1-based; reviewdog counts columns in UTF-8 bytes, so code-point columns from libcst
are converted with the line's text.  Fixes become `suggestions`: whole-line ranges (the end is
exclusive, as rdjson defines it) with the replacement text.  A finding that another module's
training loop makes run every step lists the calls on the way in `related_locations`.
"""

from __future__ import annotations

import json
from typing import Any

from gpulint import docs_url
from gpulint.linter.findings import Finding
from gpulint.linter.reporters import ReportSettings
from gpulint.linter.reporters.sarif import line_text, source_lines
from gpulint.linter.run.outcome import RunResult


def byte_column(path: str, row: int, column: int) -> int:
    """A 1-based code-point column as a 1-based UTF-8 byte column."""
    text = line_text(path, row)
    return len(text[: column - 1].encode("utf-8")) + 1 if text else column


def _suggestions(finding: Finding) -> list[dict]:
    if finding.fix is None or not finding.fix.edits:
        return []
    count = len(source_lines(finding.path))
    if not count:
        return []
    suggestions = []
    for edit in finding.fix.edits:
        start, end = edit.location.row, edit.end_location.row
        if end > count + 1 or start > count + 1:
            return []
        # [start:1, end:1) covers whole lines including their newlines (empty when inserting).
        suggestions.append(
            {
                "range": {"start": {"line": start, "column": 1}, "end": {"line": end, "column": 1}},
                "text": edit.content,
            }
        )
    return suggestions


def diagnostic(finding: Finding) -> dict:
    start = {
        "line": finding.location.row,
        "column": byte_column(finding.path, finding.location.row, finding.location.column),
    }
    end = {
        "line": finding.end_location.row,
        "column": byte_column(finding.path, finding.end_location.row, finding.end_location.column),
    }
    entry: dict[str, Any] = {
        "message": finding.shown_message,
        "location": {"path": finding.path.replace("\\", "/"), "range": {"start": start, "end": end}},
        "severity": "ERROR" if finding.severity == "error" else "INFO" if finding.hint is not None else "WARNING",
        "code": {"value": finding.code, "url": docs_url(finding.code, finding.name)},
    }
    suggestions = _suggestions(finding)
    if suggestions:
        entry["suggestions"] = suggestions
    if finding.related:
        entry["related_locations"] = [
            {
                "message": related.message,
                "location": {
                    "path": related.path.replace("\\", "/"),
                    "range": {
                        "start": {
                            "line": related.location.row,
                            "column": byte_column(related.path, related.location.row, related.location.column),
                        }
                    },
                },
            }
            for related in finding.related
        ]
    return entry


def to_rdjson(result: RunResult) -> dict:
    return {
        "source": {"name": "gpulint", "url": "https://github.com/gpulint/gpulint"},
        "diagnostics": [diagnostic(f) for f in sorted(result.findings, key=Finding.sort_key)],
    }


def render(result: RunResult, settings: ReportSettings) -> str:
    return json.dumps(to_rdjson(result), indent=2)
