"""The checkout comparison (benchmarks/compare_checkouts.py) on a tiny synthetic tree: two checkouts
whose code is the same compare identical; a copy of gpulint with one rule's message changed is
reported, in the outputs that carry the message only, and the run exits 1."""

from __future__ import annotations

import importlib.util
import inspect
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "compare_checkouts.py"
sys.path.insert(0, str(SCRIPT.parent))  # (its sibling parse_probe)
spec = importlib.util.spec_from_file_location("compare_checkouts", SCRIPT)
compare_checkouts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_checkouts)

TRAIN = """\
import torch
from torch.utils.data import DataLoader

loader = DataLoader(dataset, batch_size=8)
model = Net().cuda()
for x, y in loader:
    loss = model(x.cuda(), y.cuda())
    loss.backward()
    optimizer.step()
    print(loss.item())
"""


def tiny_tree(root: Path) -> Path:
    tree = root / "acme__trainer"
    tree.mkdir()
    (tree / "pyproject.toml").write_text("")
    (tree / "train.py").write_text(TRAIN)
    return tree


def copy_of_gpulint(root: Path) -> Path:
    checkout = root / "checkout"
    shutil.copytree(REPO / "gpulint", checkout / "gpulint", ignore=shutil.ignore_patterns("__pycache__"))
    return checkout


def plant_message(checkout: Path, code: str) -> str:
    """Change rule `code`'s message in the copy; the message as it was."""
    from gpulint.rules import rules_by_code

    rule = rules_by_code()[code]
    module = checkout / Path(inspect.getsourcefile(rule)).relative_to(REPO)
    text = module.read_text()
    assert text.count(rule.message) == 1
    module.write_text(text.replace(rule.message, rule.message + " (planted)"))
    return rule.message


def test_difference_shows_the_lines_that_differ() -> None:
    assert compare_checkouts.difference(b"a\nb\n", b"a\nb\n", ("one", "two")) == []
    lines = compare_checkouts.difference(b"a\nb\n", b"a\nc\n", ("one", "two"))
    assert "-b" in lines and "+c" in lines
    assert compare_checkouts.difference(b"a\n", b"a", ("one", "two"))  # (bytes, not lines)


def test_a_difference_on_standard_error_alone_is_reported(tmp_path) -> None:
    # (a warning or note one checkout writes and the other does not; the outputs themselves agree)
    def runner(checkout: Path, tree: Path, args: list[str]) -> tuple[bytes, bytes]:
        return b"[]", b"warning: planted\n" if checkout.name == "two" else b""

    checkouts = {"one": tmp_path / "one", "two": tmp_path / "two"}
    outputs = compare_checkouts.OUTPUTS[:1]
    found = compare_checkouts.compare(tmp_path, checkouts, ["."], outputs=outputs, runner=runner)
    assert "+warning: planted" in found["findings"]


def test_same_code_is_identical_and_a_planted_difference_is_reported(tmp_path, capsys) -> None:
    tree = tiny_tree(tmp_path)
    checkout = copy_of_gpulint(tmp_path)
    checkouts = {"copy": checkout, "this checkout": REPO}
    outputs = [kind for kind in compare_checkouts.OUTPUTS if kind[0] in ("findings", "fixes")]

    same = compare_checkouts.compare(tree, checkouts, ["."], outputs=outputs)
    assert same == {"findings": [], "fixes": []}
    assert "GL201" in compare_checkouts.output_of(REPO, tree, ["--output-format", "json", "."])[0].decode()

    plant_message(checkout, "GL201")
    found = compare_checkouts.compare(tree, checkouts, ["."], outputs=outputs)
    assert found["fixes"] == []  # (a message is in no fix)
    assert any(line.startswith("-") and "(planted)" in line for line in found["findings"])
    # (and the message as this checkout writes it: GL201's is a template, filled in per finding)
    assert any(line.startswith("+") and '"message"' in line and "(planted)" not in line for line in found["findings"])

    capsys.readouterr()
    assert compare_checkouts.main([str(checkout), str(tree)]) == 1
    printed = capsys.readouterr().out
    assert "DIFFERENT" in printed and "DIFFERENCES FOUND" in printed
