"""Step accounting, A/B statistics, command parsing, NVML absence: no child processes."""

import sys
from pathlib import Path

import pytest

from gpulint.runtime_check import nvml
from gpulint.runtime_check.measure import CommandError, analyze_steps, parse_command
from gpulint.runtime_check.report import NOT_MEASURED, sparkline
from gpulint.runtime_check.verify import compare, interleaved

HERE = Path(__file__).parent


def child_data(**overrides):
    data = {"warmup": 1, "optimizers": [], "loader_fetches": [], "tf_fetches": [], "keras_batch_ends": [],
            "stop_time": None, "syncs": {}}
    data.update(overrides)
    return data


def test_data_wait_assigned_to_the_step_it_delays():
    # Step ends at 1, 2, 3, 4; before each step a fetch of 0.25 s, before step 3 two fetches.
    fetches = [(0.5, 0.75), (1.5, 1.75), (2.1, 2.2), (2.5, 2.6), (3.5, 3.75)]
    stats = analyze_steps(child_data(optimizers=[{"name": "SGD", "times": [1.0, 2.0, 3.0, 4.0]}], loader_fetches=fetches))
    assert stats.times == pytest.approx([1.0, 1.0, 1.0])
    assert stats.data_waits == pytest.approx([0.25, 0.2, 0.25])
    assert stats.data_share == pytest.approx(0.7 / 3)
    assert stats.batches == 4
    assert stats.window == (1.0, 4.0)


def test_warmup_steps_are_not_timed():
    stats = analyze_steps(child_data(warmup=3, optimizers=[{"name": "SGD", "times": [0.0, 5.0, 6.0, 6.5, 7.0, 7.5]}]))
    assert stats.times == pytest.approx([0.5, 0.5, 0.5])  # after the end of step 3 (t=6)
    assert stats.total == 6 and stats.count == 3


def test_the_most_frequent_optimizer_paces_the_step():
    sgd = {"name": "SGD", "times": [1.0, 2.0, 3.0, 4.0]}
    adam = {"name": "Adam", "times": [2.0, 4.0]}
    stats = analyze_steps(child_data(optimizers=[adam, sgd]))
    assert stats.count == 3 and stats.optimizers == {"Adam": 2, "SGD": 4}


def test_tf_batches_end_when_the_next_batch_is_asked_for():
    # Epoch 1: 3 batches then StopIteration; epoch 2: 1 batch, then stopped by the profiler at 6.0.
    fetches = [(0.0, 0.1, True), (1.0, 1.2, True), (2.0, 2.1, True), (3.0, 3.0, False), (4.0, 4.3, True)]
    stats = analyze_steps(child_data(tf_fetches=fetches, stop_time=6.0))
    assert stats.source == "tf.data batches"
    # Step ends: 1.0, 2.0, 3.0 (epoch end), 6.0; the epoch gap (3.0 -> 4.0) is not a step end.
    assert stats.total == 4
    assert stats.times == pytest.approx([1.0, 1.0, 3.0])


def test_keras_batches_have_no_data_wait_figure():
    stats = analyze_steps(child_data(keras_batch_ends=[1.0, 2.0, 3.5]))
    assert stats.source == "Keras batches" and stats.data_waits is None and "not measured" in stats.data_note


def test_nothing_stepped_is_none():
    assert analyze_steps(child_data(loader_fetches=[(0.0, 1.0)])) is None


def test_interleaving_alternates_who_goes_first():
    assert interleaved(3) == ["A", "B", "B", "A", "A", "B"]


def test_compare_outcomes():
    assert compare([1.0, 1.1, 1.05], [0.5, 0.55, 0.52]).outcome == "confirmed"
    assert compare([0.5, 0.55, 0.52], [1.0, 1.1, 1.05]).outcome == "slowdown"
    same = compare([1.0, 1.2, 0.9, 1.1], [1.05, 0.95, 1.15, 1.0])
    assert same.outcome == "not confirmed" and not same.ranges_clear
    result = compare([2.0, 2.2], [1.0, 1.1])
    assert result.speedup == pytest.approx(2.1 / 1.05)
    assert result.interval[0] <= result.speedup <= result.interval[1]


def test_parse_command_forms(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    assert parse_command([str(script), "--lr", "3"]).target == [str(script), "--lr", "3"]
    command = parse_command([sys.executable, "-u", "-X", "dev", str(script), "-v"])
    assert command.options == ["-u", "-X", "dev"] and command.target == [str(script), "-v"]
    assert parse_command([sys.executable, "-m", "pkg.train", "--x"]).target == ["-m", "pkg.train", "--x"]
    for bad in ([], ["torchrun", "train.py"], [sys.executable, "-c", "pass"], [sys.executable, str(tmp_path / "missing.py")]):
        with pytest.raises(CommandError):
            parse_command(bad)


def test_nvml_absent_is_not_measured(monkeypatch):
    sampler = nvml.GpuSampler(interval=0.01).start()
    sampler.stop()
    if sampler.samples:
        pytest.skip("this machine has a working NVML")
    assert sampler.unavailable and nvml.summarize(sampler, None, None) is None
    # Without the package at all:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    missing = nvml.GpuSampler().start()
    assert missing.unavailable == "pynvml (nvidia-ml-py) is not installed" and not missing.measured


def test_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    assert nvml.visible_device_indices(4) == [1, 3]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert nvml.visible_device_indices(4) == []
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert nvml.visible_device_indices(2) == [0, 1]


def test_sparkline():
    assert sparkline([0, 100]) == "▁█"
    assert len(sparkline(list(range(1000)), width=40)) == 40
    assert sparkline([]) == "" and NOT_MEASURED == "not measured"


def test_one_exit_code_for_each_kind_of_failed_run():
    from gpulint.runtime_check.cli import run_exit_code
    from gpulint.runtime_check.measure import EXIT_NO_STEPS, EXIT_TIMEOUT, RunResult

    assert run_exit_code(RunResult("cmd", "timeout", EXIT_TIMEOUT, 1.0)) == EXIT_TIMEOUT
    assert run_exit_code(RunResult("cmd", "finished", 0, 1.0)) == EXIT_NO_STEPS  # ended before a measured step
    assert run_exit_code(RunResult("cmd", "stopped", 0, 1.0)) == EXIT_NO_STEPS
    assert run_exit_code(RunResult("cmd", "exit", 7, 1.0)) == 7  # the script's own code is passed on
    assert run_exit_code(RunResult("cmd", "error", 0, 1.0)) == 1  # a failure never exits 0
