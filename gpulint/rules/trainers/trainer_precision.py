"""GL803 trainer-precision."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.nodes import is_true, keyword_arg, string_literal
from gpulint.linter.analysis.trainers import (
    HF_ARGUMENTS,
    LIGHTNING_TRAINERS,
    is_hf_training_arguments,
    is_lightning_trainer,
)
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import Invalid, Rule, Valid

_FULL_PRECISION = frozenset({"32", "32-true", "64", "64-true"})


class TrainerPrecision(Rule):
    """
    ## What it finds
    A trainer configured for full fp32 training: `TrainingArguments(...)` with neither `bf16=True`
    nor `fp16=True`, and Lightning `Trainer(...)` without `precision=` (or with `32`/`"32-true"`).
    CPU-only trainers (`use_cpu=True`, `accelerator="cpu"`) are not reported.

    ## Why it is slow
    On tensor-core GPUs, bf16/fp16 matrix math runs several times faster than fp32 (about 2x in
    practice for whole training steps) and halves activation memory, which allows larger batches.

    ## Example
    ```python
    import lightning as L

    trainer = L.Trainer(max_epochs=10)
    ```
    Use instead:
    ```python
    import lightning as L

    trainer = L.Trainer(max_epochs=10, precision="bf16-mixed")
    ```

    ## Fix (unsafe)
    Sets `bf16=torch.cuda.is_bf16_supported()` (HF) or `precision="bf16-mixed" if
    torch.cuda.is_bf16_supported() else <the precision it had>` (Lightning), importing `torch` if
    needed.  The condition is the check both trainers make before they accept bf16: a literal
    `bf16=True` makes the Trainer raise on a GPU older than Ampere and on a machine without a GPU
    ("Your setup doesn't support bf16/gpu").  Unsafe: numerics change slightly.  A hint: opt in
    with `--select GL803`.
    """

    code = "GL803"
    name = "trainer-precision"
    message = "trainer configured for fp32: mixed precision (bf16) is usually about 2x faster on tensor-core GPUs"
    tokens = ("Trainer",)
    # the configuration it reports: its qualified name ends in one
    triggers = (tuple(sorted({name.rsplit(".", 1)[1] for name in HF_ARGUMENTS | LIGHTNING_TRAINERS})),)
    default = "hint"
    fix_applicability = Applicability.UNSAFE
    fixes_test_files = False

    VALID = [
        Valid(
            """
            from transformers import TrainingArguments
            import lightning as L
            a = TrainingArguments("out", bf16=True)
            b = TrainingArguments("out", fp16=True)
            c = TrainingArguments("out", bf16=args.bf16)
            d = TrainingArguments("out", use_cpu=True)
            e = L.Trainer(precision="bf16-mixed")
            f = L.Trainer(precision="16-mixed")
            g = L.Trainer(precision=args.precision)
            h = L.Trainer(accelerator="cpu")
            i = L.Trainer(plugins=[plugin])
            j = L.Trainer(**kwargs)
            """,
        ),
    ]
    INVALID = [
        Invalid(
            """
            from transformers import TrainingArguments
            import lightning as L
            a = TrainingArguments("out")
            b = TrainingArguments("out", fp16=False)
            c = L.Trainer(max_epochs=1)
            d = L.Trainer(precision="32-true")
            e = L.Trainer(precision=32)
            """,
            "3:5",
            "4:5",
            "5:5",
            "6:5",
            "7:5",
            fixed="""
            import torch
            from transformers import TrainingArguments
            import lightning as L
            a = TrainingArguments("out", bf16=torch.cuda.is_bf16_supported())
            b = TrainingArguments("out", fp16=False, bf16=torch.cuda.is_bf16_supported())
            c = L.Trainer(
                max_epochs=1,
                precision="bf16-mixed" if torch.cuda.is_bf16_supported() else "32-true",
            )
            d = L.Trainer(precision="bf16-mixed" if torch.cuda.is_bf16_supported() else "32-true")
            e = L.Trainer(precision="bf16-mixed" if torch.cuda.is_bf16_supported() else 32)
            """,
        ),
        Invalid(
            """
            from transformers import TrainingArguments
            import lightning as L
            a = TrainingArguments("out", dataloader_num_workers=2)
            b = L.Trainer(max_epochs=1)
            """,
            "3:5",
            "4:5",
            fixed="""
            import torch
            from transformers import TrainingArguments
            import lightning as L
            a = TrainingArguments(
                "out", dataloader_num_workers=2, bf16=torch.cuda.is_bf16_supported()
            )
            b = L.Trainer(
                max_epochs=1,
                precision="bf16-mixed" if torch.cuda.is_bf16_supported() else "32-true",
            )
            """,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if is_hf_training_arguments(self.ctx, node):
            if any(is_true(a.value) for k in ("use_cpu", "no_cuda") if (a := keyword_arg(node, k))):
                return
            flags = [keyword_arg(node, k) for k in ("bf16", "fp16")]
            if all(
                flag is None or not isinstance(flag.value, cst.Name) or flag.value.value == "False" for flag in flags
            ):
                if any(flag is not None and not isinstance(flag.value, cst.Name) for flag in flags):
                    return  # `bf16=args.bf16`: decided at run time
                supported, imports = self.ctx.reference("torch.cuda.is_bf16_supported")
                self.report(
                    node,
                    fix=set_keyword(
                        self.ctx,
                        node,
                        "bf16",
                        f"{supported}()",
                        Applicability.UNSAFE,
                        "Train in bf16 where the GPU supports it: `bf16=torch.cuda.is_bf16_supported()`",
                        imports,
                    ),
                )
        elif is_lightning_trainer(self.ctx, node):
            if string_literal(keyword_arg(node, "accelerator")) == "cpu" or keyword_arg(node, "plugins") is not None:
                return
            precision = keyword_arg(node, "precision")
            fallback = '"32-true"'
            if precision is not None:
                value = precision.value
                literal = (
                    string_literal(precision)
                    if isinstance(value, cst.SimpleString)
                    else (str(value.value) if isinstance(value, cst.Integer) else None)
                )
                if literal not in _FULL_PRECISION:
                    return
                fallback = self.ctx.code(value)
            supported, imports = self.ctx.reference("torch.cuda.is_bf16_supported")
            self.report(
                node,
                fix=set_keyword(
                    self.ctx,
                    node,
                    "precision",
                    f'"bf16-mixed" if {supported}() else {fallback}',
                    Applicability.UNSAFE,
                    "Train in bf16 where the GPU supports it: "
                    '`precision="bf16-mixed" if torch.cuda.is_bf16_supported() else ...`',
                    imports,
                ),
            )
