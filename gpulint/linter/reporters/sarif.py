"""`--format sarif`: SARIF 2.1.0, the format GitHub code scanning uploads.

One run, one `tool.driver` listing the rules that have results (description, help text, help URI),
one result per finding with its region, fixes as `artifactChanges` of whole-line replacements, and
`partialFingerprints` that survive lines moving: a hash of the path, the rule, the finding's line
text with whitespace normalised, and which occurrence of that (rule, text) pair in the file it is.
A finding that another module's training loop makes run every step has `relatedLocations`, one per
call on the way from that loop.

The fingerprint helpers live here and are reused by the GitLab reporter and the review bot, so the
three agree on what "the same finding" is.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from gpulint import __version__
from gpulint.linter.catalog import by_code
from gpulint.linter.findings import Edit, Finding
from gpulint.linter.reporters import ReportSettings
from gpulint.linter.run.outcome import RunResult

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT_KEY = "gpulint/v1"
INFORMATION_URI = "https://github.com/gpulint/gpulint"


# -- shared helpers -----------------------------------------------------------------------------
@lru_cache(maxsize=256)
def _cached_lines(path: str, mtime_ns: int) -> tuple[str, ...]:
    try:
        text = Path(path).read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ()
    return tuple(text.splitlines())


def source_lines(path: str) -> tuple[str, ...]:
    """The lines of a linted file without their newlines ((): unreadable, or a notebook, whose
    rows are not the file's rows)."""
    if path.endswith(".ipynb"):
        return ()
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return ()
    return _cached_lines(path, mtime)


def line_text(path: str, row: int) -> str:
    lines = source_lines(path)
    return lines[row - 1] if 0 < row <= len(lines) else ""


def fingerprints(findings: list[Finding], hash_path: Callable[[Finding], str] | None = None) -> list[str]:
    """A stable identity for each finding (same order as `findings`): line numbers are left out on
    purpose, so adding lines above a finding does not make it a new one.  `hash_path` names the
    file in the hash (default: the path as shown; the review bot passes the repository path)."""
    seen: Counter[tuple] = Counter()
    result = []
    for finding in sorted(findings, key=Finding.sort_key):
        text = " ".join(line_text(finding.path, finding.location.row).split())
        if not text:  # notebooks and unreadable files: the message is the best stable text
            text = f"{finding.extra.get('cell', '')}:{finding.message}"
        shown = hash_path(finding) if hash_path is not None else finding.path
        key = (shown.replace(os.sep, "/"), finding.code, text)
        occurrence = seen[key]
        seen[key] += 1
        # surrogateescape: a file name that is not UTF-8 hashes as its bytes
        digest = hashlib.sha256("\0".join((*key, str(occurrence))).encode("utf-8", "surrogateescape")).hexdigest()
        result.append((id(finding), digest[:32]))
    by_id = dict(result)
    return [by_id[id(f)] for f in findings]


def uri(path: str) -> str:
    return path.replace(os.sep, "/")


# -- SARIF ----------------------------------------------------------------------------------------
def _level(finding: Finding) -> str:
    if finding.severity == "error":
        return "error"
    return "note" if finding.hint is not None else "warning"


def _rule_descriptor(code: str, name: str, fallback_message: str) -> dict:
    """What SARIF says about a rule, from the catalog (no rule module is imported for it)."""
    from gpulint import docs_url
    from gpulint.linter.rule_help import EXPLANATIONS

    rule = by_code().get(code)
    explanation = EXPLANATIONS.get(code)
    if rule is None or explanation is None:  # a local rule's (not in the generated catalog)
        return {
            "id": code,
            "name": name,
            "shortDescription": {"text": fallback_message.split(":")[0]},
            "defaultConfiguration": {"level": "error"},
        }
    return {
        "id": code,
        "name": rule.name,
        "shortDescription": {"text": rule.message},
        "fullDescription": {"text": rule.summary},
        "help": {"text": rule.summary, "markdown": explanation},
        "helpUri": docs_url(rule.code, rule.name),
        "defaultConfiguration": {"level": "note" if rule.default == "hint" else "warning"},
        "properties": {
            "tags": ["performance", "gpu"],
            "default": rule.default,
            "fix": rule.fix or "none",
        },
    }


def _replacement(edit: Edit, lines: tuple[str, ...]) -> dict | None:
    """A whole-line edit as a SARIF replacement.  Lines [start, end) are replaced by `content`;
    regions are expressed within existing lines, so a replacement of the last line never points
    past the end of the file."""
    start, end = edit.location.row, edit.end_location.row
    count = len(lines)
    if end > start:  # replace lines start..end-1 (keep the final newline in place)
        last = min(end - 1, count)
        if start > count:
            return None
        content = edit.content[:-1] if edit.content.endswith("\n") else edit.content
        region = {"startLine": start, "startColumn": 1, "endLine": last, "endColumn": len(lines[last - 1]) + 1}
        if not edit.content:  # a pure deletion: take the newline that follows, when there is one
            if end <= count:
                region = {"startLine": start, "startColumn": 1, "endLine": end, "endColumn": 1}
            content = ""
        return {"deletedRegion": region, "insertedContent": {"text": content}}
    if start <= count:  # insertion before line `start`
        region = {"startLine": start, "startColumn": 1, "endLine": start, "endColumn": 1}
        return {"deletedRegion": region, "insertedContent": {"text": edit.content}}
    if count == 0:
        return None
    # insertion at the end of the file: after the last line's text
    end_column = len(lines[-1]) + 1
    region = {"startLine": count, "startColumn": end_column, "endLine": count, "endColumn": end_column}
    text = edit.content[:-1] if edit.content.endswith("\n") else edit.content
    return {"deletedRegion": region, "insertedContent": {"text": "\n" + text}}


def _fixes(finding: Finding) -> list[dict]:
    if finding.fix is None or not finding.fix.edits:
        return []
    lines = source_lines(finding.path)
    if not lines:
        return []
    replacements = [r for r in (_replacement(e, lines) for e in finding.fix.edits) if r is not None]
    if len(replacements) != len(finding.fix.edits):
        return []
    description = finding.fix.message
    if finding.fix.applicability.value == "unsafe":
        description += " (unsafe: may change behaviour; review before applying)"
    return [
        {
            "description": {"text": description},
            "artifactChanges": [
                {"artifactLocation": {"uri": uri(finding.path), "uriBaseId": "%SRCROOT%"}, "replacements": replacements}
            ],
        }
    ]


def to_sarif(result: RunResult) -> dict:
    findings = sorted(result.findings, key=Finding.sort_key)
    prints = fingerprints(findings)
    rule_ids: dict[str, int] = {}
    rules: list[dict] = []
    results: list[dict] = []
    for finding, fingerprint in zip(findings, prints, strict=True):
        if finding.code not in rule_ids:
            rule_ids[finding.code] = len(rules)
            rules.append(_rule_descriptor(finding.code, finding.name, finding.message))
        region = {
            "startLine": finding.location.row,
            "startColumn": finding.location.column,
            "endLine": max(finding.end_location.row, finding.location.row),
            "endColumn": finding.end_location.column,
        }
        if (region["endLine"], region["endColumn"]) <= (region["startLine"], region["startColumn"]):
            del region["endLine"], region["endColumn"]
        entry = {
            "ruleId": finding.code,
            "ruleIndex": rule_ids[finding.code],
            "level": _level(finding),
            "message": {"text": finding.shown_message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri(finding.path), "uriBaseId": "%SRCROOT%"},
                        "region": region,
                    }
                }
            ],
            "partialFingerprints": {FINGERPRINT_KEY: fingerprint},
        }
        if finding.display_location:
            entry["properties"] = {"notebookLocation": finding.display_location}
        if finding.related:
            entry["relatedLocations"] = [
                {
                    "id": number,
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri(related.path), "uriBaseId": "%SRCROOT%"},
                        "region": {"startLine": related.location.row, "startColumn": related.location.column},
                    },
                    "message": {"text": related.message},
                }
                for number, related in enumerate(finding.related)
            ]
        fixes = _fixes(finding)
        if fixes:
            entry["fixes"] = fixes
        results.append(entry)
    root = Path.cwd().resolve().as_uri() + "/"
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpulint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": root}},
                # libcst columns count code points, not UTF-16 units (SARIF's default).
                "columnKind": "unicodeCodePoints",
                "results": results,
                # The findings held back as hints (no evidence of a real cost; --show-hints shows them).
                "properties": {"heldBackHints": result.held_back},
            }
        ],
    }


def render(result: RunResult, settings: ReportSettings) -> str:
    return json.dumps(to_sarif(result), indent=2)
