"""GL302 per-step-logging."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.code_shapes import LOGGED, STEP_LOOP
from gpulint.linter.analysis.facts import STEPS
from gpulint.linter.analysis.logging_calls import logging_call_kind
from gpulint.linter.analysis.nodes import keyword_arg, positional_args
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.guards import logging_guard_fix
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, Valid
from gpulint.rules.case_headers import LOGGING_SCRIPT
from gpulint.rules.options import LOG_EVERY

_LOGGING_LABELS = {
    "print": "print()",
    "logging": "logging",
    "wandb": "wandb.log()",
    "tensorboard": "TensorBoard logging",
    "mlflow": "mlflow logging",
    "dllogger": "dllogger.log()",
}


class PerStepLogging(Rule):
    """
    ## What it finds
    `print(...)`, `logging`/`logger.info(...)`, `wandb.log(...)`, TensorBoard `writer.add_*(...)`,
    `mlflow.log_*(...)` and `dllogger.log(...)` inside a training step loop, not under an interval
    guard.  A progress mark -- `print(".", end="")`, constant text that does not end the line -- reads
    nothing back and writes a byte: it is not reported.  Nor is logging in a loop of a handful of
    steps (fewer than 20 known statically: `range(15)`, a default argument, `num_batches = 3`), or
    under a condition that reads the data (`if loss > 10:`), which does not run every step, or in
    the `else` of a condition (not an interval) whose body takes the step: a skipped bad batch.
    Nor logging that runs once per epoch or episode however often the optimizer steps: full-batch
    training (one step per epoch, as GL301 tells it), or a log after a loop that steps an
    environment (`while not done: ... env.step(action)`), where each iteration of the step loop is
    a whole episode.  In a loop the code bounds to fewer than 50 steps the finding carries a hint and is
    held back unless hints are shown: a few dozen prints cost milliseconds.

    ## Why it is slow
    Each call formats strings, writes to a terminal, file or socket, and usually reads the loss back
    from the GPU to do it (a host-device sync, GL201), so the GPU drains its queue every step.  With
    steps of tens of milliseconds, a print and a `.item()` per step can cost 10-30% of throughput.

    ## Example
    ```python
    import torch

    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")
    ```
    Use instead:
    ```python
    import torch

    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    ```

    ## Fix (unsafe)
    Offered only where the guard removes a read of the device that the step makes every step: the
    guarded lines (with the read-backs that move under the guard with them) read a tensor back
    (`.item()`, a tensor formatted or handed to the logger).  No fix, and the message says why, for
    a log of numbers already read back (`avg_loss = ....item()` kept above for other uses, a
    `train()` that returns `float(loss)`) or of counters (`max_memory_allocated()`, the epoch), for
    one under the script's own switch for it (`if args.print_loss:`), or once per epoch of
    full-batch training.  Wraps the statement in `if <step counter> % <N> == <first value>:` -- or, where it sits in a
    loop inside the step that only logs (gradient norms over `model.named_parameters()`), that
    loop, so one guard does what one per line would.  N fits the loop: the
    interval of the loop's own logging guard when it has one (`if batch_idx % args.log_interval ==
    0:`); else, for a loop whose length the code states (`range(500)`, a default argument, or a
    `break` on a count: `if n > args.num_iter: break` with `n += 1`), a tenth of it rounded down to
    1, 2 or 5 times a power of ten, so the loop still logs ten times a pass (500 steps: every 50) --
    at most `log-every`, which is N where the length is not known (a loader).  A loop too short for
    an interval of 2 gets no fix.  The guard is true on the counter's first value
    (`enumerate(loader, 1)`: `% 100 == 1`), so every pass logs at least once.  The read-backs whose
    values only the guarded lines use move under the guard with them (`lossf = loss.item()`; a
    `.item()` further up too, when nothing in between touches what it reads); a guard of the loop's
    own among the moved lines is merged into the new one, never left nested inside it.  No fix for a
    log under a condition on the step's data (`if dones[t]:`, `if "episode" in info:`): it logs
    events; nor where the step reads a tensor the log line reads back again outside logging
    (`losses.append(loss.item())`, the curve an LR finder plots): the guard would save no wait and
    only silence the progress.  Offered only when the loop has a step counter; a moved line keeps
    its layout, or is wrapped at the project's line length where the file is laid out as black and
    ruff format would.  Unsafe: the program prints or logs less often.  Warnings and errors
    (`logger.warning`), code in `except` handlers and branches that `continue`/`break` are events,
    not per-step logging, and are not reported.
    """

    code = "GL302"
    name = "per-step-logging"
    hint_by_default = MOSTLY_NOT_WANTED
    message = "logging runs on every training step; log every N steps"
    requires = {STEPS}
    triggers = ((LOGGED,), (STEP_LOOP,))  # a logging call, per step
    site_triggers = 1
    tokens = ("print", "log", "add_", "wandb", "mlflow")
    fix_applicability = Applicability.UNSAFE
    fixes_test_files = False
    options = (LOG_EVERY,)

    VALID = [
        # full-batch training: a step function on the whole graph, one step (and one print) per epoch
        Valid(
            """
            def train():
                optimizer.zero_grad()
                out = model(data.x, data.edge_index)
                loss = criterion(out[data.train_mask], data.y[data.train_mask])
                loss.backward()
                optimizer.step()
                return float(loss)

            for epoch in range(1, 201):
                loss = train()
                print(f"Epoch: {epoch:03d}, Loss: {loss:.4f}")
            """,
            header=LOGGING_SCRIPT,
        ),
        # an optimizer step per episode after a rollout, and one inside the rollout: the log after
        # the rollout runs once per episode
        Valid(
            """
            for episode in range(num_episodes):
                state, done, rewards = env.reset(), False, []
                while not done:
                    action, log_prob = policy.act(state)
                    state, reward, done, _ = env.step(action)
                    rewards.append(reward)
                loss = policy.loss(rewards)
                loss.backward()
                optimizer.step()
                writer.add_scalar("reward", sum(rewards), episode)

            for episode in range(num_episodes):
                state, done = env.reset(), False
                while not done:
                    state, reward, done, _ = env.step(agent.act(state))
                    agent.loss(state, reward).backward()
                    optimizer.step()
                critic_optimizer.step()
                logger.info("episode %d done", episode)
            """,
            header=LOGGING_SCRIPT,
        ),
        # the `else` of a condition whose body takes the step: a bad batch skipped
        Valid(
            """
            for batch in loader:
                loss = compute_loss(model, batch)
                if loss < loss_upper_limit:
                    loss.backward()
                    optimizer.step()
                else:
                    skipped += 1
                    logger.info(f"skipping a batch with loss {loss}, {skipped} so far")

            class Separation:
                def fit_batch(self, batch):
                    loss = self.compute_objectives(self.compute_forward(batch), batch)
                    if loss.nelement() > 0 and loss < self.hparams.loss_upper_lim:
                        self.scaler.scale(loss).backward()
                        self.scaler.step(self.optimizer)
                    else:
                        self.nonfinite_count += 1
                        logger.info(f"infinite or empty loss, {self.nonfinite_count} so far: skipping the batch")
            """,
            header=LOGGING_SCRIPT,
        ),
        # a warning, throttled, the first step only, events, text
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    logger.warning("odd batch")
                    if step % 50 == 0:
                        print(step)
                    if last_batch or step % args.log_interval == 0:
                        logger.info("step %d", step)
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
            """,
            header=LOGGING_SCRIPT,
        ),
        # a loop of a handful of steps (an argparse default); the body of a data-dependent condition
        Valid(
            """
            parser.add_argument("--steps", type=int, default=15)
            opt = parser.parse_args()
            for i in range(opt.steps):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                print(i, loss)
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if loss > 10:
                    logger.info("loss spike at step %d", step)
            """,
            header=LOGGING_SCRIPT,
        ),
        # a progress mark
        Valid(
            """
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                print(".", end="", flush=True)
            """,
            header=LOGGING_SCRIPT,
        ),
        # print is not the builtin
        Valid(
            """
            import torch
            from rich import print
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(step)
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
                    print(step, loss)
                    logger.info("step %d loss %s", step, loss)
                    logging.info("loss %.4f", loss.item())
                    wandb.log({"loss": loss})
                    writer.add_scalar("loss", loss, step)
            """,
            "10:9",
            "11:9",
            "12:9",
            "13:9",
            "14:9",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 100 == 0:
                        print(step, loss)
                        logger.info("step %d loss %s", step, loss)
                        logging.info("loss %.4f", loss.item())
                        wandb.log({"loss": loss})
                        writer.add_scalar("loss", loss, step)
            """,
        ),
        # a guard next to one of the same interval joins it, above or below; another interval stays apart
        Invalid(
            """
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    print(step)
                logger.info("step %d loss %s", step, loss)
                # to the dashboard
                wandb.log({"loss": loss})
                if step % 100 == 0:
                    writer.add_scalar("loss", 1.0, step)
                print("done")
                if step % 50 == 0:
                    save()
            """,
            "11:5",
            "13:5",
            "16:5",
            header=LOGGING_SCRIPT,
            fixed="""
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    print(step)
                    logger.info("step %d loss %s", step, loss)
                    # to the dashboard
                    wandb.log({"loss": loss})
                    writer.add_scalar("loss", 1.0, step)
                print("done")
                if step % 50 == 0:
                    save()
            """,
        ),
        # the read-back whose value only the log line uses goes under the guard with it
        Invalid(
            """
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                lossf = loss.item()
                acc = (pred == y).float().mean().item()
                print(f"step {step} loss {lossf:.4f} acc {acc:.2f}")
                kept = loss.item()
                losses.append(kept)
                print(kept)
            """,
            "11:5",
            "14:5",
            header=LOGGING_SCRIPT,
            fixed="""
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    lossf = loss.item()
                    acc = (pred == y).float().mean().item()
                    print(f"step {step} loss {lossf:.4f} acc {acc:.2f}")
                kept = loss.item()
                losses.append(kept)
                print(kept)
            """,
        ),
        # NVIDIA's dllogger, under any alias; a print that ends its line
        Invalid(
            """
            import dllogger as DLLogger
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                DLLogger.log(step=step, data={"loss": loss})
                print(".", end="\\n")
            """,
            "10:5",
            "11:5",
            header=LOGGING_SCRIPT,
            fixed="""
            import dllogger as DLLogger
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    DLLogger.log(step=step, data={"loss": loss})
                print(".", end="\\n")
            """,
        ),
        # an accumulation modulo and a rank check are not interval guards
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % accum_steps == 0:
                        print(step, loss)
                    if rank == 0:
                        print(step, loss)
            """,
            "11:13",
            "13:13",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % accum_steps == 0:
                        if step % 100 == 0:
                            print(step, loss)
                    if rank == 0:
                        if step % 100 == 0:
                            print(step, loss)
            """,
        ),
        # an aliased logger
        Invalid(
            """
            import torch
            import logging as lg
            log = lg.getLogger()
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    log.info("loss %s", loss)
            """,
            "9:9",
            fixed="""
            import torch
            import logging as lg
            log = lg.getLogger()
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 100 == 0:
                        log.info("loss %s", loss)
            """,
        ),
        # the guard uses log-every and keeps comments
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(step, loss)  # progress
            """,
            "10:9",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 25 == 0:
                        print(step, loss)  # progress
            """,
            options={"log-every": 25},
        ),
        # the interval fits a loop of known length (ten lines a pass: 500 steps, every 50; 400
        # steps from 1, every 20 from 1); a loader's length is not known: log-every, from its first value
        Invalid(
            """
            for epoch in range(3):
                for step in range(500):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(step, loss)
                for it in range(1, 401):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(it, loss)
                for i, (x, y) in enumerate(loader, 1):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(i, loss)
            """,
            "10:9",
            "15:9",
            "20:9",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step in range(500):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 50 == 0:
                        print(step, loss)
                for it in range(1, 401):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if it % 20 == 1:
                        print(it, loss)
                for i, (x, y) in enumerate(loader, 1):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if i % 100 == 1:
                        print(i, loss)
            """,
        ),
        # a loop of 15 steps (run 50 times: reported) is too short for any guard to help; a log of
        # an event the step's data picks (an episode's end) is not gated on the update counter
        Invalid(
            """
            for trial in range(50):
                for i in range(15):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print("loss:", loss)
            for update in range(num_updates):
                for t in range(num_steps):
                    obs, reward, done, info = envs.step(agent.act(obs))
                    dones[t] = done
                loss = agent.loss(rollout)
                loss.backward()
                optimizer.step()
                for t in range(num_steps):
                    if dones[t]:
                        print(f"update {update} episode return {returns[t]}")
            """,
            "10:9",
            "20:13",
            header=LOGGING_SCRIPT,
        ),
        # a loop left by a `break` on a count (an LR range test of `--num-iter` 100 steps over a
        # loader): ten lines over its 101 steps; one left after 15 steps is too short for a guard
        Invalid(
            """
            import argparse
            parser = argparse.ArgumentParser()
            parser.add_argument("--num-iter", type=int, default=100)
            args = parser.parse_args()
            n = 0
            for batch_index, (x, y) in enumerate(loader):
                if n > args.num_iter:
                    break
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                print(batch_index, loss)
                n += 1
            seen = 0
            for x, y in loader:
                if seen >= 15: break
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                print(seen, loss)
                seen += 1
            """,
            "16:5",
            "24:5",
            header=LOGGING_SCRIPT,
            fixed="""
            import argparse
            parser = argparse.ArgumentParser()
            parser.add_argument("--num-iter", type=int, default=100)
            args = parser.parse_args()
            n = 0
            for batch_index, (x, y) in enumerate(loader):
                if n > args.num_iter:
                    break
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if batch_index % 10 == 0:
                    print(batch_index, loss)
                n += 1
            seen = 0
            for x, y in loader:
                if seen >= 15: break
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                print(seen, loss)
                seen += 1
            """,
        ),
        # the loss is read back every step below the log line anyway (`losses.append(loss.item())`,
        # the curve an LR finder plots), also where the log formats the tensor itself: a guard would
        # save no wait and only silence the progress; another log line that reads it does not count
        # (its own fix guards it)
        Invalid(
            """
            losses = []
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print("loss {:0.4f}".format(loss.item()))
                    print(f"raw loss {loss}")
                    losses.append(loss.item())
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print("loss {:0.4f}".format(loss.item()))
                    writer.add_scalar("loss", loss.item(), step)
            """,
            "11:9",
            "12:9",
            "18:9",
            "19:9",
            header=LOGGING_SCRIPT,
            fixed="""
            losses = []
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print("loss {:0.4f}".format(loss.item()))
                    print(f"raw loss {loss}")
                    losses.append(loss.item())
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 100 == 0:
                        print("loss {:0.4f}".format(loss.item()))
                        writer.add_scalar("loss", loss.item(), step)
            """,
        ),
        # an event the step's data picks (an episode in this step's `infos`) gets no guard; a filter
        # on the parameters' names is no event: the lines under it still log every step
        Invalid(
            """
            for epoch in range(3):
                for batch_index, (images, labels) in enumerate(loader):
                    loss = criterion(model(images), labels)
                    loss.backward()
                    optimizer.step()
                    obs, reward, done, infos = envs.step(actions)
                    for info in infos:
                        if "episode" in info:
                            print(info["episode"]["r"])
                    for name, para in model.named_parameters():
                        if "weight" in name:
                            writer.add_scalar("grad/weights", para.grad.norm(), batch_index)
            """,
            "13:17",
            "16:17",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for batch_index, (images, labels) in enumerate(loader):
                    loss = criterion(model(images), labels)
                    loss.backward()
                    optimizer.step()
                    obs, reward, done, infos = envs.step(actions)
                    for info in infos:
                        if "episode" in info:
                            print(info["episode"]["r"])
                    if batch_index % 100 == 0:
                        for name, para in model.named_parameters():
                            if "weight" in name:
                                writer.add_scalar("grad/weights", para.grad.norm(), batch_index)
            """,
        ),
        # a loop inside the step that only logs (the last layer's gradient norms, by name) gets
        # one guard around it, not one per line, and joins the guard of the log lines after it;
        # the comment above a line stays above it
        Invalid(
            """
            for epoch in range(3):
                for batch_index, (images, labels) in enumerate(loader):
                    loss = criterion(model(images), labels)
                    loss.backward()
                    optimizer.step()
                    last_layer = list(model.children())[-1]
                    for name, para in last_layer.named_parameters():
                        if "weight" in name:
                            writer.add_scalar("grad/weights", para.grad.norm(), batch_index)
                        elif "bias" in name:
                            writer.add_scalar("grad/bias", para.grad.norm(), batch_index)

                    # the training loss
                    writer.add_scalar("train/loss", loss, batch_index)
            """,
            "13:17",
            "15:17",
            "18:9",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(3):
                for batch_index, (images, labels) in enumerate(loader):
                    loss = criterion(model(images), labels)
                    loss.backward()
                    optimizer.step()
                    last_layer = list(model.children())[-1]
                    if batch_index % 100 == 0:
                        for name, para in last_layer.named_parameters():
                            if "weight" in name:
                                writer.add_scalar("grad/weights", para.grad.norm(), batch_index)
                            elif "bias" in name:
                                writer.add_scalar("grad/bias", para.grad.norm(), batch_index)

                        # the training loss
                        writer.add_scalar("train/loss", loss, batch_index)
            """,
        ),
        # the loop's own guard lends its interval; a read-back further up that only the log line
        # uses moves under the guard with it (nothing in between touches `output`); the author's
        # layout of the moved lines stays
        Invalid(
            """
            for epoch in range(args.epochs):
                for batch_idx, (data, target) in enumerate(loader):
                    output = model(data)
                    loss = criterion(output, target)
                    loss.backward()
                    confidence = output.mean().item()
                    optimizer.step()

                    print("[%d/%d] loss: %.4f confidence: %.4f"
                          % (epoch, batch_idx, loss.item(), confidence))
                    if batch_idx % args.log_interval == 0:
                        writer.add_scalar("loss", loss.item(), batch_idx)
            """,
            "13:9",
            header=LOGGING_SCRIPT,
            fixed="""
            for epoch in range(args.epochs):
                for batch_idx, (data, target) in enumerate(loader):
                    output = model(data)
                    loss = criterion(output, target)
                    loss.backward()
                    optimizer.step()

                    if batch_idx % args.log_interval == 0:
                        confidence = output.mean().item()
                        print("[%d/%d] loss: %.4f confidence: %.4f"
                              % (epoch, batch_idx, loss.item(), confidence))
                        writer.add_scalar("loss", loss.item(), batch_idx)
            """,
        ),
        # the read-back the log lines print moves under their guard, with the lines between it and
        # the last one that uses its value (a log of the learning rate): the read runs every N steps
        Invalid(
            """
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                lossf = loss.item()
                print(f"step {step} loss {lossf:.4f}")
                logger.info("lr %s", scheduler.get_last_lr())
                wandb.log({"loss": lossf, "step": step})
            """,
            "10:5",
            "11:5",
            "12:5",
            header=LOGGING_SCRIPT,
            fixed="""
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    lossf = loss.item()
                    print(f"step {step} loss {lossf:.4f}")
                    logger.info("lr %s", scheduler.get_last_lr())
                    wandb.log({"loss": lossf, "step": step})
            """,
        ),
        # a guard fixes nothing where the logged values are not on the device -- the epoch and
        # allocator counters, a mean read back above for other uses -- or overrides the script's
        # own switch that asks for every step's loss: no fix, and the message says why
        Invalid(
            """
            for epoch in range(3):
                for step, batch in enumerate(loader):
                    loss = model(batch).loss
                    accelerator.backward(loss)
                    optimizer.step()
                    avg_loss = accelerator.gather(loss.repeat(8)).mean().item()
                    print("epoch {}, step {}, loss {}".format(epoch, step, avg_loss))
                    logger.info(f"epoch {epoch} memory {torch.cuda.max_memory_allocated() / 2**30} GiB")
                    if args.print_loss:
                        print(f"epoch {epoch} step {step} loss {loss}")
                    total += avg_loss
            """,
            "11:9",
            "12:9",
            "14:13",
            header=LOGGING_SCRIPT,
            messages=(
                "print() runs on every training step; log every N steps (no fix: the logged values are not read "
                "from the device here (numbers already read back, counters))",
                "logging runs on every training step; log every N steps (no fix: the logged values are not read "
                "from the device here (numbers already read back, counters))",
                "print() runs on every training step; log every N steps (no fix: it runs under `args.print_loss`, "
                "the script's own option for it)",
            ),
        ),
        # a pytest test that takes one step is not a step function; train_step is one
        Invalid(
            """
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
            """,
            "11:5",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        kind = logging_call_kind(self.ctx, node)
        if kind is None or (kind == "print" and _progress_mark(node)) or not self.ctx.loops.per_step_work(node):
            return
        if self.ctx.loops.one_step_per_epoch(node) or self.ctx.loops.one_step_per_episode(node):
            return  # once per epoch or per episode, however often the optimizer steps
        message = f"{_LOGGING_LABELS[kind]} runs on every training step; log every N steps"
        fix, why_not = logging_guard_fix(self.ctx, node, LOG_EVERY.key, self.option(LOG_EVERY))
        if why_not is not None:
            message += f" (no fix: {why_not})"
        self.report(node, message=message, fix=fix, hint=self.ctx.loops.few_steps_hint(node))


def _progress_mark(call: cst.Call) -> bool:
    """`print(".", end="")`: constant text that does not end the line."""
    end = keyword_arg(call, "end")
    if end is None or not isinstance(end.value, cst.SimpleString) or "\n" in str(end.value.evaluated_value):
        return False
    return all(isinstance(arg.value, cst.SimpleString) for arg in positional_args(call))
