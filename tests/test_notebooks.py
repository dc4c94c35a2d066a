"""Notebooks: linted cell by cell as one module, reported in cell coordinates, fixed in place with
outputs, metadata and the JSON layout untouched."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.run.files import discover
from gpulint.linter.run.notebook.cells import NotebookError, classify, join, make_cell, map_back, split_lines
from gpulint.linter.run.outcome import RunOptions
from gpulint.linter.run.process import process_file
from gpulint.linter.run.runner import run
from gpulint.rules import rules_by_code
from tests.helpers import FIXTURES, run_cli

NOTEBOOKS = FIXTURES / "notebooks"
BAD = NOTEBOOKS / "pytorch_training.ipynb"
CLEAN = NOTEBOOKS / "clean" / "pytorch_training.ipynb"
_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9,\s]+)")


def expected_cell_markers(path: Path) -> set[tuple[int, int, str]]:
    """(cell, row in cell, code) from `# expect:` comments in a notebook's code cells."""
    expected = set()
    for number, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"], start=1):
        if cell["cell_type"] != "code":
            continue
        for row, line in enumerate("".join(cell["source"]).splitlines(), start=1):
            match = _EXPECT.search(line)
            if match:
                expected |= {(number, row, code) for code in re.split(r"[,\s]+", match.group(1).strip()) if code}
    return expected


def outcome_for(path: Path, select="ALL", unsafe_fixes=False, **options):
    # (hints shown: these tests are about notebooks, whatever evidence of a cost a finding has)
    selected = [select] if isinstance(select, str) else select
    settings = Settings(select=selected, unsafe_fixes=unsafe_fixes, show_hints=True)
    return process_file(path, Linter(settings), RunOptions(**options))


def findings_of(path: Path, select="ALL"):
    outcome = outcome_for(path, select)
    assert not outcome.errors, outcome.errors
    return outcome.result.findings


def write_notebook(path: Path, cells: list, indent=1, ensure_ascii=False, tail="\n", metadata=None, **dump) -> Path:
    """A notebook file from (cell_type, source) pairs, laid out as asked."""
    nb = nbformat.v4.new_notebook(metadata=metadata or {"language_info": {"name": "python"}})
    for index, (kind, source) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
        cell["id"] = f"cell-{index}"
        nb.cells.append(cell)
    path.write_text(
        json.dumps(nb, indent=indent, ensure_ascii=ensure_ascii, **dump) + tail, encoding="utf-8", newline=""
    )
    return path


def without_sources(nb: dict) -> dict:
    copy = json.loads(json.dumps(nb))
    for cell in copy["cells"]:
        cell.pop("source")
    return copy


# -- the fixture notebooks --------------------------------------------------------------------


def test_planted_findings_reported_exactly_once_in_cell_coordinates():
    # (hints shown: a marker is a finding, whether or not it shows evidence of a real cost)
    outcome = process_file(BAD, Linter(Settings(select=["ALL"], show_hints=True)), RunOptions())
    assert not outcome.errors, outcome.errors
    findings = outcome.result.findings
    triples = [(f.extra["cell"], f.location.row, f.code) for f in findings]
    assert len(triples) == len(set(triples)), "a finding is reported twice"
    assert set(triples) == expected_cell_markers(BAD)
    for finding in findings:
        assert (
            finding.display_location == f"cell {finding.extra['cell']}:{finding.location.row}:{finding.location.column}"
        )
        assert finding.statement_row is not None


def test_default_selection_reports_the_non_hint_markers():
    """The default rules' markers, except the findings that are hints: held back, and counted."""
    everything = process_file(BAD, Linter(Settings(show_hints=True)), RunOptions()).result.findings
    hints = {(f.extra["cell"], f.location.row, f.code) for f in everything if f.hint is not None}
    expected = {t for t in expected_cell_markers(BAD) if rules_by_code()[t[2]].default == "on"}
    outcome = process_file(BAD, Linter(Settings()), RunOptions())
    assert {(f.extra["cell"], f.location.row, f.code) for f in outcome.result.findings} == expected - hints
    assert hints & expected and outcome.result.held_back == len(hints & expected)


def test_clean_twin_has_no_findings():
    assert findings_of(CLEAN) == []


def test_cells_are_counted_with_markdown_and_columns_are_the_cells_own():
    # Cell 10 is the `%%time` training cell (markdown cells count); `.item()` in
    # `history.append(loss.item())` starts at column 24 of its line.
    source = "".join(json.loads(BAD.read_text())["cells"][9]["source"])
    line = source.splitlines()[13]
    assert line.strip().startswith("history.append(loss.item())")
    finding = next(f for f in findings_of(BAD) if f.extra["cell"] == 10 and f.location.row == 14)
    assert finding.location.column == line.index("loss.item()") + 1


def test_text_and_json_reports_carry_the_cell(tmp_path, capsys):
    copy = shutil.copy(BAD, tmp_path / "nb.ipynb")
    # (GL302 is held back as a hint by default: shown, as the notebook's owner who wants it sees it)
    _, out, _ = run_cli(["check", "--select", "ALL", "--show-hints", str(copy)], capsys)
    assert re.search(r"nb\.ipynb:cell 10:15:9: GL302 ", out), out
    _, out, _ = run_cli(["check", "--select", "ALL", "--show-hints", "--format", "json", str(copy)], capsys)
    rows = json.loads(out)
    gl302 = next(r for r in rows if r["code"] == "GL302")
    assert (gl302["cell"], gl302["location"]["row"], gl302["noqa_row"]) == (10, 15, 15)


def test_json_fix_edits_are_in_the_cells_coordinates(tmp_path):
    copy = shutil.copy(BAD, tmp_path / "nb.ipynb")
    outcome = outcome_for(Path(copy), with_edits=True)
    gl102 = next(f for f in outcome.result.findings if f.code == "GL102" and f.location.row == 5)
    assert gl102.fix.edits, "a one-cell fix keeps its edits"
    edit = gl102.fix.edits[0]
    assert edit.location.row == 5 and "pin_memory=torch.cuda.is_available()" in edit.content


def test_fixing_a_copy_keeps_outputs_metadata_layout_and_magics(tmp_path):
    copy = Path(shutil.copy(BAD, tmp_path / "nb.ipynb"))
    before = json.loads(copy.read_text(encoding="utf-8"))
    outcome = outcome_for(copy, fix=True, unsafe_fixes=True)
    assert not outcome.errors, outcome.errors
    assert outcome.fixed >= 4
    text = copy.read_text(encoding="utf-8")
    after = json.loads(text)
    # Only sources changed; the file is laid out as Jupyter wrote the original.
    assert without_sources(after) == without_sources(before)
    assert text == json.dumps(after, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    notebook = nbformat.read(copy, as_version=4)
    nbformat.validate(notebook)
    assert sum(len(c.get("outputs", [])) for c in notebook.cells) == sum(
        len(c.get("outputs", [])) for c in before["cells"]
    )
    # Every IPython line is still there, unchanged and in order; unfixable findings are all that is left.
    for old, new in zip(before["cells"], after["cells"], strict=True):
        if old["cell_type"] == "code":
            old_lines, new_lines = split_lines("".join(old["source"])), split_lines("".join(new["source"]))
            keep = lambda lines: [line for line, m in zip(lines, classify(lines)[0], strict=True) if m]  # noqa: E731
            assert keep(new_lines) == keep(old_lines)
    assert all(f.fix is None for f in outcome.result.findings), outcome.result.findings
    # No loader workers from a notebook: it has no `__main__` guard to start them under (GL101).
    assert "num_workers=0" in "".join(after["cells"][4]["source"])
    # A second run finds nothing to fix and writes nothing.
    second = outcome_for(copy, fix=True, unsafe_fixes=True)
    assert second.fixed == 0 and not second.errors
    assert copy.read_text(encoding="utf-8") == text


def test_diff_shows_cells_and_writes_nothing(tmp_path):
    copy = Path(shutil.copy(BAD, tmp_path / "nb.ipynb"))
    original = copy.read_bytes()
    outcome = outcome_for(copy, diff=True)
    assert copy.read_bytes() == original
    assert "--- a/" in outcome.diff and ":cell 5\n" in outcome.diff
    assert "+    pin_memory=torch.cuda.is_available(),\n" in outcome.diff
    assert outcome.fixed > 0


def test_directories_include_notebooks():
    files, errors = discover([NOTEBOOKS])
    assert not errors
    assert BAD in files and CLEAN in files


# -- IPython syntax ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "%timeit f(x)\n",
        "!pip install torch\n",
        "x = !ls\n",
        "files = %sx ls\n",
        "model?\n",
        "?model\n",
        "torch.nn??\n",
        "%%time\n",
    ],
)
def test_ipython_lines_are_recognised(line):
    assert classify([line])[0] == [True]


@pytest.mark.parametrize(
    "source",
    [
        "x = (a\n     % b)\n",  # modulo on a continuation line
        'doc = """\n%d items\n!important\n"""\n',  # inside a triple-quoted string
        "x = 1  # why?\n",  # a comment that ends with a question mark
        "y = a != b\n",
        "call(a,\\\n     b)\n",
    ],
)
def test_python_lines_are_not_taken_for_ipython(source):
    lines = split_lines(source)
    magic, python = classify(lines)
    assert python and not any(magic)


def test_indented_and_continued_magics_keep_the_cell_parseable():
    cell = make_cell(1, "for i in range(3):\n    %time f(i)\n!echo a \\\n  b\nx = 1")
    assert cell.magic == [False, True, True, True, False]
    assert cell.error is None


@pytest.mark.parametrize("source", ["ls ./data/train/\n", "\ncd ..", "pip install torch"])
def test_a_one_line_automagic_cell_is_ipython_not_a_syntax_error(source):
    cell = make_cell(1, source)
    assert cell.error is None and cell.python and cell.magic == [bool(line.strip()) for line in split_lines(source)]


@pytest.mark.parametrize(
    "source",
    [
        "ls ./data\nx = 1\n",  # automagic applies to one-line cells only
        "ls = 3 +\n",  # an assignment to a variable named like the magic
        "  def f(:\n    pass\n",  # indented and broken once dedented too
    ],
)
def test_what_ipython_would_not_run_stays_a_syntax_error(source):
    assert make_cell(1, source).error is not None


def test_a_cell_indented_as_a_whole_is_run_dedented_by_ipython_and_left_out(tmp_path):
    path = write_notebook(
        tmp_path / "nb.ipynb",
        [
            ("code", "import torch\nmodel = model.cuda()"),
            ("code", " for x in windows.take(30):\n   print(x.numpy(), end=' ')\n"),
            ("code", "ls ./data/train/"),
            ("code", TRAIN + "    print(loss.item())"),
        ],
    )
    found = {(f.extra["cell"], f.location.row, f.code) for f in findings_of(path, ["GL201"])}
    assert found == {(4, 5, "GL201")}
    assert not make_cell(2, " for x in ds:\n   print(x)\n").python


def test_cell_magics_python_bodies_are_linted_others_skipped(tmp_path):
    path = write_notebook(
        tmp_path / "nb.ipynb",
        [
            (
                "code",
                "import torch\nfrom torch.utils.data import DataLoader\n"
                "loader = DataLoader(ds, num_workers=2)\nmodel = model.cuda()",
            ),
            (
                "code",
                "%%capture\nfor x, y in loader:\n"
                "    loss = model(x).sum()\n    loss.backward()\n    opt.step()\n    print(loss.item())",
            ),
            ("code", "%%bash\nfor x in loader:\n  echo $x.item()\ndone"),
            ("code", "%%writefile train.py\nfor x, y in loader:\n    loss.backward()\n    print(loss.item())"),
        ],
    )
    found = {(f.extra["cell"], f.location.row, f.code) for f in findings_of(path, "GL201")}
    assert found == {(2, 6, "GL201")}


def test_top_level_await_and_a_first_line_magic_parse(tmp_path):
    path = write_notebook(
        tmp_path / "nb.ipynb",
        [("code", "%load_ext autoreload\nimport torch\nawait asyncio.sleep(0)\nx = torch.ones(1)")],
    )
    outcome = outcome_for(path)
    assert not outcome.errors and outcome.result.findings == []


# -- suppressions, broken cells, bad files ---------------------------------------------------------


TRAIN = "for x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n    opt.step()\n"


def test_suppressions_work_per_line(tmp_path):
    path = write_notebook(
        tmp_path / "nb.ipynb",
        [
            ("code", "import torch\nmodel = model.cuda()"),
            ("code", TRAIN + "    a = loss.item()  # noqa: GL201\n    b = loss.item()"),
        ],
    )
    assert [(f.extra["cell"], f.location.row) for f in findings_of(path, "GL201")] == [(2, 6)]


def test_a_broken_cell_is_reported_where_it_is_and_the_others_are_still_linted(tmp_path):
    path = write_notebook(
        tmp_path / "nb.ipynb",
        [
            ("code", "import torch\nmodel = model.cuda()"),
            ("code", "def broken(:\n    pass"),
            ("code", TRAIN + "    print(loss.item())"),
        ],
    )
    found = {(f.extra["cell"], f.location.row, f.code) for f in findings_of(path, ["GL201"])}
    assert (2, 1, "GL000") in found
    assert (3, 5, "GL201") in found


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "invalid JSON at line 1 column 2"),
        (b"[1, 2]", "top level is not a JSON object"),
        (b'{"nbformat": 3, "worksheets": []}', "nbformat 3 notebooks are not supported"),
        (b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": 5}]}', "cell 1: `source` is not text"),
        (b'{"nbformat": 4}', "no `cells` list"),
        (b'{"cells": ["\xff"]}', "not UTF-8"),
    ],
)
def test_bad_notebooks_get_one_clear_line(tmp_path, capsys, content, message):
    path = tmp_path / "bad.ipynb"
    path.write_bytes(content)
    outcome = outcome_for(path, fix=True)
    assert len(outcome.errors) == 1 and "\n" not in outcome.errors[0]
    assert outcome.errors[0].startswith(f"{outcome.result.path}: ") and message in outcome.errors[0]
    assert path.read_bytes() == content
    code, out, err = run_cli(["check", str(path)], capsys)
    assert code == 2 and "Traceback" not in out + err


def test_other_kernels_are_skipped(tmp_path):
    path = write_notebook(
        tmp_path / "nb.ipynb",
        [("code", "library(torch)\nx <- 1")],
        metadata={"kernelspec": {"display_name": "R", "language": "R", "name": "ir"}},
    )
    outcome = outcome_for(path)
    assert not outcome.errors and outcome.result.findings == []


# -- writing back ----------------------------------------------------------------------------


LOADER_CELLS = [
    ("markdown", "# Title ünïcode"),
    (
        "code",
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "model = model.cuda()\nloader = DataLoader(ds, num_workers=2)",
    ),
    ("code", "for x in loader:\n    model(x.cuda()).sum().backward()"),
]


@pytest.mark.parametrize(
    "layout",
    [
        {"indent": 1},
        {"indent": 2, "ensure_ascii": True, "tail": ""},
        {"indent": 4, "sort_keys": True},
        {"indent": None, "separators": (",", ":"), "tail": ""},
    ],
    ids=["jupyter", "indent2-ascii-no-newline", "indent4-sorted", "minified"],
)
def test_fixes_keep_the_files_own_layout(tmp_path, layout):
    path = write_notebook(tmp_path / "nb.ipynb", LOADER_CELLS, **layout)
    outcome = outcome_for(path, select="GL102", fix=True)
    assert not outcome.errors and outcome.fixed == 1
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert "pin_memory=True" in "".join(data["cells"][1]["source"])
    tail = layout.pop("tail", "\n")
    assert text == json.dumps(data, **{"ensure_ascii": False, **layout}) + tail


def test_string_sources_stay_strings_and_crlf_and_bom_survive(tmp_path):
    path = write_notebook(tmp_path / "nb.ipynb", LOADER_CELLS)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["cells"][1]["source"] = "".join(data["cells"][1]["source"])  # one string, not a list
    path.write_bytes(
        b"\xef\xbb\xbf" + (json.dumps(data, indent=1, ensure_ascii=False) + "\n").replace("\n", "\r\n").encode()
    )
    outcome = outcome_for(path, select="GL102", fix=True)
    assert not outcome.errors and outcome.fixed == 1
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")
    source = json.loads(raw.decode("utf-8-sig"))["cells"][1]["source"]
    assert isinstance(source, str) and "pin_memory=True" in source


def test_a_layout_that_cannot_be_reproduced_is_not_rewritten(tmp_path):
    path = write_notebook(tmp_path / "nb.ipynb", LOADER_CELLS)
    odd = path.read_text(encoding="utf-8").replace('"cells": [', '"cells":   [', 1)
    path.write_text(odd, encoding="utf-8")
    outcome = outcome_for(path, select="GL102", fix=True)
    assert len(outcome.errors) == 1 and "without reformatting" in outcome.errors[0]
    assert path.read_text(encoding="utf-8") == odd
    assert [f.code for f in outcome.result.findings] == ["GL102"]


def test_a_fix_that_touches_a_magic_line_is_refused():
    cells = [make_cell(1, "import torch\n%time x = 1\ny = 2")]
    joined = join(cells)
    lines = split_lines(joined.text)
    assert lines[2].startswith("import _gpulint_ipython_line_")
    lines[2] = "if True:\n    " + lines[2]
    with pytest.raises(NotebookError, match="IPython line at cell 1:2"):
        map_back(joined, "".join(lines))
    # An import added after the imports of a cell joins them, magic restored as it was.
    cells = [make_cell(1, "%pip install x\nimport torch"), make_cell(3, "y = torch.ones(1)")]
    joined = join(cells)
    lines = split_lines(joined.text)
    fixed = "".join(lines[:3] + ["import os\n"] + lines[3:])
    assert map_back(joined, fixed) == {1: "%pip install x\nimport torch\nimport os", 3: "y = torch.ones(1)"}


def test_notebooks_are_linted_and_fixed_without_nbformat(tmp_path, monkeypatch):
    path = write_notebook(tmp_path / "nb.ipynb", LOADER_CELLS)
    monkeypatch.setitem(sys.modules, "nbformat", None)  # `import nbformat` now raises ImportError
    outcome = outcome_for(path, select="GL102", fix=True)
    assert not outcome.errors and outcome.fixed == 1
    assert "pin_memory=True" in path.read_text(encoding="utf-8")


def test_run_over_a_tree_mixes_scripts_and_notebooks(tmp_path):
    tree = tmp_path / "project"
    shutil.copytree(NOTEBOOKS, tree / "notebooks")
    shutil.copy(FIXTURES / "pytorch_image_classification.py", tree / "train.py")
    result = run([tree], Settings(select=["GL101"]), RunOptions())
    assert not result.errors
    by_file = {Path(f.path).name for f in result.findings}
    assert by_file == {"train.py", "pytorch_training.ipynb"}


# -- where fixed lines go ------------------------------------------------------------------------


def test_a_line_added_between_cells_opens_the_cell_below():
    # A statement inserted before the first line of cell 3 would, appended to cell 1, come after
    # the expression cell 1 displays (and a decorator there would leave the cell unparsable).
    cells = [make_cell(1, "import torch\ndevice"), make_cell(3, "def step():\n    pass")]
    joined = join(cells)
    lines = split_lines(joined.text)
    fixed = "".join(lines[:3] + ["@tf.function\n"] + lines[3:])
    assert map_back(joined, fixed) == {1: "import torch\ndevice", 3: "@tf.function\ndef step():\n    pass"}


def test_a_line_added_after_the_last_cell_goes_before_the_value_it_shows():
    cells = [make_cell(1, "x = 1\nx")]
    joined = join(cells)
    assert map_back(joined, joined.text + "y = 2\n") == {1: "x = 1\ny = 2\nx"}


def test_changes_to_neighbouring_lines_of_two_cells_stay_in_their_cells():
    cells = [
        make_cell(1, "model.compile(optimizer,\n              metrics=['acc'])"),
        make_cell(2, "model.fit(ds, epochs=10)"),
        make_cell(3, "model.evaluate(test_ds)"),
    ]
    joined = join(cells)
    fixed = joined.text.replace(
        "metrics=['acc'])\nmodel.fit(ds,",
        "metrics=['acc'],\n              steps_per_execution=32)\nmodel.fit(ds.prefetch(2),",
    ).replace("evaluate(test_ds)", "evaluate(test_ds.prefetch(2))")
    assert map_back(joined, fixed) == {
        1: "model.compile(optimizer,\n              metrics=['acc'],\n              steps_per_execution=32)",
        2: "model.fit(ds.prefetch(2), epochs=10)",
        3: "model.evaluate(test_ds.prefetch(2))",
    }


def test_a_pip_install_cell_is_left_alone_and_the_others_are_fixed(tmp_path):
    path = write_notebook(
        tmp_path / "nb.ipynb",
        [
            ("code", "!pip install -q tensorflow"),
            (
                "code",
                "from tensorflow.data import Dataset\nds = Dataset.range(3).map(f)\n"
                "for b in ds:\n    model.train_on_batch(b)\n"
                "options.experimental_optimization.inject_prefetch = False",  # (GL702: as before TF 2.13)
            ),
        ],
    )
    outcome = outcome_for(path, select=["GL701", "GL702"], fix=True)
    assert not outcome.errors, outcome.errors
    sources = ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]
    assert sources[0] == "!pip install -q tensorflow"
    assert sources[1].startswith("import tensorflow\nfrom tensorflow.data import Dataset\n")
    assert "num_parallel_calls=tensorflow.data.AUTOTUNE" in sources[1] and ".prefetch(" in sources[1]


def test_a_notebook_whose_outputs_pass_max_file_size_is_still_linted(tmp_path):
    """Its bytes are mostly outputs (an image as base64); the code in it is small.  A .py file of
    the same size is skipped (max-file-size), a notebook only past NOTEBOOK_SIZE_FACTOR times it."""
    from gpulint.linter.config import NOTEBOOK_SIZE_FACTOR

    path = write_notebook(
        tmp_path / "plots.ipynb",
        [
            ("code", "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\n"),
            ("code", "for x in loader:\n    step(x)\n"),
        ],
    )
    nb = json.loads(path.read_text())
    image = "A" * (3 * 2**20)
    nb["cells"][0]["outputs"] = [{"output_type": "display_data", "data": {"image/png": image}, "metadata": {}}]
    path.write_text(json.dumps(nb))
    settings = Settings(max_file_size=2**20, show_hints=True)  # (the loader's dataset is not visible: a hint)
    assert path.stat().st_size > settings.max_file_size
    outcome = process_file(path, Linter(settings), RunOptions())
    assert not outcome.errors and {f.code for f in outcome.result.findings} >= {"GL101"}

    settings = Settings(max_file_size=path.stat().st_size // NOTEBOOK_SIZE_FACTOR - 1)
    outcome = process_file(path, Linter(settings), RunOptions())
    assert outcome.errors and "max-file-size" in outcome.errors[0]


def test_a_loader_a_notebook_builds_and_never_reads_is_not_reported(tmp_path):
    # nothing imports a notebook: a loader none of its cells reads draws no batch, where a script's
    # module-level loader may be imported by another module
    builds = (
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "from torchvision import datasets, transforms\n"
        "device = torch.device('cuda')\n"
        "crop = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])\n"
        "train_loader = DataLoader(datasets.CIFAR10('data', transform=crop), batch_size=64)\n"
        "test_loader = DataLoader(datasets.CIFAR10('data', transform=crop), batch_size=64)\n"
    )
    trains = "for x, y in train_loader:\n    step(x.to(device), y.to(device))\n"
    notebook = write_notebook(tmp_path / "train.ipynb", [("code", builds), ("code", trains)])
    found = {(f.location.row, f.code) for f in findings_of(notebook, select=["GL101", "GL102"])}
    assert found == {(6, "GL101"), (6, "GL102")}
    script = tmp_path / "train.py"
    script.write_text(builds + trains, encoding="utf-8")
    assert {f.location.row for f in findings_of(script, select=["GL101", "GL102"])} == {6, 7}
