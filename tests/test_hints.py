"""Findings held back as hints (findings.py `RawFinding.hint`: a rule found no evidence of a real
cost): not reported, counted, fixed or cached as findings by default; shown with `--show-hints`,
`show-hints = true`, or their rule named by its full id or name -- and then marked as hints in
every format."""

from __future__ import annotations

import json
import textwrap

import pytest

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.fix.passes import fix_source
from gpulint.linter.rule import MOSTLY_NOT_WANTED
from gpulint.server.engine_adapter import _problem
from tests.helpers import SCHEMAS, run_cli

# A loader over a dataset the module does not build: GL102 has no evidence its batches are large.
HINTED = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader
    device = "cuda"
    loader = DataLoader(ds, num_workers=2){comment}
""")
# The same loader over a dataset that decodes every item: a finding with evidence.
EVIDENT = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder
    device = "cuda"
    loader = DataLoader(ImageFolder("data"), num_workers=2)
""")
HELD_BACK_LINE = "1 finding held back as hints (no evidence of a real cost); --show-hints shows them."


def _lint(source: str, **settings):
    return Linter(Settings(**settings)).lint_source(source.encode(), "train.py")


def test_a_hint_is_held_back_and_counted_by_default():
    result = _lint(HINTED.format(comment=""))
    assert result.findings == [] and result.held_back == 1
    # GL102 is a hint by default (Rule.hint_by_default): its finding with evidence is held back too,
    # and shown where the rule is named, with the rule's reason rather than a missing-evidence one
    assert _lint(EVIDENT).findings == [] and _lint(EVIDENT).held_back == 1
    evident = _lint(EVIDENT, select=["GL102"])
    assert [f.code for f in evident.findings] == ["GL102"] and evident.held_back == 0
    assert evident.findings[0].hint == MOSTLY_NOT_WANTED
    (hinted,) = _lint(HINTED.format(comment=""), select=["GL102"]).findings
    assert hinted.hint == "what loading an item costs is not visible here"


# A loader whose dataset augments every item (a random crop): evidence that lifts GL102's hold.
AUGMENTED = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader
    from torchvision import transforms
    from torchvision.datasets import CIFAR10
    device = "cuda"
    crop = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])
    loader = DataLoader(CIFAR10("data", transform=crop), num_workers=2)
    for x, y in loader:
        step(x.to(device))
""")


def test_evidence_that_was_mostly_wanted_shows_a_finding_of_a_rule_held_back_by_default():
    # GL102 is held back by default; items augmented one by one are evidence of large batches that
    # lifts the hold, where a file decoded per item (EVIDENT) does not
    result = _lint(AUGMENTED)
    assert [f.code for f in result.findings] == ["GL102"] and result.held_back == 0
    assert result.findings[0].hint is None and result.findings[0].fix is not None
    assert _lint(EVIDENT).findings == []


@pytest.mark.parametrize(
    "selection, shown",
    [
        ({"select": ["GL102"]}, True),
        ({"extend_select": ["GL102"]}, True),
        ({"extend_select": ["dataloader-unpinned"]}, True),
        ({"select": ["gl102"]}, True),
        ({"show_hints": True}, True),
        ({"select": ["GL1"]}, False),  # a prefix selects a family, not its hints
        ({"select": ["ALL"]}, False),
        ({"select": ["GL101"], "extend_select": ["GL10"]}, False),
    ],
)
def test_hints_are_shown_where_the_rule_is_named_in_full_or_hints_are_asked_for(selection, shown):
    result = _lint(HINTED.format(comment=""), **selection)
    if shown:
        (finding,) = result.findings
        assert finding.code == "GL102" and finding.hint == "what loading an item costs is not visible here"
        assert finding.shown_message == f"{finding.message} (hint: {finding.hint})"
        assert result.held_back == 0
    else:
        assert [f.code for f in result.findings] == [] and result.held_back == 1


def test_a_comment_that_silences_a_held_back_hint_is_not_unused():
    source = HINTED.format(comment="  # gpulint: ignore[GL102]")
    result = _lint(source, extend_select=["GL900"])
    assert result.findings == [] and result.held_back == 0  # (silenced, so not held back either)
    stale = _lint(
        EVIDENT.replace("import torch\n", "import torch  # gpulint: ignore[GL102]\n"),
        extend_select=["GL900", "GL102"],
    )
    assert [f.code for f in stale.findings] == ["GL900", "GL102"]  # (a comment that silences nothing still is)


def test_fix_leaves_a_held_back_hint_alone_and_fixes_a_shown_one():
    source = HINTED.format(comment="").encode()
    held = fix_source(Linter(Settings()), source, "train.py", unsafe=True)
    assert held.source == source and not held.fixed_codes
    shown = fix_source(Linter(Settings(show_hints=True)), source, "train.py", unsafe=True)
    assert b"DataLoader(ds, num_workers=2, pin_memory=True)" in shown.source and shown.fixed_codes == ["GL102"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "hinted.py").write_text(HINTED.format(comment=""))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


def test_text_output_counts_held_back_hints_and_exits_clean(project, capsys):
    code, out, _ = run_cli(["hinted.py", "--no-cache"], capsys)
    assert code == 0
    assert out.splitlines() == ["All checks passed!", HELD_BACK_LINE]
    code, out, _ = run_cli(["hinted.py", "--no-cache", "--fix"], capsys)
    assert code == 0 and "Fixed" not in out
    assert (project / "hinted.py").read_text() == HINTED.format(comment="")


@pytest.mark.parametrize("how", [["--show-hints"], ["--select", "GL102"], ["--extend-select", "GL102"], "config"])
def test_shown_hints_say_so_and_count(project, capsys, how):
    if how == "config":
        (project / "pyproject.toml").write_text("[tool.gpulint]\nshow-hints = true\n")
        how = []
    code, out, _ = run_cli(["hinted.py", "--no-cache", "--output-format", "concise", *how], capsys)
    assert code == 1
    assert out.splitlines()[0] == (
        "hinted.py:4:10: GL102 [*] DataLoader without `pin_memory=True`: host-to-GPU copies are slower and cannot "
        "overlap compute (hint: what loading an item costs is not visible here)"
    )
    assert HELD_BACK_LINE not in out


def test_machine_formats_carry_the_hint_and_the_held_back_count(project, capsys):
    code, out, err = run_cli(["hinted.py", "--no-cache", "--output-format", "json"], capsys)
    assert (code, json.loads(out)) == (0, []) and err.strip() == HELD_BACK_LINE
    code, out, _ = run_cli(["hinted.py", "--no-cache", "--output-format", "json", "--show-hints"], capsys)
    (finding,) = json.loads(out)
    assert code == 1 and finding["hint"] == "what loading an item costs is not visible here"
    assert not finding["message"].endswith(")")  # the reason is its own field, not in the message
    code, out, _ = run_cli(["hinted.py", "--no-cache", "--output-format", "sarif"], capsys)
    assert json.loads(out)["runs"][0]["properties"] == {"heldBackHints": 1}
    code, out, _ = run_cli(["hinted.py", "--no-cache", "--output-format", "sarif", "--show-hints"], capsys)
    assert not _schema_errors("sarif-schema-2.1.0.json", json.loads(out))
    run = json.loads(out)["runs"][0]
    (result,) = run["results"]
    assert result["level"] == "note" and result["message"]["text"].endswith(
        "(hint: what loading an item costs is not visible here)"
    )
    assert run["properties"] == {"heldBackHints": 0}
    code, out, _ = run_cli(["hinted.py", "--no-cache", "--output-format", "github", "--show-hints"], capsys)
    assert out.startswith("::notice ") and "(hint: what loading an item costs is not visible here)" in out
    code, out, _ = run_cli(["hinted.py", "--no-cache", "--output-format", "gitlab", "--show-hints"], capsys)
    assert json.loads(out)[0]["severity"] == "info"
    code, out, _ = run_cli(["hinted.py", "--no-cache", "--output-format", "rdjson", "--show-hints"], capsys)
    assert json.loads(out)["diagnostics"][0]["severity"] == "INFO"
    assert not _schema_errors("rdjson-DiagnosticResult.json", json.loads(out))


def _schema_errors(name: str, document: dict) -> list:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft4Validator(json.loads((SCHEMAS / name).read_text(encoding="utf-8")))
    return list(validator.iter_errors(document))


def test_the_cache_keeps_hints_and_the_held_back_count(project, capsys):
    for _ in range(2):  # (the second run is served from the cache)
        code, out, _ = run_cli(["hinted.py"], capsys)
        assert (code, out.splitlines()) == (0, ["All checks passed!", HELD_BACK_LINE])
    for _ in range(2):
        code, out, _ = run_cli(["hinted.py", "--show-hints", "--output-format", "json"], capsys)
        assert code == 1 and json.loads(out)[0]["hint"] == "what loading an item costs is not visible here"


def test_the_editor_shows_a_shown_hint_as_a_hint():
    (finding,) = _lint(HINTED.format(comment=""), show_hints=True).findings
    problem = _problem(finding)
    assert problem.level == "hint" and problem.message.endswith(
        "(hint: what loading an item costs is not visible here)"
    )
    # a rule that is a hint by default shows as one too; a default rule's finding is a warning
    (evident,) = _lint(EVIDENT, select=["GL102"]).findings
    assert _problem(evident).level == "hint"
    step = "for x in loader:\n    loss = model(x)\n    loss.backward()\n    optimizer.step()\n    print(loss.item())\n"
    (blocking,) = _lint(EVIDENT + step).findings
    assert blocking.code == "GL201" and _problem(blocking).level == "warning"
