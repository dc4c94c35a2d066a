"""Property test for notebooks: generated notebooks (code cells mixing training code, generated
Python, IPython magics, shell escapes, cell magics, broken code; markdown cells; both `source`
forms; two layouts) never crash the linter, and `--fix` always leaves a valid notebook whose cells
still parse, with every IPython line, output and metadata where it was."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import hypothesmith
import nbformat
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.run.notebook.cells import make_cell
from gpulint.linter.run.outcome import RunOptions
from gpulint.linter.run.process import process_file

LINTER = Linter(Settings(select=["ALL"], unsafe_fixes=True))  # fixes include the unsafe ones
SETTINGS = hypothesis_settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))

PRELUDE = "import torch\nfrom torch.utils.data import DataLoader\nmodel = model.cuda()\n"
TOP_LEVEL = [
    "loader = DataLoader(ds, batch_size=8)",
    "val_loader = DataLoader(ds, batch_size=8, num_workers=0)",
    "%matplotlib inline",
    "!pip install -q torch",
    "files = !ls data",
    "model?",
    "%time y = model(x)",
    "torch.save(model.state_dict(), 'm.pt')",
    "print(f'{len(loader)} batches')  # why?",
    "s = ('%d items'\n     % 3)",
]
IN_LOOP = [
    "loss = model(x).sum()",
    "x = x.to('cuda')",
    "print(loss.item())",
    "value = loss.item()\nprint(value)",
    "logger.info('loss %s', loss)",
    "acc = evaluate(model, val_loader)",
    "%time f(x)",
    "!nvidia-smi",
    "if step % 10 == 0:\n    print(step, loss.item())",
    "torch.save(model, 'ckpt.pt')",
    "total += loss.item()  # gpulint: ignore[GL201]",
]


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.split("\n"))


@st.composite
def training_code(draw) -> str:
    top = draw(st.lists(st.sampled_from(TOP_LEVEL), max_size=3))
    body = draw(st.lists(st.sampled_from(IN_LOOP), max_size=5))
    loop = "for step, (x, y) in enumerate(loader):\n" + "\n".join(
        _indent(part, "    ") for part in ["loss = model(x).sum()", *body, "loss.backward()", "opt.step()"]
    )
    return "\n".join([*top, loop])


CODE = st.one_of(
    training_code(),
    training_code().map(lambda code: "%%time\n" + code),
    training_code().map(lambda code: "%%bash\n" + code),
    st.lists(st.sampled_from(TOP_LEVEL), min_size=1, max_size=4).map("\n".join),
    hypothesmith.from_grammar().filter(lambda code: len(code) < 400),
    st.text(max_size=40),  # mostly not Python: the cell is reported as GL000 and left out
)
CELL = st.one_of(
    st.tuples(st.just("code"), CODE, st.booleans()),
    st.tuples(st.just("markdown"), st.text(max_size=30), st.booleans()),
)


def build(cells: list[tuple[str, str, bool]], indent: int) -> str:
    nb = nbformat.v4.new_notebook(metadata={"language_info": {"name": "python"}})
    nb.cells.append(nbformat.v4.new_code_cell(PRELUDE, id="prelude"))
    for index, (kind, source, as_list) in enumerate(cells):
        make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
        cell = make(source, id=f"c{index}")
        if kind == "code":
            cell["execution_count"] = index + 1
            cell["outputs"] = [nbformat.v4.new_output("stream", name="stdout", text=f"out {index}\n")]
        if as_list:
            cell["source"] = source.splitlines(keepends=True)
        nb.cells.append(cell)
    return json.dumps(nb, indent=indent, ensure_ascii=False) + "\n"


def _ipython_lines(text: str) -> list[str]:
    cell = make_cell(1, text)
    return [line for line, magic in zip(cell.lines, cell.magic, strict=True) if magic]


@SETTINGS
@given(st.lists(CELL, max_size=5), st.sampled_from([1, 2]))
def test_generated_notebooks_never_crash_and_fixes_keep_a_valid_notebook(cells, indent):
    text = build(cells, indent)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "generated.ipynb"
        path.write_text(text, encoding="utf-8")
        linted = process_file(path, LINTER, RunOptions(with_edits=True))
        assert not linted.errors, linted.errors
        for finding in linted.result.findings:
            assert finding.display_location.startswith(f"cell {finding.extra['cell']}:")

        fixed = process_file(path, LINTER, RunOptions(fix=True))
        after_text = path.read_text(encoding="utf-8")
    if fixed.errors:
        assert after_text == text, "a refused fix must leave the file as it was"
        return
    before, after = json.loads(text), json.loads(after_text)
    nbformat.validate(nbformat.reads(after_text, as_version=4))
    assert len(after["cells"]) == len(before["cells"])
    for old, new in zip(before["cells"], after["cells"], strict=True):
        assert {k: v for k, v in old.items() if k != "source"} == {k: v for k, v in new.items() if k != "source"}
        assert type(old["source"]) is type(new["source"])
        if old["cell_type"] != "code":
            assert old == new
            continue
        old_code, new_code = "".join(old["source"]), "".join(new["source"])
        assert _ipython_lines(new_code) == _ipython_lines(old_code)
        if make_cell(1, old_code).error is None:
            assert make_cell(1, new_code).error is None, new_code
        else:  # a cell that did not parse is never touched
            assert new_code == old_code
