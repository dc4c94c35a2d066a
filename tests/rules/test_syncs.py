"""GL201-GL204: host-device syncs, positives, negatives (the traps) and fixes."""

from __future__ import annotations

import textwrap

from tests.helpers import assert_fix_ok, codes, first_body_row, fix, in_step_loop, lint, rows

HEADER = 'import torch\nimport time\ndevice = torch.device("cuda")\n'
FIRST = first_body_row(HEADER)  # row of the body's first line


def step(body: str, header: str = HEADER) -> str:
    return in_step_loop(body, header)


# -- GL201 host-sync-in-loop ------------------------------------------------------------------------
def test_gl201_explicit_syncs():
    source = step(
        """
        total += loss.item()
        arr = loss.detach().cpu().numpy()
        values = y.tolist()
        """
    )
    # `.cpu().numpy()` is one sync, reported once at `.cpu()`.
    assert rows(source, "GL201") == [(FIRST, "GL201"), (FIRST + 1, "GL201"), (FIRST + 2, "GL201")]


def test_gl201_implicit_syncs():
    source = step(
        """
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
        """
    )
    got = rows(source, "GL201")
    # One finding per condition: `isnan(x) or isinf(x)` is reported once (transformers' Trainer).
    assert got == [(FIRST + i, "GL201") for i in (0, 1, 2, 3, 4, 5, 7, 9)]


def test_gl201_implicit_negatives():
    source = step(
        """
        lr = float(args.lr)
        n = int(len(batch))
        text = f"step {step} epoch {epoch}"
        line = "step %d" % step
        ok = torch.isnan(loss)
        name = str(epoch)
        """
    )
    assert codes(source, "GL201") == []


def test_gl201_guarded_epoch_loop_and_evaluation_loop_are_quiet():
    guarded = step(
        """
        if step % 100 == 0:
            print(loss.item(), float(loss), f"{loss}")
        """
    )
    assert codes(guarded, "GL201") == []
    epoch_level = HEADER + textwrap.dedent(
        """
        for epoch in range(3):
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            print(f"epoch {epoch} loss {loss.item()} {float(loss)}")
        for x, y in val_loader:
            acc += (model(x).argmax(1) == y).sum().item()
        """
    )
    assert codes(epoch_level, "GL201") == []


def test_gl201_needs_an_accelerator_and_torch():
    cpu = step("total += loss.item()\n", header="import torch\n")
    assert codes(cpu, "GL201") == []
    no_torch = step("total += loss.item()\n", header='import numpy as np\ndev = "cuda"\n')
    assert codes(no_torch, "GL201") == []


def test_gl201_in_comments_and_strings_is_quiet():
    source = step(
        '''
        # total += loss.item()
        note = "loss.item() and float(loss)"
        '''
    )
    assert codes(source, "GL201") == []


def test_gl201_in_step_function_and_event_branch():
    source = HEADER + textwrap.dedent(
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
        """
    )
    assert rows(source, "GL201") == [(9, "GL201")]


def test_gl201_early_stop_item_is_reported_without_fix():
    source = step(
        """
        if loss.item() < 0.01:
            break
        """
    )
    [finding] = lint(source, "GL201")
    assert finding.fix is None


def test_gl201_fix_guards_logging_only():
    source = step(
        """
        print(f"step {step} loss {loss.item():.4f}")  # comment kept
        total += loss.item()
        """
    )
    fixed = assert_fix_ok(source, "GL201")
    assert 'if step % 100 == 0:\n            print(f"step {step} loss {loss.item():.4f}")  # comment kept' in fixed
    assert "        total += loss.item()" in fixed  # feeds the computation: no fix
    assert fixed.splitlines()[: FIRST - 1] == source.splitlines()[: FIRST - 1]
    assert fix(source, "GL201", unsafe=False) == source


def test_gl201_fix_for_formatted_tensor_uses_log_every():
    source = step('print(f"loss {loss}")\n')
    fixed = assert_fix_ok(source, "GL201", **{"log-every": 50})
    assert "if step % 50 == 0:" in fixed


# -- GL202 model-transfer-in-loop -------------------------------------------------------------------
def test_gl202_reports_model_moves_in_step_loop():
    source = step(
        """
        model.to(device)
        self.encoder.cuda()
        """
    )
    assert rows(source, "GL202") == [(FIRST, "GL202"), (FIRST + 1, "GL202")]


def test_gl202_negatives():
    before = HEADER + "model = Net().to(device)\nmodel.cuda()\n"
    assert codes(before, "GL202") == []
    source = step(
        """
        x = x.to(device)
        model.to(torch.float32)
        model.to("cpu")
        if step % 1000 == 0:
            model.cuda()
        """
    )
    assert codes(source, "GL202") == []
    evaluation = HEADER + "for x in val_loader:\n    model.to(device)\n    model(x)\n"
    assert codes(evaluation, "GL202") == []


# -- GL203 host-tensor-then-copy --------------------------------------------------------------------
def test_gl203_reports_factories_then_copy():
    source = HEADER + textwrap.dedent(
        """
        a = torch.zeros(3, 4).to(device)
        b = torch.arange(10).cuda()
        c = torch.tensor([1, 2]).to(device=device)
        d = torch.randn(5).to(device)
        """
    )
    assert rows(source, "GL203") == [(5, "GL203"), (6, "GL203"), (7, "GL203"), (8, "GL203")]


def test_gl203_negatives():
    source = HEADER + textwrap.dedent(
        """
        import numpy as np
        a = torch.zeros(3, device=device)
        b = torch.zeros(3, device="cpu").to(device)
        c = torch.zeros_like(x).to(device)
        d = torch.zeros(3).to(torch.float16)
        e = torch.zeros(3).to("cpu")
        f = np.zeros(3).to(device)
        g = torch.from_numpy(arr).to(device)
        # h = torch.zeros(3).to(device)
        """
    )
    assert codes(source, "GL203") == []
    assert codes("import torch\na = torch.zeros(3).to(dev)\n", "GL203") == []  # no accelerator


def test_gl203_fix_safe_for_deterministic_unsafe_for_random():
    source = HEADER + textwrap.dedent(
        """
        a = torch.zeros(3, 4).to(device)  # kept
        b = (torch.arange(10).cuda())
        c = torch.tensor([1, 2]).to(device, non_blocking=True)
        d = torch.randn(5).to(device)
        """
    )
    safe = assert_fix_ok(source, "GL203", unsafe=False)
    assert "a = torch.zeros(3, 4, device=device)  # kept" in safe
    assert 'b = (torch.arange(10, device="cuda"))' in safe
    assert "c = torch.tensor([1, 2]).to(device, non_blocking=True)" in safe  # asked for async: kept
    assert "d = torch.randn(5).to(device)" in safe
    unsafe = assert_fix_ok(source, "GL203")
    assert "d = torch.randn(5, device=device)" in unsafe


def test_gl203_no_fix_when_to_changes_dtype_too():
    source = HEADER + "a = torch.zeros(3).to(device, torch.float16)\nb = torch.ones(2).cuda(1)\nc = torch.zeros(4).to(grad)\n"
    findings = lint(source, "GL203")
    # `.to(grad)` takes grad's dtype as well as its device (seen in torch's own code).
    assert [f.fix for f in findings] == [None, None, None]


def test_gl203_fix_with_device_attribute():
    source = HEADER + "stop = torch.ones(n, 1).to(masks.device)\n"
    assert "torch.ones(n, 1, device=masks.device)" in assert_fix_ok(source, "GL203", unsafe=False)


# -- GL204 synchronize-in-loop ----------------------------------------------------------------------
def test_gl204_reports_synchronize_in_step_loop():
    source = step(
        """
        torch.cuda.synchronize()
        torch.cuda.current_stream().synchronize()
        """
    )
    assert rows(source, "GL204") == [(FIRST, "GL204"), (FIRST + 1, "GL204")]


def test_gl204_quiet_when_timing_guarded_or_outside_step_loop():
    timing = step(
        """
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        """
    )
    assert codes(timing, "GL204") == []
    guarded = step(
        """
        if step % 100 == 0:
            torch.cuda.synchronize()
        """
    )
    assert codes(guarded, "GL204") == []
    outside = HEADER + "for x in loader:\n    model(x).sum().backward()\n    opt.step()\ntorch.cuda.synchronize()\n"
    assert codes(outside, "GL204") == []
    stream = step("s = torch.cuda.current_stream()\n")
    assert codes(stream, "GL204") == []


def test_gl204_aliased_import():
    source = step("sync()\n", header="from torch.cuda import synchronize as sync\n" + HEADER)
    assert codes(source, "GL204") == ["GL204"]
