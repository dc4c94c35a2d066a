"""What gpulint knows about trainer APIs: Hugging Face `TrainingArguments` and Lightning `Trainer`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.analysis.nodes import has_star_kwargs

if TYPE_CHECKING:
    from gpulint.linter.analysis.context import FileContext

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


def is_hf_training_arguments(ctx: FileContext, call: cst.Call) -> bool:
    """`TrainingArguments(...)` with every argument visible (no `**kwargs`)."""
    return ctx.call_qualified_name(call) in HF_ARGUMENTS and not has_star_kwargs(call)


def is_lightning_trainer(ctx: FileContext, call: cst.Call) -> bool:
    """Lightning's `Trainer(...)` with every argument visible (no `**kwargs`)."""
    return ctx.call_qualified_name(call) in LIGHTNING_TRAINERS and not has_star_kwargs(call)


# Intervals this small run the work every step or nearly: HF `eval_steps`/`save_steps`, Lightning
# `val_check_interval` (an int counts training batches).
TINY_INTERVAL = 10
