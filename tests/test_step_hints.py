"""Per-step findings that show no evidence of a real cost carry a hint (RawFinding.hint): a step
loop the code bounds to a few dozen steps, a loop that times its own steps on purpose."""

from __future__ import annotations

import textwrap

import pytest

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.rules import rules_by_code

PER_STEP_RULES = ("GL104", "GL201", "GL202", "GL204", "GL205", "GL301", "GL302", "GL303")

# Every per-step rule's pattern once in the step loop `{loop}`.
STEP_LOOP = """
import torch
device = torch.device("cuda")
model = torch.nn.Linear(4, 4).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
{loop}
    x = x.to(device)
    loss = model(x).sum()
    loss.backward()
    opt.step()
    print(loss.item())
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    model.to(device)
    torch.save(model.state_dict(), "model.pt")
    evaluate(model, val_loader)
"""


def findings(source: str, codes: tuple[str, ...] = PER_STEP_RULES) -> list:
    linter = Linter(Settings(select=list(codes)))
    return linter.lint_source(textwrap.dedent(source).encode(), "train.py").findings


@pytest.mark.parametrize(
    "loop, steps",
    [
        ("for step, (x, y) in zip(range(30), loader):", 30),
        ("for i, (x, y) in enumerate(loader):\n    if i + 1 == 40:\n        prof.stop()\n        break", 40),
        ("num_steps = 25\nfor i, (x, y) in enumerate(loader, 1):\n    if i > num_steps:\n        break", 26),
    ],
    ids=["zip-range", "break-after-other-work", "enumerate-from-one"],
)
def test_every_per_step_rule_holds_back_a_finding_in_a_loop_of_a_few_dozen_steps(loop, steps):
    found = findings(STEP_LOOP.format(loop=loop))
    assert sorted({f.code for f in found}) == sorted(PER_STEP_RULES)
    for finding in found:
        assert finding.hint == f"the training loop runs at most {steps} steps", finding


@pytest.mark.parametrize(
    "loop",
    ["for x, y in loader:", "for step, (x, y) in zip(range(50), loader):"],
    ids=["loader", "fifty-steps"],
)
def test_a_loop_not_known_to_be_short_reports_without_a_hint(loop):
    found = findings(STEP_LOOP.format(loop=loop))
    assert sorted({f.code for f in found}) == sorted(PER_STEP_RULES)
    # (the copy's own hint: the step reads `loss.item()` back, see below; a rule that is a hint by
    # default gives its reason, no step-count one)
    assert all(f.hint == rules_by_code()[f.code].hint_by_default for f in found if f.code != "GL104")


@pytest.mark.parametrize(
    "read_back, hinted",
    [
        ("total += loss.item()", True),
        ("total += float(loss)", True),
        ("total += loss.detach()", False),
        ("if step % 100 == 0:\n            print(loss.item())", False),
    ],
    ids=["item", "float", "kept-on-device", "every-100-steps"],
)
def test_a_copy_in_a_step_that_reads_back_every_step_has_a_hint(read_back, hinted):
    source = f"""
    import torch
    device = torch.device("cuda")
    for step, (x, y) in enumerate(loader):
        x = x.to(device)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        {read_back}
    """
    found = findings(source, ("GL104",))
    assert [f.location.row for f in found] == [5]
    assert (found[0].hint is not None and "reads a value back" in found[0].hint) is hinted


# A loop that times its steps, with `{timing}` after the step; `.item()` read back every step.
TIMED_LOOP = """
import time
import torch
device = torch.device("cuda")
def {function}(model, loader, optimizer):
    times, losses = [], []
    for x, y in loader:
        start = time.perf_counter()
        loss = model(x.to(device, non_blocking=True)).sum()
        loss.backward()
        optimizer.step()
        {timing}
        losses.append(loss.item())
    return times, losses
"""


def read_back_row(source: str) -> int:
    return 1 + textwrap.dedent(source).splitlines().index("        losses.append(loss.item())")


@pytest.mark.parametrize(
    "function, timing",
    [
        ("train", "torch.cuda.synchronize()\n        elapsed = time.perf_counter() - start"),
        ("train", "times.append(time.perf_counter() - start)"),
        ("benchmark_training", "elapsed = time.perf_counter() - start"),
    ],
    ids=["synchronized", "per-step-times-kept", "named-benchmark"],
)
def test_a_loop_that_times_its_steps_on_purpose_reads_back_with_a_hint(function, timing):
    source = TIMED_LOOP.format(function=function, timing=timing)
    found = findings(source, ("GL201",))
    assert [f.location.row for f in found] == [read_back_row(source)]
    assert found[0].hint is not None and "times its steps" in found[0].hint


@pytest.mark.parametrize(
    "function, timing",
    [
        # a clock read for a throughput log is no benchmark; nor is a name without a clock
        ("train", "elapsed = time.perf_counter() - start"),
        ("benchmark_training", "pass"),
    ],
    ids=["throughput-log", "name-alone"],
)
def test_a_loop_that_does_not_measure_its_steps_reads_back_without_a_hint(function, timing):
    source = TIMED_LOOP.format(function=function, timing=timing)
    if timing == "pass":
        source = source.replace("start = time.perf_counter()", "start = None")
    found = findings(source, ("GL201",))
    assert [f.location.row for f in found] == [read_back_row(source)]
    assert found[0].hint is None


@pytest.mark.parametrize("offload", ["vae.cpu()", 'vae.to("cpu")', "pass"], ids=["cpu", "to-cpu", "none"])
def test_a_model_moved_to_the_device_and_offloaded_in_the_same_step_has_a_hint(offload):
    source = f"""
    import torch
    device = torch.device("cuda")
    for batch in loader:
        latents = vae.to(device).encode(batch)
        loss = unet(latents).sum()
        loss.backward()
        optimizer.step()
        if args.offload:
            {offload}
    """
    found = findings(source, ("GL202",))
    assert [f.location.row for f in found] == [5]
    if offload == "pass":
        assert found[0].hint == rules_by_code()["GL202"].hint_by_default  # (GL202's reason, no offload one)
    else:
        assert found[0].hint is not None and "offload" in found[0].hint


def test_the_reads_after_the_first_of_one_statement_have_a_hint():
    source = """
    import torch
    device = torch.device("cuda")
    for real in loader:
        err_d = criterion(net_d(real.to(device, non_blocking=True)), ones)
        err_d.backward()
        optimizer_d.step()
        err_g = criterion(net_d(net_g(noise)), ones)
        err_g.backward()
        optimizer_g.step()
        d_x = err_d.item()
        print("%.4f %.4f" % (err_d.item(), err_g.item()))
    """
    found = findings(source, ("GL201",))
    assert [(f.location.row, f.hint is None) for f in found] == [(11, True), (12, True), (12, False)]
    assert "earlier read of the same statement" in found[2].hint
