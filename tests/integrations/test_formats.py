"""SARIF, GitHub, rdjson and GitLab output: the fixtures' findings validate against the official
schemas, fixes survive the conversion, fingerprints ignore line moves."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from gpulint.linter.config import Settings
from gpulint.linter.reporters import FORMATS, NEEDS_EDITS, ReportSettings, render
from gpulint.linter.reporters.github import escape_property, format_finding
from gpulint.linter.run.outcome import RunOptions
from gpulint.linter.run.runner import run
from tests.helpers import FIXTURES, SCHEMAS
from tests.integrations.conftest import run_cli


def _schema(name: str) -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(json.loads((SCHEMAS / name).read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def fixture_result(tmp_path_factory):
    # A copy, a project of its own: in place, the fixtures' project is this whole repository, which
    # the run would index first.
    target = tmp_path_factory.mktemp("formats") / "fixtures"
    fixtures = shutil.copytree(FIXTURES, target, ignore=shutil.ignore_patterns("__pycache__"))
    result = run([fixtures], Settings(select=["ALL"]), RunOptions(with_edits=True))
    assert len(result.findings) > 10 and any(f.fix and f.fix.edits for f in result.findings)
    return result


def _apply_line_replacements(lines: list[str], replacements: list[dict]) -> str:
    """Apply SARIF replacements (1-based line/column regions) to text, last first."""
    text = "".join(lines)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(row: int, column: int) -> int:
        return offsets[row - 1] + column - 1

    spans = []
    for r in replacements:
        region = r["deletedRegion"]
        start = offset(region["startLine"], region["startColumn"])
        end = offset(region.get("endLine", region["startLine"]), region.get("endColumn", region["startColumn"]))
        spans.append((start, end, r["insertedContent"]["text"]))
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def test_formats_are_registered():
    assert {"sarif", "github", "rdjson", "gitlab"} <= set(FORMATS)
    assert {"sarif", "rdjson"} <= NEEDS_EDITS


def test_sarif_validates_and_carries_rules_regions_fixes(fixture_result):
    document = json.loads(render("sarif", fixture_result, ReportSettings()))
    errors = sorted(_schema("sarif-schema-2.1.0.json").iter_errors(document), key=str)
    assert not errors, errors[0].message
    run_ = document["runs"][0]
    rules = run_["tool"]["driver"]["rules"]
    results = run_["results"]
    assert len(results) == len(fixture_result.findings)
    assert {r["id"] for r in rules} == {f.code for f in fixture_result.findings}
    for rule in rules:
        if rule["id"] != "GL000":
            assert rule["helpUri"].endswith(f"{rule['id']}.md") and rule["shortDescription"]["text"]
    for entry in results:
        assert rules[entry["ruleIndex"]]["id"] == entry["ruleId"]
        assert entry["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1
    prints = [e["partialFingerprints"]["gpulint/v1"] for e in results]
    assert len(set(prints)) == len(prints), "fingerprints must tell findings apart"
    assert any("fixes" in e for e in results)


def test_sarif_fix_applied_gives_the_fixed_line(fixture_result):
    """Applying a result's SARIF replacements to the file yields exactly what the fix's own edits
    yield: the conversion loses nothing."""
    document = json.loads(render("sarif", fixture_result, ReportSettings()))
    findings = sorted(fixture_result.findings, key=lambda f: f.sort_key())
    checked = 0
    for finding, entry in zip(findings, document["runs"][0]["results"], strict=True):
        if "fixes" not in entry:
            continue
        lines = Path(finding.path).read_text(encoding="utf-8").splitlines(keepends=True)
        via_sarif = _apply_line_replacements(lines, entry["fixes"][0]["artifactChanges"][0]["replacements"])
        expected = list(lines)
        for edit in sorted(finding.fix.edits, key=lambda e: e.location.row, reverse=True):
            expected[edit.location.row - 1 : edit.end_location.row - 1] = [edit.content]
        assert via_sarif == "".join(expected), finding
        checked += 1
    assert checked >= 3


def test_fingerprints_survive_lines_added_above(tmp_path):
    source = (FIXTURES / "pytorch_image_classification.py").read_text(encoding="utf-8")
    target = tmp_path / "train.py"

    def prints() -> dict[str, str]:
        result = run([target], Settings(select=["ALL"]), RunOptions())
        document = json.loads(render("sarif", result, ReportSettings()))
        return {e["partialFingerprints"]["gpulint/v1"]: e["ruleId"] for e in document["runs"][0]["results"]}

    target.write_text(source, encoding="utf-8")
    before = prints()
    target.write_text('"""A new module docstring."""\n\n# and a comment\n' + source, encoding="utf-8")
    assert prints() == before


def test_rdjson_validates_with_suggestions(fixture_result):
    document = json.loads(render("rdjson", fixture_result, ReportSettings()))
    errors = list(_schema("rdjson-DiagnosticResult.json").iter_errors(document))
    assert not errors, errors[0].message
    diagnostics = document["diagnostics"]
    assert len(diagnostics) == len(fixture_result.findings)
    with_suggestions = [d for d in diagnostics if d.get("suggestions")]
    assert with_suggestions
    for d in with_suggestions:
        for s in d["suggestions"]:
            assert s["range"]["start"]["column"] == 1 and s["range"]["end"]["column"] == 1
    assert all(
        d["code"]["url"].endswith(f"{d['code']['value']}.md") for d in diagnostics if d["code"]["value"] != "GL000"
    )


def test_rdjson_columns_are_utf8_bytes(tmp_path):
    target = tmp_path / "t.py"
    target.write_text(
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "déjà = 1; loader = DataLoader(ds)\nmodel = torch.nn.Linear(1, 1).cuda()\n",
        encoding="utf-8",
    )
    result = run([target], Settings(select=["GL101"]), RunOptions())
    (finding,) = result.findings
    (diagnostic,) = json.loads(render("rdjson", result, ReportSettings()))["diagnostics"]
    assert diagnostic["location"]["range"]["start"]["column"] == finding.location.column + 2  # é and à: 2 bytes each


def test_github_annotations(fixture_result):
    lines = render("github", fixture_result, ReportSettings()).splitlines()
    assert len(lines) == len(fixture_result.findings)
    for line, finding in zip(lines, sorted(fixture_result.findings, key=lambda f: f.sort_key()), strict=True):
        assert line.startswith(("::warning ", "::notice ", "::error "))
        assert f"line={finding.location.row}," in line and f"title={finding.code} " in line
        assert "\n" not in line
    assert escape_property("a:b,c%\nd") == "a%3Ab%2Cc%25%0Ad"


def test_github_hint_rules_are_notices(fixture_result):
    hints = [f for f in fixture_result.findings if f.code in {"GL401", "GL403", "GL404", "GL705", "GL708", "GL803"}]
    if not hints:
        pytest.skip("no hint findings in the fixtures")
    assert format_finding(hints[0]).startswith("::notice ")


def test_gitlab_code_quality(fixture_result):
    issues = json.loads(render("gitlab", fixture_result, ReportSettings()))
    assert len(issues) == len(fixture_result.findings)
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    for issue in issues:
        assert set(issue) >= {"description", "check_name", "fingerprint", "severity", "location"}
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        assert issue["location"]["lines"]["begin"] >= 1 and issue["location"]["path"].endswith((".py", ".ipynb"))


@pytest.mark.parametrize("fmt", ["sarif", "rdjson", "gitlab", "github"])
def test_cli_formats(tmp_path, monkeypatch, capsys, fmt):
    shutil.copy(FIXTURES / "pytorch_image_classification.py", tmp_path / "train.py")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["train.py", "--format", fmt], capsys)
    assert code == 1, err
    if fmt == "github":
        assert out.startswith("::warning file=train.py,")
    else:
        assert "train.py" in out and json.loads(out)
