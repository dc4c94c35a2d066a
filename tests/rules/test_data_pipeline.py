"""GL101-GL105: the input pipeline rules, positives, negatives (the traps) and fixes."""

from __future__ import annotations

import textwrap

from tests.helpers import assert_fix_ok, codes, fix, lint, rows

CUDA = 'import torch\nfrom torch.utils.data import DataLoader\ndevice = torch.device("cuda")\n'


def src(body: str, header: str = CUDA) -> str:
    return header + textwrap.dedent(body)


# -- GL101 dataloader-serial ----------------------------------------------------------------------
def test_gl101_reports_missing_and_zero_workers():
    source = src(
        """
        a = DataLoader(ds, batch_size=32)
        b = DataLoader(ds, batch_size=32, num_workers=0)
        c = DataLoader(ds, batch_size=32, num_workers=4)
        d = DataLoader(ds, batch_size=32, num_workers=args.workers)
        e = DataLoader(ds, 32, True, None, None, 4)
        f = DataLoader(ds, **options)
        """
    )
    assert rows(source, "GL101") == [(5, "GL101"), (6, "GL101")]


def test_gl101_resolves_aliased_imports():
    source = """
        import torch.utils.data as tud
        from torch.utils.data import DataLoader as DL
        x = torch.zeros(1).cuda()
        a = tud.DataLoader(ds)
        b = DL(ds)
        """
    assert codes(source, "GL101") == ["GL101", "GL101"]


def test_gl101_quiet_without_accelerator_and_for_tensor_datasets_and_text():
    cpu_only = """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds)
        """
    assert codes(cpu_only, "GL101") == []
    tensors = src(
        """
        from torch.utils.data import TensorDataset
        ds = TensorDataset(x, y)
        loader = DataLoader(ds, batch_size=32)
        """
    )
    assert codes(tensors, "GL101") == []
    text = src(
        '''
        # loader = DataLoader(ds)
        doc = "DataLoader(ds) without workers"
        '''
    )
    assert codes(text, "GL101") == []


def test_gl101_fix_is_unsafe_adds_workers_and_import():
    source = src("loader = DataLoader(ds, batch_size=32)  # keep me\nother = 1  # and me\n")
    assert fix(source, "GL101", unsafe=False) == source
    fixed = assert_fix_ok(source, "GL101")
    assert "num_workers=min(8, os.cpu_count() or 1)" in fixed
    assert fixed.count("import os") == 1
    assert "# keep me" in fixed and "other = 1  # and me" in fixed


def test_gl101_fix_uses_configured_expression():
    source = src("loader = DataLoader(ds, num_workers=0)\n")
    fixed = assert_fix_ok(source, "GL101", **{"num-workers": "4"})
    assert "num_workers=4)" in fixed and "import os" not in fixed


# -- GL102 dataloader-unpinned --------------------------------------------------------------------
def test_gl102_reports_unpinned_in_accelerated_module():
    source = src(
        """
        a = DataLoader(ds, num_workers=4)
        b = DataLoader(ds, num_workers=4, pin_memory=False)
        c = DataLoader(ds, num_workers=4, pin_memory=True)
        d = DataLoader(ds, num_workers=4, pin_memory=args.pin)
        """
    )
    assert rows(source, "GL102") == [(5, "GL102"), (6, "GL102")]


def test_gl102_quiet_on_cpu_module():
    assert codes("from torch.utils.data import DataLoader\nl = DataLoader(ds, num_workers=2)\n", "GL102") == []


def test_gl102_fix_keeps_multiline_layout():
    source = src(
        """
        loader = DataLoader(  # comment kept
            ds,
            batch_size=32,
            num_workers=4,
        )
        """
    )
    fixed = assert_fix_ok(source, "GL102", unsafe=False)
    assert "    num_workers=4,\n    pin_memory=True,\n)" in fixed
    assert "# comment kept" in fixed


# -- GL103 dataloader-respawn ---------------------------------------------------------------------
EPOCHS = """
loader = DataLoader(ds, num_workers={workers}, pin_memory=True{extra})
for epoch in range(10):
    for x, y in loader:
        loss = model(x.to(device, non_blocking=True)).sum()
        loss.backward()
        optimizer.step()
"""


def test_gl103_reports_workers_reiterated_each_epoch():
    assert rows(src(EPOCHS.format(workers=4, extra="")), "GL103") == [(5, "GL103")]


def test_gl103_quiet_when_persistent_or_no_workers_or_single_pass():
    assert codes(src(EPOCHS.format(workers=4, extra=", persistent_workers=True")), "GL103") == []
    assert codes(src(EPOCHS.format(workers=0, extra="")), "GL103") == []
    single = src(
        """
        loader = DataLoader(ds, num_workers=4)
        for x, y in loader:
            model(x).sum().backward()
        """
    )
    assert codes(single, "GL103") == []


def test_gl103_loader_created_inside_the_epoch_loop_is_not_this_rule():
    source = src(
        """
        for epoch in range(10):
            loader = DataLoader(ds, num_workers=4)
            for x in loader:
                model(x).sum().backward()
        """
    )
    assert codes(source, "GL103") == []


def test_gl103_reiterated_through_a_function_or_argument_or_lightning_hook():
    through_function = src(
        """
        class Runner:
            def __init__(self):
                self.loader = DataLoader(ds, num_workers=4)
            def train_epoch(self):
                for batch in self.loader:
                    self.model(batch).sum().backward()
            def fit(self):
                for epoch in range(3):
                    self.train_epoch()
        """
    )
    assert codes(through_function, "GL103") == ["GL103"]
    passed = src(
        """
        val_loader = DataLoader(ds, num_workers=4)
        for epoch in range(3):
            acc = evaluate(model, val_loader)
            print(len(val_loader))
        """
    )
    assert codes(passed, "GL103") == ["GL103"]
    hook = src(
        """
        class Data:
            def train_dataloader(self):
                return DataLoader(self.train, num_workers=8)
            def test_dataloader(self):
                return DataLoader(self.test, num_workers=8)
        """
    )
    assert rows(hook, "GL103") == [(7, "GL103")]


def test_gl103_only_print_or_len_in_loop_is_not_reiteration():
    source = src(
        """
        loader = DataLoader(ds, num_workers=4)
        for epoch in range(3):
            print(len(loader), loader)
        """
    )
    assert codes(source, "GL103") == []


def test_gl103_fix_literal_and_variable_workers():
    literal = assert_fix_ok(src(EPOCHS.format(workers=4, extra="")), "GL103", unsafe=False)
    assert "persistent_workers=True)" in literal
    variable = assert_fix_ok(src(EPOCHS.format(workers="args.workers", extra="")), "GL103", unsafe=False)
    assert "persistent_workers=args.workers > 0)" in variable


def test_gl103_fix_unsafe_when_dataset_changes_between_epochs():
    source = src(
        """
        loader = DataLoader(ds, num_workers=4)
        for epoch in range(10):
            ds.set_epoch(epoch)
            for x in loader:
                model(x).sum().backward()
        """
    )
    [finding] = lint(source, "GL103")
    assert finding.fix.applicability.value == "unsafe"
    assert fix(source, "GL103", unsafe=False) == textwrap.dedent(source)


# -- GL104 blocking-h2d-copy ----------------------------------------------------------------------
STEP = """
for epoch in range(3):
    for step, (x, y) in enumerate(loader):
{body}
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
"""


def step(body: str) -> str:
    return src(STEP.format(body=textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)))


def test_gl104_reports_blocking_batch_copies():
    source = step(
        """
        x = x.to(device)
        y = y.cuda()
        """
    )
    assert rows(source, "GL104") == [(7, "GL104"), (8, "GL104")]


def test_gl104_batch_views_and_dict_comprehensions():
    source = src(
        """
        for batch in loader:
            inputs, labels = batch
            inputs = inputs.to(device)
            ids = batch["input_ids"].to(device)
            batch = {k: v.to(device) for k, v in batch.items()}
            model(inputs).loss.backward()
            optimizer.step()
        """
    )
    assert rows(source, "GL104") == [(7, "GL104"), (8, "GL104"), (9, "GL104")]


def test_gl104_negatives():
    source = step(
        """
        x = x.to(device, non_blocking=True)
        y = y.cuda(non_blocking=True)
        x = x.to(torch.float16)
        y = y.to("cpu")
        model.to(device)
        w = weights.to(device)
        if step % 100 == 0:
            z = x.to(device)
        """
    )
    assert codes(source, "GL104") == []
    evaluation = src(
        """
        for x, y in val_loader:
            pred = model(x.to(device))
        """
    )
    assert codes(evaluation, "GL104") == []
    cpu_module = "import torch\nfor x in loader:\n    x = x.to(dev)\n    model(x).sum().backward()\n    opt.step()\n"
    assert codes(cpu_module, "GL104") == []


def test_gl104_step_function_batch_parameter():
    source = src(
        """
        def train_step(model, batch, optimizer):
            batch = batch.to(device)
            model.to(device)
            loss = model(batch).sum()
            loss.backward()
            optimizer.step()
        """
    )
    assert rows(source, "GL104") == [(6, "GL104")]


def test_gl104_fix_is_safe_and_keeps_the_rest():
    source = step(
        """
        x = x.to(device)  # comment
        y = y.cuda()
        """
    )
    fixed = assert_fix_ok(source, "GL104", unsafe=False)
    assert "x = x.to(device, non_blocking=True)  # comment" in fixed
    assert "y = y.cuda(non_blocking=True)" in fixed
    untouched = [l for l in textwrap.dedent(source).splitlines() if ".to(" not in l and ".cuda(" not in l]
    assert untouched == [l for l in fixed.splitlines() if ".to(" not in l and ".cuda(" not in l]


# -- GL105 loader-reiterated ----------------------------------------------------------------------
def test_gl105_reports_counting_and_peeking_in_loops():
    source = src(
        """
        loader = DataLoader(ds, num_workers=4)
        n = len(list(loader))
        for epoch in range(3):
            first = next(iter(loader))
            m = len(tuple(loader))
        """
    )
    assert rows(source, "GL105") == [(6, "GL105"), (8, "GL105"), (9, "GL105")]


def test_gl105_negatives():
    source = src(
        """
        loader = DataLoader(ds, num_workers=4)
        first = next(iter(loader))
        n = len(loader)
        for epoch in range(3):
            it = iter(loader)
            cached = len(list(files))
            other = next(iter(items))
        """
    )
    assert codes(source, "GL105") == []
    assert codes("from torch.utils.data import DataLoader\nl = DataLoader(d)\nn = len(list(l))\n", "GL105") == []
