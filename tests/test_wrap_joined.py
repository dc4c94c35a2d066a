"""A statement split over lines that a fix makes too long is joined, then wrapped again: the line
breaks it had become nothing inside brackets, and a space where Python or PEP 8 wants one -- before
a generator's `for` (without it the joined code is not valid and the run stopped with an internal
error), between strings written one after the other, after a dict's colon.
"""

from __future__ import annotations

import pytest

from tests.helpers import run_cli

SCRIPT = """\
import torch

device = torch.device("cuda")


def train(model, loader, sizes):
    for data, target in loader:
{statement}
        out.backward()
"""


@pytest.mark.parametrize(
    ("statement", "argument"),
    [
        (
            "        out = model(data.to(device), some_long_argument_name, weights=sum(w\n"
            "                                                                          for w in sizes))",
            "weights=sum(w for w in sizes),",
        ),
        (
            '        out = model(data.to(device), some_long_argument_name, another_argument, "epoch "\n'
            '                    "done")',
            '"epoch " "done",',
        ),
        (
            '        out = model(data.to(device), some_long_argument_name, another_argument, {"mode":\n'
            '                                                                      "train"})',
            '{"mode": "train"},',
        ),
    ],
)
def test_a_split_statement_a_fix_lengthens_is_joined_with_the_spaces_it_needs(
    tmp_path, monkeypatch, capsys, statement, argument
):
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(SCRIPT.format(statement=statement))
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["check", "train.py", "--fix", "--no-cache"], capsys)
    assert "Fixed 1 problem" in out, err
    fixed = (tmp_path / "train.py").read_text()
    compile(fixed, "train.py", "exec")
    assert "data.to(device, non_blocking=True),\n" in fixed
    assert f"\n            {argument}\n" in fixed
