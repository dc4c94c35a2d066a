"""What the waste costs (costs.py): the arithmetic, the bases profile, verify and scale measure,
the price from the flag or [tool.gpulint], and the text and HTML reports -- an estimate, labelled
so, and no money figure without a price."""

from __future__ import annotations

import io
import sys
from types import SimpleNamespace

import pytest

from gpulint.linter.config import ConfigError, settings_from_table
from gpulint.runtime_check import costs, html_report, report
from gpulint.runtime_check.costs import CostBasis
from gpulint.runtime_check.measure import Command, ProcessRun
from gpulint.runtime_check.profile import Profile, measurements_of
from gpulint.runtime_check.verdict import decide
from gpulint.runtime_check.verify import Arm, VerifyResult, compare
from tests.runtime.helpers import measured_run, step_stats
from tests.runtime.test_html_report import gpu_run
from tests.runtime.test_runs import gpulint


def test_the_estimate_per_epoch_per_month_and_in_gpus():
    basis = CostBasis("waste", 0.5, 0.1, 8, 1000)
    headline, epoch, month, assumptions = costs.cost_lines(basis, 2.0)
    assert headline == "50% of the GPU time is wasted: worth 4.00 of your 8 GPUs"
    # 1000 steps x 0.1 s x 8 GPUs = 0.222 GPU-hours, half of it wasted, at $2
    assert epoch == "per epoch (1,000 steps of 100.0 ms on 8 GPUs): 0.22 GPU-hours, 0.11 wasted = $0.22"
    # 730 h x 8 GPUs = 5,840 GPU-hours, half wasted = 2,920 x $2
    assert month == "per month of continuous training (730 h on 8 GPUs): 5,840 GPU-hours, 2,920 wasted = $5,840"
    assert assumptions.startswith("assumptions: the waste is the share of each step not spent in compute")
    assert "$2.00 an hour" in assumptions and "steps per epoch" not in assumptions


def test_without_steps_per_epoch_the_month_stands_alone_and_says_why():
    lines = costs.cost_lines(CostBasis("saving", 0.75, 0.02, 1, None), 3.0)
    assert len(lines) == 3 and not any(line.startswith("per epoch") for line in lines)
    assert lines[0] == "75% of the GPU time is saved by the fix: worth 0.75 of your 1 GPU"
    assert "give --steps-per-epoch N" in lines[-1]


def profile_with(waits: list[float] | None, loader_batches: int | None = None, cuda: bool = True) -> Profile:
    run = measured_run([0.1] * 20, cuda=cuda)
    run.steps = step_stats([0.1] * 20, waits)
    run.processes = [ProcessRun(None, 1, run.steps, {"loader": {"batches": loader_batches}, "world_size": None})]
    result = Profile(run, "torch", command=Command(sys.executable, [], ["train.py"]))
    result.measurements = measurements_of(run, "torch")
    result.verdict = decide(result.measurements)
    return result


def test_profile_prices_the_share_not_in_compute_and_knows_the_epoch_from_the_loader():
    basis = costs.profile_basis(profile_with([0.04] * 20, loader_batches=500))
    assert basis is not None
    assert (basis.kind, basis.gpus, basis.steps_per_epoch) == ("waste", 1, 500)
    assert basis.share == pytest.approx(0.4) and basis.step_seconds == pytest.approx(0.1)
    given = costs.profile_basis(profile_with([0.04] * 20, loader_batches=500), gpus=64, steps_per_epoch=7)
    assert given is not None and (given.gpus, given.steps_per_epoch) == (64, 7)


def test_no_waste_is_priced_when_data_wait_was_not_measured():
    assert costs.profile_basis(profile_with(None)) is None


def test_a_cpu_only_run_is_not_priced_as_gpu_time():
    """A CPU run's 40% data wait is no share of GPU time: no "worth 0.4 of your 1 GPU"."""
    cpu = profile_with([0.04] * 20, loader_batches=500, cuda=False)
    assert not costs.on_accelerator(cpu.run) and costs.profile_basis(cpu) is None
    stream = io.StringIO()
    report.print_costs(report.Output(stream, color=False), None, 2.0, costs.NO_ACCELERATOR)
    assert "not estimated (no accelerator was measured" in stream.getvalue()


def test_verify_prices_only_a_confirmed_speedup_on_an_accelerator():
    cuda = True

    def arm(name: str, times: list[float]) -> Arm:
        runs = []
        for t in times:
            run = measured_run([t] * 10, cuda=cuda)
            run.processes = [ProcessRun(None, 1, run.steps, {})]
            runs.append(run)
        return Arm(name, runs)

    original, fixed = [0.100, 0.101, 0.099], [0.050, 0.051, 0.049]
    confirmed = VerifyResult("train.py", ["GL101"], 1, "", arm("original", original), arm("fixed", fixed), [])
    confirmed.comparison = compare(original, fixed)
    basis = costs.verify_basis(confirmed)
    assert basis is not None and basis.kind == "saving" and basis.share == pytest.approx(0.5, abs=0.01)
    same = VerifyResult("train.py", ["GL101"], 1, "", arm("original", original), arm("fixed", original), [])
    same.comparison = compare(original, original)
    assert costs.verify_basis(same) is None
    cuda = False
    on_cpu = VerifyResult("train.py", ["GL101"], 1, "", arm("original", original), arm("fixed", fixed), [])
    on_cpu.comparison = compare(original, fixed)
    assert on_cpu.comparison.outcome == "confirmed" and costs.verify_basis(on_cpu) is None


def scale_result(kind: str, cuda: bool = True) -> SimpleNamespace:
    size = SimpleNamespace(nproc=4, breakdown=lambda: {"step_time": 0.2}, runs=[measured_run([0.2] * 5, cuda=cuda)])
    return SimpleNamespace(
        failed=None, efficiencies=[SimpleNamespace(nproc=4, value=0.7, outcome="below")], sizes=[size], kind=kind
    )


def test_scale_prices_the_loss_against_linear_at_the_largest_size():
    basis = costs.scale_basis(scale_result("below linear"))
    assert basis is not None and (basis.kind, basis.gpus) == ("scaling loss", 4)
    assert basis.share == pytest.approx(0.3)


def test_an_inconclusive_or_cpu_scaling_result_is_not_priced():
    """ "inconclusive, run more repeats" and "$6,445/month lost to scaling" in one output: no more."""
    assert costs.scale_basis(scale_result("inconclusive")) is None
    assert costs.scale_basis(scale_result("below linear", cuda=False)) is None


def test_a_size_within_the_noise_of_the_bar_is_not_priced():
    """2 processes below the bar, 4 within its noise: the result is "below linear", but the loss at
    4 processes was not measured; the loss at 2 is what is priced."""
    result = scale_result("below linear")
    two = SimpleNamespace(nproc=2, breakdown=lambda: {"step_time": 0.15}, runs=result.sizes[0].runs)
    result.sizes.insert(0, two)
    result.efficiencies = [
        SimpleNamespace(nproc=2, value=0.8, outcome="below"),
        SimpleNamespace(nproc=4, value=0.6, outcome="within noise"),
    ]
    basis = costs.scale_basis(result)
    assert basis is not None and basis.gpus == 2 and basis.share == pytest.approx(0.2)
    result.efficiencies = [SimpleNamespace(nproc=4, value=0.6, outcome="within noise")]
    assert costs.scale_basis(result) is None


def test_the_text_report_prints_the_estimate_only_with_a_price():
    stream = io.StringIO()
    report.print_costs(report.Output(stream), CostBasis("waste", 0.5, 0.1, 2), None, "")
    assert stream.getvalue() == ""
    report.print_costs(report.Output(stream), CostBasis("waste", 0.5, 0.1, 2), 2.5, "")
    text = stream.getvalue()
    assert "What it costs (an estimate, at $2.50 per GPU-hour)" in text and "worth 1.00 of your 2 GPUs" in text
    stream = io.StringIO()
    report.print_costs(report.Output(stream), None, 2.5, "no confirmed speed-up to price")
    assert stream.getvalue().strip() == "What it costs: not estimated (no confirmed speed-up to price)"


def test_the_html_report_shows_the_estimate_with_a_price_only():
    run = gpu_run(1, 20.0)
    run.meta["cost"] = CostBasis("waste", 0.4, 0.02, 8, 1000).as_meta()
    assert "What it costs" not in html_report.render(run)
    page = html_report.render(run, price=2.5)
    assert "What it costs" in page and "worth 3.20 of your 8 GPUs" in page and "$2.50" in page
    run.meta["cost"] = None
    assert "Not estimated" in html_report.render(run, price=2.5)


@pytest.mark.parametrize(
    ("field", "value"),
    [("share", "0.4 <script>"), ("gpus", [8]), ("steps_per_epoch", "1000"), ("kind", 3)],
)
def test_a_stored_cost_of_the_wrong_type_is_refused(field, value):
    run = gpu_run(1, 20.0)
    run.meta["cost"] = {**CostBasis("waste", 0.4, 0.02, 8, 1000).as_meta(), field: value}
    with pytest.raises(html_report.ReportError, match=rf"^cannot draw run 1: meta\.cost\.{field} is "):
        html_report.render(run, price=2.5)


@pytest.mark.parametrize(
    "meta",
    [
        {"kind": "waste", "share": 1.5, "step_seconds": 0.1, "gpus": 1, "steps_per_epoch": None},
        {"kind": "waste", "share": 0.5, "step_seconds": 0.0, "gpus": 1, "steps_per_epoch": None},
        {"kind": "waste", "share": 0.5, "step_seconds": 0.1, "gpus": 0, "steps_per_epoch": None},
        {"kind": "free lunch", "share": 0.5, "step_seconds": 0.1, "gpus": 1, "steps_per_epoch": None},
    ],
)
def test_a_stored_cost_out_of_its_range_is_not_priced(meta):
    assert costs.basis_from_meta(meta) is None


def test_the_price_comes_from_the_configuration(tmp_path):
    assert settings_from_table({"gpu-hour-price": 2}, tmp_path / "pyproject.toml").gpu_hour_price == 2.0
    for bad in (0, -1, "2.5", True, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="gpu-hour-price"):
            settings_from_table({"gpu-hour-price": bad}, tmp_path / "pyproject.toml")
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\ngpu-hour-price = 1.75\n")
    assert costs.configured_price(tmp_path) == 1.75


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--gpu-hour-price", "-2"], "argument --gpu-hour-price: must be a number above 0, not '-2'"),
        (["--gpu-hour-price", "nan"], "argument --gpu-hour-price: must be a number above 0, not 'nan'"),
        (["--gpu-hour-price", "2e6"], "--gpu-hour-price must be a price in USD per GPU-hour above 0"),
        (["--gpus", "0"], "--gpus must be at least 1"),
        (["--steps-per-epoch", "0"], "--steps-per-epoch must be at least 1"),
        (["--data-fn", "get batch"], "--data-fn 'get batch': give a function name"),
        (["--sample-interval", "0"], "argument --sample-interval: must be a number above 0, not '0'"),
        (["--sample-interval", "20000"], "--sample-interval must be between 1 and 10000 milliseconds"),
    ],
)
def test_bad_values_are_refused_before_the_run(tmp_path, option, message):
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('the script ran')\n")
    done = gpulint(tmp_path, "profile", "--no-history", *option, "--", sys.executable, str(script))
    assert done.returncode == 2 and message in done.stderr and "the script ran" not in done.stderr + done.stdout
