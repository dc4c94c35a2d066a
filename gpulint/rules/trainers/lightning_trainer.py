"""GL802 lightning-trainer."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.nodes import int_literal, keyword_arg, string_literal
from gpulint.linter.analysis.trainers import (
    LIGHTNING_TRAINERS,
    TINY_INTERVAL,
    commented_arguments,
    is_lightning_trainer,
    short_run,
    short_run_hint,
)
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import LIGHTNING_SCRIPT

# What the fix writes: Lightning's defaults (log every 50 steps, validate once per epoch).
_DEFAULTS = {"log_every_n_steps": "50", "val_check_interval": "1.0"}


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
    import lightning as L

    trainer = L.Trainer(max_epochs=10, log_every_n_steps=1, val_check_interval=1)
    ```
    Use instead:
    ```python
    import lightning as L

    trainer = L.Trainer(max_epochs=10, log_every_n_steps=50, val_check_interval=1.0)
    ```

    ## Fix (unsafe)
    Writes Lightning's default in place of the value (`log_every_n_steps=50`,
    `val_check_interval=1.0`: validate once per epoch); the argument stays where the user wrote
    it, with its comment.  Unsafe: the program logs and validates less often.  An argument with a
    comment on its line (`log_every_n_steps=1,  # per-step curves for the paper`) is a deliberate
    choice: it is reported and left as written, without a fix.  Values from `LightningCLI` or
    `args` are never reported.

    No fix either where the default would not do what the run needs (the finding says why):
    - `val_check_interval` where a `ModelCheckpoint` or `EarlyStopping` acts on the validation
      runs: one in the Trainer's `callbacks`, or one in the module that monitors a validation
      metric (`monitor="val_loss"`).  Which checkpoint is kept, and when training stops (patience
      counts validation runs), follow how often the run validates;
    - `log_every_n_steps` in a run shorter than 50 steps (`max_steps`, or `limit_train_batches`
      times `max_epochs`, as the code gives them): every 50 steps, it would never log.

    In a short run -- `max_steps` under 20 (as the code gives it), `fast_dev_run`, or
    `limit_train_batches` times `max_epochs` under 20 -- the finding is a hint: a demo or smoke
    test spends its time starting up, not logging.  It is held back unless hints are shown.
    """

    code = "GL802"
    name = "lightning-trainer"
    fix_api = frozenset({"lightning"})
    message = "Lightning Trainer {what}: per-step work keeps the GPU waiting"
    title = "Lightning Trainer that logs or validates every few steps: per-step work keeps the GPU waiting"
    # What it reports is one of these keyword arguments, written in the module's own Trainer call:
    # a module that spells neither is not parsed for it (most modules of a project that names its
    # Trainer everywhere, in annotations and docstrings).
    tokens = tuple(_DEFAULTS)
    triggers = (
        tuple(f"{keyword}=" for keyword in _DEFAULTS),
        tuple(sorted({name.rsplit(".", 1)[1] for name in LIGHTNING_TRAINERS})),  # what it reports ends in one
    )
    site_triggers = 1
    fix_applicability = Applicability.UNSAFE
    fixes_test_files = False

    VALID = [
        Valid(
            """
            from lightning.pytorch.cli import LightningCLI
            from transformers import Trainer as HfTrainer
            a = L.Trainer(log_every_n_steps=50, val_check_interval=0.25)
            b = L.Trainer(val_check_interval=1000)
            c = L.Trainer(log_every_n_steps=args.log_every)
            d = L.Trainer(**vars(args))
            e = HfTrainer(model=m, args=targs)
            cli = LightningCLI(Model)
            # L.Trainer(log_every_n_steps=1)
            """,
            header=LIGHTNING_SCRIPT,
        ),
    ]
    INVALID = [
        Invalid(
            """
            trainer = L.Trainer(
                max_epochs=3,
                log_every_n_steps=1,
                val_check_interval=5,
            )
            """,
            "4:5",
            "5:5",
            header=LIGHTNING_SCRIPT,
            fixed="""
            trainer = L.Trainer(
                max_epochs=3,
                log_every_n_steps=50,
                val_check_interval=1.0,
            )
            """,
        ),
        # short runs (`max_steps=10`, `fast_dev_run`, 5 batches for 2 epochs): hints
        Invalid(
            """
            demo = L.Trainer(max_steps=10, log_every_n_steps=1)
            check = L.Trainer(fast_dev_run=True, log_every_n_steps=1)
            tiny = L.Trainer(limit_train_batches=5, max_epochs=2, val_check_interval=2)
            """,
            "2:32",
            "3:38",
            "4:55",
            header=LIGHTNING_SCRIPT,
            hints=(
                "a short run (`max_steps=10`, fewer than 20 steps): start-up costs more than this setting there",
                "a short run (`fast_dev_run=True`, fewer than 20 steps): start-up costs more than this setting there",
                "a short run (`limit_train_batches=5` for `max_epochs=2`, fewer than 20 steps): start-up costs more "
                "than this setting there",
            ),
            fixed="""
            demo = L.Trainer(max_steps=10, log_every_n_steps=1)
            check = L.Trainer(fast_dev_run=True, log_every_n_steps=50)
            tiny = L.Trainer(limit_train_batches=5, max_epochs=2, val_check_interval=1.0)
            """,
        ),
        # the default would not do what the run needs: a checkpoint callback acts on each validation,
        # EarlyStopping counts validation runs, a 30-step run would never log every 50 steps
        Invalid(
            """
            from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
            checkpoint = ModelCheckpoint(dirpath="ckpt", every_n_train_steps=10)
            a = L.Trainer(max_epochs=3, val_check_interval=10, callbacks=[checkpoint])
            stop = EarlyStopping(monitor="val_loss", patience=3)
            b = L.Trainer(max_epochs=3, val_check_interval=5, callbacks=callbacks)
            c = L.Trainer(max_steps=30, log_every_n_steps=1)
            """,
            "4:29",
            "6:29",
            "7:29",
            header=LIGHTNING_SCRIPT,
            messages=(
                "Lightning Trainer validates every 10 training batches: per-step work keeps the GPU waiting (no fix: "
                "`ModelCheckpoint(...)` acts on each validation run: validating once an epoch would change which "
                "checkpoint is kept or when training stops)",
                "Lightning Trainer validates every 5 training batches: per-step work keeps the GPU waiting (no fix: "
                '`EarlyStopping(monitor="val_loss")` acts on each validation run: validating once an epoch would '
                "change which checkpoint is kept or when training stops)",
                "Lightning Trainer logs every step (`log_every_n_steps=1`): per-step work keeps the GPU waiting (no "
                "fix: the run has `max_steps=30`: every 50 steps, it would never log)",
            ),
        ),
        # both package names
        Invalid(
            """
            from pytorch_lightning import Trainer
            t = Trainer(log_every_n_steps=1)
            """,
            "2:13",
            fixed="""
            from pytorch_lightning import Trainer
            t = Trainer(log_every_n_steps=50)
            """,
        ),
        Invalid(
            """
            import lightning.pytorch as pl
            t = pl.Trainer(val_check_interval=1)
            """,
            "2:16",
            fixed="""
            import lightning.pytorch as pl
            t = pl.Trainer(val_check_interval=1.0)
            """,
        ),
        # a comment on the argument's line explains the value: reported, left as written; every
        # other comment stays on its own argument
        Invalid(
            """
            trainer = L.Trainer(
                max_epochs=3,  # three epochs is enough
                log_every_n_steps=1,  # TODO: lower once debugged
                val_check_interval=2,
            )
            """,
            "4:5",
            "5:5",
            header=LIGHTNING_SCRIPT,
            fixed="""
            trainer = L.Trainer(
                max_epochs=3,  # three epochs is enough
                log_every_n_steps=1,  # TODO: lower once debugged
                val_check_interval=1.0,
            )
            """,
            messages=(
                "Lightning Trainer logs every step (`log_every_n_steps=1`): per-step work keeps the GPU waiting "
                "(no fix: the comment on its line may explain this value)",
                "Lightning Trainer validates every 2 training batches: per-step work keeps the GPU waiting",
            ),
        ),
        # one line with a comment: the comment may explain any of its values
        Invalid(
            "t = L.Trainer(max_epochs=3, log_every_n_steps=1, val_check_interval=2)  # keep\n",
            "2:29",
            "2:50",
            header=LIGHTNING_SCRIPT,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not is_lightning_trainer(self.ctx, node):
            return
        reports = []
        if int_literal(keyword_arg(node, "log_every_n_steps")) == 1:
            reports.append(("log_every_n_steps", "logs every step (`log_every_n_steps=1`)"))
        interval = int_literal(keyword_arg(node, "val_check_interval"))
        if interval is not None and interval <= TINY_INTERVAL:
            reports.append(("val_check_interval", f"validates every {interval} training batches"))
        commented = commented_arguments(self.ctx, node) if reports else set()
        short = short_run(self.ctx, node) if reports else None
        hint = short_run_hint(short) if short is not None else None
        for keyword, what in reports:
            self._report(node, keyword, what, keyword in commented, hint)

    def _report(self, node: cst.Call, keyword: str, what: str, commented: bool, hint: str | None) -> None:
        arg = keyword_arg(node, keyword)
        assert arg is not None  # called for a keyword the call has
        message = self.message.format(what=what)
        if commented:
            self.report(arg, message=f"{message} (no fix: the comment on its line may explain this value)", hint=hint)
            return
        why_not = self._default_unfit(node, keyword)
        if why_not is not None:
            self.report(arg, message=f"{message} (no fix: {why_not})", hint=hint)
            return
        default = _DEFAULTS[keyword]
        fix = set_keyword(
            self.ctx,
            node,
            keyword,
            default,
            Applicability.UNSAFE,
            f"`{keyword}={default}` (Lightning's default)",
        )
        self.report(arg, message=message, fix=fix, hint=hint)

    def _default_unfit(self, node: cst.Call, keyword: str) -> str | None:
        """Why Lightning's default would not do what this run needs, or None."""
        if keyword == "log_every_n_steps":
            steps = _run_steps(self.ctx, node)
            if steps is not None and steps[0] < int(_DEFAULTS[keyword]):
                return f"the run has {steps[1]}: every {_DEFAULTS[keyword]} steps, it would never log"
            return None
        callback = _validation_callback(self.ctx, node)
        if callback is not None:
            return (
                f"`{callback}` acts on each validation run: validating once an epoch would change which "
                "checkpoint is kept or when training stops"
            )
        return None


# Callbacks whose decisions are taken at each validation run.
_VALIDATION_CALLBACKS = frozenset({"ModelCheckpoint", "EarlyStopping"})


def _validation_callback(ctx: FileContext, trainer: cst.Call) -> str | None:
    """How the code writes the first `ModelCheckpoint`/`EarlyStopping` that depends on the
    trainer's validation cadence (in its `callbacks`, or monitoring a `val...` metric), or None."""
    given = keyword_arg(trainer, "callbacks")
    in_trainer: set[int] = set()
    if given is not None:
        pending = [given.value]
        while pending:
            value = pending.pop()
            if isinstance(value, (cst.List, cst.Tuple)):
                pending.extend(element.value for element in value.elements)
            elif isinstance(value, cst.Call):
                in_trainer.add(id(value))
            else:
                pending.extend(ctx.values.origins(value) or [])
    for call in ctx.index.nodes("Call"):
        qualified = ctx.call_qualified_name(call) or ""
        kind = qualified.rsplit(".", 1)[-1]
        if not qualified.startswith("lightning.") or kind not in _VALIDATION_CALLBACKS:
            continue
        monitor = string_literal(keyword_arg(call, "monitor")) or ""
        if id(call) in in_trainer or monitor.startswith("val"):
            return f'{kind}(monitor="{monitor}")' if monitor else f"{kind}(...)"
    return None


def _run_steps(ctx: FileContext, trainer: cst.Call) -> tuple[int, str] | None:
    """How many training steps the run takes, as the code gives it, and how it says so:
    `max_steps`, or `limit_train_batches` times `max_epochs` as literals; None when not known."""
    steps = keyword_arg(trainer, "max_steps")
    value = ctx.loops.static_int(steps.value, trainer) if steps is not None else None
    if value is not None and value > 0:
        return value, f"`max_steps={value}`"
    batches, epochs = (
        int_literal(keyword_arg(trainer, "limit_train_batches")),
        int_literal(keyword_arg(trainer, "max_epochs")),
    )
    if batches is not None and epochs is not None and batches > 0 and epochs > 0:
        return batches * epochs, f"`limit_train_batches={batches}` for `max_epochs={epochs}`"
    return None
