"""GL603 ddp-accumulation-sync."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.analysis.code_shapes import STEP_LOOP
from gpulint.linter.analysis.facts import ONE_PROCESS_PER_GPU
from gpulint.linter.analysis.intervals import ACCUMULATION_NAME
from gpulint.linter.analysis.loops import is_direct_step_call
from gpulint.linter.analysis.nodes import last_name, method_name
from gpulint.linter.analysis.pytorch import wraps_for_ranks
from gpulint.linter.analysis.walk import words_under
from gpulint.linter.rule import Invalid, Rule, Valid

# Handling of accumulation under DDP: the context manager, accelerate's wrapper, or the flag.
# Keywords of a helper that runs backward on every call and the optimizer step only when true.
_STEP_SWITCHES = frozenset({"update_grad", "optimizer_step", "update", "step", "sync"})
_SWITCH_KEYWORDS = tuple(sorted(f"{switch}=" for switch in _STEP_SWITCHES))  # (as trigger shapes: code_shapes)
# Skipping the all-reduce: DDP's `no_sync()`, its flag, FSDP's setter, Accelerate's `accumulate()`,
# Fabric's `no_backward_sync()`, apex DDP's `disable_allreduce()`, or setting Accelerate's
# `sync_gradients` (reading it, to act on the last micro-batch, is not).
_SYNC_HANDLED = re.compile(
    r"no_sync|no_backward_sync|require_backward_grad_sync|set_requires_gradient_sync|\baccumulate\s*\(|"
    r"disable_allreduce\s*\(|sync_gradients\s*=(?!=)"
)
# Frameworks that wrap the model in DDP themselves when run on several GPUs.
_WRAPPING_FRAMEWORKS = ("accelerate", "lightning", "pytorch_lightning")


class DdpAccumulationSync(Rule):
    """
    ## What it finds
    Gradient accumulation in a module that trains with one process per GPU (DistributedDataParallel,
    FSDP, torch.distributed or Accelerate) -- `loss.backward()` on every micro-batch and
    `optimizer.step()` only under `if (step + 1) % accum_steps == 0:`, or after an inner loop over
    micro-batches, or a helper called with `update_grad=(i + 1) % accum == 0`, or a step function
    whose optimizer step is counted (`if self.since_update == self.grad_acc_steps:`) while the
    backward runs in another step function on every call -- without skipping
    the gradient all-reduce on the micro-batches in between: no `model.no_sync()`, no
    `accelerator.accumulate(model)`, no `require_backward_grad_sync` toggle, no apex
    `disable_allreduce()` anywhere in the module.
    Reported at the `.backward()` call (or the helper's call).

    Only where the program wraps a model for data parallel training: the module calls
    `DistributedDataParallel`/`FullyShardedDataParallel`/`fully_shard` (or a function named for
    them, `smart_DDP(model)`), uses Accelerate or Lightning (which wrap it themselves), or another
    module of the project does.  A script that uses `torch.distributed` for its process group or
    sampler but never wraps its model has no all-reduce in `backward()` to repeat.

    Where the accumulation count is 1 with every default the file gives it (an argparse option's
    `default=1`, a parameter's default, `accum = batch_size // MAX_GPU_BATCH_SIZE` of constants
    that divide to 1, or `accum = 1` raised only under a condition), a run as written accumulates
    nothing: the finding is a hint, held back
    unless hints are shown.

    ## Why it is slow
    DDP all-reduces every gradient during every `backward()`.  With k micro-batches per optimizer
    step, k-1 of those all-reduces are thrown away: communication grows k-fold, and on a
    bandwidth-bound job the step time grows almost as much.  `no_sync()` accumulates locally and
    communicates once, on the last micro-batch.

    ## Example
    ```python
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(model, device_ids=[rank])
    for step, batch in enumerate(loader):
        loss = model(batch) / accum_steps
        loss.backward()
        if (step + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```
    Use instead:
    ```python
    import contextlib

    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(model, device_ids=[rank])
    for step, batch in enumerate(loader):
        sync = (step + 1) % accum_steps == 0
        with model.no_sync() if not sync else contextlib.nullcontext():
            loss = model(batch) / accum_steps
            loss.backward()
        if sync:
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Fix
    None: the forward pass must move into the `no_sync()` block too (DDP decides at forward time),
    which restructures the loop body.
    """

    code = "GL603"
    name = "ddp-accumulation-sync"
    fix_api = frozenset({"torch"})
    message = (
        "gradient accumulation under DDP all-reduces gradients on every micro-batch; "
        "wrap the non-final ones in `model.no_sync()`"
    )
    requires = {ONE_PROCESS_PER_GPU}
    tokens = ("backward", "update_grad")
    # a `.backward()` and an optimizer `.step()` run per step, or a helper called with a step switch keyword
    triggers = (
        (".step(", *_SWITCH_KEYWORDS),
        (".backward(", *_SWITCH_KEYWORDS),
        (STEP_LOOP, *_SWITCH_KEYWORDS),
    )
    # The step and the backward are the module's own code whatever the project says (it finds the
    # backward from the step: both in this module); only where they run per step may come from it.
    site_triggers = 2

    VALID = [
        # no_sync()
        Valid(
            """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = DDP(net.cuda(), device_ids=[rank])
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(3):
                for step, batch in enumerate(loader):
                    with model.no_sync():
                        loss = model(batch) / accum_steps
                        loss.backward()
                    if (step + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
        ),
        # the flag
        Valid(
            """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = DDP(net.cuda(), device_ids=[rank])
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(3):
                for step, batch in enumerate(loader):
                    loss = model(batch) / accum_steps
                    model.require_backward_grad_sync = (step + 1) % accum_steps == 0
                    loss.backward()
                    if (step + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
        ),
        # accelerator.accumulate()
        Valid(
            """
            from accelerate import Accelerator
            accelerator = Accelerator(gradient_accumulation_steps=4)
            for batch in loader:
                with accelerator.accumulate(model):
                    loss = model(batch)
                    accelerator.backward(loss)
                    optimizer.step()
            """,
        ),
        # no DDP: accumulation is fine
        Valid(
            """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = net.cuda()
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(3):
                for step, batch in enumerate(loader):
                    loss = model(batch) / accum_steps
                    loss.backward()
                    if (step + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
        ),
        # torch.distributed for the process group and the sampler, but no model wrapped in the
        # program: backward() all-reduces nothing
        Valid(
            """
            import torch
            import torch.distributed as dist
            from torch.utils.data.distributed import DistributedSampler

            dist.init_process_group("nccl")
            loader = DataLoader(data, sampler=DistributedSampler(data))
            model = net.cuda()
            for step, batch in enumerate(loader):
                loss = model(batch) / accum_steps
                loss.backward()
                if (step + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """,
        ),
        # apex DDP's own toggle: the all-reduce is off until the last micro-batch
        Valid(
            """
            import torch.distributed as dist
            from apex.parallel import DistributedDataParallel as DDP
            dist.init_process_group("nccl")
            model = DDP(net.cuda())
            for step, batch in enumerate(loader):
                model.disable_allreduce()
                if (step + 1) % accum_steps == 0:
                    model.enable_allreduce()
                loss = model(batch) / accum_steps
                loss.backward()
                if (step + 1) % accum_steps == 0:
                    optimizer.step()
            """,
        ),
        # no accumulation, a logging interval only
        Valid(
            """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = DDP(net.cuda(), device_ids=[rank])
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(3):
                for step, batch in enumerate(loader):
                    loss = model(batch) / accum_steps
                    loss.backward()
                    optimizer.step()
                    if step % 100 == 0:
                        print(step)
            """,
        ),
        # the backward's function is called under the guard with the step: nothing is accumulated
        Valid(
            """
            from torch.nn.parallel import DistributedDataParallel as DDP
            class Executor:
                def distributed(self, gpu):
                    self.model = DDP(self.model, device_ids=[gpu])
                def backward_pass(self, loss):
                    loss.backward()
            class Trainer:
                def train_step(self, x, y):
                    self.since_update += 1
                    if self.since_update == self.grad_acc_steps:
                        self.executor.backward_pass(self.loss(x, y))
                        self.optimizer.step()
                        self.since_update = 0
            """,
        ),
        # the backward under the same guard: nothing is accumulated
        Valid(
            """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = DDP(net.cuda(), device_ids=[rank])
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(3):
                for step, batch in enumerate(loader):
                    loss = model(batch) / accum_steps
                    if (step + 1) % accum_steps == 0:
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
            """,
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = DDP(net.cuda(), device_ids=[rank])
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(3):
                for step, batch in enumerate(loader):
                    loss = model(batch) / accum_steps
                    loss.backward()
                    if (step + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            "9:9",
        ),
        # a literal modulo, a scaler's step
        Invalid(
            """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = DDP(net.cuda(), device_ids=[rank])
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(3):
                for step, batch in enumerate(loader):
                    loss = model(batch) / accum_steps
                    loss.backward()
                    if step % 4 == 3:
                        scaler.step(optimizer)
                        optimizer.zero_grad()
            """,
            "9:9",
        ),
        # Accelerate without accumulate() (its own test scripts)
        Invalid(
            """
            from accelerate import Accelerator
            accelerator = Accelerator()
            for step, batch in enumerate(loader):
                loss = model(**batch).loss / gradient_accumulation_steps
                accelerator.backward(loss)
                if step % gradient_accumulation_steps == 0:
                    optimizer.step()
            """,
            "5:5",
        ),
        # accumulation by an inner loop over micro-batches, DDP built by a helper of another module
        Invalid(
            """
            import torch
            import torch.distributed as dist

            model = smart_DDP(net)
            for batches in loader:
                for micro in batches.chunk(accum):
                    loss = model(micro).mean()
                    scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            """,
            "8:28",
        ),
        # a reading of Accelerate's `sync_gradients` does not skip the all-reduce; a helper that
        # steps only when told
        Invalid(
            """
            from accelerate import Accelerator
            accelerator = Accelerator()
            for step, batch in enumerate(loader):
                loss = model(**batch).loss / accum
                accelerator.backward(loss)
                if step % accum == 0 or step == len(loader) - 1:
                    optimizer.step()
                if accelerator.sync_gradients:
                    progress.update(1)
            for i, batch in enumerate(loader):
                loss_scaler(model(batch), optimizer, update_grad=(i + 1) % accum_iter == 0)
            """,
            "5:5",
            "11:5",
        ),
        # the backward in one class, the step counted by hand in another's step function
        Invalid(
            """
            from torch.nn.parallel import DistributedDataParallel as DDP
            class Executor:
                def distributed(self, gpu):
                    self.model = DDP(self.model, device_ids=[gpu])
                def forward_backward(self, x, y):
                    loss = self.loss(self.model(x), y)
                    loss.backward()
                    return loss
            class Trainer:
                def train_step(self, x, y):
                    loss = self.executor.forward_backward(x, y)
                    self.since_update += 1
                    if self.since_update == self.grad_acc_steps:
                        self.optimizer.step()
                        self.since_update = 0
                    return loss
            """,
            "7:9",
        ),
        # the step counted since the last optimizer step, a wrapper helper
        Invalid(
            """
            import torch.nn.parallel as parallel

            model = parallel.DistributedDataParallel(model)
            for i, (images, targets) in enumerate(loader):
                done = i + batches * epoch
                scaler.scale(criterion(model(images), targets)).backward()
                if done - last_step >= accumulate:
                    scaler.step(optimizer)
                    last_step = done
            """,
            "6:53",
        ),
        # accumulation 1 by default (an argparse default, constants that divide to 1, a
        # parameter's default): hints; raised by a call here, it is not
        Invalid(
            """
            import argparse
            from torch.nn.parallel import DistributedDataParallel as DDP
            parser = argparse.ArgumentParser()
            parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
            args = parser.parse_args()
            model = DDP(net.cuda(), device_ids=[rank])
            for step, batch in enumerate(loader):
                loss = model(batch) / args.gradient_accumulation_steps
                loss.backward()
                if (step + 1) % args.gradient_accumulation_steps == 0:
                    optimizer.step()
            MAX_GPU_BATCH_SIZE = 16
            batch_size = 16
            gradient_accumulation_steps = 1
            if batch_size > MAX_GPU_BATCH_SIZE:
                gradient_accumulation_steps = batch_size // MAX_GPU_BATCH_SIZE
            def train(loader, accumulation_steps=1):
                for i, batch in enumerate(loader):
                    loss_scaler(model(batch), optimizer, update_grad=(i + 1) % accumulation_steps == 0)
                for step, batch in enumerate(loader):
                    model(batch).backward()
                    if step % gradient_accumulation_steps == 0:
                        optimizer.step()
            def finetune(loader, accum=1):
                for i, batch in enumerate(loader):
                    loss_scaler(model(batch), optimizer, update_grad=(i + 1) % accum == 0)
            finetune(loader, accum=8)
            """,
            "9:5",
            "19:9",
            "21:22",
            "26:9",
            hints=(
                "the accumulation count `args.gradient_accumulation_steps` is 1 with the defaults this file gives it: "
                "no all-reduce is repeated unless a run raises it",
                "the accumulation count `accumulation_steps` is 1 with the defaults this file gives it: "
                "no all-reduce is repeated unless a run raises it",
                "the accumulation count `gradient_accumulation_steps` is 1 with the defaults this file gives it: "
                "no all-reduce is repeated unless a run raises it",
                None,
            ),
        ),
        # set to 1, raised only under a condition (Accelerate's examples): a hint
        Invalid(
            """
            from accelerate import Accelerator
            def training_function(config):
                accelerator = Accelerator()
                batch_size = int(config["batch_size"])
                gradient_accumulation_steps = 1
                if batch_size > MAX_GPU_BATCH_SIZE:
                    gradient_accumulation_steps = batch_size // MAX_GPU_BATCH_SIZE
                for step, batch in enumerate(loader):
                    accelerator.backward(model(**batch).loss / gradient_accumulation_steps)
                    if step % gradient_accumulation_steps == 0:
                        optimizer.step()
            """,
            "9:9",
            hints=(
                "the accumulation count `gradient_accumulation_steps` is 1 with the defaults this file gives it: "
                "no all-reduce is repeated unless a run raises it",
            ),
        ),
        # no_sync in a comment does not count
        Invalid(
            """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = DDP(net.cuda(), device_ids=[rank])
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(3):
                for step, batch in enumerate(loader):
                    loss = model(batch) / accum_steps
                    loss.backward()
                    if (step + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            # TODO: no_sync()
            """,
            "9:9",
        ),
    ]

    def finish(self) -> None:
        found: list[tuple[cst.CSTNode, str | None]] = []  # (where, its hint)
        reported: set[int] = set()
        for call in self.ctx.index.nodes("Call"):
            if not self._is_optimizer_step(call):
                continue
            loop = self.ctx.loops.step_boundary(call)
            if loop is None or id(loop) in reported:
                continue
            guard = self._accumulation_guard(call, loop)
            if guard is None:
                backward = self._backward_in_inner_loop(loop, call)
            else:
                backward = self._backward_outside(loop, guard) or self._backward_in_other_step_function(loop, guard)
            if backward is not None:
                reported.add(id(loop))
                found.append((backward, None if guard is None else self._single_step_hint(guard.test, guard)))
        for call in self.ctx.index.nodes("Call"):
            switch = next(
                (
                    a.value
                    for a in call.args
                    if a.keyword is not None and a.keyword.value in _STEP_SWITCHES and _counts_micro_batches(a.value)
                ),
                None,
            )
            if switch is not None and self.ctx.in_loop(call):
                # `loss_scaler(loss, optimizer, update_grad=(i + 1) % accum == 0)`
                found.append((call, self._single_step_hint(switch, call)))
        # Read last: the text without comments takes a tokenizer pass, and most files find nothing.
        if found and self._program_wraps_model() and not _SYNC_HANDLED.search(self.ctx.code_without_comments):
            for node, hint in found:
                self.report(node, hint=hint)

    def _single_step_hint(self, test: cst.BaseExpression, where: cst.CSTNode) -> str | None:
        """Why the finding is a hint when the accumulation count its test reads is at most 1 with
        every default the file gives it (`default=1` of an argparse option, a parameter's default,
        `accum = BATCH // MAX_GPU_BATCH` of constants that make 1): as run by default, every
        micro-batch is a step and no all-reduce is repeated."""
        count = _accumulation_count(test)
        if count is None:
            return None
        value = self._default_value(count, where)
        if value is None or value > 1:
            return None
        return (
            f"the accumulation count `{self.ctx.code(count)}` is {value} with the defaults this file gives it: "
            "no all-reduce is repeated unless a run raises it"
        )

    def _default_value(self, count: cst.BaseExpression, where: cst.CSTNode) -> int | None:
        """The most `count` may be as the file says (loops.static_int), or else -- for a name set
        to a value first and raised under a condition (`accum = 1`, then `if batch_size > MAX:
        accum = batch_size // MAX`) -- the most its unconditional assignments give it."""
        value = self.ctx.loops.static_int(count, where)
        if value is not None or not isinstance(count, cst.Name):
            return value
        unconditional = [
            self.ctx.loops.static_int(assigned, assigned)
            for assigned in self.ctx.values.assigned.get(count.value, ())
            if not self._conditional(assigned)
        ]
        if not unconditional or None in unconditional:
            return None
        return max(v for v in unconditional if v is not None)

    def _conditional(self, node: cst.CSTNode) -> bool:
        """Whether `node` runs only under a condition of its function (or module): in an `if`,
        a loop, a `try`, a `with`."""
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, (cst.If, cst.For, cst.While, cst.Try, cst.With)):
                return True
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
        return False

    def _program_wraps_model(self) -> bool:
        """Whether the program wraps a model for data parallel training (the docs' list): here,
        through a framework, or in another module of the project."""
        if self.ctx.project.ranks_wrapped_elsewhere or self.ctx.uses(*_WRAPPING_FRAMEWORKS):
            return True
        return any(wraps_for_ranks(self.ctx, call) for call in self.ctx.index.nodes("Call"))

    def _is_optimizer_step(self, call: cst.Call) -> bool:
        func = call.func
        return (
            isinstance(func, cst.Attribute) and func.attr.value == "step" and is_direct_step_call(call, self.ctx.values)
        )

    def _accumulation_guard(self, call: cst.Call, loop: cst.CSTNode | None) -> cst.If | None:
        """The `if` between the optimizer step and its loop that skips it on some iterations (a
        modulo test, or a test naming an accumulation count)."""
        if loop is None:
            return None
        child: cst.CSTNode = call
        for ancestor in self.ctx.ancestors(call):
            if ancestor is loop:
                return None
            if isinstance(ancestor, cst.If) and child is ancestor.body and _counts_micro_batches(ancestor.test):
                return ancestor
            child = ancestor
        return None

    def _backward_in_inner_loop(self, loop: cst.CSTNode, step: cst.Call) -> cst.Call | None:
        """The first `.backward()` of a loop nested in `loop` that does not hold the optimizer
        step: `for _ in range(accum): ... backward()` then `optimizer.step()` once."""
        for call in self.ctx.index.nodes("Call"):
            if method_name(call) != "backward":
                continue
            inner = self.ctx.loops.step_boundary(call)
            if (
                not isinstance(inner, (cst.For, cst.While))
                or inner is loop
                or any(a is inner for a in self.ctx.ancestors(step))
            ):
                continue
            if any(a is loop for a in self.ctx.ancestors(inner)):
                return call
        return None

    def _backward_outside(self, loop: cst.CSTNode, guard: cst.If) -> cst.Call | None:
        """The first `.backward()` that runs on every iteration of `loop`, not under `guard`."""
        for call in self.ctx.index.nodes("Call"):
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "backward"):
                continue
            if self.ctx.loops.step_boundary(call) is not loop:
                continue
            if not any(a is guard for a in self.ctx.ancestors(call)):
                return call
        return None

    def _backward_in_other_step_function(self, boundary: cst.CSTNode, guard: cst.If) -> cst.Call | None:
        """When the guarded optimizer step is in a step function (`train_step`, called once per
        micro-batch), the first `.backward()` of another step function that takes no optimizer
        step itself and is not called under `guard`: the backward and the step in different
        classes (`self.executor.forward_backward(...)`, then `if self.since_update == self.grad_acc:`)."""
        if not isinstance(boundary, cst.FunctionDef):
            return None
        called_under_guard = {last_name(c.func) for c in self.ctx.index.nodes("Call") if self._is_under(c, guard)}
        for call in self.ctx.index.nodes("Call"):
            if method_name(call) != "backward":
                continue
            function = self.ctx.loops.step_boundary(call)
            if not isinstance(function, cst.FunctionDef) or function is boundary:
                continue
            if function.name.value in called_under_guard or self._steps_optimizer_in(function):
                continue
            return call
        return None

    def _steps_optimizer_in(self, function: cst.FunctionDef) -> bool:
        return any(self._is_optimizer_step(c) and self._is_under(c, function) for c in self.ctx.index.nodes("Call"))

    def _is_under(self, node: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
        return any(a is ancestor for a in self.ctx.ancestors(node))


def _counts_micro_batches(test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.BooleanOperation):
        return _counts_micro_batches(test.left) or _counts_micro_batches(test.right)
    if isinstance(test, cst.UnaryOperation):
        return _counts_micro_batches(test.expression)
    words = words_under(test)
    if any(ACCUMULATION_NAME.search(w) for w in words):
        return True
    # `(i + 1) % 4 == 0` around the optimizer step (and not around the backward) is accumulation.
    stack: list[cst.CSTNode] = [test]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.BinaryOperation) and isinstance(current.operator, cst.Modulo):
            return True
        stack.extend(current.children)
    return False


def _accumulation_count(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """The number of micro-batches an accumulation test counts to: the divisor of its modulo
    (`(step + 1) % accum_steps == 0`), else the name it compares with that says it is one
    (`since_update == grad_acc_steps`)."""
    named: cst.BaseExpression | None = None
    stack: list[cst.CSTNode] = [test]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.BinaryOperation) and isinstance(current.operator, cst.Modulo):
            return current.right
        if isinstance(current, (cst.Name, cst.Attribute)):
            name = last_name(current)
            if named is None and name is not None and ACCUMULATION_NAME.search(name):
                named = current
            continue
        stack.extend(current.children)
    return named
