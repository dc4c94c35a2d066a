"""GL301 per-step-validation."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.code_shapes import EVALUATED, STEP_LOOP
from gpulint.linter.analysis.facts import STEPS
from gpulint.linter.analysis.nodes import last_name
from gpulint.linter.analysis.vocabulary import EVALUATION_NAME
from gpulint.linter.analysis.walk import nodes_under
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.guards import guard_fix
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, RuleOption, Valid, positive_int
from gpulint.rules.case_headers import LOGGING_SCRIPT

EVAL_EVERY = RuleOption(
    "eval-every",
    1000,
    "Interval (in steps) the GL301 fix guards validation with"
    " (at most: a loop of known length validates ten times a pass).",
    int,
    check=positive_int,
)


class PerStepValidation(Rule):
    """
    ## What it finds
    A call that evaluates the model -- `evaluate(...)`, `validate(...)`, `run_validation(...)`,
    `model.eval()` -- inside a training step loop, not under an interval guard.  In full-batch
    training (the step loop iterates epochs: one optimizer step per epoch, also through a step
    function called once per epoch, or a `tqdm(range(n))` loop that trains on the same data every
    step) it runs once per epoch, and is not reported.  Nor is `model.eval()` followed in its block
    by a training step: one network is put in eval mode for another's step (a GAN's phases).  In
    a loop the code bounds to fewer than 50 steps the finding carries a hint and is held back unless
    hints are shown.

    ## Why it is slow
    Validation runs a whole pass over the validation set.  Doing it after every optimizer step
    multiplies the cost of training by the size of the validation set over the batch size; even a
    small validation set usually costs more than the step itself.  The GPU does useful training work
    only a fraction of the time.

    ## Example
    ```python
    import torch

    for step, batch in enumerate(train_loader):
        loss = model(batch).loss
        loss.backward()
        optimizer.step()
        val_loss = evaluate(model, val_loader)
    ```
    Use instead:
    ```python
    import torch

    for step, batch in enumerate(train_loader):
        loss = model(batch).loss
        loss.backward()
        optimizer.step()
        if step % 1000 == 0:
            val_loss = evaluate(model, val_loader)
    ```

    ## Fix (unsafe)
    Wraps the statement in `if <step counter> % <N> == <first value>:` (statements right after it
    that use its result move under the guard too).  N is `eval-every`, or less in a loop whose length
    the code states, so validation runs ten times a pass (as GL302 chooses its interval); a guard of
    the loop's own among the moved lines (`if step % 100 == 0: print(acc)`) is merged into the new
    one, whose interval becomes a multiple of it (no fix where that cannot be exact).  Offered only
    when the loop has a step counter (`enumerate`, `range`, or a `+= 1` counter) and only for
    evaluation functions; `model.eval()` starts a block of statements that must move together,
    which is left to a person.  Unsafe: it
    changes how often validation runs and what the program prints.
    """

    code = "GL301"
    name = "per-step-validation"
    hint_by_default = MOSTLY_NOT_WANTED
    message = "validation runs on every training step; run it every N steps or once per epoch"
    requires = {STEPS}
    triggers = ((EVALUATED,), (STEP_LOOP,))  # an evaluation call, per step
    site_triggers = 1
    tokens = ("eval", "valid", "test")
    fix_applicability = Applicability.UNSAFE
    fixes_test_files = False
    options = (EVAL_EVERY,)

    VALID = [
        # a step helper on the whole graph in a tqdm loop: one step per epoch
        Valid(
            """
            def _train_step(model, dataset, opt):
                data = dataset[0]
                mask = data.train_mask if dataset.split != "THI" else data.mask
                out = model(data.x, data.edge_index)
                loss = criterion(out[data.train_mask], data.y[data.train_mask])
                loss.backward()
                opt.step()
                return loss

            for _ in tqdm(range(n_steps)):
                loss = _train_step(model, dataset, opt)
                metrics = _eval_step(model, dataset)

            pbar = tqdm(range(n_steps))
            for _ in pbar:
                loss = _train_step(model, dataset, opt)
                metrics = _eval_step(model, dataset)
            """,
            header=LOGGING_SCRIPT,
        ),
        # the other network in eval mode for this one's step: no validation
        Valid(
            """
            for real in loader:
                gen.train()
                disc.eval()
                loss_g = criterion(disc(gen(noise())), ones)
                loss_g.backward()
                opt_g.step()
                gen.eval()
                disc.train()
                loss_d = criterion(disc(real), ones) + criterion(disc(gen(noise()).detach()), zeros)
                loss_d.backward()
                opt_d.step()
            """,
            header=LOGGING_SCRIPT,
        ),
        # a full-batch step function called once per epoch: it validates once per epoch
        Valid(
            """
            def train(model, data, optimizer):
                optimizer.zero_grad()
                out = model(data.x, data.edge_index)
                loss = criterion(out[data.train_mask], data.y[data.train_mask])
                loss.backward()
                optimizer.step()
                return loss, evaluate(model, data)

            for epoch in range(1, 201):
                loss, val_acc = train(model, data, optimizer)
            """,
            header=LOGGING_SCRIPT,
        ),
        # full-batch training: one step per epoch, so this runs once per epoch
        Valid(
            """
            for epoch in range(num_epochs):
                optimizer.zero_grad()
                loss = criterion(model(features, graph)[train_mask], labels[train_mask])
                loss.backward()
                optimizer.step()
                val_acc = evaluate(model, features, labels, val_mask)
            """,
            header=LOGGING_SCRIPT,
        ),
        # full-batch training counted in steps: the whole graph every step, no batch drawn
        Valid(
            """
            for it in range(args.iterations):
                optimizer.zero_grad()
                out = model(data.x, data.edge_index)
                loss = criterion(out[data.train_mask], data.y[data.train_mask])
                loss.backward()
                optimizer.step()
                model.eval()
                val_acc = evaluate(model, data)
                model.train()
            """,
            header=LOGGING_SCRIPT,
        ),
        # not evaluation (argument checks, the builtin eval), or throttled
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    validate_args(args)
                    test_inputs(x)
                    result = eval("1 + 1")
                    if step % 500 == 0:
                        evaluate(model, val_loader)
                    if step % steps_per_epoch == 0 or step == max_steps:
                        evaluator.eval(model)
            """,
            header=LOGGING_SCRIPT,
        ),
        # once per epoch
        Valid(
            """
            for epoch in range(3):
                for x, y in loader:
                    model(x).sum().backward()
                    optimizer.step()
                evaluate(model, val_loader)
            """,
            header=LOGGING_SCRIPT,
        ),
        # a pytest test that takes one step is not a step function (keras' trainer tests)
        Valid(
            """
            import keras
            def test_nested_inputs():
                model.compile(optimizer="sgd", loss="mse")
                out = model.train_on_batch(x, y)
                res = model.evaluate(x, y)
                print(res)
            """,
        ),
    ]
    INVALID = [
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    acc = evaluate(model, val_loader)
                    val = self.run_validation()
                    model.eval()
            """,
            "10:15",
            "11:15",
            "12:9",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 1000 == 0:
                        acc = evaluate(model, val_loader)
                        val = self.run_validation()
                    model.eval()
            """,
        ),
        # a frequency rule: no accelerator needed
        Invalid(
            """
            import torch
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    evaluate(model, val_loader)
            """,
            "7:9",
            fixed="""
            import torch
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 1000 == 0:
                        evaluate(model, val_loader)
            """,
        ),
        # the guard takes the statements that use the result along; a mode switch has no fix
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    acc = evaluate(model, val_loader)  # note
                    print(acc)
                    model.eval()
            """,
            "10:15",
            "12:9",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 1000 == 0:
                        acc = evaluate(model, val_loader)  # note
                        print(acc)
                    model.eval()
            """,
        ),
        # the loop's own guard of a line that uses the result goes into the new one, whose interval
        # becomes a multiple of it (never a guard inside a coarser one); where that cannot be exact
        # (the own guard fires on other steps), no fix
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    acc = evaluate(model, val_loader)
                    # on the dashboard
                    if step % 300 == 0:
                        print(f"step {step} accuracy {acc:.3f}")
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    score = evaluate(model, val_loader)
                    if step % 100 == 1:
                        print(score)
            """,
            "10:15",
            "18:17",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 1200 == 0:
                        acc = evaluate(model, val_loader)
                        # on the dashboard
                        print(f"step {step} accuracy {acc:.3f}")
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    score = evaluate(model, val_loader)
                    if step % 100 == 1:
                        print(score)
            """,
        ),
        # a loop of known length is validated ten times a pass (500 steps: every 50), at most eval-every
        Invalid(
            """
            for epoch in range(3):
                for step in range(500):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    evaluate(model, val_loader)
            """,
            "10:9",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step in range(500):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 50 == 0:
                        evaluate(model, val_loader)
            """,
        ),
        # no step counter: no fix
        Invalid(
            """
            for x in loader:
                model(x).sum().backward()
                opt.step()
                evaluate(model)
            """,
            "8:5",
            header=LOGGING_SCRIPT,
        ),
        # the guard uses eval-every
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    evaluate(model, val_loader)
            """,
            "10:9",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 250 == 0:
                        evaluate(model, val_loader)
            """,
            options={"eval-every": 250},
        ),
    ]

    def _steps_after(self, node: cst.Call) -> bool:
        """Whether a training step follows `node` in its own block (`disc.eval()` ...
        `loss_g.backward(); opt_g.step()`): the mode switch serves that step, no validation."""
        statement = self.ctx.statement_of(node)
        body = getattr(self.ctx.parent(statement), "body", None)
        if not isinstance(body, (list, tuple)) or statement not in body:
            return False
        following = body[body.index(statement) + 1 :]
        return any(
            isinstance(call, cst.Call) and self.ctx.loops.is_step_call(call)
            for later in following
            for call in nodes_under(later)
        )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        is_mode_switch = isinstance(func, cst.Attribute) and func.attr.value == "eval" and not node.args
        name = last_name(func) or ""
        is_evaluation = (
            not is_mode_switch
            and bool(EVALUATION_NAME.match(name))
            and not (
                isinstance(func, cst.Name) and name == "eval"  # the builtin eval()
            )
        )
        if not (is_mode_switch or is_evaluation):
            return
        if is_mode_switch and self._steps_after(node):
            return  # one network switched to eval mode for another's training step (a GAN phase)
        if not self.ctx.loops.per_step_work(node) or self.ctx.loops.one_step_per_epoch(node):
            return  # (full-batch training: a step per epoch, and this runs once per epoch)
        fix = None
        if is_evaluation:
            fix = guard_fix(self.ctx, node, EVAL_EVERY.key, self.option(EVAL_EVERY), "validation")
        self.report(node, fix=fix, hint=self.ctx.loops.few_steps_hint(node))
