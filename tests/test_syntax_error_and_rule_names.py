"""GL000 (a file that does not parse) is a rule like the others: ignored, selected and explained;
and a rule's name works wherever its code does in a suppression comment, and stays as written."""

from __future__ import annotations

import textwrap

import pytest

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.run.add_suppressions import suppress_source
from tests.helpers import run_cli

BROKEN = """\
import torch
from torch.utils.data import DataLoader
model = torch.nn.Linear(1, 1).cuda()
loader = DataLoader(ds,
"""

# One finding of another rule (GL102, over a dataset that decodes its files), so a selection has
# something else to show.
UNPINNED = """\
import torch
import torchvision
from torch.utils.data import DataLoader
model = torch.nn.Linear(1, 1).cuda()
loader = DataLoader(torchvision.datasets.ImageFolder("data"), num_workers=4)
"""

LOOP = """\
import torch
model = torch.nn.Linear(1, 1).cuda()
for batch in loader:
    loss = model(batch).sum()
    loss.backward()
    optimizer.step()
    value = loss.item(){comment}
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "broken.py").write_text(BROKEN)
    (tmp_path / "unpinned.py").write_text(UNPINNED)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _codes(capsys, *args: str) -> tuple[list[str], str]:
    _, out, err = run_cli(["--no-cache", "--output-format", "concise", *args], capsys)
    assert "Traceback" not in err, err
    return [line.split()[1] for line in out.splitlines() if ": GL" in line], out


def test_ignore_gl000_hides_syntax_errors(project, capsys):
    # (hints shown: the good file's GL102 is a hint by default, and it shows the run went on)
    assert _codes(capsys, ".", "--show-hints")[0] == ["GL000", "GL102"]
    codes, out = _codes(capsys, ".", "--show-hints", "--ignore", "GL000")
    assert codes == ["GL102"] and "broken.py" not in out
    (project / "pyproject.toml").write_text(
        '[tool.gpulint]\nshow-hints = true\nper-file-ignores = { "broken.py" = ["syntax-error"] }\n'
    )
    assert _codes(capsys, ".")[0] == ["GL102"]


def test_select_gl000_shows_only_syntax_errors(project, capsys):
    codes, out = _codes(capsys, ".", "--select", "GL000")
    assert codes == ["GL000"] and "broken.py:4:20: GL000 SyntaxError" in out
    assert "All checks passed!" not in out


def test_selecting_other_rules_does_not_hide_that_a_file_was_not_checked(project, capsys):
    # (the file is one GL102 would check: it names a DataLoader and a GPU)
    assert _codes(capsys, ".", "--select", "GL102")[0] == ["GL000", "GL102"]
    assert _codes(capsys, ".", "--select", "GL102", "--ignore", "GL000")[0] == ["GL102"]


def test_gpulint_rule_gl000_explains_it(capsys):
    code, out, err = run_cli(["rule", "GL000"], capsys)
    assert code == 0, err
    assert out.startswith("# GL000 syntax-error") and "--ignore GL000" in out
    code, out, _ = run_cli(["rule", "syntax-error"], capsys)
    assert code == 0 and out.startswith("# GL000 syntax-error")


# -- rule names in suppression comments ---------------------------------------------------------


def _lint(source: str, select: tuple[str, ...] = ("GL201",)) -> list[tuple[int, str]]:
    linter = Linter(Settings(select=list(select)))
    return [(f.location.row, f.code) for f in linter.lint_source(source.encode(), "train.py").findings]


def test_a_rule_name_silences_its_rule():
    assert _lint(LOOP.format(comment="")) == [(7, "GL201")]
    assert _lint(LOOP.format(comment="  # gpulint: ignore[host-sync-in-loop]")) == []
    assert _lint(LOOP.format(comment="  # gpulint: ignore[per-step-logging]")) == [(7, "GL201")]


def test_an_unused_rule_name_is_reported_as_written():
    source = LOOP.format(comment="") + "x = 1  # gpulint: ignore[dataloader-serial]\n"
    linter = Linter(Settings(select=["GL201", "GL101", "GL900"]))
    (unused,) = [f for f in linter.lint_source(source.encode(), "train.py").findings if f.code == "GL900"]
    assert unused.message == "Unused suppression of dataloader-serial: nothing to suppress on this line"
    used = LOOP.format(comment="  # gpulint: ignore[host-sync-in-loop]")
    assert [f.code for f in linter.lint_source(used.encode(), "train.py").findings] == []


def test_add_suppressions_keeps_rule_names_as_written(tmp_path, monkeypatch, capsys):
    source = LOOP.format(comment="  # gpulint: ignore[per-step-logging]")
    (tmp_path / "train.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["--no-cache", "--select", "GL201", "--add-suppressions", "."], capsys)
    assert code == 0, err
    written = (tmp_path / "train.py").read_text().splitlines()[6]
    assert written == "    value = loss.item()  # gpulint: ignore[GL201, per-step-logging]"
    # A code written in lower case is still normalised as before.
    text, added, _ = suppress_source(textwrap.dedent("x = f()  # gpulint: ignore[gl302]\n"), [])
    assert (text, added) == ("x = f()  # gpulint: ignore[gl302]\n", 0)
