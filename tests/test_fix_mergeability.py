"""The fix mergeability harness (benchmarks/fix_mergeability.py) on a synthetic diff and a tiny tree.

The labelled repositories live outside this project; these tests split a diff written here into
hunks, attribute them to the rules whose fix edits touch them, key and join them to labels, and
once run gpulint itself on a small tree.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "benchmarks" / "fix_mergeability.py"
spec = importlib.util.spec_from_file_location("fix_mergeability", HARNESS)
mergeability = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mergeability  # dataclasses look their module up there
spec.loader.exec_module(mergeability)

REPO = "acme/trainer"
DIFF = "\n".join(
    [
        "--- a/train.py",
        "+++ b/train.py",
        "@@ -1,3 +1,4 @@",
        " import torch",
        "+import os",
        " from torch.utils.data import DataLoader",
        " ",
        "@@ -10,4 +11,4 @@",
        " for x, y in loader:",
        "-    x = x.cuda()",
        "+    x = x.cuda(non_blocking=True)",
        "     loss = model(x)",
        "--- a/notebooks/demo.ipynb:cell 3",
        "+++ b/notebooks/demo.ipynb:cell 3",
        "@@ -1,2 +1,2 @@",
        "-ds = ds.map(parse)",
        "+ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)",
        " model.fit(ds)",
        "",
    ]
)


def record(path, row, end, code, message, cell=None, edits=None):
    edits = [(row, end)] if edits is None else edits
    return {
        "filename": path,
        "cell": cell,
        "code": code,
        "location": {"row": row},
        "end_location": {"row": row},
        "fix": {
            "message": message,
            "edits": [{"location": {"row": a}, "end_location": {"row": b}} for a, b in edits],
        },
    }


RECORDS = [
    # GL101's fix edits line 11 (no hunk there) and adds `import os` before line 2
    record("train.py", 11, 12, "GL101", "Load batches in 8 worker processes", edits=[(2, 2), (30, 31)]),
    record("train.py", 11, 12, "GL104", "Copy asynchronously: `non_blocking=True`"),
    record("train.py", 11, 12, "GL102", "Pin host memory", edits=[(40, 41)]),  # touches no hunk
    # a notebook fix JSON could not place: attributed by the finding's own line
    record("notebooks/demo.ipynb", 1, 1, "GL701", "Run `map` in parallel", cell=3, edits=[]),
]


def hunks(tree=Path("/tree")):
    return mergeability.attribute(mergeability.split_diff(DIFF, REPO), RECORDS, tree)


def test_a_diff_is_split_into_hunks_per_file_and_cell_with_their_original_lines():
    split = mergeability.split_diff(DIFF, REPO)
    assert [(h.path, h.cell, h.old_start) for h in split] == [
        ("train.py", None, 1),
        ("train.py", None, 10),
        ("notebooks/demo.ipynb", 3, 1),
    ]
    assert split[1].body == (
        " for x, y in loader:",
        "-    x = x.cuda()",
        "+    x = x.cuda(non_blocking=True)",
        "     loss = model(x)",
    )
    assert [h.changed_rows() for h in split] == [(1, 2), (11, 11), (1, 1)]


def test_hunks_belong_to_the_rules_whose_edits_touch_them_and_their_kind_hides_numbers():
    kinds = [h.kind for h in hunks()]
    assert kinds == [
        "GL101: Load batches in N worker processes",
        "GL104: Copy asynchronously: `non_blocking=True`",
        "GL701: Run `map` in parallel",
    ]


def test_a_hunk_key_is_its_changed_text_so_it_survives_moving_lines():
    first = mergeability.split_diff(DIFF, REPO)[1]
    moved = mergeability.split_diff(DIFF.replace("@@ -10,4 +11,4 @@", "@@ -40,4 +41,4 @@"), REPO)[1]
    edited = mergeability.split_diff(DIFF.replace("non_blocking=True)", "non_blocking=False)"), REPO)[1]
    assert first.sha1 == moved.sha1 != edited.sha1 and first.old_start != moved.old_start


def test_hunk_labels_win_over_kind_labels_and_unmatched_labels_are_listed():
    found = hunks()
    labels = [
        mergeability.FixLabel(REPO, "needs-edits", "kind", kind=found[1].kind),
        mergeability.FixLabel(REPO, "mergeable", "hunk", path="train.py", hunk=found[1].sha1),
        mergeability.FixLabel(REPO, "wrong", "gone", path="train.py", hunk="0" * 10),
        mergeability.FixLabel(REPO, "wrong", "cell", path="notebooks/demo.ipynb", cell=3, hunk=found[2].sha1),
    ]
    result = mergeability.join(labels, found)
    assert [label and label.reason for _, label in result.judged] == [None, "hunk", "cell"]
    assert [label.reason for label in result.unmatched] == ["kind", "gone"]
    summary = mergeability.summarize(result)
    assert summary["overall"]["hunks"] == 3 and summary["overall"]["unread"] == 1
    assert summary["overall"]["kinds_with_wrong"] == 1 and summary["overall"]["wrong_share"] == 0.5
    assert summary["per_kind"]["GL701: Run `map` in parallel"]["wrong"] == 1
    text = mergeability.render_text(summary, show_hunks=True)
    assert "Unlabelled hunks, to read (1)" in text and "+import os" in text
    assert "Labels no hunk matches any more (2)" in text


def test_a_label_names_a_kind_or_a_hunk_and_a_known_verdict(tmp_path):
    path = tmp_path / "fix_labels.jsonl"
    path.write_text(json.dumps({"repo": REPO, "verdict": "fine", "reason": "", "kind": "k"}) + "\n")
    with pytest.raises(ValueError, match="fix_labels.jsonl:1: verdict must be one of"):
        mergeability.load_labels(path)
    path.write_text(json.dumps({"repo": REPO, "verdict": "wrong", "reason": ""}) + "\n")
    with pytest.raises(ValueError, match="either a kind or a hunk"):
        mergeability.load_labels(path)


@pytest.mark.slow
def test_end_to_end_on_a_tree_with_gpulint_and_saved_diffs(tmp_path, capsys):
    tree = tmp_path / "trees" / "acme__trainer"
    tree.mkdir(parents=True)
    (tree / "train.py").write_text(
        "import torch\n\nmodel = Net().cuda()\nfor x, y in loader:\n    loss = model(x.cuda()).mean()\n"
        "    loss.backward()\n    optimizer.step()\n"
    )
    manifest, labels = tmp_path / "manifest.json", tmp_path / "fix_labels.jsonl"
    manifest.write_text(json.dumps({"repos": {REPO: {"commit": "a" * 40, "licence": "MIT"}}}))
    labels.write_text("")
    common = ["--trees", str(tmp_path / "trees"), "--manifest", str(manifest), "--labels", str(labels), "--json"]
    saved = tmp_path / "saved"
    assert mergeability.main([*common, "--save-diffs", str(saved)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["per_kind"]["GL104: Copy asynchronously: `non_blocking=True`"]["unread"] == 1
    assert "x.cuda(non_blocking=True)" in (saved / "acme__trainer.diff").read_text()
    assert mergeability.main([*common, "--diffs", str(saved)]) == 0
    assert json.loads(capsys.readouterr().out) == summary


def test_the_hunks_of_a_diff_patch_the_original_and_a_stale_one_does_not_apply():
    original = "".join(f"line {n}\n" for n in range(1, 21))
    diff = "\n".join(
        [
            "--- a/f.py",
            "+++ b/f.py",
            "@@ -2,3 +2,4 @@",
            " line 2",
            "+new after 2",
            " line 3",
            " line 4",
            "@@ -10,3 +11,3 @@",
            " line 10",
            "-line 11",
            "+changed 11",
            " line 12",
        ]
    )
    hunks = mergeability.split_diff(diff, REPO)
    expected = original.replace("line 2\n", "line 2\nnew after 2\n").replace("line 11\n", "changed 11\n")
    assert mergeability.patched(original, hunks) == expected
    assert mergeability.patched(original.replace("line 11", "line eleven"), hunks) is None


def _ruff_missing() -> bool:
    return subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True).returncode != 0


@pytest.mark.skipif(_ruff_missing(), reason="ruff is not installed (the dev extra)")
def test_the_formatter_check_reports_files_the_fixes_leave_unformatted_at_the_projects_settings(tmp_path):
    tree = tmp_path / "acme__trainer"
    (tree / "pkg").mkdir(parents=True)
    # Formatted at 100 columns, not at ruff's default 88: the check must read the project's settings.
    wide = "loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)\n"
    (tree / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    (tree / "pkg" / "clean.py").write_text(wide)
    (tree / "pkg" / "broken.py").write_text(wide)
    (tree / "messy.py").write_text("x = (1,\n  2)\n")

    def hunk(path: str, old: str, new: str) -> str:
        return f"--- a/{path}\n+++ b/{path}\n@@ -1,1 +1,1 @@\n-{old}\n+{new}"

    keep = wide.rstrip("\n").replace("shuffle=True", "shuffle=False")
    break_it = wide.rstrip("\n").replace("(train_set", "( train_set")
    diff = "\n".join(
        [
            hunk("pkg/clean.py", wide.rstrip("\n"), keep),
            hunk("pkg/broken.py", wide.rstrip("\n"), break_it),
            "--- a/messy.py\n+++ b/messy.py\n@@ -1,2 +1,2 @@\n-x = (1,\n+x = (3,\n   2)",
        ]
    )
    check = mergeability.formatter_check(tree, mergeability.split_diff(diff, REPO))
    assert check["files"] == 3 and check["unpatched"] == []
    # (messy.py was unformatted before the fix: not the fix's doing)
    assert check["formatters"] == {"ruff": {"before": ["messy.py"], "new": ["pkg/broken.py"]}}


def _yapf_missing() -> bool:
    return subprocess.run([sys.executable, "-m", "yapf", "--version"], capture_output=True).returncode != 0


@pytest.mark.skipif(_yapf_missing(), reason="yapf is not installed (the dev extra)")
def test_the_formatter_check_runs_yapf_where_the_project_formats_with_it(tmp_path):
    tree = tmp_path / "acme__trainer"
    tree.mkdir()
    # pytorch_geometric's setup: yapf formats (its pre-commit hook, `[tool.yapf]`), ruff only lints.
    (tree / "pyproject.toml").write_text('[tool.yapf]\nbased_on_style = "pep8"\n\n[tool.ruff]\nline-length = 79\n')
    (tree / ".pre-commit-config.yaml").write_text(
        "repos:\n  - repo: https://github.com/google/yapf\n    hooks:\n      - id: yapf\n"
    )
    assert mergeability.configured_formatters(tree) == ["ruff", "yapf"]
    aligned = "loader = make_loader(train_set, args.batch_size, args.num_workers,\n                     args.shuffle)\n"
    (tree / "aligned.py").write_text(aligned)
    (tree / "broken.py").write_text(aligned)
    black = "loader = make_loader(\n    train_set, args.batch_size, args.num_workers, args.shuffle_each_epoch\n)"
    diff = "\n".join(
        [
            "--- a/aligned.py\n+++ b/aligned.py\n@@ -1,2 +1,2 @@\n"
            " loader = make_loader(train_set, args.batch_size, args.num_workers,\n"
            "-                     args.shuffle)\n+                     args.shuffle_each_epoch)",
            "--- a/broken.py\n+++ b/broken.py\n@@ -1,2 +1,3 @@\n"
            "-loader = make_loader(train_set, args.batch_size, args.num_workers,\n-                     args.shuffle)\n"
            + "\n".join("+" + line for line in black.split("\n")),
        ]
    )
    check = mergeability.formatter_check(tree, mergeability.split_diff(diff, REPO))
    assert check["files"] == 2 and check["unpatched"] == []
    # (the aligned layout is yapf's, not ruff format's: each formatter judges by its own)
    assert check["formatters"]["yapf"] == {"before": [], "new": ["broken.py"]}
    assert check["formatters"]["ruff"]["before"] == ["aligned.py", "broken.py"]
