"""GL401-GL404: mixed precision, the deprecated torch.cuda.amp API, torch.compile, TF32."""

from __future__ import annotations

import textwrap

from tests.helpers import assert_fix_ok, codes, fix, lint, rows

# A minimal accelerated PyTorch training script with no AMP, no compile and no TF32.
TRAIN = """
import torch
import torch.nn as nn

model = nn.Linear(8, 2).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
"""


def _hints(source: str) -> list[tuple[int, str]]:
    return rows(source, ["GL401", "GL403", "GL404"])


# -- GL401 / GL403 / GL404: whole-module hints -------------------------------------------------
def test_plain_fp32_training_gets_each_hint_once_where_its_fix_belongs():
    assert sorted(_hints(TRAIN)) == [(5, "GL403"), (6, "GL404"), (10, "GL401")]


def test_hints_are_off_by_default():
    assert [c for c in codes(TRAIN, select=[]) if c.startswith("GL4")] == []


def test_autocast_anywhere_silences_gl401_and_gl404_not_gl403():
    source = TRAIN.replace("        loss = nn", '        with torch.autocast("cuda", dtype=torch.bfloat16):\n            loss = nn')
    assert _hints(source) == [(5, "GL403")]


def test_an_amp_flag_counts_as_handled_but_a_comment_does_not():
    flagged = TRAIN + "\nuse_amp = args.amp\n"
    assert "GL401" not in codes(flagged, "GL401")
    commented = TRAIN + "\n# TODO: try autocast and torch.compile and tf32\n"
    assert sorted(codes(commented, ["GL401", "GL403", "GL404"])) == ["GL401", "GL403", "GL404"]


def test_compile_and_tf32_silence_their_hints():
    source = TRAIN.replace(
        "optimizer = torch", 'model = torch.compile(model)\ntorch.set_float32_matmul_precision("high")\noptimizer = torch'
    )
    assert _hints(source) == [(12, "GL401")]


def test_re_compile_is_not_torch_compile():
    assert "GL403" in codes(TRAIN + "\nimport re\nPATTERN = re.compile('x')\n", "GL403")


def test_cpu_only_module_gets_no_precision_hint():
    assert _hints(TRAIN.replace(".cuda()", "")) == []


def test_accelerate_and_lightning_manage_precision_themselves():
    accelerate = TRAIN.replace("import torch\n", "import torch\nfrom accelerate import Accelerator\n")
    assert _hints(accelerate) == []
    lightning = TRAIN.replace("import torch\n", "import torch\nimport lightning as L\n")
    assert _hints(lightning) == []


def test_library_helper_without_optimizer_or_loop_is_not_a_training_script():
    # Found in timm/utils/cuda.py and transformers' trainer_pt_utils.py: a helper calling backward.
    helper = """
    import torch
    class ApexScaler:
        def __call__(self, loss, optimizer):
            loss.backward()
            optimizer.step()
    x = torch.zeros(1).cuda()
    """
    assert _hints(helper) == []
    gradient_check = """
    import torch
    def check(layer):
        for _ in range(3):
            out = layer(torch.ones(2, device="cuda"))
            out.sum().backward()
    """
    assert _hints(gradient_check) == []


def test_evaluation_loop_alone_is_not_training():
    source = """
    import torch
    model = torch.nn.Linear(2, 2).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in loader:
        print(model(x))
    """
    assert _hints(source) == []


def test_step_function_called_from_a_loop_counts_as_training():
    source = """
    import torch
    model = torch.nn.Linear(2, 2).cuda()
    opt = torch.optim.AdamW(model.parameters())
    def train_step(batch):
        loss = model(batch).sum()
        loss.backward()
        opt.step()
    for batch in loader:
        train_step(batch)
    """
    assert sorted(c for _, c in _hints(source)) == ["GL401", "GL403", "GL404"]


def test_gl403_fix_compiles_the_model_after_its_line():
    fixed = assert_fix_ok(TRAIN, "GL403")
    lines = textwrap.dedent(fixed).splitlines()
    assert lines[4:7] == ["model = nn.Linear(8, 2).cuda()", "model = torch.compile(model)", "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)"]


def test_gl404_fix_enables_tf32_before_the_optimizer_and_keeps_the_rest():
    source = TRAIN.replace("for epoch", "# three epochs are enough\nfor epoch")
    fixed = assert_fix_ok(source, "GL404")
    assert 'torch.set_float32_matmul_precision("high")\noptimizer = torch.optim.SGD' in fixed
    assert fixed.replace('torch.set_float32_matmul_precision("high")\n', "") == textwrap.dedent(source)


def test_gl403_without_a_findable_model_reports_the_optimizer_without_fix():
    source = TRAIN.replace("model.parameters()", "params")
    found = lint(source, "GL403")
    assert [(f.location.row, f.fix) for f in found] == [(6, None)]


# -- GL402 ---------------------------------------------------------------------------------------
AMP_OLD = """
import torch
from torch.cuda.amp import GradScaler, autocast

scaler = GradScaler(init_scale=1024)  # keep this comment
for x in loader:
    with autocast():
        loss = model(x)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
"""


def test_gl402_reports_each_deprecated_call():
    assert rows(AMP_OLD, "GL402") == [(5, "GL402"), (7, "GL402")]


def test_gl402_fix_uses_torch_amp_and_drops_the_dead_import():
    fixed = assert_fix_ok(AMP_OLD, "GL402", unsafe=False)
    assert 'scaler = torch.amp.GradScaler("cuda", init_scale=1024)  # keep this comment' in fixed
    assert 'with torch.amp.autocast("cuda"):' in fixed
    assert "torch.cuda.amp" not in fixed


def test_gl402_autocast_positional_arguments_become_keywords():
    source = """
    import torch
    with torch.cuda.amp.autocast(True, torch.bfloat16):
        y = model(x)
    """
    fixed = assert_fix_ok(source, "GL402", unsafe=False)
    assert 'torch.amp.autocast("cuda", enabled=True, dtype=torch.bfloat16)' in fixed


def test_gl402_aliases_and_module_import():
    source = """
    import torch.cuda.amp as amp
    from torch.cuda.amp import autocast as ac
    s = amp.GradScaler()
    with ac(enabled=False):
        pass
    """
    assert rows(source, "GL402") == [(4, "GL402"), (5, "GL402")]
    fixed = assert_fix_ok(source, "GL402", unsafe=False)
    assert 'torch.amp.GradScaler("cuda")' in fixed and 'torch.amp.autocast("cuda", enabled=False)' in fixed
    assert "import torch\n" in fixed and "autocast as ac" not in fixed


def test_gl402_keeps_an_import_still_used_elsewhere():
    source = """
    import torch
    from torch.cuda.amp import GradScaler
    scaler = GradScaler()
    assert isinstance(scaler, GradScaler)
    """
    fixed = assert_fix_ok(source, "GL402", unsafe=False)
    assert "from torch.cuda.amp import GradScaler" in fixed
    assert "isinstance(scaler, GradScaler)" in fixed
    assert 'scaler = torch.amp.GradScaler("cuda")' in fixed


def test_gl402_custom_fwd_decorators_and_cpu_amp():
    source = """
    import torch
    class F(torch.autograd.Function):
        @staticmethod
        @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x):
            return x
        @staticmethod
        @torch.cuda.amp.custom_bwd
        def backward(ctx, g):
            return g
    with torch.cpu.amp.autocast():
        pass
    """
    assert rows(source, "GL402") == [(5, "GL402"), (9, "GL402"), (12, "GL402")]
    fixed = assert_fix_ok(source, "GL402", unsafe=False)
    assert '@torch.amp.custom_fwd(cast_inputs=torch.float32, device_type="cuda")' in fixed
    assert '@torch.amp.custom_bwd(device_type="cuda")' in fixed
    assert 'torch.amp.autocast("cpu")' in fixed


def test_gl402_negatives():
    assert codes('import torch\nwith torch.amp.autocast("cuda"):\n    pass\ns = torch.amp.GradScaler()\n', "GL402") == []
    assert codes("import torch\n# torch.cuda.amp.autocast() is deprecated\nx = 'torch.cuda.amp.GradScaler()'\n", "GL402") == []


def test_gl402_version_fallbacks_are_not_reported():
    # Found in lightning's precision plugins and timm's NativeScaler.
    source = """
    import torch
    scaler = torch.amp.GradScaler(device="cuda") if _TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()
    try:
        s = torch.amp.GradScaler(device="cuda")
    except (AttributeError, TypeError):
        s = torch.cuda.amp.GradScaler()
    """
    assert codes(source, "GL402") == []


def test_gl402_star_args_reported_without_fix():
    found = lint("import torch\nwith torch.cuda.amp.autocast(*flags):\n    pass\n", "GL402")
    assert [(f.code, f.fix) for f in found] == [("GL402", None)]


def test_gl402_fix_output_is_idempotent_in_the_fixture_style_file():
    fixed = fix(AMP_OLD, "GL402", unsafe=False)
    assert fix(fixed, "GL402", unsafe=False) == fixed
