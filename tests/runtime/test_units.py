"""Step accounting, A/B statistics, command parsing, NVML absence: no child processes."""

import sys
from pathlib import Path

import pytest

from gpulint.runtime_check import bootstrap, nvml
from gpulint.runtime_check.measure import CommandError, analyze_steps, parse_command
from gpulint.runtime_check.report import NOT_MEASURED, sparkline
from gpulint.runtime_check.verify import compare, interleaved

HERE = Path(__file__).parent


class Child:
    """The bootstrap's State fed events at given times, as the child process would see them."""

    def __init__(self, monkeypatch, warmup: int = 1) -> None:
        self.now = 0.0
        monkeypatch.setattr(bootstrap, "clock", lambda: self.now)
        self.state = bootstrap.State({"out": "unused", "warmup": warmup})
        monkeypatch.setattr(bootstrap, "STATE", self.state)

    def at(self, now: float) -> "Child":
        self.now = now
        return self

    def step(self, now: float, optimizer: object = "SGD") -> None:
        self.at(now).state.optimizer_step(optimizer)

    def fetch(self, start: float, end: float) -> None:
        self.at(end).state.fetch(start, end)

    def tf_fetch(self, start: float, end: float, ok: bool = True) -> None:
        self.at(start).state.tf_fetch_start(start)
        self.at(end).state.tf_fetch_end(start, ok)

    def steps(self):
        return analyze_steps(self.state.result("stopped", 0, None))


def test_data_wait_assigned_to_the_step_it_delays(monkeypatch):
    # Step ends at 1, 2, 3, 4; before each step a fetch of 0.25 s, before step 3 two fetches.
    child = Child(monkeypatch)
    child.fetch(0.5, 0.75)
    child.step(1.0)
    child.fetch(1.5, 1.75)
    child.step(2.0)
    child.fetch(2.1, 2.2)
    child.fetch(2.5, 2.6)
    child.step(3.0)
    child.fetch(3.5, 3.75)
    child.step(4.0)
    stats = child.steps()
    assert stats.times == pytest.approx([1.0, 1.0, 1.0])
    assert stats.data_waits == pytest.approx([0.25, 0.2, 0.25])
    assert stats.data_share == pytest.approx(0.7 / 3)
    assert stats.batches == 4
    assert stats.window == (1.0, 4.0)


def test_warmup_steps_are_not_timed(monkeypatch):
    child = Child(monkeypatch, warmup=3)
    for now in [0.0, 5.0, 6.0, 6.5, 7.0, 7.5]:
        child.step(now)
    stats = child.steps()
    assert stats.times == pytest.approx([0.5, 0.5, 0.5])  # after the end of step 3 (t=6)
    assert stats.total == 6 and stats.count == 3
    assert stats.data_waits is None and "no DataLoader" in stats.data_note


def test_the_most_frequent_optimizer_paces_the_step(monkeypatch):
    child = Child(monkeypatch)
    sgd, adam = object(), object()
    for now in [1.0, 2.0, 3.0, 4.0]:
        child.step(now, sgd)
        if now in (2.0, 4.0):
            child.step(now + 0.1, adam)
    stats = child.steps()
    assert stats.count == 3 and stats.optimizers == {"object": 6}
    assert stats.times == pytest.approx([1.0, 1.0, 1.0])


def test_tf_batches_end_when_the_next_batch_is_asked_for(monkeypatch):
    # Epoch 1: 3 batches then StopIteration; epoch 2: 1 batch, then the next request at 6.0.
    child = Child(monkeypatch)
    for start, end, ok in [(0.0, 0.1, True), (1.0, 1.2, True), (2.0, 2.1, True), (3.0, 3.0, False), (4.0, 4.3, True)]:
        child.tf_fetch(start, end, ok)
    child.at(6.0).state.tf_fetch_start(6.0)
    stats = child.steps()
    assert stats.source == "tf.data batches"
    # Step ends: 1.0, 2.0, 3.0 (epoch end), 6.0; the epoch gap (3.0 -> 4.0) is not a step end.
    assert stats.total == 4
    assert stats.times == pytest.approx([1.0, 1.0, 3.0])
    assert stats.data_waits == pytest.approx([0.2, 0.1, 0.3])  # each fetch waits in the step it starts


def test_keras_batches_have_no_data_wait_figure(monkeypatch):
    child = Child(monkeypatch)
    for now in [1.0, 2.0, 3.5]:
        child.at(now).state.keras_batch_end()
    stats = child.steps()
    assert stats.source == "Keras batches" and stats.data_waits is None and "not measured" in stats.data_note


def test_nothing_stepped_is_none(monkeypatch):
    child = Child(monkeypatch)
    child.fetch(0.0, 1.0)
    assert child.steps() is None


def test_a_long_run_is_kept_in_bounded_memory_with_exact_totals(monkeypatch):
    child = Child(monkeypatch)
    steps = 3 * bootstrap.SERIES_CAP + 5
    now = 0.0
    for i in range(steps + 1):  # the first step end is the warm-up
        child.fetch(now, now + 0.001)
        now += 0.01 if i % 2 else 0.03
        child.step(now)
    stats = child.steps()
    assert stats.count == steps and stats.total_time == pytest.approx(now - 0.03)
    assert len(stats.series) <= bootstrap.SERIES_CAP and stats.width == 4
    assert sum(n for n, _, _ in stats.series) == steps
    assert stats.data_share == pytest.approx(steps * 0.001 / stats.total_time)
    assert len(stats.sample) == bootstrap.SERIES_CAP  # a uniform sample: both step lengths are in it
    assert stats.quantile(0.1) == pytest.approx(0.01) and stats.quantile(0.9) == pytest.approx(0.03)
    assert stats.times[0] == pytest.approx(0.02)  # each point is the mean of 4 steps


def test_interleaving_alternates_who_goes_first():
    assert interleaved(3) == ["A", "B", "B", "A", "A", "B"]


def test_compare_outcomes():
    assert compare([1.0, 1.1, 1.05], [0.5, 0.55, 0.52]).outcome == "confirmed"
    assert compare([0.5, 0.55, 0.52], [1.0, 1.1, 1.05]).outcome == "slowdown"
    same = compare([1.0, 1.2, 0.9, 1.1], [1.05, 0.95, 1.15, 1.0])
    assert same.outcome == "not confirmed" and "includes 1" in same.reason
    result = compare([2.0, 2.2], [1.0, 1.1])
    assert result.speedup == pytest.approx(2.0)  # ratio of geometric means
    assert result.interval[0] <= result.speedup <= result.interval[1]


def test_clear_ranges_alone_are_not_evidence():
    # Every fixed run faster than every original run, by less than the runs' own spread.
    result = compare([1.00, 1.08, 1.04], [0.95, 0.99, 0.97])
    assert result.outcome == "not confirmed"


def test_parse_command_forms(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    assert parse_command([str(script), "--lr", "3"]).target == [str(script), "--lr", "3"]
    command = parse_command([sys.executable, "-u", "-X", "dev", str(script), "-v"])
    assert command.options == ["-u", "-X", "dev"] and command.target == [str(script), "-v"]
    assert parse_command([sys.executable, "-m", "pkg.train", "--x"]).target == ["-m", "pkg.train", "--x"]
    for bad in (
        [],
        ["torchrun", "train.py"],
        [sys.executable, "-c", "pass"],
        [sys.executable, str(tmp_path / "missing.py")],
    ):
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


def test_samplers_keep_a_bounded_list_over_a_long_run():
    from gpulint.runtime_check import cpu

    sampler = cpu.CpuSampler(pid=0, interval=0.25, cores=2)
    for i in range(3 * cpu.SAMPLES_CAP):  # main process: half a core; one worker: a full core
        sampler.samples.add(cpu.CpuSample(0.25 * i, 0.125 * i, {7: 0.25 * i}, [50.0, 100.0]))
    assert len(sampler.samples) < cpu.SAMPLES_CAP and sampler.samples.stride == 4
    gaps = {round(b.t - a.t, 6) for a, b in zip(sampler.samples, sampler.samples[1:], strict=False)}
    assert gaps == {1.0}  # evenly spaced: every item covers four raw samples
    summary = cpu.summarize(sampler, None, None)
    assert summary.main_cores == pytest.approx(0.5) and summary.worker_cores == pytest.approx(1.0)
    assert summary.per_core == pytest.approx([50.0, 100.0])
    assert summary.main_series == pytest.approx([0.5] * len(summary.times))
    gpu = nvml.GpuSampler(devices=["GPU"], mem_total=[100])
    for i in range(3 * nvml.SAMPLES_CAP):
        gpu.samples.add(nvml.GpuSample(0.2 * i, [100 * (i % 2)], [i]))
    assert len(gpu.samples) < nvml.SAMPLES_CAP
    summary = nvml.summarize(gpu, None, None)
    assert summary.util_mean == pytest.approx(50.0)
    assert summary.mem_peak_fraction == pytest.approx((3 * nvml.SAMPLES_CAP - 1) / 100)


def test_workers_that_exit_between_two_listings_still_count():
    """A loader started again every epoch: its workers live between two listings of the descendants
    and are never seen; the time the kernel adds to the parent when it waits for them is counted."""
    from gpulint.runtime_check import cpu

    sampler = cpu.CpuSampler(pid=0, interval=0.25, cores=4)
    for i in range(9):  # main: one core; unseen workers: two cores, reaped as they go
        sampler.samples.add(cpu.CpuSample(0.25 * i, 0.25 * i, {}, [50.0] * 4, descendants=0.5 * i))
    summary = cpu.summarize(sampler, None, None)
    assert summary.main_cores == pytest.approx(1.0) and summary.worker_cores == pytest.approx(2.0)
    assert summary.worker_series == pytest.approx([2.0] * 8) and summary.other_cores == pytest.approx(0.0)
    # Where the kernel gives no children's time (the counter has the listed alone), the listed count.
    sampler = cpu.CpuSampler(pid=0, interval=0.25, cores=4)
    for i in range(9):
        seen = {7: 0.25 * i} if i < 5 else {}  # seen for a second, then gone
        sampler.samples.add(cpu.CpuSample(0.25 * i, 0.25 * i, seen, [50.0] * 4, descendants=sum(seen.values())))
    assert cpu.summarize(sampler, None, None).worker_cores == pytest.approx(0.5)


def test_a_real_worker_process_is_counted_after_it_exits(tmp_path):
    """A child that burns CPU for a moment and is waited for before the sampler lists it."""
    import subprocess
    import sys

    from gpulint.runtime_check import cpu

    script = tmp_path / "parent.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "time.sleep(0.6)\n"
        "for _ in range(3):\n"
        "    subprocess.run([sys.executable, '-c', 'import time\\nend = time.process_time() + 0.3\\n"
        "while time.process_time() < end: pass'])\n"
        "time.sleep(0.6)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)])
    sampler = cpu.CpuSampler(pid=parent.pid, interval=0.1).start()
    parent.wait(timeout=60)
    sampler.stop()
    summary = cpu.summarize(sampler, None, None)
    assert summary is not None and summary.workers <= 3
    span = sampler.samples[-1].t - sampler.samples[0].t
    assert summary.worker_cores * span > 0.6  # 0.9 s of the children's CPU (listed or not)


def test_one_exit_code_for_each_kind_of_failed_run():
    from gpulint.runtime_check.cli import run_exit_code
    from gpulint.runtime_check.measure import EXIT_NO_STEPS, EXIT_TIMEOUT, RunResult

    assert run_exit_code(RunResult("cmd", "timeout", EXIT_TIMEOUT, 1.0)) == EXIT_TIMEOUT
    assert run_exit_code(RunResult("cmd", "finished", 0, 1.0)) == EXIT_NO_STEPS  # ended before a measured step
    assert run_exit_code(RunResult("cmd", "stopped", 0, 1.0)) == EXIT_NO_STEPS
    assert run_exit_code(RunResult("cmd", "exit", 7, 1.0)) == 7  # the script's own code is passed on
    assert run_exit_code(RunResult("cmd", "error", 0, 1.0)) == 1  # a failure never exits 0
