"""--add-suppressions (silence today's findings, idempotently, never breaking a file) and unused
suppressions (GL900, --report-unused-suppressions)."""

from __future__ import annotations

import shutil
import textwrap

import libcst as cst

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.run.add_suppressions import comment_rows, suppress_source
from tests.helpers import FIXTURES, lint
from tests.integrations.conftest import run_cli
from tests.test_cross_module_chain import DATA, MODEL, TRAIN, UTILS

LOOP = textwrap.dedent(
    '''\
    import torch
    from torch.utils.data import DataLoader


    def train(ds, model, optimizer):
        loader = DataLoader(ds, batch_size=8)  # a note
        model.cuda()
        for step, (x, y) in enumerate(loader):
            loss = model(x.cuda(non_blocking=True), y)
            loss.backward()
            optimizer.step()
            text = """loss
            %s""" % loss.item()
            print(loss.item())  # gpulint: ignore[GL302]
    '''
)


def test_add_suppressions_silences_everything_once(tmp_path, monkeypatch, capsys):
    for path in FIXTURES.glob("*.py"):
        shutil.copy(path, tmp_path / path.name)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli([".", "--select", "ALL"], capsys)
    assert code == 1
    before = {p.name: p.read_text() for p in tmp_path.glob("*.py")}

    code, _, err = run_cli([".", "--select", "ALL", "--add-suppressions"], capsys)
    assert code == 0, err
    assert "Added" in err
    after = {p.name: p.read_text() for p in tmp_path.glob("*.py")}
    for name, text in after.items():
        cst.parse_module(text)  # every file still parses
        assert len(text.splitlines()) == len(before[name].splitlines())  # comments only, no new lines
    code, out, err = run_cli([".", "--select", "ALL"], capsys)
    assert code == 0, out  # nothing left to report
    code, _, err = run_cli([".", "--select", "ALL", "--add-suppressions"], capsys)
    assert "Added 0 suppressions in 0 files." in err
    assert {p.name: p.read_text() for p in tmp_path.glob("*.py")} == after  # second run adds nothing


def _cross_module_tree(folder):
    """train.py's loop calls helpers of utils.py that read the loss on the host: the project index
    reports those findings in utils.py, explained by train.py."""
    for name, text in (("train.py", TRAIN), ("utils.py", UTILS), ("model.py", MODEL), ("data.py", DATA)):
        (folder / name).write_text(text)


def test_add_suppressions_silences_what_the_project_index_reports(tmp_path, monkeypatch, capsys):
    _cross_module_tree(tmp_path)
    shutil.copy(FIXTURES / "notebooks" / "clean" / "pytorch_training.ipynb", tmp_path / "clean.ipynb")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(["--no-cache", "."], capsys)
    assert code == 1 and "utils.py:7:12: GL201" in out and "called from train.py" in out
    notebook = (tmp_path / "clean.ipynb").read_bytes()

    code, _, err = run_cli(["--no-cache", "--add-suppressions", "."], capsys)
    assert code == 0, err
    assert "notebook" not in err and "error" not in err  # nothing to say about files with nothing to do
    assert err.strip() == "Added 3 suppressions in 2 files."
    assert "return t.item()  # gpulint: ignore[GL201]" in (tmp_path / "utils.py").read_text()
    assert (tmp_path / "clean.ipynb").read_bytes() == notebook
    code, out, err = run_cli(["--no-cache", "."], capsys)
    assert (code, out.strip(), err) == (0, "All checks passed!", "")


def test_add_suppressions_names_a_notebook_it_leaves_findings_in(tmp_path, monkeypatch, capsys):
    _cross_module_tree(tmp_path)
    shutil.copy(FIXTURES / "notebooks" / "pytorch_training.ipynb", tmp_path / "nb.ipynb")
    monkeypatch.chdir(tmp_path)
    # (hints shown: the notebook's findings are most of them held back as hints by default)
    code, _, err = run_cli(["--no-cache", "--show-hints", "--add-suppressions", "."], capsys)
    # as ruff's --add-noqa: what could be written was, so the run succeeded; what it left is a warning
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("gpulint: warning:")]
    assert len(warnings) == 1 and "nb.ipynb: 8 findings not suppressed" in warnings[0]
    assert "does not edit notebooks" in warnings[0]
    code, out, _ = run_cli(["--no-cache", "--show-hints", "."], capsys)
    assert code == 1 and {line.split(":")[0] for line in out.splitlines() if ": GL" in line} == {"nb.ipynb"}


def test_add_suppressions_leaves_a_file_edited_since_it_was_linted(tmp_path, monkeypatch):
    from gpulint.linter.run.add_suppressions import add_suppressions
    from gpulint.linter.run.outcome import RunOptions
    from gpulint.linter.run.runner import run
    from gpulint.linter.run.safe_files import WriteScope

    _cross_module_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    result = run([tmp_path], settings, RunOptions())
    edited = "import os\n" + UTILS  # (the rows the findings name moved down one)
    (tmp_path / "utils.py").write_text(edited)
    outcome = add_suppressions(result, WriteScope.of([tmp_path]), settings.size_limit)
    assert outcome.errors == ["utils.py: changed while it was linted; left unchanged"]
    assert (tmp_path / "utils.py").read_text() == edited
    assert outcome.files == 1 and "# gpulint: ignore[GL104]" in (tmp_path / "train.py").read_text()


def test_add_suppressions_merges_and_avoids_string_lines():
    every = ["ALL", "GL101", "GL102"]  # (the loader's findings are hints: its dataset is not visible)
    findings = lint(LOOP, every)
    new_text, added, skipped = suppress_source(LOOP, findings)
    assert not skipped and added == len({(f.location.row, f.code) for f in findings})
    lines = new_text.splitlines()
    # merged into the existing comment, codes in order
    assert lines[13].endswith("print(loss.item())  # gpulint: ignore[GL201, GL302]")
    # the loader line keeps its own comment and gets ours after it
    assert lines[5].endswith("# a note  # gpulint: ignore[GL101, GL102]")
    # the multi-line string's first line is untouched: a comment there would land inside the string
    assert lines[11].endswith('text = """loss')
    cst.parse_module(new_text)
    assert lint(new_text, every) == []


def test_comment_rows_exclude_string_interiors_and_continuations():
    text = 'a = """x\ny""" + \\\n    b\nc = 1\n'
    assert comment_rows(text) == {3, 4}  # row 1 ends inside the string, row 2 with a backslash


def test_statement_row_used_when_the_reported_line_cannot_take_a_comment():
    source = LOOP.replace(
        "        print(loss.item())  # gpulint: ignore[GL302]\n",
        '        pair = (\n            loss.item(), """tail\n            """)\n',
    )
    findings = [f for f in lint(source, "GL201") if f.location.row == 15]
    assert findings and findings[0].statement_row == 14
    new_text, added, skipped = suppress_source(source, findings)
    assert added == 1 and not skipped
    assert new_text.splitlines()[13].endswith("pair = (  # gpulint: ignore[GL201]")
    assert [f for f in lint(new_text, "GL201") if f.location.row == 15] == []


def test_crlf_line_endings_are_kept():
    source = LOOP.replace("\n", "\r\n")
    findings = lint(LOOP, "ALL")
    new_text, _, _ = suppress_source(source, findings)
    assert "\r\n" in new_text and "\n" not in new_text.replace("\r\n", "")


# -- unused suppressions ----------------------------------------------------------------------------
UNUSED = textwrap.dedent(
    """\
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(ds, num_workers=4, pin_memory=True)  # gpulint: ignore[GL101]
    other = DataLoader(ds, pin_memory=True)  # noqa: GL101, GL102
    x = 1  # noqa: E501
    y = 2  # noqa
    z = 3  # gpulint: ignore
    w = 4  # gpulint: ignore[GL999]
    model = torch.nn.Linear(1, 1).cuda()
    """
)


def _gl900(source: str, select: list[str]) -> list[tuple[int, str]]:
    return [(f.location.row, f.message) for f in lint(source, select) if f.code == "GL900"]


def test_unused_suppressions_only_when_gl900_is_selected():
    # The suppression stage produces GL900 (not a tree rule): it must still honour the selection.
    # What it reports is in GL900's cases (gpulint/rules/meta/unused_suppression.py).
    assert _gl900(UNUSED, ["GL1"]) == []
    assert [row for row, _ in _gl900(UNUSED, ["GL1", "GL900"])] == [4, 5, 8, 9]


def test_selecting_gl900_parses_nothing_more():
    linter = Linter(Settings(select=["GL900"]))
    assert linter.analyze(b"import torch\nx = 1  # noqa: GL101\n", "a.py") is None


def test_report_unused_suppressions_flag(tmp_path, monkeypatch, capsys):
    (tmp_path / "t.py").write_text(UNUSED)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(["t.py"], capsys)
    assert "GL900" not in out
    code, out, _ = run_cli(["t.py", "--report-unused-suppressions"], capsys)
    assert code == 1 and out.count("GL900") == 4
