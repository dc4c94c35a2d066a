"""What gpulint knows about trainer APIs: Hugging Face `TrainingArguments` and Lightning `Trainer`."""

from __future__ import annotations

import io
import re
import tokenize
from functools import lru_cache
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.analysis.nodes import has_star_kwargs, keyword_arg
from gpulint.linter.analysis.vocabulary import SHORT_LOOP_STEPS

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


def short_run(ctx: FileContext, call: cst.Call) -> str | None:
    """Why a trainer configured by `call` runs fewer than SHORT_LOOP_STEPS training steps, as the
    code says (a demo, a smoke test: start-up costs more than per-step settings there), or None:
    `max_steps` of a value the module gives (a literal, a name given literals, an argparse
    default), Lightning's `fast_dev_run`, or `limit_train_batches` times `max_epochs` as literals."""
    steps = keyword_arg(call, "max_steps")
    value = ctx.loops.static_int(steps.value, call) if steps is not None else None
    if value is not None and 0 < value < SHORT_LOOP_STEPS:
        return f"`max_steps={value}`"
    dev_run = keyword_arg(call, "fast_dev_run")
    if dev_run is not None and (
        (isinstance(dev_run.value, cst.Name) and dev_run.value.value == "True")
        or (isinstance(dev_run.value, cst.Integer) and int(dev_run.value.evaluated_value) > 0)
    ):
        return f"`fast_dev_run={ctx.code(dev_run.value)}`"
    batches, epochs = keyword_arg(call, "limit_train_batches"), keyword_arg(call, "max_epochs")
    if (
        batches is not None
        and epochs is not None
        and isinstance(batches.value, cst.Integer)
        and isinstance(epochs.value, cst.Integer)
        and 0 < int(batches.value.evaluated_value) * int(epochs.value.evaluated_value) < SHORT_LOOP_STEPS
    ):
        return f"`limit_train_batches={batches.value.value}` for `max_epochs={epochs.value.value}`"
    return None


def short_run_hint(what: str) -> str:
    """The hint of a trainer setting in a short run (`short_run`)."""
    return f"a short run ({what}, fewer than {SHORT_LOOP_STEPS} steps): start-up costs more than this setting there"


def commented_arguments(ctx: FileContext, call: cst.Call) -> set[str]:
    """The keywords of `call` whose argument shares a line with a comment
    (`logging_steps=1,  # per-step loss curves for the paper`): an explicit value the user
    explained, which a fix reports and leaves as written."""
    keyword_args = [arg for arg in call.args if arg.keyword is not None]
    rows = _comment_rows(ctx.source_text)
    if not keyword_args or not rows:
        return set()
    positions = ctx.positions(keyword_args)
    found = set()
    for arg in keyword_args:
        assert arg.keyword is not None  # kept above
        span = positions[arg]
        if any(row in rows for row in range(span.start.line, span.end.line + 1)):
            found.add(arg.keyword.value)
    return found


# Comments addressed to tools, not to readers.
_TOOL_DIRECTIVE = re.compile(r"#\s*(noqa\b|type:|pragma\b|fmt:|isort:|pylint:|ruff:|gpulint:)", re.IGNORECASE)


@lru_cache(maxsize=1)
def _comment_rows(source: str) -> frozenset[int]:
    """The rows that hold a comment (a `#` inside a string is not one) other than a directive to a
    tool (`# noqa`, `# type: ignore`, `# fmt: skip`: they explain nothing); none when the text does
    not tokenize."""
    try:
        return frozenset(
            token.start[0]
            for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type == tokenize.COMMENT and not _TOOL_DIRECTIVE.match(token.string)
        )
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return frozenset()
