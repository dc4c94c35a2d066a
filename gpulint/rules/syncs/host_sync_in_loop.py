"""GL201 host-sync-in-loop."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from gpulint.linter.analysis.code_shapes import HOST_READ, STEP_LOOP
from gpulint.linter.analysis.facts import ACCELERATOR, STEPS, TORCH
from gpulint.linter.analysis.loops import is_method, method_class
from gpulint.linter.analysis.nodes import dotted_name, last_name, method_name
from gpulint.linter.analysis.pytorch import is_device_target
from gpulint.linter.analysis.values import HOST_FACTORIES, target_key
from gpulint.linter.analysis.vocabulary import (
    HOST_READ_HOOKS,
    MASK_METHODS,
    MODULE_NAME,
    NAN_CHECKS,
    SELECTIONS,
    SYNC_METHODS,
    TORCH_PREDICATES,
)
from gpulint.linter.analysis.walk import nodes_under
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.fix.guards import host_read_guard_fix
from gpulint.linter.rule import Invalid, Rule, Valid
from gpulint.rules.case_headers import TF_SCRIPT, TIMED_CUDA_SCRIPT
from gpulint.rules.options import LOG_EVERY

_CONDITION = "a tensor used as a Python condition in the training loop makes the CPU wait for the GPU every step"
_SELECTION_COUNT = (
    "counting what a mask or `nonzero` selects in the training loop makes the CPU wait for the GPU every step; "
    "count on the device (`mask.sum()`, `torch.count_nonzero`)"
)
_IDENTITY_OR_MEMBERSHIP = (cst.Is, cst.IsNot, cst.In, cst.NotIn)
# A device-wide wait the code asks for (GL204 reports it when it is per step).
_SYNCHRONIZE_CALLS = frozenset({"torch.cuda.synchronize", "torch.mps.synchronize", "torch.xpu.synchronize"})
_FORMATTED = "a tensor formatted into a string in the training loop makes the CPU wait for the GPU every step"


class HostSyncInLoop(Rule):
    """
    ## What it finds
    A value read back from the GPU inside a training step loop, not under an interval guard, in a
    PyTorch module that trains on an accelerator:

    * `.item()`, `.cpu()`, `.numpy()` and `.tolist()` on a tensor;
    * `float(loss)` / `int(correct)` of a tensor;
    * a tensor formatted into a string: `f"{loss}"`, `"%f" % loss`, `"{}".format(loss)`, `str(loss)`;
    * a NaN/Inf check used as a condition: `if torch.isnan(loss)`, `if not torch.isfinite(loss).all()`;
    * any other tensor used as a Python condition: `if loss > 10:`, `while err > tol:`,
      `if (pred == y).all():`, `if torch.equal(a, b):` (the condition is reported, not its body);
    * counting what a mask or `nonzero` selects: `len(t[mask])`, `t[t > 0].shape[0]`,
      `torch.nonzero(t).size(0)` -- the size of the result is only known on the GPU.

    A tensor that provably lives on the host is none of these: a `torch.zeros(3)` (no `device=`, or
    `device="cpu"` / `torch.device("cpu")`; never moved or added to a device tensor), a `.cpu()`
    result, an optimizer's `state["step"]`, a name that is also assigned a value read back (`loss =
    loss.item()`, or `loss = train()` where every `return` of the module's `train` reads back:
    `return float(loss)`), NumPy arrays and Python numbers.

    A tensor is the loss (the receiver of `.backward()`), `outputs.loss`, the result of a
    criterion, of a `torch.*` function or of a reduction on another tensor, or a name assigned a
    copy to the device (`x, t = x.to(dev), t.to(dev)`).  Where the module only moves work to a
    device it is handed (which may be the host) and names no GPU, the message says the host waits
    for "the device".  Not reported either: a
    read in a loop of a handful of steps (`range(15)`, `num_batches = 3`: fewer than 20
    known statically), under a condition that reads the data (`if loss > 10:`), whose body does
    not run every step, or in the statement right after `torch.cuda.synchronize()` (a step
    timer's: the host already waited there; GL204 reports the synchronize when it is per step),
    nor the value a framework's step hook returns read back where the framework's own version
    returns it so and its caller reads it on the host every step (`return loss.detach().cpu()`
    in the `fit_batch` of a SpeechBrain `Brain` subclass): the override follows the framework's
    contract, and the wait is the framework's.  The same holds for an override of a method of a
    base class of the module whose own version returns the value read back: the base's read is
    the one reported, and changing the contract there is the fix.
    Held back unless hints are shown (a hint on the finding says why): a read in a loop the code
    bounds to fewer than 50 steps, and one in a loop that times its steps on purpose -- it reads a
    clock and also synchronizes every step, or keeps each step's time (`times.append(...)`), or
    sits in a function named for a benchmark or a profile; and a read after the first of one
    statement (`print(err_d.item(), err_g.item())`: the first drains the queue, the others wait at
    most for the statement's own small kernels, and the first finding's fix guards them all).

    ## Why it is slow
    CUDA runs asynchronously: the host queues kernels and moves on.  Reading a value back to the
    host makes it wait until every queued kernel has finished, so the next step's kernels cannot be
    queued while this one runs and the GPU idles between steps.  One `.item()` per step commonly
    costs 5-20% of step time on small models, more with several.  `float(t)`, `str(t)` and
    `if t:` do the same read implicitly.

    ## Example
    ```python
    import torch

    model = Net().cuda()
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    ```
    Use instead: accumulate on the device and read it back every N steps:
    ```python
    import torch

    model = Net().cuda()
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.detach()
        if step % 100 == 0:
            print(total_loss.item() / (step + 1))
    ```

    ## Fix (unsafe)
    Where the value only feeds a logging call (`print(f"{loss.item()}")`), the statement is wrapped
    in an interval guard that fits the loop, as GL302 does (at most every `log-every` steps; the
    read-backs that only feed the guarded lines move under it).  Elsewhere -- the value feeds the
    computation, or decides control flow (`if torch.isnan(loss): break`, early stopping) -- there is
    no automatic fix: the read is still a sync, but skipping it would change what the program does.
    Nor is the log line guarded when the step reads the same tensor back anyway outside logging
    (`losses.append(loss.item())` below it): the guard would save no wait, only silence the log.
    A condition on a tensor (`if loss > 10: break`) and a count of a selection get none either:
    keep the value on the device (`torch.where`, `mask.sum()`, `torch.count_nonzero(t)`) and read
    it back every N steps.  Unsafe: the program prints less often.
    """

    code = "GL201"
    name = "host-sync-in-loop"
    message = "`.{method}()` in the training loop makes the CPU wait for the GPU every step"
    title = (
        "a tensor read back to the host (`.item()`, `.cpu()`, `float()`) in the training loop makes the CPU wait for "
        "the GPU every step"
    )
    # Its patterns (a method call, an f-string, `%`) are everywhere: the facts are the prefilter.
    requires = {TORCH, ACCELERATOR, STEPS}
    triggers = ((HOST_READ,), (STEP_LOOP,))  # a value read back, per step
    site_triggers = 1
    fix_applicability = Applicability.UNSAFE
    fixes_test_files = False
    options = (LOG_EVERY,)

    VALID = [
        # a factory on the CPU device reads back nothing (also where the name is given a device
        # tensor elsewhere: the statement right before the read decides); a model offloaded
        Valid(
            """
            for x in loader:
                t = torch.randint(0, n, (1,), device=torch.device("cpu"))
                step = t.item()
                if args.huber:
                    timesteps = torch.randint(0, 1000, (1,), device="cpu")
                    timestep = timesteps.item()
                else:
                    timesteps = torch.randint(0, 1000, (x.shape[0],), device=x.device)
                model(x.to(device), step, timesteps).sum().backward()
                optimizer.step()
                if args.offload:
                    vae.cpu()
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # read right after a deliberate synchronize (a step timer): the host already waited
        Valid(
            """
            for images in loader:
                loss = model(images.cuda(non_blocking=True)).mean()
                loss.backward()
                optimizer.step()
                torch.cuda.synchronize()
                metric_logger.update(loss=loss.item())
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # a step function that turns whatever it is given into numbers: the caller decides
        Valid(
            """
            class Meter:
                def update(self, **values):
                    for name, value in values.items():
                        if isinstance(value, torch.Tensor):
                            value = value.item()
                        self.totals[name] += value

            def train_step(x, y, metrics):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                for name, value in metrics.items():
                    if type(value) is torch.Tensor:
                        value = value.item()
                    metrics[name] = value

            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                meter.update(lr=optimizer.param_groups[0]["lr"])
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # tensors on the host: built without a device, an optimizer's step count
        Valid(
            """
            class Adam(torch.optim.Optimizer):
                def step(self):
                    for p in self.params:
                        state = self.state[p]
                        step_t = state["step"]
                        step_t += 1
                        bias_correction = 1 - beta ** step_t.item()

            correct = torch.zeros(1)
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                total = correct.cpu() + 1
                print(correct.item(), total.item(), f"{correct}")
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # the loss a framework's step hook hands back read, as the framework's own version does: its
        # caller reads it on the host every step anyway (also through a subclass of the module)
        Valid(
            """
            import speechbrain as sb

            class Separation(sb.Brain):
                def fit_batch(self, batch):
                    loss = self.compute_objectives(self.compute_forward(batch), batch)
                    loss.backward()
                    self.optimizer.step()
                    return loss.detach().cpu()

            class Enhancement(Separation):
                def fit_batch(self, batch):
                    loss = self.compute_objectives(self.compute_forward(batch), batch)
                    loss.backward()
                    self.optimizer.step()
                    return loss.detach().cpu()
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # a loop of a handful of steps
        Valid(
            """
            def demo(steps=15):
                for i in range(steps):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(loss.item())

            num_batches = 3
            for i in range(num_batches):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # not tensors; a NaN check that is not a condition
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    lr = float(args.lr)
                    n = int(len(batch))
                    text = f"step {step} epoch {epoch}"
                    line = "step %d" % step
                    ok = torch.isnan(loss)
                    name = str(epoch)
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # under an interval guard
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 100 == 0:
                        print(loss.item(), float(loss), f"{loss}")
                    if last_batch or step % args.log_interval == 0:
                        meter.update(loss.item())
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # once per epoch, and in an evaluation loop
        Valid(
            """
            for epoch in range(3):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                print(f"epoch {epoch} loss {loss.item()} {float(loss)}")
            for x, y in val_loader:
                acc += (model(x).argmax(1) == y).sum().item()
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # no accelerator in the module
        Valid(
            """
            import torch
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += loss.item()
            """,
        ),
        # not PyTorch
        Valid(
            """
            import numpy as np
            dev = "cuda"
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += loss.item()
            """,
        ),
        # comments and strings
        Valid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    # total += loss.item()
                    note = "loss.item() and float(loss)"
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # conditions and counts on host values: NumPy, a tensor built on the host and never moved, a
        # value read back once into its own name, identity tests; per epoch; under an interval guard
        Valid(
            """
            import numpy as np
            window = np.zeros(3)
            seen = torch.zeros(3)
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    out = model(x)
                    loss = criterion(out, y)
                    loss.backward()
                    optimizer.step()
                    seen += 1
                    if window[0] > 1 or seen.sum() > 5:
                        pass
                    if loss is None or out is not None or out == None:
                        pass
                    line = "%11.4g" * 3 % (*window,)
                    bar = ("%11s" + "%11.4g" * 3) % ("x", *seen)
                    count = len(seen[seen > 0]) + torch.nonzero(seen).shape[0]
                    if step % 100 == 0:
                        if loss > 10:
                            print(len(out[out > 0]))
                if loss > 10:
                    break
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
        # an evaluation loop
        Valid(
            """
            for x, y in val_loader:
                out = model(x)
                if (out.argmax(1) == y).all():
                    n = len(out[out > 0])
            """,
            header=TIMED_CUDA_SCRIPT,
        ),
    ]
    INVALID = [
        # the step function's own read is reported; the number it returns is a host number, which
        # the loop formats without waiting
        Invalid(
            """
            def train():
                optimizer.zero_grad()
                loss = criterion(model(data.x, data.edge_index), data.y)
                loss.backward()
                optimizer.step()
                return loss.item(), 0.0

            for epoch in range(1, 201):
                loss, _ = train()
                loss = train()[0]
                print(f"Loss: {loss:.4f}")
            """,
            "9:12",
            header=TIMED_CUDA_SCRIPT,
        ),
        # a tensor built on the host but moved, or built on the device
        Invalid(
            """
            correct = torch.zeros(1)
            correct = correct.to(device)
            step_t = torch.tensor(0.0, device=device)
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                print(correct.item(), step_t.item())
            """,
            "11:11",
            "11:27",
            header=TIMED_CUDA_SCRIPT,
        ),
        # `.cpu().numpy()` is one sync, reported once at `.cpu()`
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += loss.item()
                    arr = loss.detach().cpu().numpy()
                    values = y.tolist()
            """,
            "9:18",
            "10:29",
            "11:18",
            header=TIMED_CUDA_SCRIPT,
        ),
        # implicit reads; `isnan(x) or isinf(x)` is one read, reported once
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += float(loss)
                    seen = int((model(x).argmax(1) == y).sum())
                    text = f"loss {loss:.3f}"
                    line = "loss %.3f" % loss
                    other = "loss {}".format(loss)
                    if torch.isnan(loss):
                        break
                    if not torch.isfinite(loss).all():
                        raise ValueError("diverged")
                    if args.nan_filter and (torch.isnan(loss) or torch.isinf(loss)):
                        continue
            """,
            "9:18",
            "10:16",
            "11:24",
            "12:30",
            "13:34",
            "14:12",
            "16:37",
            "18:33",
            header=TIMED_CUDA_SCRIPT,
        ),
        # in a step function; an except handler is an event
        Invalid(
            """
            def train_step(batch):
                loss = model(batch).loss
                loss.backward()
                optimizer.step()
                return loss.item()

            for batch in loader:
                loss = train_step(batch)
                try:
                    pass
                except RuntimeError:
                    print(loss.item())
            """,
            "8:12",
            header=TIMED_CUDA_SCRIPT,
        ),
        # a framework's step hook: a read it does not hand back, and a step method of a class
        # that is no such framework's; a base class of the module that returns a read sets the
        # contract its subclass keeps: the base's read is reported, once
        Invalid(
            """
            import speechbrain as sb

            class GAN(sb.Brain):
                def fit_batch(self, batch):
                    loss = self.compute_objectives(self.compute_forward(batch), batch)
                    loss.backward()
                    self.optimizer.step()
                    loss.detach().cpu()
                    return loss.detach()

            class Trainer:
                def fit_batch(self, batch):
                    loss = self.compute_objectives(self.compute_forward(batch), batch)
                    loss.backward()
                    self.optimizer.step()
                    return loss.detach().cpu()

            class WarmupTrainer(Trainer):
                def fit_batch(self, batch):
                    loss = self.compute_objectives(self.compute_forward(batch), batch) * self.warmup
                    loss.backward()
                    self.optimizer.step()
                    return loss.detach().cpu()
            """,
            "11:23",
            "19:30",
            header=TIMED_CUDA_SCRIPT,
        ),
        # the value decides control flow: no fix
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if loss.item() < 0.01:
                        break
            """,
            "9:12",
            header=TIMED_CUDA_SCRIPT,
        ),
        # only a read that feeds a log line could be guarded; but the other, which feeds the
        # computation, reads the same loss back every step: the guard would save no wait (and only
        # silence the log), so neither has a fix.  Reading another tensor, the log line's is guarded
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(f"step {step} loss {loss.item():.4f}")
                    total += loss.item()
                for step, (x, y) in enumerate(loader):
                    loss, acc = criterion(model(x), y), accuracy(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(f"step {step} loss {loss.item():.4f}")  # comment kept
                    total += acc.item()
            """,
            "9:35",
            "10:18",
            "15:35",
            "16:18",
            header=TIMED_CUDA_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(f"step {step} loss {loss.item():.4f}")
                    total += loss.item()
                for step, (x, y) in enumerate(loader):
                    loss, acc = criterion(model(x), y), accuracy(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 100 == 0:
                        print(f"step {step} loss {loss.item():.4f}")  # comment kept
                    total += acc.item()
            """,
        ),
        # a read-back only log lines use goes under the guard with them
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    lossf = loss.item()
                    print(f"step {step} loss {lossf:.4f}")
                    logger.info("loss %f", lossf)
            """,
            "9:17",
            header=TIMED_CUDA_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 100 == 0:
                        lossf = loss.item()
                        print(f"step {step} loss {lossf:.4f}")
                        logger.info("loss %f", lossf)
            """,
        ),
        # the guard uses log-every
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    print(f"loss {loss}")
            """,
            "9:23",
            header=TIMED_CUDA_SCRIPT,
            fixed="""
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    if step % 50 == 0:
                        print(f"loss {loss}")
            """,
            options={"log-every": 50},
        ),
        # TensorFlow and PyTorch on an accelerator in one module: this read is GL201's (GL706 stands aside)
        Invalid(
            """
            import torch
            device = torch.device("cuda")
            for x, y in ds:
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                print(loss.numpy())
            """,
            "9:11",
            header=TF_SCRIPT,
        ),
        # a tensor as a Python condition: the condition is reported (once), not its body
        Invalid(
            """
            for epoch in range(3):
                for step, (x, y) in enumerate(loader):
                    out = model(x)
                    loss = criterion(out, y)
                    loss.backward()
                    optimizer.step()
                    if loss > 10:
                        break
                    err = (out - y).abs().max()
                    while err > 0.1 and step > 0:
                        err = err / 2
                    if not (out.argmax(1) == y).all():
                        pass
                    if torch.equal(out, y):
                        pass
            """,
            "10:12",
            "13:15",
            "15:12",
            "17:12",
            header=TIMED_CUDA_SCRIPT,
        ),
        # a condition that reads the data: the condition is the per-step sync, its rare body is not
        Invalid(
            """
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if loss > 10:
                    print(loss.item())
            """,
            "8:8",
            header=TIMED_CUDA_SCRIPT,
        ),
        # a name also assigned a value read back: the read is reported; which value the condition
        # tests is not known, so the condition is not
        Invalid(
            """
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                loss = loss.item()
                if loss > 10:
                    break
            """,
            "8:12",
            header=TIMED_CUDA_SCRIPT,
        ),
        # a format string built by repetition (yolov5's progress bar) over a device tensor's elements
        Invalid(
            """
            mloss = torch.zeros(3, device=device)
            for epoch in range(3):
                for i, (x, y) in enumerate(loader):
                    loss, items = compute_loss(model(x), y)
                    loss.backward()
                    optimizer.step()
                    mloss = (mloss * i + items) / (i + 1)
                    pbar.set_description(("%10s" * 2 + "%10.4g" * 3) % (f"{epoch}", "mem", *mloss))
                    line = "%11.4g" * 3 % (*mloss,)
            """,
            "11:81",
            "12:33",
            header=TIMED_CUDA_SCRIPT,
        ),
        # counting what a mask or nonzero selects: the size is only known on the GPU
        Invalid(
            """
            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                loss.backward()
                optimizer.step()
                positive = out > 0
                hits = torch.nonzero(out).shape[0]
                n = len(out[positive])
                k = out[~torch.isnan(out)].size(0)
                m = out.nonzero().numel()
            """,
            "10:12",
            "11:9",
            "12:32",
            "13:23",
            header=TIMED_CUDA_SCRIPT,
        ),
        # a tensor moved to the device by an unpacking assignment; a module that only moves work
        # to a device it is handed (which may be the host) says "the host waits for the device"
        Invalid(
            """
            def train(model, loader, optimizer, dev):
                for x, t in loader:
                    x, t = x.to(dev), t.to(dev)
                    n = torch.nonzero(t).shape[0]
                    loss = model(x, t).sum() / n
                    loss.backward()
                    optimizer.step()
                    print(f"{loss.item():.3f}")
            """,
            "5:13",
            "9:18",
            header="import torch\n",
            messages=(
                "counting what a mask or `nonzero` selects in the training loop makes the host wait for the device "
                "every step; count on the device (`mask.sum()`, `torch.count_nonzero`)",
                "`.item()` in the training loop makes the host wait for the device every step",
            ),
        ),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._reported_tests: set[int] = set()

    def report(
        self, node: cst.CSTNode, message: str | None = None, fix: Fix | None = None, hint: str | None = None
    ) -> None:
        if message is not None and not self._names_gpu:
            message = message.replace("the CPU wait for the GPU", "the host wait for the device")
        if hint is None and self.ctx.loops.benchmarks_steps(node):
            hint = "the loop times its steps on purpose (a benchmark): its per-step waits are part of what it measures"
        if hint is None and self._after_a_read_of_its_statement(node):
            hint = "an earlier read of the same statement already waits for the device: that finding stands for both"
        super().report(node, message, fix, hint or self.ctx.loops.few_steps_hint(node))

    def _after_a_read_of_its_statement(self, node: cst.CSTNode) -> bool:
        """Whether a finding of this rule already stands in the statement holding `node` (the rule
        visits in source order: `print(err_d.item(), err_g.item())`): the first read drains the
        queue, so the later ones wait at most for the statement's own small kernels (`.mean()`),
        and one guard of the statement removes them all."""
        statement = self.ctx.statement_of(node)
        return any(self.ctx.statement_of(earlier.node) is statement for earlier in self.findings)

    @cached_property
    def _names_gpu(self) -> bool:
        """Whether the module (or the loop that runs it) says it runs on a GPU, not only on a
        device it is handed (which may be the host): what the messages may call "the GPU"."""
        return self.ctx.names_accelerator or self.ctx.project.accelerator_loop_elsewhere

    def _applies(self, node: cst.CSTNode) -> bool:
        return self.ctx.loops.per_step_work(node)

    def _report(self, node: cst.CSTNode, message: str) -> None:
        fix, why_not = host_read_guard_fix(self.ctx, node, LOG_EVERY.key, self.option(LOG_EVERY))
        if why_not is not None:
            message = f"{message} (no fix: {why_not})"
        self.report(node, message=message, fix=fix)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS:
            if self.ctx.values.on_host(func.value) or self._host_just_before(func.value, node):
                return  # a host tensor: reading it waits for nothing
            if func.attr.value == "cpu" and MODULE_NAME.search(last_name(func.value) or ""):
                return  # `vae.cpu()`: a model offloaded (its move is GL202's question), no value read
            if _earlier_sync_in_chain(node) or self._right_after_synchronize(node):
                return
            if self._handed_to_a_host_reading_framework(node):
                return
            if self._applies(node) and not self._converts_a_tensor_argument(node):
                self._report(node, self.message.format(method=func.attr.value))
            return
        if isinstance(func, cst.Name) and func.value in ("float", "int", "bool", "str") and len(node.args) == 1:
            if func.value in self.ctx.imports.bindings or node.args[0].star:
                return
            if self._is_unsynced_tensor(node.args[0].value) and self._applies(node):
                self._report(
                    node, f"`{func.value}()` of a tensor in the training loop makes the CPU wait for the GPU every step"
                )
            return
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "format"
            and isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString))
        ):
            for arg in node.args:
                if self._is_unsynced_tensor(arg.value) and self._applies(arg.value):
                    self._report(arg.value, _FORMATTED)
            return
        if self._counts_a_selection(node):
            return
        self._nan_check(node)

    def _handed_to_a_host_reading_framework(self, node: cst.Call) -> bool:
        """Whether `node` is what a step method returns where the class it overrides sets that
        contract: a framework's hook whose caller reads the value on the host every step
        (`return loss.detach().cpu()` in the `fit_batch` of a `speechbrain.Brain` subclass,
        HOST_READ_HOOKS), or a method of a base class of this module whose own version returns a
        read-back value (where that read is reported, once).  The override keeps the contract: the
        read moves the wait the caller has anyway, it adds none."""
        if not isinstance(self.ctx.parent(node), cst.Return):
            return False
        function = self.ctx.enclosing_function(node)
        if function is None:
            return False
        cls = method_class(self.ctx.index, function)
        return cls is not None and function.name.value in self._inherited_host_returns(cls, set())

    def _inherited_host_returns(self, cls: cst.ClassDef, seen: set[str]) -> frozenset[str]:
        """The methods whose value `cls` inherits the contract to return read back: a framework
        base class's hooks, and the methods of its base classes of this module that return one
        (`return loss.item()`), following those classes' own bases."""
        seen.add(cls.name.value)
        methods: frozenset[str] = frozenset()
        for base in cls.bases:
            qualified = self.ctx.imports.qualified_name(base.value)
            if qualified is not None:
                methods |= HOST_READ_HOOKS.get(qualified, frozenset())
            elif isinstance(base.value, cst.Name) and base.value.value not in seen:
                for local in self.ctx.index.nodes("ClassDef"):
                    if local.name.value == base.value.value:
                        methods |= _methods_returning_a_read(local) | self._inherited_host_returns(local, seen)
        return methods

    def _host_just_before(self, receiver: cst.BaseExpression, node: cst.Call) -> bool:
        """Whether the statement right before the read gives `receiver` a host tensor (`t =
        torch.randint(0, n, (1,), device="cpu")` then `t.item()`): whatever the name holds
        elsewhere, here it holds that."""
        if not isinstance(receiver, cst.Name):
            return False
        statement = self.ctx.statement_of(node)
        body = list(getattr(self.ctx.parent(statement), "body", ()))
        if statement not in body or body.index(statement) == 0:
            return False
        before = body[body.index(statement) - 1]
        if not (isinstance(before, cst.SimpleStatementLine) and len(before.body) == 1):
            return False
        assign = before.body[0]
        return (
            isinstance(assign, cst.Assign)
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and assign.targets[0].target.value == receiver.value
            and self.ctx.values.on_host(assign.value)
        )

    def _right_after_synchronize(self, node: cst.Call) -> bool:
        """A read in the statement right after `torch.cuda.synchronize()` (a step timer's): the
        host already waited for the GPU there, so the read adds no wait of its own."""
        statement = self.ctx.statement_of(node)
        block = self.ctx.parent(statement)
        body = list(getattr(block, "body", ()))
        if statement not in body or body.index(statement) == 0:
            return False
        before = body[body.index(statement) - 1]
        if not (isinstance(before, cst.SimpleStatementLine) and len(before.body) == 1):
            return False
        expr = before.body[0]
        return (
            isinstance(expr, cst.Expr)
            and isinstance(expr.value, cst.Call)
            and self.ctx.call_qualified_name(expr.value) in _SYNCHRONIZE_CALLS
        )

    def _nan_check(self, node: cst.Call) -> None:
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else None
        qualified = self.ctx.call_qualified_name(node)
        is_check = (
            qualified is not None and qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in NAN_CHECKS
        ) or (
            qualified is None
            and isinstance(func, cst.Attribute)
            and name in NAN_CHECKS
            and self.ctx.torch.tensors.is_tensor(func.value)
        )
        if not is_check:
            return
        # Report the outermost call of the chain: `torch.isfinite(loss).all()`.
        outer: cst.CSTNode = node
        parent = self.ctx.parent(outer)
        while (
            isinstance(parent, cst.Attribute)
            and parent.attr.value in ("any", "all")
            and isinstance(call := self.ctx.parent(parent), cst.Call)
        ):
            outer = call
            parent = self.ctx.parent(outer)
        test = self._condition_of(outer)
        if test is None or id(test) in self._reported_tests or not self._applies(outer):
            return
        self._reported_tests.add(id(test))  # `isnan(x) or isinf(x)` is one read: report it once
        self.report(
            outer, message="a NaN/Inf check of a tensor used as a condition makes the CPU wait for the GPU every step"
        )

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        if self._is_unsynced_tensor(node.expression) and self._applies(node):
            self._report(node.expression, _FORMATTED)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not (isinstance(node.operator, cst.Modulo) and _is_format_string(node.left)):
            return
        right = node.right
        values = [el.value for el in right.elements] if isinstance(right, cst.Tuple) else [right]
        for value in values:
            if self._is_unsynced_tensor(value) and self._applies(value):
                self._report(value, _FORMATTED)

    # -- a tensor as a Python condition --------------------------------------------------------
    def visit_If(self, node: cst.If) -> None:
        self._tensor_condition(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._tensor_condition(node.test)

    def _tensor_condition(self, test: cst.BaseExpression) -> None:
        """`if loss > 10:`, `while err > tol:`: Python asks the tensor for its truth value, which
        reads it back.  A NaN/Inf check is `_nan_check`'s (reported at the check itself)."""
        if _holds_anywhere_in(test, self._is_nan_check_call):
            return
        if not _holds_anywhere_in(test, self._is_device_truth_value) or not self._applies(test):
            return
        self._reported_tests.add(id(test))
        self.report(test, message=_CONDITION)

    def _is_device_truth_value(self, expr: cst.BaseExpression) -> bool:
        """A comparison with a device tensor (`loss > 10`), or a tensor reduction or predicate
        used for its truth value (`(pred == y).all()`, `torch.equal(a, b)`)."""
        if isinstance(expr, cst.Comparison):
            if any(isinstance(c.operator, _IDENTITY_OR_MEMBERSHIP) for c in expr.comparisons):
                return False
            operands = (expr.left, *(c.comparator for c in expr.comparisons))
            if any(isinstance(operand, cst.Name) and operand.value == "None" for operand in operands):
                return False  # `t == None` is answered without looking at the values
            return any(self._is_device_tensor(operand) for operand in operands)
        if isinstance(expr, cst.Call):
            qualified = self.ctx.call_qualified_name(expr)
            if qualified is not None:
                return qualified in TORCH_PREDICATES and any(self._is_device_tensor(a.value) for a in expr.args)
            func = expr.func
            if not (isinstance(func, cst.Attribute) and func.attr.value in ("any", "all")):
                return False
            receiver = func.value  # `(pred == y).all()`
            return self._is_device_truth_value(receiver) or self._is_device_tensor(receiver)
        return False

    def _is_nan_check_call(self, expr: cst.BaseExpression) -> bool:
        while (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in ("any", "all")
        ):
            expr = expr.func.value  # `torch.isfinite(loss).all()`
        if not isinstance(expr, cst.Call):
            return False
        qualified = self.ctx.call_qualified_name(expr)
        name = qualified.rsplit(".", 1)[-1] if qualified else method_name(expr)
        return name in NAN_CHECKS

    # -- counting a data-dependent selection ------------------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        # `t[mask].shape`, `torch.nonzero(t).shape` (`.size()` and `.numel()` are calls: visit_Call)
        if node.attr.value == "shape" and self._is_data_dependent_selection(node.value) and self._applies(node):
            self.report(node, message=_SELECTION_COUNT)

    def _counts_a_selection(self, node: cst.Call) -> bool:
        """`len(t[mask])`, `t[mask].size(0)`, `torch.nonzero(t).numel()`: reported here."""
        func = node.func
        if isinstance(func, cst.Name) and func.value == "len" and "len" not in self.ctx.imports.bindings:
            counted = node.args[0].value if len(node.args) == 1 and not node.args[0].star else None
        elif isinstance(func, cst.Attribute) and func.attr.value in ("size", "numel"):
            counted = func.value
        else:
            return False
        if counted is None or not self._is_data_dependent_selection(counted):
            return False
        if self._applies(node):
            self.report(node, message=_SELECTION_COUNT)
        return True

    def _is_data_dependent_selection(self, expr: cst.BaseExpression) -> bool:
        """A tensor whose size depends on the values of a device tensor: `t[mask]` with a boolean
        mask, `torch.nonzero(t)`, `t.nonzero()`, `torch.masked_select(t, m)`, `torch.unique(t)`."""
        if isinstance(expr, cst.Subscript):
            if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
                return False
            return self._is_device_tensor(expr.value) and self._is_boolean_mask(expr.slice[0].slice.value, set())
        if not isinstance(expr, cst.Call):
            return False
        qualified = self.ctx.call_qualified_name(expr)
        if qualified is not None:
            return (
                qualified in SELECTIONS
                and bool(expr.args)
                and not expr.args[0].star
                and self._is_device_tensor(expr.args[0].value)
            )
        func = expr.func
        return (
            isinstance(func, cst.Attribute)
            and f"torch.{func.attr.value}" in SELECTIONS
            and self._is_device_tensor(func.value)
        )

    def _is_boolean_mask(self, expr: cst.BaseExpression, seen: set[str]) -> bool:
        """A boolean tensor: a comparison with a device tensor (`t > 0`), a predicate
        (`torch.isnan(t)`, `t.eq(y)`, `t.bool()`), `~`/`&`/`|` of masks, or a name every
        assignment of which is one."""
        if isinstance(expr, cst.Comparison):
            return self._is_device_truth_value(expr)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
            return self._is_boolean_mask(expr.expression, seen)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
            return self._is_boolean_mask(expr.left, seen) or self._is_boolean_mask(expr.right, seen)
        if isinstance(expr, cst.Call):
            qualified = self.ctx.call_qualified_name(expr)
            if qualified is not None:
                name = qualified.rsplit(".", 1)[-1]
                return (
                    qualified.startswith("torch.")
                    and (name in NAN_CHECKS or name in MASK_METHODS or name.startswith("logical_"))
                    and any(self._is_device_tensor(a.value) for a in expr.args)
                )
            func = expr.func
            return (
                isinstance(func, cst.Attribute)
                and (func.attr.value in MASK_METHODS or func.attr.value in NAN_CHECKS or func.attr.value == "bool")
                and self._is_device_tensor(func.value)
            )
        key = target_key(expr)
        if key is None or key in seen:
            return False
        values = self.ctx.values.assigned.get(key, [])
        seen.add(key)
        return bool(values) and all(self._is_boolean_mask(value, seen) for value in values)

    # -- which tensors are on the device ---------------------------------------------------------
    def _is_device_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor (`TensorNames`) with no sign of living on the host: not a name also assigned a
        value read back (`loss = loss.item()`), nor one that only ever holds a tensor built on the
        host (`torch.zeros(3)` without `device=`, never moved) and host arithmetic on it."""
        return (self.ctx.torch.tensors.is_tensor(expr) or self._moved_to_device(expr)) and not self._may_be_host(
            expr, set()
        )

    def _moved_to_device(self, expr: cst.BaseExpression) -> bool:
        """A name (not a model's) assigned a copy to the device: `t = t.to(dev)`, also unpacked
        (`x, t = x.to(dev), t.cuda()`) -- a tensor whatever it held before."""
        key = target_key(expr)
        if key is None or MODULE_NAME.search(key.rsplit(".", 1)[-1]):
            return False
        return any(
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("to", "cuda")
            and is_device_target(self.ctx, value)
            for value in self.ctx.values.assigned.get(key, ())
        )

    def _may_be_host(self, expr: cst.BaseExpression, seen: set[str]) -> bool:
        """Whether `expr` may hold a host value: a tensor provably on the host (`values.on_host`:
        a factory without a device, a `.cpu()` result, an optimizer's `state["step"]`), a number,
        NumPy, a value read back, or a name any assignment of which is one of the last three
        (flow-insensitive: which assignment reaches a use is not known)."""
        if self.ctx.values.on_host(expr):
            return True
        if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation, cst.Integer, cst.Float)):
            return self._host_value(expr, seen)
        key = target_key(expr)
        if key is None and isinstance(expr, (cst.Subscript, cst.Attribute)):
            return self._may_be_host(expr.value, seen)  # `t[0]`, `t.data`
        if isinstance(expr, cst.Call):
            qualified = self.ctx.call_qualified_name(expr)
            if qualified is not None:
                if not qualified.startswith("torch."):
                    return True  # NumPy, Python
                if qualified.rsplit(".", 1)[-1] in HOST_FACTORIES:
                    return False  # built on a device (`values.on_host` answered the others)
                # `torch.isnan(t)`, `torch.nonzero(t)`: where its first argument is
                return bool(expr.args) and not expr.args[0].star and self._may_be_host(expr.args[0].value, seen)
            func = expr.func
            if isinstance(func, cst.Attribute):
                if func.attr.value in SYNC_METHODS:
                    return True
                if func.attr.value in ("cuda", "to"):
                    return False
                return self._may_be_host(func.value, seen)  # `t.detach().sum()` stays where `t` is
            return False  # `criterion(out, y)`, `model(x)`
        if key is None:
            return False
        if key in seen:
            return True  # `total = total * 0.9`: the other assignments decide
        values = [*self.ctx.values.assigned.get(key, ()), *self._augmented.get(key, ())]
        if any(_is_host_read(self.ctx, value) or self._returns_host_number(value) for value in values):
            return True  # a name that also holds a number read back: which one is tested is not known
        seen.add(key)
        try:
            return bool(values) and all(self._host_value(value, seen) for value in values)
        finally:
            seen.discard(key)

    def _host_value(self, expr: cst.BaseExpression, seen: set[str]) -> bool:
        """Provably on the host: a number, a torch factory without a device, or arithmetic of
        those and of names that only hold them (a loop counter, a host tensor)."""
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, cst.BinaryOperation):
            return self._host_value(expr.left, seen) and self._host_value(expr.right, seen)
        if isinstance(expr, cst.UnaryOperation):
            return self._host_value(expr.expression, seen)
        if isinstance(expr, cst.Call):
            return self._may_be_host(expr, seen)
        if target_key(expr) is not None:
            return not self.ctx.torch.tensors.is_tensor(expr) or self._may_be_host(expr, seen)
        return False

    def _returns_host_number(self, value: cst.BaseExpression) -> bool:
        """`loss = train()` where every `return` of the module's function `train` gives a value read
        back (`return float(loss)`, `return loss.item(), acc`): the name holds a host number (also
        one of them: `loss, acc = train()`, `train()[0]`)."""
        if isinstance(value, cst.Subscript):
            value = value.value
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
            return False
        return self._host_number_functions.get(value.func.value, False)

    @cached_property
    def _host_number_functions(self) -> dict[str, bool]:
        """Module-level functions by name: whether each `return` of every one so named gives host
        numbers."""
        returns: dict[int, list[cst.BaseExpression | None]] = {}
        for node in self.ctx.index.nodes("Return"):
            function = self.ctx.enclosing_function(node)
            if function is not None:
                returns.setdefault(id(function), []).append(node.value)
        found: dict[str, bool] = {}
        for function in self.ctx.index.nodes("FunctionDef"):
            if self.ctx.enclosing_function(function) is not None or is_method(self.ctx.index, function):
                continue
            values = returns.get(id(function), [])
            host = bool(values) and all(value is not None and self._host_number(value) for value in values)
            found[function.name.value] = found.get(function.name.value, True) and host
        return found

    def _host_number(self, expr: cst.BaseExpression) -> bool:
        """A number read back, a literal, or a tuple or arithmetic of those."""
        if isinstance(expr, (cst.Tuple, cst.List)):
            return bool(expr.elements) and all(self._host_number(element.value) for element in expr.elements)
        if isinstance(expr, cst.BinaryOperation):
            return self._host_number(expr.left) and self._host_number(expr.right)
        return isinstance(expr, (cst.Integer, cst.Float)) or _is_host_read(self.ctx, expr)

    @cached_property
    def _augmented(self) -> dict[str, list[cst.BaseExpression]]:
        """What `x += v` adds to each name (a device tensor added in moves nothing, but the result is
        on the device: `total = torch.zeros(1); total += loss` is not a host tensor)."""
        found: dict[str, list[cst.BaseExpression]] = {}
        for aug in self.ctx.index.nodes("AugAssign"):
            key = target_key(aug.target)
            if key is not None:
                found.setdefault(key, []).append(aug.value)
        return found

    def _converts_a_tensor_argument(self, node: cst.Call) -> bool:
        """`if isinstance(v, torch.Tensor): v = v.item()` (or `type(v) is torch.Tensor`): a helper
        that turns whatever it is given into a number.  Whether it syncs is the caller's choice (a
        caller that passes a tensor is where the read is decided)."""
        assert isinstance(node.func, cst.Attribute)  # visit_Call passes method calls
        receiver = node.func.value
        if not isinstance(receiver, cst.Name):
            return False
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, cst.If):
                test = ancestor.test
                if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
                    if not isinstance(test.comparisons[0].operator, (cst.Is, cst.Equal)):
                        continue
                    test = test.left  # `type(v) is torch.Tensor`
                    checks = ("type",)
                else:
                    checks = ("isinstance",)
                if (
                    isinstance(test, cst.Call)
                    and dotted_name(test.func) in checks
                    and test.args
                    and isinstance(test.args[0].value, cst.Name)
                    and test.args[0].value.value == receiver.value
                ):
                    return True
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return False
        return False

    def _is_unsynced_tensor(self, expr: cst.BaseExpression) -> bool:
        """A device tensor that has not already been read back by a reported `.item()`/`.cpu()`."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in SYNC_METHODS:
            return False
        return self._is_device_tensor(expr)

    def _condition_of(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """The test of the `if`, `while`, conditional expression or assert that `node` is part of."""
        child = node
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, (cst.If, cst.While, cst.IfExp, cst.Assert)):
                return ancestor.test if child is ancestor.test else None
            if isinstance(ancestor, cst.SimpleStatementLine) or isinstance(ancestor, cst.BaseSuite):
                return None
            child = ancestor
        return None


def _methods_returning_a_read(cls: cst.ClassDef) -> frozenset[str]:
    """The methods `cls` defines that return a value read back (`return loss.detach().cpu()`)."""
    found = set()
    for statement in cls.body.body:
        if not isinstance(statement, cst.FunctionDef):
            continue
        for node in nodes_under(statement.body):
            if (
                isinstance(node, cst.Return)
                and isinstance(node.value, cst.Call)
                and isinstance(node.value.func, cst.Attribute)
                and node.value.func.attr.value in SYNC_METHODS
            ):
                found.add(statement.name.value)
    return frozenset(found)


def _earlier_sync_in_chain(call: cst.Call) -> bool:
    """`x.cpu().numpy()`: the `.cpu()` already synced; report the chain once, at its first sync."""
    node = call.func.value if isinstance(call.func, cst.Attribute) else None
    while node is not None:
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in SYNC_METHODS:
                return True
            node = node.func
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            return False
    return False


def _is_format_string(expr: cst.BaseExpression) -> bool:
    """A format string, also built by repetition and concatenation: `"%11.4g" * 5`,
    `("%11s" * 2 + "%11.4g" * 5)` (yolov5's progress bar)."""
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Add):
            return _is_format_string(expr.left) and _is_format_string(expr.right)
        if isinstance(expr.operator, cst.Multiply):
            return _is_format_string(expr.left) or _is_format_string(expr.right)
    return False


def _holds_anywhere_in(test: cst.BaseExpression, check) -> bool:
    """`check` on a condition or on any operand of its `and`/`or`/`not`."""
    if isinstance(test, cst.BooleanOperation):
        return _holds_anywhere_in(test.left, check) or _holds_anywhere_in(test.right, check)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _holds_anywhere_in(test.expression, check)
    return check(test)


def _is_host_read(ctx, value: cst.BaseExpression) -> bool:
    """`x.item()`, `x.tolist()`, `float(x)`: a value already read back to the host."""
    if isinstance(value, cst.Call):
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("item", "tolist", "numpy"):
            return True
        if (
            isinstance(func, cst.Name)
            and func.value in ("float", "int", "bool")
            and func.value not in ctx.imports.bindings
        ):
            return True
    return False
