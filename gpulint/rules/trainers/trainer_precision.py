"""GL803 trainer-precision."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.context import FileContext
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
_BF16_SUPPORTED_SINCE = (1, 10)  # torch.cuda.is_bf16_supported
_BF16_CHECK_SAFE_SINCE = (2, 5)  # from then it answers False without a GPU instead of raising
_LIGHTNING_BF16_SINCE = (1, 5)
# Trainer arguments Lightning 2.0 removed: code that passes them runs on 1.x.
_LIGHTNING_1_ONLY = frozenset(
    {"gpus", "tpu_cores", "ipus", "progress_bar_refresh_rate", "resume_from_checkpoint", "auto_lr_find", "amp_backend"}
)
_NUMBERS_CHANGE = "changes the run's numbers: matrix products and activations round to bf16"


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
    Sets `bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported()` (HF) or
    `precision=<bf16> if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else <the
    precision it had>` (Lightning), importing `torch` if needed.  The condition is the check both
    trainers make before they accept bf16: a literal `bf16=True` makes the Trainer raise on a GPU
    older than Ampere and on a machine without a GPU ("Your setup doesn't support bf16/gpu").
    `torch.cuda.is_bf16_supported()` itself raises on a machine without a GPU before PyTorch 2.5,
    hence `torch.cuda.is_available() and` in front of it, left out only where the project's PyTorch
    is 2.5 or later; it exists from PyTorch 1.10 (no fix for a project on an older one).

    Lightning spells bf16 by its version, which the fix reads from the project's requirements
    (`lightning`, `pytorch-lightning`), else from the code's own trainer arguments, else from the
    package it imports:
    - Lightning 2.0 or later, arguments of 2.x (`precision="16-mixed"`, `"32-true"`,
      `accelerator="gpu"` with `devices=`), or `import lightning`: `"bf16-mixed"`, else
      `"32-true"`;
    - Lightning 1.5 to 1.9, or arguments only 1.x accepts (`gpus=`, `precision=16`,
      `progress_bar_refresh_rate=`, `tpu_cores=`, `resume_from_checkpoint=`): `"bf16"`, else `32`
      (1.x rejects `"bf16-mixed"` and `"32-true"`; 2.x warns on `"bf16"`);
    - older than 1.5 (no bf16 at all), or `pytorch_lightning` with nothing that says which
      version: no fix, the finding says why.

    Unsafe, and the fix's message says so: the run's numbers change (matrix products and
    activations round to bf16's 8-bit mantissa), which a reproduction or a test tolerance may
    notice.  A hint: opt in with `--select GL803`.
    """

    code = "GL803"
    name = "trainer-precision"
    fix_api = frozenset({"lightning", "transformers"})
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
            a = TrainingArguments(
                "out", bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported()
            )
            b = TrainingArguments(
                "out", fp16=False, bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported()
            )
            c = L.Trainer(
                max_epochs=1,
                precision=(
                    "bf16-mixed"
                    if torch.cuda.is_available() and torch.cuda.is_bf16_supported()
                    else "32-true"
                ),
            )
            d = L.Trainer(
                precision=(
                    "bf16-mixed"
                    if torch.cuda.is_available() and torch.cuda.is_bf16_supported()
                    else "32-true"
                ),
            )
            e = L.Trainer(
                precision=(
                    "bf16-mixed"
                    if torch.cuda.is_available() and torch.cuda.is_bf16_supported()
                    else 32
                ),
            )
            """,
        ),
        # a project on PyTorch 2.5 or later: `is_bf16_supported()` answers False without a GPU
        Invalid(
            """
            from transformers import TrainingArguments
            import lightning as L
            a = TrainingArguments("out", dataloader_num_workers=2)
            b = L.Trainer(max_epochs=1)
            """,
            "3:5",
            "4:5",
            target_torch=(2, 5),
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
        # Lightning 1.x, as the requirements say: its spellings, `"bf16"` and `32`
        Invalid(
            """
            import torch
            import pytorch_lightning as pl
            t = pl.Trainer(max_epochs=1)
            """,
            "3:5",
            target_lightning=(1, 6),
            fixed="""
            import torch
            import pytorch_lightning as pl
            t = pl.Trainer(
                max_epochs=1,
                precision=(
                    "bf16"
                    if torch.cuda.is_available() and torch.cuda.is_bf16_supported()
                    else 32
                ),
            )
            """,
        ),
        # ... or as the code's own arguments say (`gpus=` is gone in 2.0)
        Invalid(
            """
            import torch
            from pytorch_lightning import Trainer
            t = Trainer(gpus=1, max_epochs=1)
            """,
            "3:5",
            fixed="""
            import torch
            from pytorch_lightning import Trainer
            t = Trainer(
                gpus=1,
                max_epochs=1,
                precision=(
                    "bf16"
                    if torch.cuda.is_available() and torch.cuda.is_bf16_supported()
                    else 32
                ),
            )
            """,
        ),
        # Lightning 2.x, as the requirements say, whatever the package's name
        Invalid(
            """
            import torch
            import pytorch_lightning as pl
            t = pl.Trainer(max_epochs=1)
            """,
            "3:5",
            target_lightning=(2, 1),
            fixed="""
            import torch
            import pytorch_lightning as pl
            t = pl.Trainer(
                max_epochs=1,
                precision=(
                    "bf16-mixed"
                    if torch.cuda.is_available() and torch.cuda.is_bf16_supported()
                    else "32-true"
                ),
            )
            """,
        ),
        # no bf16 before Lightning 1.5; `pytorch_lightning` and nothing that says which: no fix
        Invalid(
            """
            import pytorch_lightning as pl
            t = pl.Trainer(max_epochs=1)
            """,
            "2:5",
            target_lightning=(1, 4),
            messages=(
                "trainer configured for fp32: mixed precision (bf16) is usually about 2x faster on tensor-core "
                "GPUs (no fix: the project requires Lightning 1.4, which has no bf16 (from 1.5))",
            ),
        ),
        Invalid(
            """
            import pytorch_lightning as pl
            t = pl.Trainer(max_epochs=1)
            """,
            "2:5",
            messages=(
                "trainer configured for fp32: mixed precision (bf16) is usually about 2x faster on tensor-core "
                'GPUs (no fix: the project does not say which Lightning it runs on: 2.x spells bf16 `"bf16-mixed"`, '
                '1.x `"bf16"`; a `lightning` requirement says)',
            ),
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
                supported, imports = self._bf16_supported()
                fix = set_keyword(
                    self.ctx,
                    node,
                    "bf16",
                    supported,
                    Applicability.UNSAFE,
                    f"Train in bf16 where the GPU supports it: `bf16=...is_bf16_supported()`; {_NUMBERS_CHANGE}",
                    imports,
                )
                fix.min_torch = _BF16_SUPPORTED_SINCE
                self.report(node, fix=fix)
        elif is_lightning_trainer(self.ctx, node):
            if string_literal(keyword_arg(node, "accelerator")) == "cpu" or keyword_arg(node, "plugins") is not None:
                return
            precision = keyword_arg(node, "precision")
            literal = None
            if precision is not None:
                value = precision.value
                literal = (
                    string_literal(precision)
                    if isinstance(value, cst.SimpleString)
                    else (str(value.value) if isinstance(value, cst.Integer) else None)
                )
                if literal not in _FULL_PRECISION:
                    return
            generation, why = self._lightning_generation()
            if generation is None:
                self.report(node, message=f"{self.message} (no fix: {why})")
                return
            bf16, fallback = ('"bf16-mixed"', '"32-true"') if generation == 2 else ('"bf16"', "32")
            if precision is not None:
                fallback = self.ctx.code(precision.value)
            supported, imports = self._bf16_supported()
            fix = set_keyword(
                self.ctx,
                node,
                "precision",
                f"{bf16} if {supported} else {fallback}",
                Applicability.UNSAFE,
                f"Train in bf16 where the GPU supports it: `precision={bf16} if ...is_bf16_supported() else ...` "
                f"(Lightning {'2.x' if generation == 2 else '1.x'}'s spelling: {why}); {_NUMBERS_CHANGE}",
                imports,
            )
            fix.min_torch = _BF16_SUPPORTED_SINCE
            self.report(node, fix=fix)

    def _bf16_supported(self) -> tuple[str, tuple[str, ...]]:
        """The condition under which the GPU takes bf16, in the module's spelling, and the imports
        it needs: `torch.cuda.is_bf16_supported()` raises without a GPU before PyTorch 2.5."""
        supported, imports = self.ctx.reference("torch.cuda.is_bf16_supported")
        floor = self.ctx.torch_floor
        if floor is not None and floor[0] >= _BF16_CHECK_SAFE_SINCE:
            return f"{supported}()", imports
        available, more = self.ctx.reference("torch.cuda.is_available")
        return f"{available}() and {supported}()", tuple(dict.fromkeys((*imports, *more)))

    def _lightning_generation(self) -> tuple[int | None, str]:
        """Which Lightning the project runs on, as far as the fix needs it: 2 (2.0 or later), 1 (1.5
        to 1.9: bf16 spelled `"bf16"`) or None (no bf16, or not known), and the evidence."""
        floor = self.ctx.target_lightning
        if floor is not None:
            stated = f"the project requires Lightning {floor[0]}.{floor[1]}"
            if floor >= (2, 0):
                return 2, stated
            if floor >= _LIGHTNING_BF16_SINCE:
                return 1, stated
            return None, f"{stated}, which has no bf16 (from 1.5)"
        styles = {style for call in self.ctx.index.nodes("Call") if (style := _argument_style(self.ctx, call))}
        if len(styles) == 1:
            generation = styles.pop()
            return generation, f"the code passes the Trainer arguments of Lightning {generation}.x"
        packages = {target.split(".", 1)[0] for target in self.ctx.imports.bindings.values()}
        if "lightning" in packages and "pytorch_lightning" not in packages:
            return 2, "the code imports `lightning`, the 2.x package"
        return None, (
            'the project does not say which Lightning it runs on: 2.x spells bf16 `"bf16-mixed"`, '
            '1.x `"bf16"`; a `lightning` requirement says'
        )


def _argument_style(ctx: FileContext, call: cst.Call) -> int | None:
    """The Lightning major version a `Trainer(...)` call's own arguments are written for (1 or 2),
    or None when they fit both."""
    if ctx.call_qualified_name(call) not in LIGHTNING_TRAINERS:
        return None
    keywords = {arg.keyword.value for arg in call.args if arg.keyword is not None}
    precision = keyword_arg(call, "precision")
    if precision is not None and isinstance(precision.value, cst.Integer):
        literal: str | None = precision.value.value  # `precision=16`: 2.x warns, 1.x's spelling
    else:
        literal = string_literal(precision) if precision is not None else None
    if keywords & _LIGHTNING_1_ONLY or literal in ("16", "bf16"):
        return 1
    if literal is not None and literal.endswith(("-mixed", "-true")):
        return 2
    if string_literal(keyword_arg(call, "accelerator")) == "gpu" and "devices" in keywords:
        return 2
    return None
