"""GL301-GL303: per-step validation, logging and checkpoints, positives, negatives and fixes."""

from __future__ import annotations

import textwrap

from tests.helpers import assert_fix_ok, codes, first_body_row, fix, in_step_loop, lint, rows

HEADER = "import logging\nimport torch\nimport wandb\nlogger = logging.getLogger(__name__)\n"
FIRST = first_body_row(HEADER)  # row of the body's first line


def step(body: str, header: str = HEADER) -> str:
    return in_step_loop(body, header)


# -- GL301 per-step-validation ----------------------------------------------------------------------
def test_gl301_reports_evaluation_calls_and_eval_mode():
    source = step(
        """
        acc = evaluate(model, val_loader)
        val = self.run_validation()
        model.eval()
        """
    )
    assert rows(source, "GL301") == [(FIRST, "GL301"), (FIRST + 1, "GL301"), (FIRST + 2, "GL301")]


def test_gl301_negatives():
    source = step(
        """
        validate_args(args)
        test_inputs(x)
        result = eval("1 + 1")
        if step % 500 == 0:
            evaluate(model, val_loader)
        """
    )
    assert codes(source, "GL301") == []
    epoch_level = HEADER + textwrap.dedent(
        """
        for epoch in range(3):
            for x, y in loader:
                model(x).sum().backward()
                optimizer.step()
            evaluate(model, val_loader)
        """
    )
    assert codes(epoch_level, "GL301") == []


def test_gl301_fires_on_cpu_too_frequency_rule():
    assert codes(step("evaluate(model, val_loader)\n", header="import torch\n"), "GL301") == ["GL301"]


def test_gl301_fix_guards_call_and_its_users():
    source = step(
        """
        acc = evaluate(model, val_loader)  # note
        print(acc)
        model.eval()
        """
    )
    fixed = assert_fix_ok(source, "GL301")
    assert "        if step % 1000 == 0:\n            acc = evaluate(model, val_loader)  # note\n            print(acc)\n" in fixed
    assert "        model.eval()\n" in fixed  # no fix for a mode switch
    assert fixed.splitlines()[: FIRST - 1] == source.splitlines()[: FIRST - 1]
    assert fix(source, "GL301", unsafe=False) == source


def test_gl301_no_fix_without_counter():
    source = HEADER + "for x in loader:\n    model(x).sum().backward()\n    opt.step()\n    evaluate(model)\n"
    [finding] = lint(source, "GL301")
    assert finding.fix is None


# -- GL302 per-step-logging -------------------------------------------------------------------------
def test_gl302_reports_each_logging_kind():
    source = step(
        """
        print(step)
        logger.info("step %d", step)
        logging.info("step")
        wandb.log({"step": step})
        writer.add_scalar("loss", 1.0, step)
        """
    )
    assert [r for r, _ in rows(source, "GL302")] == [FIRST + i for i in range(5)]


def test_gl302_negatives():
    source = step(
        """
        logger.warning("odd batch")
        if step % 50 == 0:
            print(step)
        if step == 0:
            print("first step")
        if not torch.isfinite(loss):
            print("skipping")
            continue
        try:
            pass
        except ValueError:
            logger.info("bad")
        # print(step)
        msg = "print(step)"
        """
    )
    assert codes(source, "GL302") == []


def test_gl302_accumulation_modulo_and_rank_check_are_not_guards():
    source = step(
        """
        if step % accum_steps == 0:
            print(step)
        if rank == 0:
            print(step)
        """
    )
    assert codes(source, "GL302") == ["GL302", "GL302"]


def test_gl302_aliased_logger_and_shadowed_print():
    aliased = step('log.info("x")\n', header="import torch\nimport logging as lg\nlog = lg.getLogger()\n")
    assert codes(aliased, "GL302") == ["GL302"]
    shadowed = step("print(step)\n", header="import torch\nfrom rich import print\n")
    assert codes(shadowed, "GL302") == []


def test_gl302_fix_uses_log_every_and_keeps_comments():
    source = step('print(step)  # progress\n')
    fixed = assert_fix_ok(source, "GL302", **{"log-every": 25})
    assert "        if step % 25 == 0:\n            print(step)  # progress\n" in fixed


# -- GL303 per-step-checkpoint ----------------------------------------------------------------------
def test_gl303_reports_checkpoint_writes():
    source = step(
        """
        torch.save(model.state_dict(), "last.pt")
        model.save_pretrained("out")
        accelerator.save_state("ckpt")
        trainer.save_checkpoint("x.ckpt")
        model.save("model.keras")
        """
    )
    assert [r for r, _ in rows(source, "GL303")] == [FIRST + i for i in range(5)]


def test_gl303_aliased_torch_save():
    source = step('save(model.state_dict(), "last.pt")\n', header="from torch import save\n")
    assert codes(source, "GL303") == ["GL303"]


def test_gl303_negatives():
    source = step(
        """
        image.save("sample.png")
        np.save("arr.npy", arr)
        if step % 1000 == 0:
            torch.save(model.state_dict(), "ckpt.pt")
        if acc > best_acc:
            torch.save(model.state_dict(), "best.pt")
        if loss.isnan().any():
            torch.save(model.state_dict(), "crash.pt")
            break
        # torch.save(model.state_dict(), "x.pt")
        """
    )
    assert codes(source, "GL303") == []
    epoch_level = HEADER + textwrap.dedent(
        """
        for epoch in range(3):
            for x, y in loader:
                model(x).sum().backward()
                optimizer.step()
            torch.save(model.state_dict(), f"epoch{epoch}.pt")
        """
    )
    assert codes(epoch_level, "GL303") == []


def test_gl303_fix_uses_checkpoint_every():
    source = step('torch.save(model.state_dict(), "last.pt")  # keep\n')
    fixed = assert_fix_ok(source, "GL303")
    assert '        if step % 1000 == 0:\n            torch.save(model.state_dict(), "last.pt")  # keep\n' in fixed
    fixed = assert_fix_ok(source, "GL303", **{"checkpoint-every": 200})
    assert "if step % 200 == 0:" in fixed
    assert fix(source, "GL303", unsafe=False) == source


def test_model_a_pytest_test_taking_one_step_is_not_a_step_function():
    # Seen in keras' trainer tests: `train_on_batch(...)` then `evaluate(...)` in one test.
    source = """
        import keras
        def test_nested_inputs():
            model.compile(optimizer="sgd", loss="mse")
            out = model.train_on_batch(x, y)
            res = model.evaluate(x, y)
            print(res)
        def train_step(batch):
            loss = model(batch).loss
            loss.backward()
            optimizer.step()
            print(loss)
        """
    assert rows(source, ["GL301", "GL302"]) == [(12, "GL302")]
