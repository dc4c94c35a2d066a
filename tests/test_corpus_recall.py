"""The corpus harness (benchmarks/corpus_recall.py): matching findings to labels on a tiny synthetic corpus.

The real corpus lives outside the repository; these tests build a two-file corpus in a temporary folder,
feed the matching synthetic findings (and, once, real gpulint output), and check every verdict.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "benchmarks" / "corpus_recall.py"
spec = importlib.util.spec_from_file_location("corpus_recall", HARNESS)
corpus_recall = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = corpus_recall  # dataclasses look their module up there
spec.loader.exec_module(corpus_recall)

Label, Finding, SourceFile = corpus_recall.Label, corpus_recall.Finding, corpus_recall.SourceFile

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
NOTEBOOK_CELLS = [
    {"cell_type": "markdown", "source": ["# Title"]},
    {"cell_type": "code", "source": ["%%time\n", "ds = ds.map(\n", "    parse)\n", "ds = ds.map(parse)"]},
]


def write_corpus(root: Path, train: str = TRAIN) -> dict[tuple[str, str], SourceFile]:
    folder = root / corpus_recall.repo_folder(REPO)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text(train)
    (folder / "data.ipynb").write_text(json.dumps({"cells": NOTEBOOK_CELLS, "metadata": {}, "nbformat": 4}))
    return {(REPO, name): SourceFile(folder / name) for name in ("train.py", "data.ipynb")}


def label(path: str, line: int, rule: str, sources, kind="positive", scope="single-file", cell=None) -> Label:
    text = sources[(REPO, path)].line_text(cell, line)
    return Label(
        repo=REPO,
        commit="0" * 40,
        path=path,
        line=line,
        rule=rule,
        kind=kind,
        scope=scope,
        reason=f"{rule} here",
        cell=cell,
        text_sha1=corpus_recall.line_hash(text),
    )


def finding(path: str, line: int, rule: str, cell=None) -> Finding:
    return Finding(REPO, path, cell, line, rule, f"{rule} message")


def test_a_finding_matches_a_label_on_its_line_or_in_its_statement(tmp_path):
    sources = write_corpus(tmp_path)
    on_line = label("train.py", 13, "GL201", sources)
    in_statement = label("train.py", 4, "GL102", sources)  # the label anchors on the call's first line
    outcome = corpus_recall.evaluate(
        [on_line, in_statement], [finding("train.py", 13, "GL201"), finding("train.py", 6, "GL102")], sources
    )
    assert [lab.rule for _, lab in outcome.true_positives] == ["GL102", "GL201"]
    assert not outcome.misses and not outcome.unlabelled and not outcome.tricky_hits


def test_a_finding_in_another_statement_or_of_another_rule_does_not_match(tmp_path):
    sources = write_corpus(tmp_path)
    labels = [label("train.py", 10, "GL104", sources), label("train.py", 4, "GL101", sources)]
    findings = [finding("train.py", 11, "GL104"), finding("train.py", 4, "GL102")]
    outcome = corpus_recall.evaluate(labels, findings, sources)
    assert outcome.true_positives == []
    assert sorted(lab.rule for lab in outcome.misses) == ["GL101", "GL104"]
    assert sorted(f.rule for f in outcome.unlabelled) == ["GL102", "GL104"]


def test_findings_of_one_rule_on_one_line_count_once(tmp_path):
    sources = write_corpus(tmp_path)
    outcome = corpus_recall.evaluate(
        [label("train.py", 10, "GL104", sources)],
        [finding("train.py", 10, "GL104"), finding("train.py", 10, "GL104")],
        sources,
    )
    assert len(outcome.true_positives) == 1 and not outcome.unlabelled


def test_a_tricky_negative_hit_is_a_false_positive_and_module_rules_match_anywhere_in_the_file(tmp_path):
    sources = write_corpus(tmp_path)
    labels = [label("train.py", 13, "GL302", sources, kind="tricky-negative"), label("train.py", 8, "GL403", sources)]
    outcome = corpus_recall.evaluate(
        labels, [finding("train.py", 13, "GL302"), finding("train.py", 11, "GL403")], sources
    )
    assert [(f.rule, lab.kind) for f, lab in outcome.tricky_hits] == [("GL302", "tricky-negative")]
    assert [lab.rule for _, lab in outcome.true_positives] == ["GL403"]


def test_notebook_findings_match_by_cell_and_statement_despite_magics(tmp_path):
    sources = write_corpus(tmp_path)
    labels = [label("data.ipynb", 2, "GL701", sources, cell=2), label("data.ipynb", 4, "GL701", sources, cell=2)]
    findings = [finding("data.ipynb", 3, "GL701", cell=2), finding("data.ipynb", 2, "GL701", cell=1)]
    outcome = corpus_recall.evaluate(labels, findings, sources)
    assert [lab.line for _, lab in outcome.true_positives] == [2]  # line 3 is inside the call that starts on 2
    assert [lab.line for lab in outcome.misses] == [4]
    assert [(f.cell, f.line) for f in outcome.unlabelled] == [(1, 2)]  # another cell: no label there


def test_labels_follow_their_text_when_the_file_drifts_and_go_stale_when_it_is_gone(tmp_path):
    sources = write_corpus(tmp_path)
    moved = label("train.py", 13, "GL201", sources)
    gone = label("train.py", 12, "GL999", sources)
    drifted = write_corpus(tmp_path, "# a new header\n\n" + TRAIN.replace("    optimizer.step()\n", ""))
    outcome = corpus_recall.evaluate([moved, gone], [finding("train.py", 14, "GL201")], drifted)
    assert [(lab.line, f.line) for f, lab in outcome.true_positives] == [(14, 14)]
    assert [lab.rule for lab in outcome.stale] == ["GL999"] and not outcome.misses


def test_summary_separates_core_from_full_and_single_file_from_cross_file(tmp_path):
    sources = write_corpus(tmp_path)
    labels = [
        label("train.py", 13, "GL201", sources),
        label("train.py", 10, "GL104", sources, scope="cross-file"),
        label("train.py", 8, "GL403", sources),
        label("train.py", 4, "GL102", sources, kind="tricky-negative"),
    ]
    findings = [
        finding("train.py", 13, "GL201"),
        finding("train.py", 8, "GL403"),
        finding("train.py", 5, "GL102"),
        finding("train.py", 11, "GL203"),
    ]
    summary = corpus_recall.summarize(corpus_recall.evaluate(labels, findings, sources), labels, files=2)
    core, full = summary["core"], summary["full"]
    assert "GL403" not in summary["core_rules"]  # a hint rule: in "full" only
    assert (core["tp"], core["fp"], core["fn"]) == (1, 2, 1)  # GL102 tricky hit and unlabelled GL203
    assert (full["tp"], full["fp"], full["fn"]) == (2, 2, 1)
    assert (core["recall_single"], core["recall_cross"]) == (1.0, 0.0)
    assert core["precision"] == pytest.approx(1 / 3, abs=1e-3)
    assert [m["rule"] for m in summary["misses"]] == ["GL104"]
    assert {f["label"] for f in summary["false_positives"]} == {"tricky-negative", "unlabelled"}
    assert "GL104" in corpus_recall.render_text(summary)


def test_end_to_end_with_gpulint(tmp_path, capsys):
    sources = write_corpus(tmp_path)
    labels = [label("train.py", 10, "GL104", sources), label("train.py", 13, "GL201", sources)]
    labels_path, manifest_path = tmp_path / "labels.jsonl", tmp_path / "manifest.json"
    corpus_recall.write_labels(labels_path, labels)
    manifest_path.write_text(
        json.dumps({"repos": {REPO: {"commit": "0" * 40}}, "files": [{"repo": REPO, "path": "train.py"}]})
    )
    argv = [str(tmp_path), "--labels", str(labels_path), "--manifest", str(manifest_path), "--json", "--jobs", "1"]
    assert corpus_recall.main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["per_rule"]["GL104"]["tp"] == 1 and summary["per_rule"]["GL201"]["tp"] == 1
    assert corpus_recall.main(["--manifest", str(manifest_path), "--fetch-commands"]) == 0
    assert f"git clone --filter=blob:none --no-checkout https://github.com/{REPO}.git" in capsys.readouterr().out


def test_default_output_scores_only_what_a_default_run_prints(tmp_path, capsys):
    # the loader's dataset is not visible: GL102 is a hint, shown by the harness's own run
    # (`--show-hints`) and left out of what a default run prints
    sources = write_corpus(tmp_path)
    labels = [label("train.py", 4, "GL102", sources), label("train.py", 13, "GL201", sources)]
    labels_path, manifest_path = tmp_path / "labels.jsonl", tmp_path / "manifest.json"
    corpus_recall.write_labels(labels_path, labels)
    manifest_path.write_text(
        json.dumps({"repos": {REPO: {"commit": "0" * 40}}, "files": [{"repo": REPO, "path": "train.py"}]})
    )
    saved = tmp_path / "findings.json"
    common = [str(tmp_path), "--labels", str(labels_path), "--manifest", str(manifest_path), "--json"]
    assert corpus_recall.main([*common, "--jobs", "1", "--save-findings", str(saved)]) == 0
    shown = json.loads(capsys.readouterr().out)["per_rule"]
    assert corpus_recall.main([*common, "--findings", str(saved), "--default-output"]) == 0
    printed = json.loads(capsys.readouterr().out)["per_rule"]
    assert shown["GL102"]["tp"] == 1 and (printed["GL102"]["tp"], printed["GL102"]["fn"]) == (0, 1)
    assert shown["GL201"]["tp"] == printed["GL201"]["tp"] == 1
