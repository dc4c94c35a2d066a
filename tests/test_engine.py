"""The engine: import resolution, prefilter, suppressions, syntax errors, positions."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

import gpulint.linter.engine as engine
from gpulint.linter.analysis.imports import ImportTable
from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from tests.helpers import codes, lint, rows

LOADER_LINE = "loader = {call}(ds, batch_size=8)\n"
ACCELERATED = "device = 'cuda'\n"


def _table(source: str) -> ImportTable:
    table = ImportTable()
    for statement in cst.parse_module(textwrap.dedent(source)).body:
        for small in getattr(statement, "body", ()):
            if isinstance(small, cst.Import):
                table.add_import(small)
            elif isinstance(small, cst.ImportFrom):
                table.add_import_from(small)
    return table


@pytest.mark.parametrize(
    "imports, expression, expected",
    [
        ("from torch.utils.data import DataLoader as DL", "DL", "torch.utils.data.DataLoader"),
        ("import torch.utils.data as tud", "tud.DataLoader", "torch.utils.data.DataLoader"),
        ("import torch.utils.data", "torch.utils.data.DataLoader", "torch.utils.data.DataLoader"),
        ("import tensorflow as tf", "tf.data.Dataset", "tensorflow.data.Dataset"),
        ("from tensorflow import data", "data.Dataset", "tensorflow.data.Dataset"),
        ("import tensorflow as tf", "tf.keras.Model", "keras.Model"),
        ("import pytorch_lightning as pl", "pl.Trainer", "lightning.pytorch.Trainer"),
        ("from . import DataLoader", "DataLoader", None),
        ("import torch", "DataLoader", None),
    ],
)
def test_qualified_names(imports, expression, expected):
    assert _table(imports).qualified_name(cst.parse_expression(expression)) == expected


def test_reference_uses_the_module_alias():
    table = _table("import tensorflow as tf")
    assert table.reference("tensorflow.data.AUTOTUNE") == "tf.data.AUTOTUNE"
    assert table.reference("os.cpu_count") is None


@pytest.mark.parametrize(
    "header",
    [
        "from torch.utils.data import DataLoader as DL\n",
        "import torch.utils.data as tud\n",
        "import torch.utils.data\n",
    ],
)
def test_aliased_imports_are_resolved_by_rules(header):
    name = "DL" if "as DL" in header else ("tud.DataLoader" if "as tud" in header else "torch.utils.data.DataLoader")
    source = "import torch\n" + header + ACCELERATED + LOADER_LINE.format(call=name)
    assert codes(source, "GL101") == ["GL101"]


def test_unrelated_dataloader_class_is_not_torch():
    source = "import torch\nfrom mylib import DataLoader\n" + ACCELERATED + LOADER_LINE.format(call="DataLoader")
    assert codes(source, "GL101") == []


def test_pattern_in_comment_or_string_is_not_a_finding():
    source = textwrap.dedent("""
        import torch
        device = "cuda"
        # loader = torch.utils.data.DataLoader(ds)
        doc = "torch.utils.data.DataLoader(ds) is slow without workers"
    """)
    assert codes(source) == []


def test_prefilter_skips_files_without_framework_or_tokens(monkeypatch):
    parsed = []
    real_parse = engine.parse
    monkeypatch.setattr(engine, "parse", lambda src, *budget: parsed.append(src) or real_parse(src, *budget))
    linter = Linter(Settings(select=["ALL"]))
    linter.lint_source(b"import os\nprint(os.getcwd())\n", "a.py")  # no framework named
    linter.lint_source(b"import torch\nx = torch.ones(3)\n", "b.py")  # framework, no rule token
    assert parsed == []
    linter.lint_source(b"import torch\nloader = torch.utils.data.DataLoader(ds)\nmodel.cuda()\n", "c.py")
    assert len(parsed) == 1


SUPPRESSIBLE = """
import torch
from torch.utils.data import DataLoader
device = "cuda"
a = DataLoader(ds, num_workers=2, pin_memory=False){comment}
"""


@pytest.mark.parametrize(
    "comment, reported",
    [
        ("", ["GL102"]),
        ("  # gpulint: ignore[GL102]", []),
        ("  # gpulint: ignore[GL101]", ["GL102"]),
        ("  # gpulint: ignore[GL101, GL102]", []),
        ("  # gpulint: ignore", []),
        ("  # noqa: GL102", []),
        ("  # noqa", []),
        ("  # noqa: E501", ["GL102"]),
        ("  # GPULINT: IGNORE[gl102]", []),
    ],
)
def test_suppression_comments(comment, reported):
    assert codes(SUPPRESSIBLE.format(comment=comment), "GL102") == reported


def test_suppression_on_first_line_of_multiline_statement():
    source = textwrap.dedent("""
        import torch
        from torch.utils.data import DataLoader
        device = "cuda"
        loader = DataLoader(  # noqa: GL102
            ds,
            num_workers=2,
        )
        other = dict(
            x=DataLoader(ds, num_workers=2),  # gpulint: ignore[GL102]
        )
    """)
    assert codes(source, "GL102") == []


def test_suppression_text_inside_a_string_does_not_count():
    source = (
        'import torch\nfrom torch.utils.data import DataLoader\ndevice = "cuda"\n'
        'a = DataLoader(ds, num_workers=2, x="# noqa")\n'
    )
    assert codes(source, "GL102") == ["GL102"]


def test_ignore_file_comment():
    source = "# gpulint: ignore-file\n" + SUPPRESSIBLE.format(comment="")
    assert codes(source) == []


def test_syntax_error_is_a_finding_with_position():
    findings = lint("import torch\nloader = DataLoader(ds))\nx = 'cuda'\n")
    assert [(f.code, f.name, f.location.row) for f in findings] == [("GL000", "syntax-error", 2)]
    assert findings[0].message.startswith("SyntaxError")


def test_file_the_prefilter_rules_out_is_not_parsed_even_if_broken():
    # Documented trade-off: a file with nothing any rule looks for is not gpulint's to parse.
    assert lint("import torch\ndef broken(:\n    pass\n") == []


def test_positions_are_one_based():
    assert rows(SUPPRESSIBLE.format(comment=""), "GL102") == [(5, "GL102")]
    finding = lint(SUPPRESSIBLE.format(comment=""), "GL102")[0]
    assert finding.location.column == 5
    assert finding.end_location.row == 5


def test_per_file_ignores(tmp_path):
    # (GL102 named in full: the loader's dataset is not visible, so its finding is a hint)
    settings = Settings(select=["GL102"], per_file_ignores={"scripts/*.py": ["GL102"]}, root=tmp_path)
    linter = Linter(settings)
    source = SUPPRESSIBLE.format(comment="").encode()
    assert [f.code for f in linter.lint_source(source, str(tmp_path / "scripts" / "a.py")).findings] == []
    assert [f.code for f in linter.lint_source(source, str(tmp_path / "src" / "a.py")).findings] == ["GL102"]


def test_nothing_that_cannot_be_reported_is_parsed(tmp_path, monkeypatch):
    # A file every rule is ignored in, or one no selected rule's triggers can meet, would report
    # nothing: it is not parsed at all (the same source elsewhere is, and reports).
    parsed = []
    real_parse = engine.parse
    monkeypatch.setattr(engine, "parse", lambda src, *budget: parsed.append(src) or real_parse(src, *budget))
    source = SUPPRESSIBLE.format(comment="").encode()
    ignoring = Linter(
        Settings(select=["ALL"], show_hints=True, per_file_ignores={"vendored/*.py": ["GL"]}, root=tmp_path)
    )
    assert ignoring.lint_source(source, str(tmp_path / "vendored" / "a.py")).findings == []
    assert parsed == []
    assert [f.code for f in Linter(Settings(select=["GL70"])).lint_source(source, "a.py").findings] == []
    assert parsed == []
    assert [f.code for f in ignoring.lint_source(source, str(tmp_path / "src" / "a.py")).findings] == ["GL102"]
    assert parsed == [source]


def test_method_on_a_chain_is_reported_at_its_name():
    source = textwrap.dedent("""
        import tensorflow as tf
        ds = (
            tf.data.Dataset.range(10)
            .shuffle(10)
            .map(parse)
        )
    """)
    finding = lint(source, "GL701")[0]
    assert (finding.location.row, finding.location.column) == (6, 6)
    assert finding.end_location.row == 6


def test_per_step_rules_do_not_parse_files_that_never_take_a_step(monkeypatch):
    parsed = []
    real_parse = engine.parse
    monkeypatch.setattr(engine, "parse", lambda src, *budget: parsed.append(src) or real_parse(src, *budget))
    linter = Linter(Settings(select=["GL2", "GL3"]))
    model_file = (
        b"import torch\nclass Net(torch.nn.Module):\n"
        b"    def forward(self, x):\n        print(x.shape)\n        return x.cpu()\n"
    )
    assert linter.lint_source(model_file, "model.py").findings == []
    assert parsed == []
    training = model_file + b"for batch in loader:\n    loss.backward()\n    optimizer.step()\n"
    linter.lint_source(training, "train.py")
    assert len(parsed) == 1


def test_device_rules_do_not_parse_files_that_give_no_accelerator_evidence(monkeypatch):
    parsed = []
    real_parse = engine.parse
    monkeypatch.setattr(engine, "parse", lambda src, *budget: parsed.append(src) or real_parse(src, *budget))
    linter = Linter(Settings(select=["GL102", "GL203"]))
    source = (
        b"import torch\nfrom torch.utils.data import DataLoader\n"
        b"loader = DataLoader(ds)\nx = torch.zeros(3).to(torch.float16)\n"
    )
    assert linter.lint_source(source, "m.py").findings == []
    assert parsed == []
    # The loader rules are about the host: they read the same file.
    host = Linter(Settings(select=["GL101"]))
    assert [f.code for f in host.lint_source(source, "m.py").findings] == ["GL101"] and parsed


def test_a_batch_reassigned_from_a_plain_call_does_not_crash_gl104():
    # `y = prep(y)` before `y.cuda()`: the earlier assignment is a call of a name, not a copy.
    source = """
    import torch
    model = torch.nn.Linear(2, 2).cuda()
    for x, y in loader:
        y = prep(y)
        y = y.cuda()
        loss = model(x).sum()
        loss.backward()
        opt.step()
    """
    assert "GL104" in codes(source, "GL104")


# -- the parse: libcst's node checks are off while it builds the tree, and only then ------------
@pytest.mark.parametrize("outcome", ["parsed", "failed"])
def test_node_checks_are_off_only_while_the_parser_builds_the_tree(monkeypatch, outcome):
    from gpulint.linter.analysis import parse as parse_module

    built = []

    def parser(source):
        built.append(cst.Name(""))  # an empty identifier: checked, it raises
        if outcome == "failed":
            raise cst.ParserSyntaxError("boom", lines=["x"], raw_line=1, raw_column=0)
        return cst.Module(body=[])

    monkeypatch.setattr(cst, "parse_module", parser)
    if outcome == "failed":
        with pytest.raises(cst.ParserSyntaxError):
            parse_module._parse_module_unvalidated("x\n")
    else:
        parse_module._parse_module_unvalidated("x\n")
    assert len(built) == 1  # not checked while parsing
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")  # checked again afterwards, as a fix's nodes are


def test_a_parse_without_node_checks_is_the_same_tree():
    from gpulint.linter.analysis.parse import parse

    source = b"x = (1 +\n     2)  # kept\nif x:\n\tprint(f'{x!r:>3}')\n"
    assert parse(source).code.encode() == source
    assert parse(source).deep_equals(cst.parse_module(source))
