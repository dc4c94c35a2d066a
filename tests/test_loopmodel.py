"""The training-loop model (terms in gpulint/linter/analysis/loops.py): step calls, step functions, loops, guards."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.nodes import method_name


def context(source: str) -> FileContext:
    module = cst.parse_module(textwrap.dedent(source))
    return FileContext(module, "t.py", {}, frozenset({"Call"}))


def call_named(ctx: FileContext, name: str, occurrence: int = 0) -> cst.Call:
    matches = [
        c
        for c in ctx.index.nodes("Call")
        if (isinstance(c.func, cst.Attribute) and c.func.attr.value == name)
        or (isinstance(c.func, cst.Name) and c.func.value == name)
    ]
    return matches[occurrence]


TRAIN = """
import torch
for epoch in range(10):
    epoch_work()
    for step, batch in enumerate(loader):
        loss = model(batch)
        loss.backward()
        optimizer.step()
        per_step()
        if step % 100 == 0:
            guarded()
        if (step + 1) % accum_steps == 0:
            accumulated()
    for batch in val_loader:
        evaluation()
"""


def test_step_loop_epoch_loop_and_evaluation_loop():
    ctx = context(TRAIN)
    assert ctx.loops.per_step(call_named(ctx, "per_step"))
    assert not ctx.loops.per_step(call_named(ctx, "epoch_work"))
    assert not ctx.loops.per_step(call_named(ctx, "evaluation"))
    assert ctx.loops.is_step_call(call_named(ctx, "backward"))


def test_interval_guard_but_not_accumulation_guard():
    ctx = context(TRAIN)
    assert ctx.loops.interval_guard(call_named(ctx, "guarded")) is not None
    assert ctx.loops.per_step_work(call_named(ctx, "accumulated"))


def test_loop_header_runs_once_per_epoch():
    ctx = context("""
        for epoch in range(3):
            for batch in make_loader():
                loss.backward()
    """)
    assert not ctx.loops.per_step(call_named(ctx, "make_loader"))


def test_while_test_runs_every_step():
    ctx = context("""
        while not done(step):
            opt.step()
            step += 1
    """)
    assert ctx.loops.per_step(call_named(ctx, "done"))
    assert ctx.loops.step_counter(call_named(ctx, "step")) == "step"


def test_step_function_defined_below_its_caller():
    ctx = context("""
        def train(loader):
            for batch in loader:
                train_step(batch)
                after()

        def train_step(batch):
            loss = compute(batch)
            loss.backward()
            optimizer.step()
            inside()
    """)
    assert ctx.loops.per_step(call_named(ctx, "after"))
    assert ctx.loops.per_step(call_named(ctx, "inside"))  # the step function runs every step


def test_method_step_function_through_self():
    ctx = context("""
        class Trainer:
            def _run_batch(self, batch):
                self.scaler.scale(self.loss(batch)).backward()
                self.scaler.step(self.optimizer)

            def fit(self):
                for batch in self.loader:
                    self._run_batch(batch)
                    self.report()
    """)
    assert ctx.loops.per_step(call_named(ctx, "report"))


def test_scheduler_and_env_step_are_not_training_steps():
    ctx = context("""
        import torch
        sched = torch.optim.lr_scheduler.StepLR(opt, 10)
        for batch in loader:
            sched.step()
            first()
        for t in range(100):
            obs, reward, done, info = env.step(action)
            second()
    """)
    assert not ctx.loops.per_step(call_named(ctx, "first"))
    assert not ctx.loops.per_step(call_named(ctx, "second"))


def test_optimizer_recognised_by_constructor_even_with_odd_name():
    ctx = context("""
        import torch
        thing = torch.optim.AdamW(params)
        for batch in loader:
            thing.step()
            work()
    """)
    assert ctx.loops.per_step(call_named(ctx, "work"))


def test_tensorflow_tape_step():
    ctx = context("""
        import tensorflow as tf
        for x, y in dataset:
            with tf.GradientTape() as t:
                loss = model(x)
            grads = t.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            log_it()
    """)
    assert ctx.loops.per_step(call_named(ctx, "log_it"))


EAGER_GUIDE = """
import tensorflow as tf
{switch}
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x))
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

for x, y in ds:
    print(train_step(x, y).numpy())
{compiled}
for x, y in ds:
    print(fast_step(x, y).numpy())
"""
COMPILED_TWIN = """
@tf.function
def fast_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x))
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss
"""
COMPILED_OTHER = """
@tf.function
def fast_step(x, y):
    return optimizer.minimize(lambda: loss_fn(y, model(x)), variables)
"""


@pytest.mark.parametrize(
    "switch, compiled, step_hint, loop_hint",
    [
        # a guide: the same step compiled below the eager one -- said of the step, and of its loop
        (
            "",
            COMPILED_TWIN,
            "the file also runs this step compiled (`fast_step` under `tf.function`): the eager one is there to "
            "compare",
            "the loop takes the eager step of a file that also runs it compiled (`fast_step` under `tf.function`): "
            "a guide's loop, there to compare",
        ),
        # TensorFlow 1 turned eager on its own: the same reason for the step and for its loop
        (
            "tf.compat.v1.enable_eager_execution()",
            COMPILED_OTHER,
            "the file turns eager execution on itself (`tf.compat.v1.enable_eager_execution()`, TensorFlow 1)",
            "the file turns eager execution on itself (`tf.compat.v1.enable_eager_execution()`, TensorFlow 1)",
        ),
        # another compiled step, eager not asked for: no reason
        ("", COMPILED_OTHER, None, None),
    ],
)
def test_an_eager_step_is_a_hint_where_the_file_compiles_it_too_or_asks_for_eager(
    switch, compiled, step_hint, loop_hint
):
    ctx = context(EAGER_GUIDE.format(switch=switch, compiled=compiled))
    eager_step = next(f for f in ctx.index.nodes("FunctionDef") if f.name.value == "train_step")
    eager_read, compiled_read = (c for c in ctx.index.nodes("Call") if method_name(c) == "numpy")
    assert ctx.tf.eager_step_hint(eager_step) == step_hint
    assert ctx.tf.eager_step_hint(eager_read) == loop_hint
    # a loop that takes only the compiled step takes no eager one: never a hint for this reason
    assert ctx.tf.eager_step_hint(compiled_read) is None


def test_lightning_training_step_is_per_step():
    ctx = context("""
        import lightning as L
        class Model(L.LightningModule):
            def training_step(self, batch, batch_idx):
                print(batch_idx)
                return self.loss(batch)
            def configure_optimizers(self):
                print("once")
    """)
    assert ctx.loops.per_step(call_named(ctx, "print", 0))
    assert not ctx.loops.per_step(call_named(ctx, "print", 1))


def test_nested_loop_inside_step_loop_is_per_step():
    ctx = context("""
        for batch in loader:
            loss.backward()
            optimizer.step()
            for name, p in model.named_parameters():
                inner()
    """)
    assert ctx.loops.per_step(call_named(ctx, "inner"))


def test_step_counter_from_enumerate_range_and_increment():
    enumerate_ctx = context("for i, b in enumerate(loader):\n    opt.step()\n    x()\n")
    assert enumerate_ctx.loops.step_counter(call_named(enumerate_ctx, "x")) == "i"
    range_ctx = context("for it in range(1000):\n    opt.step()\n    x()\n")
    assert range_ctx.loops.step_counter(call_named(range_ctx, "x")) == "it"
    plain = context("for b in loader:\n    opt.step()\n    x()\n")
    assert plain.loops.step_counter(call_named(plain, "x")) is None
    counted = context("for b in loader:\n    opt.step()\n    self.global_step += 1\n    x()\n")
    assert counted.loops.step_counter(call_named(counted, "x")) == "self.global_step"


def test_step_function_called_once_is_not_per_step_work():
    ctx = context("""
        def check_gradients(model, batch):
            loss = model(batch)
            loss.backward()
            print(loss)

        def run_checks(model, batch):
            check_gradients(model, batch)
            print("checked")

        def main():
            run_checks(model, batch)
    """)
    assert not ctx.loops.per_step(call_named(ctx, "print", 0))
    assert not ctx.loops.per_step(call_named(ctx, "print", 1))


def test_step_function_per_step_through_a_wrapper_called_in_a_loop():
    ctx = context("""
        def inner(batch):
            loss.backward()
            optimizer.step()
            print("inner")

        def wrapper(batch):
            inner(batch)
            print("wrapper")

        def train():
            for batch in loader:
                wrapper(batch)
    """)
    assert ctx.loops.per_step(call_named(ctx, "print", 0))
    assert ctx.loops.per_step(call_named(ctx, "print", 1))


def test_uncalled_step_function_is_a_framework_hook_and_per_step():
    ctx = context("""
        import tensorflow as tf
        class Model(tf.keras.Model):
            def train_step(self, data):
                with tf.GradientTape() as tape:
                    loss = self.compute_loss(data)
                grads = tape.gradient(loss, self.trainable_variables)
                self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
                print("step")
    """)
    assert ctx.loops.per_step(call_named(ctx, "print"))


def test_an_interval_through_a_helper_of_the_module_or_a_counter_reset_by_hand():
    ctx = context("""
        def every(step, n):
            return step % n == 0

        for batch in loader:
            loss = model(batch)
            loss.backward()
            opt.step()
            since_save += 1
            if every(step, 100):
                by_helper()
            if is_main and since_save >= save_steps:
                by_counter()
                since_save = 0
            if since_eval >= eval_steps:
                not_reset()
            if every(step, 100) or is_last_batch:
                helper_or_last()
            if every(step, 100) or args.verbose:
                helper_or_flag()
    """)
    assert ctx.loops.interval_guard(call_named(ctx, "by_helper")) is not None
    assert ctx.loops.interval_guard(call_named(ctx, "by_counter")) is not None
    assert ctx.loops.per_step_work(call_named(ctx, "not_reset"))
    # beside a helper's interval, a condition that picks one step keeps the guard; a flag does not
    assert ctx.loops.interval_guard(call_named(ctx, "helper_or_last")) is not None
    assert ctx.loops.per_step_work(call_named(ctx, "helper_or_flag"))


def test_a_branch_that_ends_the_program_is_an_event():
    ctx = context("""
        import sys
        for batch in loader:
            loss = model(batch)
            if not math.isfinite(loss.item()):
                report(loss)
                sys.exit(1)
            loss.backward()
            opt.step()
    """)
    assert ctx.loops.in_event_branch(call_named(ctx, "report"))
    assert not ctx.loops.per_step_work(call_named(ctx, "report"))
    assert ctx.loops.per_step_work(call_named(ctx, "item"))


def test_one_step_per_epoch_is_full_batch_training():
    ctx = context("""
        for epoch in range(num_epochs):
            loss = criterion(model(features), labels)
            loss.backward()
            optimizer.step()
            full_batch()
        for epoch in range(3):
            for batch in loader:
                model(batch).sum().backward()
                optimizer.step()
                mini_batch()
    """)
    assert ctx.loops.one_step_per_epoch(call_named(ctx, "full_batch"))
    assert not ctx.loops.one_step_per_epoch(call_named(ctx, "mini_batch"))


def test_a_step_function_handed_to_a_runner_or_through_a_parameter():
    ctx = context("""
        def train_step(batch):
            loss = model(batch)
            loss.backward()
            optimizer.step()

        def fit(step_fn, loader):
            for batch in loader:
                step_fn(batch)
                through_parameter()

        for batch in dist_loader:
            strategy.run(train_step, args=(batch,))
            through_runner()

        fit(train_step, loader)
    """)
    assert ctx.loops.per_step(call_named(ctx, "through_parameter"))
    assert ctx.loops.per_step(call_named(ctx, "through_runner"))


def test_a_loop_that_reads_a_clock_times_its_steps_and_those_of_its_step_functions():
    ctx = context("""
        import time

        def train_step(batch):
            model(batch).sum().backward()
            optimizer.step()
            in_timed_step()

        for batch in loader:
            start = time.perf_counter()
            train_step(batch)
            took = time.perf_counter() - start

        for batch in other_loader:
            model(batch).sum().backward()
            optimizer.step()
            untimed()
    """)
    assert ctx.loops.times_steps(call_named(ctx, "in_timed_step"))
    assert not ctx.loops.times_steps(call_named(ctx, "untimed"))


def test_value_origins_follow_unpacking_containers_returns_and_arguments():
    ctx = context("""
        import tensorflow as tf
        import tensorflow_datasets as tfds

        splits, info = tfds.load("mnist", with_info=True)
        train = splits["train"]
        parts = []
        parts.append(tf.data.TextLineDataset("a.txt"))
        last = parts[-1]

        def make(files):
            return tf.data.Dataset.from_tensor_slices(files).batch(8)

        made = make(paths)

        def fit(dataset):
            for batch in dataset:
                pass

        fit(made)
        plain = [1, 2][0]
        first, *rest = tfds.load("cifar10", split=["train", "test"])
        tail = tfds.load("cifar10", split=["train", "test"])[-1]
    """)
    values = ctx.values
    names = {
        target.target.value: a.value
        for a in ctx.index.nodes("Assign")
        for target in a.targets
        if isinstance(target.target, cst.Name)
    }
    for name in ("train", "last", "made", "tail"):
        assert values.is_kind(names[name], "tfdata"), name
    assert not values.is_kind(names["plain"], "tfdata")
    parameter = next(p for p in ctx.index.nodes("Param") if p.name.value == "dataset")
    assert values.is_kind(parameter.name, "tfdata")  # what `fit` is called with


def test_keyword_dictionaries_resolve_or_say_they_cannot():
    ctx = context("""
        kwargs = {"batch_size": 8}
        kwargs.update({"num_workers": 2}, pin_memory=True)
        kwargs["drop_last"] = True
        a = DataLoader(ds, **kwargs)
        b = DataLoader(ds, **options)
        c = DataLoader(ds, **dict(kwargs, shuffle=True))
    """)
    calls = [c for c in ctx.index.nodes("Call") if getattr(c.func, "value", None) == "DataLoader"]
    assert set(ctx.values.keywords_of(calls[0])) == {"batch_size", "num_workers", "pin_memory", "drop_last"}
    assert ctx.values.keywords_of(calls[1]) is None
    assert "shuffle" in ctx.values.keywords_of(calls[2])


@pytest.mark.parametrize(
    "source",
    [
        # a literal range, a literal list, a name only ever given a literal
        "for i in range(15):\n    loss.backward()\n    optimizer.step()\n    work()\n",
        "for lr in [0.1, 0.01, 0.001]:\n    loss.backward()\n    optimizer.step()\n    work()\n",
        "num_batches = 3\nfor i in range(num_batches):\n    loss.backward()\n    optimizer.step()\n    work()\n",
        # a parameter's default, an argparse default
        "def train(steps=15):\n    for i in range(steps):\n        loss.backward()\n        optimizer.step()\n"
        "        work()\n",
        "parser.add_argument('--steps', type=int, default=15)\nopt = parser.parse_args()\n"
        "for i in tqdm(range(opt.steps)):\n    loss.backward()\n    optimizer.step()\n    work()\n",
        # 4 x 4 iterations; a step function called only from a loop of 5
        "for epoch in range(4):\n    for i, x in enumerate([1, 2, 3, 4]):\n        loss.backward()\n"
        "        optimizer.step()\n        work()\n",
        "def train_step(x):\n    loss.backward()\n    optimizer.step()\n    work()\n"
        "for i in range(5):\n    train_step(i)\n",
        # a counter that ends the loop: `enumerate`'s index, a name raised by 1 every iteration
        "for i, batch in enumerate(loader):\n    if i >= 10:\n        break\n    loss.backward()\n"
        "    optimizer.step()\n    work()\n",
        "n = 0\nfor batch in loader:\n    if n > args.num_iter:\n        break\n    loss.backward()\n"
        "    optimizer.step()\n    work()\n    n += 1\n"
        "parser.add_argument('--num_iter', type=int, default=8)\nargs = parser.parse_args()\n",
        "step = 0\nwhile step < 12:\n    loss.backward()\n    optimizer.step()\n    work()\n    step += 1\n",
        # a `continue` that skips only an inner loop's rest, or a nested function's loop's
        "n = 0\nfor batch in loader:\n    for x in batch:\n        if bad(x):\n            continue\n    n += 1\n"
        "    if n >= 10:\n        break\n    loss.backward()\n    optimizer.step()\n    work()\n",
        "n = 0\nfor batch in loader:\n    def skip(xs):\n        for x in xs:\n            continue\n    n += 1\n"
        "    if n >= 10:\n        break\n    loss.backward()\n    optimizer.step()\n    work()\n",
        # an argparse option's list default
        "parser.add_argument('--lrs', default=[0.1, 0.01], nargs='+')\nargs = parser.parse_args()\n"
        "for lr in args.lrs:\n    loss.backward()\n    optimizer.step()\n    work()\n",
        # a branch that ends in the `break` after other work; an offset counter; `enumerate` from 1
        "for i, batch in enumerate(loader):\n    if i == 15:\n        prof.stop()\n        break\n"
        "    loss.backward()\n    optimizer.step()\n    work()\n",
        "max_steps = 10\nfor i, batch in enumerate(loader):\n    loss.backward()\n    optimizer.step()\n"
        "    work()\n    if (i + 1) >= max_steps:\n        break\n",
        "for i, batch in enumerate(loader, 1):\n    loss.backward()\n    optimizer.step()\n    work()\n"
        "    if i > 15:\n        break\n",
        # a slice of the loader
        "import itertools\nfor batch in itertools.islice(loader, 10):\n    loss.backward()\n"
        "    optimizer.step()\n    work()\n",
    ],
    ids=[
        "literal-range",
        "literal-list",
        "constant",
        "default-argument",
        "argparse-default",
        "nested",
        "caller",
        "enumerate-break",
        "counter-break",
        "while-counter",
        "inner-loop-continue",
        "nested-function-continue",
        "argparse-list",
        "break-after-other-work",
        "offset-counter",
        "enumerate-from-one",
        "islice",
    ],
)
def test_a_loop_of_a_handful_of_steps_is_not_per_step(source):
    ctx = context("import torch\n" + source)
    assert not ctx.loops.per_step(call_named(ctx, "work"))
    assert not ctx.loops.per_step_work(call_named(ctx, "work"))


@pytest.mark.parametrize(
    "source",
    [
        "for i in range(20):\n    loss.backward()\n    optimizer.step()\n    work()\n",
        "num_batches = 3\nnum_batches += n\nfor i in range(num_batches):\n    loss.backward()\n"
        "    optimizer.step()\n    work()\n",
        # a default the module's own call overrides; an argument of unknown value
        "def train(steps=15):\n    for i in range(steps):\n        loss.backward()\n        optimizer.step()\n"
        "        work()\ntrain(steps=1000)\n",
        "def train(steps=15):\n    for i in range(steps):\n        loss.backward()\n        optimizer.step()\n"
        "        work()\ntrain(steps=args.steps)\n",
        # short inner loop, long outer loop: the product is not known
        "for batch in loader:\n    for micro in range(4):\n        loss.backward()\n        work()\n"
        "    optimizer.step()\n",
        "def train(steps=15):\n    for i in range(steps):\n        loss.backward()\n        optimizer.step()\n"
        "        work()\nfor epoch in range(epochs):\n    train()\n",
        # a break after many steps; on the data; a counter raised only sometimes, skipped by
        # `continue`, or set to 0 again inside the loop
        "for i, batch in enumerate(loader):\n    if i >= 500:\n        break\n    loss.backward()\n"
        "    optimizer.step()\n    work()\n",
        "for batch in loader:\n    if loss < 10:\n        break\n    loss.backward()\n    optimizer.step()\n"
        "    work()\n",
        "n = 0\nfor i, batch in enumerate(loader, 1):\n    if i % 4 == 0:\n        n += 1\n    if n >= 10:\n"
        "        break\n    loss.backward()\n    optimizer.step()\n    work()\n",
        "n = 0\nfor batch in loader:\n    if bad(batch):\n        continue\n    n += 1\n    if n >= 10:\n"
        "        break\n    loss.backward()\n    optimizer.step()\n    work()\n",
        "for batch in loader:\n    n = 0\n    n += 1\n    if n >= 10:\n        break\n    loss.backward()\n"
        "    optimizer.step()\n    work()\n",
    ],
    ids=[
        "twenty",
        "grown",
        "overridden",
        "unknown-argument",
        "accumulation",
        "called-in-long-loop",
        "late-break",
        "data-break",
        "counter-under-if",
        "counter-skipped",
        "counter-reset",
    ],
)
def test_a_loop_whose_length_is_not_known_short_stays_per_step(source):
    ctx = context("import torch\n" + source)
    assert ctx.loops.per_step_work(call_named(ctx, "work"))


@pytest.mark.parametrize(
    "source, steps",
    [
        ("for i in range(30):\n    loss.backward()\n    optimizer.step()\n    work()\n", 30),
        (
            "for i, batch in enumerate(loader):\n    if i - 1 >= 40:\n        break\n    loss.backward()\n"
            "    optimizer.step()\n    work()\n",
            42,
        ),
        ("for i in range(50):\n    loss.backward()\n    optimizer.step()\n    work()\n", None),
        ("for batch in loader:\n    loss.backward()\n    optimizer.step()\n    work()\n", None),
        # a counter's offset or start given by a name is only known at most: no bound
        (
            "k = 5\nfor i, batch in enumerate(loader, k):\n    if i >= 30:\n        break\n    loss.backward()\n"
            "    optimizer.step()\n    work()\n",
            None,
        ),
    ],
    ids=["thirty", "offset-counter", "fifty", "loader", "start-by-a-name"],
)
def test_a_loop_of_a_few_dozen_steps_is_per_step_with_a_hint(source, steps):
    ctx = context("import torch\n" + source)
    work = call_named(ctx, "work")
    assert ctx.loops.per_step_work(work)
    hint = ctx.loops.few_steps_hint(work)
    if steps is None:
        assert hint is None
    else:
        assert hint is not None and f"at most {steps} steps" in hint


@pytest.mark.parametrize(
    "condition, data",
    [
        ("loss > 10", True),
        ("torch.isnan(loss)", True),
        ("not torch.isfinite(loss).all()", True),
        ("tf.equal(optimizer.iterations % n, 0)", True),
        ("acc > best", True),  # acc = out.item()
        ("verbose and loss > 10", True),
        ("verbose or loss > 10", False),
        ("loss is not None", False),
        ("verbose", False),
        ("torch.distributed.get_rank() == 0", False),
        ("epoch > 3", False),
    ],
)
def test_the_body_of_a_data_dependent_condition_is_not_per_step_work(condition, data):
    ctx = context(
        "import torch\nimport tensorflow as tf\n"
        "for step, (x, y) in enumerate(loader):\n"
        "    out = model(x)\n    loss = criterion(out, y)\n    acc = out.item()\n"
        "    loss.backward()\n    optimizer.step()\n"
        f"    if {condition}:\n        work()\n"
    )
    work = call_named(ctx, "work")
    assert ctx.loops.per_step(work)
    assert (ctx.loops.data_guard(work) is not None) is data
    assert ctx.loops.per_step_work(work) is not data


@pytest.mark.parametrize(
    "body, full_batch",
    [
        ("out = model(data.x, data.edge_index)\n    loss = criterion(out, data.y)", True),
        ("x, y = get_batch('train')\n    loss = criterion(model(x), y)", False),
        ("loss = criterion(model(xs[i]), ys[i])", False),
        ("ix = torch.randint(0, n, (8,))\n    xb = next(stream)\n    loss = criterion(model(xb), y)", False),
    ],
)
def test_a_range_loop_that_draws_no_batch_is_full_batch_training(body, full_batch):
    ctx = context(
        f"import torch\nfor i in range(args.iterations):\n    {body}\n    loss.backward()\n    optimizer.step()\n"
        "    evaluate(model)\n"
    )
    assert ctx.loops.one_step_per_epoch(call_named(ctx, "evaluate")) is full_batch
