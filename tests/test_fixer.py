"""The fixer: layout-preserving edits, imports added once, overlap handling, safe writing."""

from __future__ import annotations

import os
import stat
import textwrap

import libcst as cst
import pytest

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.fix.passes import fix_source
from gpulint.linter.run.outcome import RunOptions
from gpulint.linter.run.runner import run
from tests.helpers import assert_fix_ok, fix

HEADER = "import torch\nfrom torch.utils.data import DataLoader\ndevice = 'cuda'\n"
MAIN = 'if __name__ == "__main__":\n'  # where GL101 may add workers


def test_keyword_appended_in_one_line_layout():
    fixed = fix(HEADER + "loader = DataLoader(ds, batch_size=8)  # keep me\n", "GL102")
    assert fixed == HEADER + "loader = DataLoader(ds, batch_size=8, pin_memory=True)  # keep me\n"


def test_keyword_appended_in_argument_per_line_layout_with_trailing_comma():
    source = HEADER + textwrap.dedent("""
        loader = DataLoader(
            ds,
            batch_size=8,  # the batch
        )
    """)
    fixed = fix(source, "GL102")
    assert fixed == HEADER + textwrap.dedent("""
        loader = DataLoader(
            ds,
            batch_size=8,  # the batch
            pin_memory=True,
        )
    """)


def test_keyword_appended_in_argument_per_line_layout_without_trailing_comma():
    source = HEADER + "loader = DataLoader(\n    ds,\n    batch_size=8\n)\n"
    assert fix(source, "GL102") == HEADER + "loader = DataLoader(\n    ds,\n    batch_size=8,\n    pin_memory=True\n)\n"


def test_existing_keyword_value_is_replaced():
    fixed = fix(HEADER + "loader = DataLoader(ds, pin_memory=False, batch_size=8)\n", "GL102")
    assert fixed == HEADER + "loader = DataLoader(ds, pin_memory=True, batch_size=8)\n"


def test_two_fixes_on_one_call_both_apply_and_import_added_once():
    source = HEADER + MAIN + "    a = DataLoader(ds)\n    b = DataLoader(ds)\n"
    fixed = assert_fix_ok(source, ["GL101", "GL102"])
    call = "DataLoader(ds, num_workers=min(8, os.cpu_count() or 1), pin_memory=True)"
    assert fixed == "import os\n\n" + HEADER + MAIN + f"    a = {call}\n    b = {call}\n"


def test_import_not_added_when_already_bound():
    fixed = fix("import os\n" + HEADER + MAIN + "    a = DataLoader(ds)\n", "GL101")
    assert fixed == "import os\n" + HEADER + MAIN + "    a = DataLoader(ds, num_workers=min(8, os.cpu_count() or 1))\n"


def test_import_goes_after_docstring_as_its_own_section():
    source = (
        '"""Doc."""\nimport torch\nfrom torch.utils.data import DataLoader\n\ndevice = "cuda"\n'
        + MAIN
        + "    a = DataLoader(ds)\n"
    )
    fixed = fix(source, "GL101")
    assert fixed.startswith('"""Doc."""\nimport os\n\nimport torch\nfrom torch.utils.data import DataLoader\n\ndevice')


def test_num_workers_option_is_used():
    fixed = fix(HEADER + MAIN + "    a = DataLoader(ds)\n", "GL101", **{"num-workers": "4"})
    assert fixed == HEADER + MAIN + "    a = DataLoader(ds, num_workers=4)\n"


def test_unsafe_fixes_need_the_flag():
    linter = Linter(Settings(select=["GL101"]))
    outcome = fix_source(linter, (HEADER + "a = DataLoader(ds)\n").encode(), "x.py", unsafe=False)
    assert not outcome.changed


def test_newlines_encoding_and_bom_survive(tmp_path):
    path = tmp_path / "train.py"
    source = ("\ufeff# -*- coding: utf-8 -*-\n" + HEADER + "a = DataLoader(ds)  # é\n").replace("\n", "\r\n")
    path.write_bytes(source.encode("utf-8"))
    run([path], Settings(select=["GL102"]), RunOptions(fix=True))
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    assert b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert "pin_memory=True)  # é".encode() in data


def test_latin1_file_keeps_its_encoding(tmp_path):
    path = tmp_path / "train.py"
    source = "# -*- coding: latin-1 -*-\n" + HEADER + "a = DataLoader(ds)  # café\n"
    path.write_bytes(source.encode("latin-1"))
    run([path], Settings(select=["GL102"]), RunOptions(fix=True))
    assert "pin_memory=True)  # café".encode("latin-1") in path.read_bytes()


def test_file_mode_is_kept_and_no_temporary_file_left(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(HEADER + "a = DataLoader(ds)\n")
    path.chmod(0o750)
    run([path], Settings(select=["GL102"]), RunOptions(fix=True))
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_fix_writes_through_a_link_only_to_a_path_that_was_given(tmp_path):
    target = tmp_path / "real.py"
    target.write_text(HEADER + "a = DataLoader(ds)\n")
    before = target.read_bytes()
    link = tmp_path / "link.py"
    link.symlink_to(target)
    result = run([link], Settings(select=["GL102"]), RunOptions(fix=True))
    assert target.read_bytes() == before, "the link's target was not given"
    refusal = "fixes not written: its real path is outside the paths given (a symbolic link?)"
    assert result.errors == [f"{os.path.relpath(link)}: {refusal}"]
    assert [f.code for f in result.findings] == ["GL102"], "the report describes the file as it is"
    run([link, target], Settings(select=["GL102"]), RunOptions(fix=True))
    assert link.is_symlink() and "pin_memory=True" in target.read_text()


def test_diff_writes_nothing(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(HEADER + "a = DataLoader(ds)\n")
    before = path.read_bytes()
    result = run([path], Settings(select=["GL102"]), RunOptions(diff=True))
    assert path.read_bytes() == before
    assert "+a = DataLoader(ds, pin_memory=True)" in result.outcomes[0].diff


def test_only_named_files_change(tmp_path):
    (tmp_path / "a.py").write_text(HEADER + "a = DataLoader(ds)\n")
    (tmp_path / "b.py").write_text(HEADER + "b = DataLoader(ds)\n")
    before = (tmp_path / "b.py").read_bytes()
    run([tmp_path / "a.py"], Settings(select=["GL102"]), RunOptions(fix=True))
    assert (tmp_path / "b.py").read_bytes() == before
    assert "pin_memory=True" in (tmp_path / "a.py").read_text()


def test_fix_that_would_break_parsing_is_not_written(tmp_path, monkeypatch):
    import libcst as cst

    import gpulint.linter.fix.passes as passes

    path = tmp_path / "train.py"
    path.write_text(HEADER + "a = DataLoader(ds)\n")
    before = path.read_bytes()

    def broken_apply(ctx, fixes, line_length, layout):
        # Stand in for a buggy fix: a module whose code is `def`, which does not parse.
        return cst.Module(body=[cst.SimpleStatementLine([cst.Expr(cst.Name("def"))])])

    monkeypatch.setattr(passes, "apply_fixes", broken_apply)
    result = run([path], Settings(select=["GL102"]), RunOptions(fix=True))
    assert path.read_bytes() == before
    assert any("does not parse" in line for line in result.errors)


def test_comments_stay_with_their_arguments_without_trailing_comma():
    source = HEADER + "loader = DataLoader(\n    ds,  # data\n    batch_size=8  # batch\n)\n"
    assert fix(source, "GL102") == HEADER + (
        "loader = DataLoader(\n    ds,  # data\n    batch_size=8,  # batch\n    pin_memory=True\n)\n"
    )


TF_HEADER = "import tensorflow as tf\n"


def test_removing_the_last_argument_keeps_each_comment_on_its_own_argument():
    # GL704 removes `jit_compile=False`: the argument before it keeps its own comment.
    for after_last in (",\n", "\n"):
        source = TF_HEADER + (
            'model.compile(\n    optimizer="adam",  # adam works best here\n    jit_compile=False' + after_last + ")\n"
        )
        closing = "," if after_last.startswith(",") else ""
        assert fix(source, "GL704") == TF_HEADER + (
            'model.compile(\n    optimizer="adam"' + closing + "  # adam works best here\n)\n"
        )
    # With a comment on its own line the value is a deliberate choice: reported, left as written.
    commented = (
        TF_HEADER
        + 'model.compile(\n    optimizer="adam",\n    jit_compile=False,  # XLA crashed on the old driver\n)\n'
    )
    assert fix(commented, "GL704") == commented


def test_single_argument_per_line_call():
    source = HEADER + "loader = DataLoader(\n    ds,\n)\n"
    assert fix(source, "GL102") == HEADER + "loader = DataLoader(\n    ds,\n    pin_memory=True,\n)\n"


def test_single_line_trailing_comma():
    assert fix(HEADER + "loader = DataLoader(ds,)\n", "GL102") == HEADER + "loader = DataLoader(ds, pin_memory=True,)\n"


def test_stdlib_import_is_sorted_into_the_stdlib_section():
    source = (
        '"""Doc."""\nfrom __future__ import annotations\n\nimport argparse\nimport time\nfrom pathlib import Path\n\n'
        'import torch\nfrom torch.utils.data import DataLoader\n\ndevice = "cuda"\n' + MAIN + "    a = DataLoader(ds)\n"
    )
    fixed = fix(source, "GL101")
    assert fixed.startswith(
        '"""Doc."""\nfrom __future__ import annotations\n\n'
        "import argparse\nimport os\nimport time\nfrom pathlib import Path\n\nimport torch\n"
    )


def test_new_stdlib_section_takes_over_the_comment_above_the_imports():
    source = (
        "# header comment\nimport torch\nfrom torch.utils.data import DataLoader\ndevice = 'cuda'\n"
        + MAIN
        + "    a = DataLoader(ds)\n"
    )
    assert fix(source, "GL101").startswith("# header comment\nimport os\n\nimport torch\n")


def test_third_party_import_is_sorted_after_stdlib_and_before_relative_imports():
    source = (
        "import os\n\nimport numpy as np\nfrom torch import nn\nfrom torch.optim import SGD\n\nfrom . import data\n\n"
        "x = model.cuda()\nopt = SGD(model.parameters())\n"
        "for x in loader:\n    loss = model(x)\n    loss.backward()\n    opt.step()\n"
    )
    fixed = fix(source, "GL404")
    assert fixed.startswith(
        "import os\n\nimport numpy as np\nimport torch\nfrom torch import nn\nfrom torch.optim import SGD\n\n"
        "from . import data\n"
    )


def test_import_a_fix_leaves_unused_is_removed_and_one_still_used_is_kept():
    source = (
        "import torch\nfrom torch.cuda import amp\nfrom torch.cuda.amp import GradScaler, autocast\n\n"
        "scaler = amp.GradScaler()\nother = GradScaler()\nwith autocast(*args):\n    pass\n"
    )
    fixed = fix(source, "GL402")
    assert fixed == (
        "import torch\nfrom torch.cuda.amp import autocast\n\n"
        'scaler = torch.amp.GradScaler("cuda")\nother = torch.amp.GradScaler("cuda")\nwith autocast(*args):\n    pass\n'
    )


def test_a_long_header_with_a_one_line_suite_is_fixed_without_wrapping_it():
    source = """
    import torch
    from torch.utils.data import DataLoader

    model = torch.nn.Linear(2, 2).cuda()
    for batch in DataLoader(dataset_with_a_long_name, batch_size=64, shuffle=True, collate_fn=c): step(batch)
    """
    # The fixer wraps long headers of indented blocks only; this line stays one (long) line.
    assert "collate_fn=c, pin_memory=True): step(batch)\n" in fix(source, "GL102")


def test_a_random_factory_moved_to_the_device_is_an_unsafe_fix_that_says_the_numbers_change():
    # gat/gcn: `torch.randperm(n).to(device)` draws the data split; on the device it draws another.
    source = HEADER + textwrap.dedent("""
        for epoch in range(100):
            perm = torch.randperm(num_nodes).to(device)
            mask = torch.zeros(num_nodes).to(device)
    """)
    findings = Linter(Settings(select=["GL203"])).lint_source(source.encode(), "train.py").findings
    by_factory = {f.message.split("`")[1]: f.fix for f in findings}
    randperm, zeros = by_factory["torch.randperm(...)"], by_factory["torch.zeros(...)"]
    assert randperm is not None and randperm.applicability.value == "unsafe"
    assert "changes the random numbers" in randperm.message
    assert zeros is not None and zeros.applicability.value == "safe"
    assert "random" not in zeros.message
    # `--fix` (safe fixes only) leaves the random stream alone
    assert fix(source, "GL203", unsafe=False) == source.replace(
        "torch.zeros(num_nodes).to(device)", "torch.zeros(num_nodes, device=device)"
    )


def test_code_marked_as_slow_on_purpose_keeps_its_form_and_says_why():
    marked = HEADER + textwrap.dedent("""
        # naive baseline, for comparison with the pinned loader below
        slow = DataLoader(ds, batch_size=8)
        fast = DataLoader(ds, batch_size=8)
        # BEGIN_DEOPTIMIZE
        kept = DataLoader(ds, batch_size=8)
        # END_DEOPTIMIZE
    """)
    fixed = fix(marked, "GL102")
    assert "slow = DataLoader(ds, batch_size=8)\n" in fixed
    assert "kept = DataLoader(ds, batch_size=8)\n" in fixed
    assert "fast = DataLoader(ds, batch_size=8, pin_memory=True)\n" in fixed
    findings = Linter(Settings(select=["GL102"])).lint_source(marked.encode(), "snippet.py").findings
    reasons = sorted(f.message.partition("(no fix: ")[2] for f in findings if f.fix is None)
    assert reasons == [
        "it lies between the author's `BEGIN_DEOPTIMIZE` and `END_DEOPTIMIZE` marks)",
        "the author marks this code `naive baseline`)",
    ]


def test_a_folder_whose_readme_takes_no_changes_gets_no_fix(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    frozen = tmp_path / "pipelines" / "deprecated"
    frozen.mkdir(parents=True)
    (frozen / "README.md").write_text("We will stop testing these and will not accept any changes to existing files.\n")
    (frozen / "old.py").write_text(HEADER + "a = DataLoader(ds)\n")
    (tmp_path / "pipelines" / "new.py").write_text(HEADER + "a = DataLoader(ds)\n")
    result = run([tmp_path], Settings(select=["GL102"]), RunOptions(fix=True))
    assert "pin_memory" not in (frozen / "old.py").read_text()
    assert "pin_memory=True" in (tmp_path / "pipelines" / "new.py").read_text()
    assert any("(no fix: the README of `deprecated/` says it takes no changes)" in f.message for f in result.findings)


def test_start_up_settings_of_two_rules_land_together_once_after_the_seed():
    # GL404 and GL405 both add a process-wide switch: each goes after the script's own settings,
    # in main(), not before the optimizer or the backward of the per-batch function.
    source = textwrap.dedent("""\
        import torch
        import torch.nn as nn
        from torchvision import datasets


        def step(model, optimizer, x):
            loss = model(x.cuda()).sum()
            loss.backward()
            optimizer.step()


        def main():
            torch.manual_seed(0)
            train_set = datasets.CIFAR10("data")
            # patches of 8 channels, then attention over them
            model = nn.Sequential(nn.Conv2d(3, 8, 4, stride=4), nn.Flatten(2), nn.TransformerEncoderLayer(8, 2)).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                step(model, optimizer, x)


        if __name__ == "__main__":
            main()
        """)
    fixed = assert_fix_ok(source, ["GL404", "GL405"])
    settings = (
        "    torch.manual_seed(0)\n"
        "    # TF32 matmuls on Ampere+: faster, ~1e-3 relative precision\n"
        '    torch.set_float32_matmul_precision("high")\n'
        "    # cuDNN times its conv algorithms per input shape and keeps the fastest: not bit-reproducible\n"
        "    torch.backends.cudnn.benchmark = True\n"
        '    train_set = datasets.CIFAR10("data")\n'
    )
    assert settings in fixed
    assert fixed.count("set_float32_matmul_precision") == 1 and fixed.count("cudnn.benchmark") == 1


CPU_AUTOCAST = """\
import torch

if torch.cuda.is_available():
    amp = torch.amp.autocast({cuda}, enabled=False)
else:
    amp = torch.cpu.amp.autocast(enabled=flags[{key}])
"""


def _fixed_with(source: str, quote_style: str | None) -> str:
    """GL402's fix of `source` with the project's quote style, checked as every fix is: it
    parses, and a second run changes nothing."""
    linter = Linter(Settings(select=["GL402"], quote_style=quote_style))
    fixed = fix_source(linter, source.encode(), "bench.py", unsafe=True).source.decode()
    cst.parse_module(fixed)
    assert fix_source(linter, fixed.encode(), "bench.py", unsafe=True).source.decode() == fixed
    return fixed


@pytest.mark.parametrize(
    "quotes, quote_style, written",
    [
        # no setting: the file's own prevailing quotes (PyG's benchmarks: `'cuda'` beside the fix)
        (("'cuda'", "'bf16'"), None, "'cpu'"),
        (('"cuda"', '"bf16"'), None, '"cpu"'),
        # the formatter's setting wins over the file
        (('"cuda"', '"bf16"'), "single", "'cpu'"),
        (("'cuda'", "'bf16'"), "double", '"cpu"'),
    ],
)
def test_strings_a_fix_writes_take_the_projects_quotes_and_those_it_keeps_stay(quotes, quote_style, written):
    cuda, key = quotes
    source = CPU_AUTOCAST.format(cuda=cuda, key=key)
    expected = source.replace(
        f"torch.cpu.amp.autocast(enabled=flags[{key}])", f"torch.amp.autocast({written}, enabled=flags[{key}])"
    )
    assert _fixed_with(source, quote_style) == expected


def test_a_string_that_would_need_escaping_in_the_other_quotes_keeps_its_own():
    from gpulint.linter.fix.quotes import _restyled

    assert _restyled(cst.SimpleString('"it\'s"'), "'").value == '"it\'s"'
    assert _restyled(cst.SimpleString('b"cpu"'), "'").value == "b'cpu'"
    assert _restyled(cst.SimpleString('"""cpu"""'), "'").value == '"""cpu"""'
