"""The whole-repository precision harness (benchmarks/wholerepo_precision.py) on a tiny synthetic tree.

The labelled repositories live outside this project; these tests build one small tree in a temporary
folder, feed synthetic findings (and, once, real gpulint output), and check the join and the shares.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "benchmarks" / "wholerepo_precision.py"
spec = importlib.util.spec_from_file_location("wholerepo_precision", HARNESS)
wholerepo = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = wholerepo  # dataclasses look their module up there
spec.loader.exec_module(wholerepo)

Label, Finding, SourceFile = wholerepo.Label, wholerepo.Finding, wholerepo.SourceFile

REPO = "acme/trainer"
TRAIN = """\
import torch
from torch.utils.data import DataLoader

loader = DataLoader(
    dataset,
    batch_size=8,
)
model = Net().cuda()
for x, y in loader:
    loss = model(x.cuda(), y.cuda())
    loss.backward()
    optimizer.step()
    print(loss.item())
"""
TEST = """\
def test_step():
    for _ in range(3):
        print(loss.item())
"""
NOTEBOOK_CELLS = [
    {"cell_type": "markdown", "source": ["# Title"]},
    {"cell_type": "code", "source": ["ds = ds.map(\n", "    parse)\n", "ds = ds.map(parse)"]},
]
FILES = {"train.py": TRAIN, "tests/test_train.py": TEST}


def write_tree(trees: Path, files: dict[str, str] = FILES) -> dict[tuple[str, str], SourceFile]:
    tree = trees / wholerepo.repo_folder(REPO)
    for name, text in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    (tree / "examples").mkdir(exist_ok=True)
    (tree / "examples" / "data.ipynb").write_text(json.dumps({"cells": NOTEBOOK_CELLS, "metadata": {}, "nbformat": 4}))
    return {(REPO, name): SourceFile(tree / name) for name in [*files, "examples/data.ipynb"]}


def label(path: str, line: int, rule: str, verdict: str, sources, cell=None) -> Label:
    text = sources[(REPO, path)].line_text(cell, line)
    return Label(REPO, "0" * 40, path, cell, line, rule, verdict, f"{rule} {verdict}", wholerepo.line_hash(text))


def finding(path: str, line: int, rule: str, cell=None) -> Finding:
    return Finding(REPO, path, cell, line, rule, f"{rule} message")


def verdicts(result) -> list[tuple[int, str, str | None]]:
    return [(f.line, f.rule, lab.verdict if lab else None) for f, lab in result.judged]


def test_findings_take_the_verdict_of_the_label_on_their_line_or_statement_and_may_share_it(tmp_path):
    sources = write_tree(tmp_path)
    labels = [label("train.py", 10, "GL104", "tp", sources), label("train.py", 4, "GL102", "tp-low", sources)]
    findings = [
        finding("train.py", 10, "GL104"),
        finding("train.py", 10, "GL104"),  # x.cuda() and y.cuda(): one label, two findings
        finding("train.py", 6, "GL102"),  # inside the DataLoader(...) call that starts on line 4
        finding("train.py", 6, "GL101"),  # same statement, another rule: no label
    ]
    result = wholerepo.join(labels, findings, sources)
    assert verdicts(result) == [(6, "GL101", None), (6, "GL102", "tp-low"), (10, "GL104", "tp"), (10, "GL104", "tp")]
    assert result.unreported == [] and result.stale == []


def test_notebook_labels_match_by_cell(tmp_path):
    sources = write_tree(tmp_path)
    labels = [label("examples/data.ipynb", 1, "GL701", "fp", sources, cell=2)]
    findings = [finding("examples/data.ipynb", 2, "GL701", cell=2), finding("examples/data.ipynb", 1, "GL701", cell=1)]
    result = wholerepo.join(labels, findings, sources)
    assert [(f.cell, f.line, lab and lab.verdict) for f, lab in result.judged] == [(1, 1, None), (2, 2, "fp")]


def test_labels_follow_their_line_gone_ones_are_stale_and_unmatched_ones_are_listed(tmp_path):
    sources = write_tree(tmp_path)
    moved = label("train.py", 13, "GL201", "tp", sources)
    gone = label("train.py", 12, "GL999", "fp", sources)
    silent = label("train.py", 8, "GL203", "fp", sources)
    drifted = write_tree(tmp_path, {"train.py": "# header\n\n" + TRAIN.replace("    optimizer.step()\n", "")})
    result = wholerepo.join([moved, gone, silent], [finding("train.py", 14, "GL201")], drifted)
    assert verdicts(result) == [(14, "GL201", "tp")]
    assert [lab.rule for lab in result.stale] == ["GL999"]
    assert [(lab.rule, lab.line) for lab in result.unreported] == [("GL203", 10)]  # moved with its text


def test_shares_per_rule_and_weighted_by_findings_per_rule_overall(tmp_path):
    sources = write_tree(tmp_path)
    labels = [
        label("train.py", 13, "GL201", "tp", sources),
        label("tests/test_train.py", 3, "GL201", "tp-low", sources),
        label("examples/data.ipynb", 1, "GL701", "fp", sources, cell=2),
    ]
    findings = [
        finding("train.py", 13, "GL201"),
        finding("tests/test_train.py", 3, "GL201"),
        finding("examples/data.ipynb", 1, "GL701", cell=2),
        *(finding("examples/data.ipynb", 3, "GL701", cell=2) for _ in range(3)),  # 3 unread: the read one stands for 4
        finding("train.py", 8, "GL203"),  # a rule with nothing read: left out of the shares
    ]
    summary = wholerepo.summarize(wholerepo.join(labels, findings, sources))
    gl201, gl701 = summary["per_rule"]["GL201"], summary["per_rule"]["GL701"]
    assert (gl201["wanted"], gl201["right"], gl201["wrong"]) == (0.5, 1.0, 0.0)
    assert (gl701["findings"], gl701["labelled"], gl701["wrong"]) == (4, 1, 1.0)
    overall = summary["overall"]
    assert (overall["findings"], overall["labelled"], overall["rules_without_labels"]) == (7, 3, ["GL203"])
    # GL201: 2 findings, half wanted, all right; GL701: 4 findings, all wrong -> over 6 weighed findings
    assert overall["wanted"] == pytest.approx(1 / 6, abs=1e-3)
    assert overall["right"] == pytest.approx(2 / 6, abs=1e-3)
    assert overall["wrong"] == pytest.approx(4 / 6, abs=1e-3)
    assert summary["per_place"]["tests"]["findings"] == 1 and summary["per_place"]["examples"]["findings"] == 4
    assert summary["per_place"]["library"]["places"] == {"tests": 0, "examples": 0, "library": 2}
    assert len(summary["unlabelled"]) == 4
    text = wholerepo.render_text(summary)
    assert "no finding read yet for: GL203" in text and "Unlabelled findings, to read (4)" in text


def test_findings_from_json_relative_to_the_tree_and_absolute_outside_it(tmp_path):
    tree = tmp_path / "tree"
    record = {"cell": None, "location": {"row": 3}, "code": "GL201", "message": "m"}
    records = [{**record, "filename": str(tree / "pkg" / "train.py")}, {**record, "filename": "/elsewhere/x.py"}]
    findings = wholerepo.findings_from_json(records, REPO, tree)
    assert [(f.repo, f.path, f.line, f.rule) for f in findings] == [
        (REPO, "pkg/train.py", 3, "GL201"),
        (REPO, "/elsewhere/x.py", 3, "GL201"),
    ]


@pytest.mark.parametrize(
    ("path", "place"),
    [
        ("tests/test_api.py", "tests"),
        ("pkg/conftest.py", "tests"),
        ("examples/train.py", "examples"),
        ("site/en/guide/data.ipynb", "examples"),
        ("demo.ipynb", "examples"),
        ("projects/adder/adder.py", "examples"),
        ("litgpt/finetune/lora.py", "library"),
        ("main.py", "library"),
    ],
)
def test_place_of_a_file(path, place):
    assert wholerepo.place_of(path) == place


def test_a_bad_verdict_is_refused_with_its_line(tmp_path):
    path = tmp_path / "labels.jsonl"
    record = {"repo": REPO, "commit": "0", "path": "a.py", "cell": None, "line": 1, "rule": "GL201"}
    path.write_text(
        json.dumps({**record, "verdict": "tp", "reason": ""})
        + "\n"
        + json.dumps({**record, "verdict": "ok", "reason": ""})
    )
    with pytest.raises(ValueError, match=r"labels.jsonl:2: verdict must be one of"):
        wholerepo.load_labels(path)


def test_end_to_end_with_gpulint_saved_findings_and_fetch_commands(tmp_path, capsys):
    trees = tmp_path / "trees"
    sources = write_tree(trees)
    labels_path, manifest_path = tmp_path / "labels.jsonl", tmp_path / "manifest.json"
    wholerepo.write_labels(labels_path, [label("train.py", 13, "GL201", "tp", sources)])
    manifest_path.write_text(json.dumps({"repos": {REPO: {"commit": "a" * 40, "licence": "MIT"}}}))
    common = ["--labels", str(labels_path), "--manifest", str(manifest_path)]
    saved = tmp_path / "saved"
    assert wholerepo.main(["--trees", str(trees), *common, "--json", "--save-findings", str(saved)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["per_rule"]["GL201"]["tp"] >= 1  # the training loop's loss.item()
    assert (saved / f"{wholerepo.repo_folder(REPO)}.json").is_file()
    assert wholerepo.main(["--trees", str(trees), *common, "--json", "--findings", str(saved)]) == 0
    assert json.loads(capsys.readouterr().out) == summary  # the saved run scores the same
    assert wholerepo.main([*common, "--fetch-commands"]) == 0
    fetch = capsys.readouterr().out
    assert (
        f"git clone --quiet --filter=blob:none --no-checkout https://github.com/{REPO}.git" in fetch
        and f"checkout --quiet {'a' * 40}" in fetch
    )
