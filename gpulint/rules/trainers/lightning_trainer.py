"""GL802 lightning-trainer."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.nodes import int_literal, keyword_arg
from gpulint.linter.analysis.trainers import TINY_INTERVAL, is_lightning_trainer
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import remove_keyword
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import LIGHTNING_SCRIPT


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
    title = "Lightning Trainer that logs or validates every few steps: per-step work keeps the GPU waiting"
    tokens = ("Trainer",)
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
            )
            """,
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
            t = Trainer()
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
            t = pl.Trainer()
            """,
        ),
        # the fix removes the keywords
        Invalid(
            "t = L.Trainer(max_epochs=3, log_every_n_steps=1, val_check_interval=2)  # keep\n",
            "2:29",
            "2:50",
            header=LIGHTNING_SCRIPT,
            fixed="t = L.Trainer(max_epochs=3)  # keep\n",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not is_lightning_trainer(self.ctx, node):
            return
        if int_literal(keyword_arg(node, "log_every_n_steps")) == 1:
            self._report(node, "log_every_n_steps", "logs every step (`log_every_n_steps=1`)")
        interval = int_literal(keyword_arg(node, "val_check_interval"))
        if interval is not None and interval <= TINY_INTERVAL:
            self._report(node, "val_check_interval", f"validates every {interval} training batches")

    def _report(self, node: cst.Call, keyword: str, what: str) -> None:
        arg = keyword_arg(node, keyword)
        assert arg is not None  # called for a keyword the call has
        self.report(
            arg,
            message=self.message.format(what=what),
            fix=remove_keyword(
                node, keyword, Applicability.UNSAFE, f"Remove `{keyword}` (back to Lightning's default)"
            ),
        )
