"""GL8xx: trainers configured to starve the GPU -- Hugging Face `TrainingArguments`, Lightning `Trainer`.

Only literal values are findings: an argument that comes from a command-line parser
(`HfArgumentParser`, `LightningCLI`, `args.logging_steps`) or from `**kwargs` is the user's choice
at run time, and a constructor the parser builds (`parse_args_into_dataclasses()`) is no call here.
"""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.context import FileContext, has_star_kwargs, is_true, keyword_arg
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import remove_keyword, set_keyword
from gpulint.linter.rule import Rule
from gpulint.rules.data_pipeline import DataLoaderSerial

HF_ARGUMENTS = frozenset(
    {
        "transformers.TrainingArguments",
        "transformers.Seq2SeqTrainingArguments",
        "transformers.training_args.TrainingArguments",
        "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
    }
)
LIGHTNING_TRAINERS = frozenset(
    {
        "lightning.Trainer",
        "lightning.pytorch.Trainer",
        "lightning.pytorch.trainer.Trainer",
        "lightning.pytorch.trainer.trainer.Trainer",
    }
)
# Intervals this small run the work every step or nearly: HF `eval_steps`/`save_steps`, Lightning
# `val_check_interval` (an int counts training batches).
_TINY_INTERVAL = 10


def _int_literal(arg: cst.Arg | None) -> int | None:
    if arg is not None and isinstance(arg.value, cst.Integer):
        return int(arg.value.evaluated_value)
    return None


def _string_literal(arg: cst.Arg | None) -> str | None:
    if arg is not None and isinstance(arg.value, cst.SimpleString):
        return str(arg.value.evaluated_value)
    return None


def _strategy(arg: cst.Arg | None, default: str) -> str | None:
    """"steps"/"epoch"/"no" from a string or `IntervalStrategy.STEPS`; None when not a literal."""
    if arg is None:
        return default
    text = _string_literal(arg)
    if text is not None:
        return text.lower()
    if isinstance(arg.value, cst.Attribute) and arg.value.attr.value.isupper():
        return arg.value.attr.value.lower()
    return None


def _hf_arguments(ctx: FileContext, node: cst.Call) -> bool:
    return ctx.call_qualified_name(node) in HF_ARGUMENTS and not has_star_kwargs(node)


def _lightning_trainer(ctx: FileContext, node: cst.Call) -> bool:
    return ctx.call_qualified_name(node) in LIGHTNING_TRAINERS and not has_star_kwargs(node)


class HfTrainerArgs(Rule):
    """
    ## What it finds
    Hugging Face `TrainingArguments(...)` (and `Seq2SeqTrainingArguments`) written with literal
    values that starve the GPU:
    - `dataloader_num_workers` absent or `0`: batches are loaded and collated in the training
      process;
    - `logging_steps=1`: the Trainer reads the loss back from the GPU and logs on every step;
    - `eval_steps` of 10 or less with `eval_strategy="steps"` (or `logging_steps=1` standing in for
      an absent `eval_steps`): a pass over the evaluation set every few steps;
    - `save_steps` of 10 or less with the default `save_strategy="steps"`: a checkpoint every
      few steps.

    ## Why it is slow
    With no workers, the GPU waits while the main process loads and collates each batch (the
    PyTorch profiler plugin flags data loading above 5% of step time).  Logging each step adds a
    host-device sync (`.item()`) per step; evaluation and checkpoints every few steps cost more than
    the steps themselves.

    ## Example
    ```python
    args = TrainingArguments("out", logging_steps=1, eval_strategy="steps", eval_steps=1)
    ```
    Use instead:
    ```python
    args = TrainingArguments("out", eval_strategy="steps", eval_steps=500, dataloader_num_workers=4)
    ```

    ## Fix (unsafe)
    Sets `dataloader_num_workers=` the `num-workers` expression (as GL101; worker processes must be
    able to pickle the dataset and collator), and removes `logging_steps=1`, a tiny `eval_steps`
    and a tiny `save_steps` (back to the Trainer's defaults: 500, or `logging_steps`).  Unsafe: it
    changes what is logged, evaluated and saved, and how data is loaded.  Values that come from
    a parser (`args.logging_steps`) are never reported.
    """

    code = "GL801"
    name = "hf-trainer-args"
    message = "TrainingArguments that starve the GPU: no loader workers, or logging, evaluation or saving every few steps"
    tokens = ("TrainingArguments",)
    fix_applicability = Applicability.UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        if not _hf_arguments(self.ctx, node):
            return
        workers = keyword_arg(node, "dataloader_num_workers")
        if workers is None or _int_literal(workers) == 0:
            expression = str(self.ctx.options.get("num-workers", DataLoaderSerial.options["num-workers"].default))
            imports = ("import os",) if "os." in expression else ()
            self.report(
                node,
                message="TrainingArguments without `dataloader_num_workers`: batches load in the training process",
                fix=set_keyword(
                    self.ctx, node, "dataloader_num_workers", expression, Applicability.UNSAFE,
                    f"Load batches in worker processes: `dataloader_num_workers={expression}`", imports,
                ),
            )
        logging = keyword_arg(node, "logging_steps")
        logging_strategy = _strategy(keyword_arg(node, "logging_strategy"), "steps")
        logs_every_step = _int_literal(logging) == 1 and logging_strategy == "steps"
        if logs_every_step:
            self._interval(node, "logging_steps", "logging_steps=1: the loss is read back and logged every step")
        eval_strategy = _strategy(keyword_arg(node, "eval_strategy") or keyword_arg(node, "evaluation_strategy"), "no")
        if eval_strategy == "steps":
            eval_steps = keyword_arg(node, "eval_steps")
            if eval_steps is None and _int_literal(logging) == 1:
                self.report(
                    keyword_arg(node, "eval_strategy") or keyword_arg(node, "evaluation_strategy"),
                    message="`eval_steps` defaults to `logging_steps=1`: the model is evaluated every step",
                )
            elif eval_steps is not None and (_int_literal(eval_steps) or _TINY_INTERVAL + 1) <= _TINY_INTERVAL:
                self._interval(node, "eval_steps", "the model is evaluated every few steps (`eval_steps`)")
        if _strategy(keyword_arg(node, "save_strategy"), "steps") == "steps":
            save_steps = keyword_arg(node, "save_steps")
            if save_steps is not None and (_int_literal(save_steps) or _TINY_INTERVAL + 1) <= _TINY_INTERVAL:
                self._interval(node, "save_steps", "a checkpoint is written every few steps (`save_steps`)")

    def _interval(self, node: cst.Call, keyword: str, message: str) -> None:
        self.report(
            keyword_arg(node, keyword),
            message=message,
            fix=remove_keyword(node, keyword, Applicability.UNSAFE, f"Remove `{keyword}` (back to the Trainer's default)"),
        )


class LightningTrainerArgs(Rule):
    """
    ## What it finds
    Lightning `Trainer(...)` with `log_every_n_steps=1`, or an integer `val_check_interval` of 10
    or less (validation every few training batches).

    ## Why it is slow
    Logging every step reads the logged values back from the GPU (a host-device sync) and writes
    to the logger every step; Lightning's default is every 50 steps.  Validation every few batches
    runs the whole validation loop more often than training makes progress worth measuring, and
    usually costs more than the training between two checks.

    ## Example
    ```python
    trainer = L.Trainer(max_epochs=10, log_every_n_steps=1, val_check_interval=1)
    ```
    Use instead:
    ```python
    trainer = L.Trainer(max_epochs=10)
    ```

    ## Fix (unsafe)
    Removes the keyword: Lightning's defaults (log every 50 steps, validate once per epoch) take
    over.  Unsafe: the program logs and validates less often.  Values from `LightningCLI` or
    `args` are never reported.
    """

    code = "GL802"
    name = "lightning-trainer"
    message = "Lightning Trainer {what}: per-step work keeps the GPU waiting"
    tokens = ("Trainer",)
    fix_applicability = Applicability.UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        if not _lightning_trainer(self.ctx, node):
            return
        if _int_literal(keyword_arg(node, "log_every_n_steps")) == 1:
            self._report(node, "log_every_n_steps", "logs every step (`log_every_n_steps=1`)")
        interval = _int_literal(keyword_arg(node, "val_check_interval"))
        if interval is not None and interval <= _TINY_INTERVAL:
            self._report(node, "val_check_interval", f"validates every {interval} training batches")

    def _report(self, node: cst.Call, keyword: str, what: str) -> None:
        self.report(
            keyword_arg(node, keyword),
            message=self.message.format(what=what),
            fix=remove_keyword(node, keyword, Applicability.UNSAFE, f"Remove `{keyword}` (back to Lightning's default)"),
        )


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
    trainer = L.Trainer(max_epochs=10)
    ```
    Use instead:
    ```python
    trainer = L.Trainer(max_epochs=10, precision="bf16-mixed")
    ```

    ## Fix (unsafe)
    Sets `bf16=True` (HF) or `precision="bf16-mixed"` (Lightning).  Unsafe: bf16 needs an Ampere or
    newer GPU (or a TPU), and numerics change slightly.  A hint: opt in with `--select GL803`.
    """

    code = "GL803"
    name = "trainer-precision"
    message = "trainer configured for fp32: mixed precision (bf16) is usually about 2x faster on tensor-core GPUs"
    tokens = ("Trainer",)
    default = "hint"
    fix_applicability = Applicability.UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        if _hf_arguments(self.ctx, node):
            if any(is_true(a.value) for k in ("use_cpu", "no_cuda") if (a := keyword_arg(node, k))):
                return
            flags = [keyword_arg(node, k) for k in ("bf16", "fp16")]
            if all(flag is None or not isinstance(flag.value, cst.Name) or flag.value.value == "False" for flag in flags):
                if any(flag is not None and not isinstance(flag.value, cst.Name) for flag in flags):
                    return  # `bf16=args.bf16`: decided at run time
                self.report(node, fix=set_keyword(self.ctx, node, "bf16", "True", Applicability.UNSAFE, "Train in bf16: `bf16=True`"))
        elif _lightning_trainer(self.ctx, node):
            if _string_literal(keyword_arg(node, "accelerator")) == "cpu" or keyword_arg(node, "plugins") is not None:
                return
            precision = keyword_arg(node, "precision")
            if precision is not None:
                value = precision.value
                literal = _string_literal(precision) if isinstance(value, cst.SimpleString) else (
                    str(value.value) if isinstance(value, cst.Integer) else None
                )
                if literal not in _FULL_PRECISION:
                    return
            self.report(
                node,
                fix=set_keyword(self.ctx, node, "precision", '"bf16-mixed"', Applicability.UNSAFE, 'Train in bf16: `precision="bf16-mixed"`'),
            )
