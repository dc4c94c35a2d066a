"""GL801 hf-trainer-args."""

from __future__ import annotations

import re
from functools import cached_property

import libcst as cst

from gpulint.linter.analysis.nodes import int_literal, is_true, keyword_arg, string_literal
from gpulint.linter.analysis.trainers import (
    HF_ARGUMENTS,
    TINY_INTERVAL,
    commented_arguments,
    is_hf_training_arguments,
    short_run,
    short_run_hint,
)
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import HF_SCRIPT
from gpulint.rules.options import NUM_WORKERS

# Collators that pad token ids: what a text Trainer's loader does per batch, a millisecond's work.
_TOKEN_COLLATORS = re.compile(
    r"^transformers\.(data\.data_collator\.)?DataCollator(WithPadding|ForSeq2Seq|ForLanguageModeling|"
    r"ForTokenClassification|ForWholeWordMask)$"
)
_TRAINERS = re.compile(r"^(transformers|trl)\.(trainer\.|trainer_seq2seq\.)?\w*Trainer$")
# What the fix writes for a tiny `logging_steps`, `eval_steps` or `save_steps`: the Trainer's
# default interval for each (`eval_steps` follows `logging_steps`, itself 500 by default).
_DEFAULT_INTERVAL = "500"
_INTERVAL_WORK = {"logging_steps": "log", "eval_steps": "evaluate", "save_steps": "save a checkpoint"}


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
    from transformers import TrainingArguments

    args = TrainingArguments("out", logging_steps=1, eval_strategy="steps", eval_steps=1)
    ```
    Use instead:
    ```python
    from transformers import TrainingArguments

    args = TrainingArguments("out", logging_steps=500, eval_strategy="steps", eval_steps=500, dataloader_num_workers=4)
    ```

    ## Fix (unsafe)
    Sets `dataloader_num_workers=` the `num-workers` expression (as GL101; worker processes must be
    able to pickle the dataset and collator, and the fix is offered only where workers can start
    under every start method: under `if __name__ == "__main__":` or in a function called from
    there, see `gpulint rule GL101`), and writes the Trainer's default interval, 500, in place of
    `logging_steps=1`, a tiny `eval_steps` and a tiny `save_steps`: the argument stays where the
    user wrote it, with its comment.  Unsafe: it changes what is logged, evaluated and saved, and
    how data is loaded.  An interval with a comment on its line (`logging_steps=1,  # per-step loss
    curves for the paper`) is a deliberate choice: it is reported and left as written, without a
    fix.  Values that come from a parser (`args.logging_steps`) are never reported.  No fix either
    where 500 would not do what the run needs (the finding says why): a run whose `max_steps` (as
    the code gives it) is under 500 would then never log, evaluate or save at that interval; and
    with `load_best_model_at_end=True` the Trainer requires `save_steps` to be a multiple of
    `eval_steps`, so one of them is changed only where the other one's value still divides.

    Missing workers are a hint where the module's Trainer collates with a collator that pads
    token ids (`DataCollatorWithPadding`, `DataCollatorForSeq2Seq`,
    `DataCollatorForLanguageModeling`): the batches are pre-tokenized text, cheap to collate.  In
    a short run -- `max_steps` under 20, as the code gives it (a literal, an argparse default) --
    every finding is a hint: a demo or smoke test spends its time starting up.  Hints are held
    back unless hints are shown.
    """

    code = "GL801"
    name = "hf-trainer-args"
    fix_api = frozenset({"transformers"})
    message = (
        "TrainingArguments that starve the GPU: no loader workers, or logging, evaluation or saving every few steps"
    )
    tokens = ("TrainingArguments",)
    triggers = (tuple(sorted({name.rsplit(".", 1)[1] for name in HF_ARGUMENTS})),)  # what it reports ends in one
    fix_applicability = Applicability.UNSAFE
    fixes_test_files = False
    options = (NUM_WORKERS,)

    VALID = [
        # values from a parser, unused or per-epoch settings, **kwargs
        Valid(
            """
            import argparse
            from transformers import HfArgumentParser, Seq2SeqTrainingArguments as S2S
            parser = argparse.ArgumentParser()
            args = parser.parse_args()
            ok = TrainingArguments(
                "out", dataloader_num_workers=4, logging_steps=50, eval_strategy="steps", eval_steps=500
            )
            from_cli = TrainingArguments("out", dataloader_num_workers=args.workers, logging_steps=args.logging_steps)
            no_eval = TrainingArguments("out", dataloader_num_workers=2, eval_steps=1)  # eval_strategy "no": unused
            epoch_logs = TrainingArguments("out", dataloader_num_workers=2, logging_steps=1, logging_strategy="epoch")
            epoch_saves = TrainingArguments("out", dataloader_num_workers=2, save_steps=1, save_strategy="epoch")
            splat = TrainingArguments(**config)
            (parsed,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
            s2s = S2S("out", dataloader_num_workers=8)
            # TrainingArguments("out", logging_steps=1) in a comment
            text = "TrainingArguments(logging_steps=1)"
            """,
            header=HF_SCRIPT,
        ),
    ]
    INVALID = [
        # each problem once: no workers, logging, evaluation and saving every few steps
        Invalid(
            """
            from transformers import TrainingArguments
            if __name__ == "__main__":
                args = TrainingArguments(
                    "out",
                    logging_steps=1,
                    eval_strategy="steps",
                    eval_steps=10,
                    save_steps=2,
                )
            """,
            "3:12",
            "5:9",
            "7:9",
            "8:9",
            fixed="""
            import os

            from transformers import TrainingArguments
            if __name__ == "__main__":
                args = TrainingArguments(
                    "out",
                    logging_steps=500,
                    eval_strategy="steps",
                    eval_steps=500,
                    save_steps=500,
                    dataloader_num_workers=min(8, os.cpu_count() or 1),
                )
            """,
        ),
        # eval_steps defaults to logging_steps=1 (the second finding)
        Invalid(
            """
            a = TrainingArguments("out", dataloader_num_workers=4, logging_steps=1,
                evaluation_strategy="steps")
            """,
            "2:56",
            "3:5",
            header=HF_SCRIPT,
            fixed="""
            a = TrainingArguments("out", dataloader_num_workers=4, logging_steps=500,
                evaluation_strategy="steps")
            """,
            messages=(
                "logging_steps=1: the loss is read back and logged every step",
                "`eval_steps` defaults to `logging_steps=1`: the model is evaluated every step",
            ),
        ),
        # the Trainer pads token ids: missing workers are a hint
        Invalid(
            """
            from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer
            collator = DataCollatorForSeq2Seq(tokenizer, model=model)
            args = TrainingArguments("out")
            trainer = Seq2SeqTrainer(model=model, args=args, train_dataset=tokenized, data_collator=collator)
            """,
            "4:8",
            header=HF_SCRIPT,
            hints=(
                "the Trainer pads token ids (`DataCollatorForSeq2Seq`): a loader worker saves about a millisecond "
                "a batch",
            ),
        ),
        # a short run (`max_steps` under 20, here an argparse default): hints
        Invalid(
            """
            import argparse
            parser = argparse.ArgumentParser()
            parser.add_argument("--max_steps", type=int, default=10)
            args = parser.parse_args()
            demo = TrainingArguments("o", logging_steps=1, max_steps=args.max_steps)
            smoke = TrainingArguments("o", logging_steps=1, max_steps=5)
            full = TrainingArguments("o", logging_steps=1, max_steps=5000)
            """,
            "6:8",
            "6:31",
            "7:9",
            "7:32",
            "8:8",
            "8:31",
            header=HF_SCRIPT,
            hints=(
                "a short run (`max_steps=10`, fewer than 20 steps): start-up costs more than this setting there",
                "a short run (`max_steps=10`, fewer than 20 steps): start-up costs more than this setting there",
                "a short run (`max_steps=5`, fewer than 20 steps): start-up costs more than this setting there",
                "a short run (`max_steps=5`, fewer than 20 steps): start-up costs more than this setting there",
                None,
                None,
            ),
            fixed="""
            import argparse
            parser = argparse.ArgumentParser()
            parser.add_argument("--max_steps", type=int, default=10)
            args = parser.parse_args()
            demo = TrainingArguments("o", logging_steps=1, max_steps=args.max_steps)
            smoke = TrainingArguments("o", logging_steps=1, max_steps=5)
            full = TrainingArguments("o", logging_steps=500, max_steps=5000)
            """,
        ),
        # 500 would not come within the run (a run of 20 steps would never log), or would break
        # `load_best_model_at_end` (`save_steps` a multiple of `eval_steps`): no fix, and why
        Invalid(
            """
            short = TrainingArguments("o", dataloader_num_workers=2, logging_steps=1, max_steps=200)
            best = TrainingArguments(
                "o",
                dataloader_num_workers=2,
                eval_strategy="steps",
                eval_steps=5,
                save_steps=100,
                load_best_model_at_end=True,
            )
            both = TrainingArguments(
                "o",
                dataloader_num_workers=2,
                eval_strategy="steps",
                eval_steps=5,
                save_steps=10,
                load_best_model_at_end=True,
            )
            """,
            "2:58",
            "7:5",
            "15:5",
            "16:5",
            header=HF_SCRIPT,
            messages=(
                "logging_steps=1: the loss is read back and logged every step (no fix: the run has `max_steps=200`: "
                "at the default interval, 500, it would never log)",
                "the model is evaluated every few steps (`eval_steps`) (no fix: `load_best_model_at_end` needs "
                "`save_steps` a multiple of `eval_steps`; 100 and 500 would not be)",
                "the model is evaluated every few steps (`eval_steps`)",
                "a checkpoint is written every few steps (`save_steps`)",
            ),
            fixed="""
            short = TrainingArguments("o", dataloader_num_workers=2, logging_steps=1, max_steps=200)
            best = TrainingArguments(
                "o",
                dataloader_num_workers=2,
                eval_strategy="steps",
                eval_steps=5,
                save_steps=100,
                load_best_model_at_end=True,
            )
            both = TrainingArguments(
                "o",
                dataloader_num_workers=2,
                eval_strategy="steps",
                eval_steps=500,
                save_steps=500,
                load_best_model_at_end=True,
            )
            """,
        ),
        # aliases and Seq2SeqTrainingArguments; workers only where they can start (see GL101)
        Invalid(
            """
            import transformers as tr
            from transformers import Seq2SeqTrainingArguments as S
            a = tr.TrainingArguments('o', dataloader_num_workers=0)
            b = S('o', dataloader_num_workers=2, logging_steps=1)
            """,
            "3:5",
            "4:38",
            fixed="""
            import transformers as tr
            from transformers import Seq2SeqTrainingArguments as S
            a = tr.TrainingArguments('o', dataloader_num_workers=0)
            b = S('o', dataloader_num_workers=2, logging_steps=500)
            """,
        ),
        # a comment on the argument's line explains the value: reported, left as written with its
        # comment; the other comments stay where they are
        Invalid(
            """
            from transformers import TrainingArguments
            def main():
                # configure
                args = TrainingArguments(
                    "out",
                    logging_steps=1,  # chatty
                    eval_strategy="steps",
                    eval_steps=1,
                    bf16=True,
                )
                x = 1  # untouched
            if __name__ == "__main__":
                main()
            """,
            "4:12",
            "6:9",
            "8:9",
            fixed="""
            import os

            from transformers import TrainingArguments
            def main():
                # configure
                args = TrainingArguments(
                    "out",
                    logging_steps=1,  # chatty
                    eval_strategy="steps",
                    eval_steps=500,
                    bf16=True,
                    dataloader_num_workers=min(8, os.cpu_count() or 1),
                )
                x = 1  # untouched
            if __name__ == "__main__":
                main()
            """,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not is_hf_training_arguments(self.ctx, node):
            return
        short = short_run(self.ctx, node)
        hint = short_run_hint(short) if short is not None else None  # (every finding of a short run)
        workers = keyword_arg(node, "dataloader_num_workers")
        if workers is None or int_literal(workers) == 0:
            expression = str(self.option(NUM_WORKERS))
            imports = ("import os",) if "os." in expression else ()
            fix = None
            if self.ctx.workers.runs_as_main_program(node):  # where workers can start (see GL101)
                fix = set_keyword(
                    self.ctx,
                    node,
                    "dataloader_num_workers",
                    expression,
                    Applicability.UNSAFE,
                    f"Load batches in worker processes: `dataloader_num_workers={expression}`",
                    imports,
                )
            message = "TrainingArguments without `dataloader_num_workers`: batches load in the training process"
            self.report(node, message=message, fix=fix, hint=hint or self._token_collator_hint)
        logging = keyword_arg(node, "logging_steps")
        logging_strategy = _strategy(keyword_arg(node, "logging_strategy"), "steps")
        logs_every_step = int_literal(logging) == 1 and logging_strategy == "steps"
        if logs_every_step:
            self._interval(node, "logging_steps", "logging_steps=1: the loss is read back and logged every step", hint)
        eval_strategy = _strategy(keyword_arg(node, "eval_strategy") or keyword_arg(node, "evaluation_strategy"), "no")
        if eval_strategy == "steps":
            eval_steps = keyword_arg(node, "eval_steps")
            if eval_steps is None and int_literal(logging) == 1:
                strategy = keyword_arg(node, "eval_strategy") or keyword_arg(node, "evaluation_strategy")
                assert strategy is not None  # "steps" was read from it
                self.report(
                    strategy,
                    message="`eval_steps` defaults to `logging_steps=1`: the model is evaluated every step",
                    hint=hint,
                )
            elif eval_steps is not None and (int_literal(eval_steps) or TINY_INTERVAL + 1) <= TINY_INTERVAL:
                self._interval(node, "eval_steps", "the model is evaluated every few steps (`eval_steps`)", hint)
        if _strategy(keyword_arg(node, "save_strategy"), "steps") == "steps":
            save_steps = keyword_arg(node, "save_steps")
            if save_steps is not None and (int_literal(save_steps) or TINY_INTERVAL + 1) <= TINY_INTERVAL:
                self._interval(node, "save_steps", "a checkpoint is written every few steps (`save_steps`)", hint)

    @cached_property
    def _token_collator_hint(self) -> str | None:
        """Why missing loader workers are a hint where the module's Trainer collates with a
        collator that pads token ids (`DataCollatorForSeq2Seq(tokenizer)`): its batches are
        pre-tokenized text, and a worker would save about a millisecond a batch."""
        for call in self.ctx.index.nodes("Call"):
            if not _TRAINERS.match(self.ctx.call_qualified_name(call) or ""):
                continue
            collator = keyword_arg(call, "data_collator")
            value = collator.value if collator is not None else None
            origins = (
                [value] if isinstance(value, cst.Call) else (self.ctx.values.origins(value) or []) if value else []
            )
            for origin in origins:
                if isinstance(origin, cst.Call):
                    qualified = self.ctx.call_qualified_name(origin) or ""
                    if _TOKEN_COLLATORS.match(qualified):
                        name = qualified.rsplit(".", 1)[1]
                        return (
                            f"the Trainer pads token ids (`{name}`): a loader worker saves about a millisecond a batch"
                        )
        return None

    def _interval(self, node: cst.Call, keyword: str, message: str, hint: str | None) -> None:
        arg = keyword_arg(node, keyword)
        assert arg is not None  # called for a keyword the call has
        if keyword in commented_arguments(self.ctx, node):
            self.report(arg, message=f"{message} (no fix: the comment on its line may explain this value)", hint=hint)
            return
        why_not = self._interval_unfit(node, keyword)
        if why_not is not None:
            self.report(arg, message=f"{message} (no fix: {why_not})", hint=hint)
            return
        fix = set_keyword(
            self.ctx,
            node,
            keyword,
            _DEFAULT_INTERVAL,
            Applicability.UNSAFE,
            f"`{keyword}={_DEFAULT_INTERVAL}` (the Trainer's default)",
        )
        self.report(arg, message=message, fix=fix, hint=hint)

    def _interval_unfit(self, node: cst.Call, keyword: str) -> str | None:
        """Why the default interval would not do what this run needs, or None: beyond the run's
        `max_steps` it never comes; under `load_best_model_at_end` the Trainer raises unless
        `save_steps` is a multiple of `eval_steps`."""
        steps = keyword_arg(node, "max_steps")
        max_steps = self.ctx.loops.static_int(steps.value, node) if steps is not None else None
        if max_steps is not None and 0 < max_steps < int(_DEFAULT_INTERVAL):
            return (
                f"the run has `max_steps={max_steps}`: at the default interval, {_DEFAULT_INTERVAL}, it would never "
                f"{_INTERVAL_WORK[keyword]}"
            )
        best = keyword_arg(node, "load_best_model_at_end")
        if keyword in ("eval_steps", "save_steps") and best is not None and is_true(best.value):
            planned = {k: self._interval_after_fix(node, k) for k in ("eval_steps", "save_steps")}
            evaluation, saving = planned["eval_steps"], planned["save_steps"]
            if evaluation is not None and saving is not None and saving % evaluation:
                return (
                    f"`load_best_model_at_end` needs `save_steps` a multiple of `eval_steps`; {saving} and "
                    f"{evaluation} would not be"
                )
        return None

    def _interval_after_fix(self, node: cst.Call, keyword: str) -> int | None:
        """The literal `eval_steps` or `save_steps` once this rule's fixes are applied (a tiny value
        without a comment becomes the default), or None when it is not a literal."""
        arg = keyword_arg(node, keyword)
        if arg is None:
            return int(_DEFAULT_INTERVAL)
        value = int_literal(arg)
        if value is not None and value <= TINY_INTERVAL and keyword not in commented_arguments(self.ctx, node):
            return int(_DEFAULT_INTERVAL)
        return value


def _strategy(arg: cst.Arg | None, default: str) -> str | None:
    """ "steps"/"epoch"/"no" from a string or `IntervalStrategy.STEPS`; None when not a literal."""
    if arg is None:
        return default
    text = string_literal(arg)
    if text is not None:
        return text.lower()
    if isinstance(arg.value, cst.Attribute) and arg.value.attr.value.isupper():
        return arg.value.attr.value.lower()
    return None
