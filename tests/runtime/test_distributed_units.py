"""Launcher parsing, per-rank figures, the scaling verdict and parameter setting, on synthetic
inputs (no child processes)."""

import os
import random
import stat
import statistics
import sys
from pathlib import Path

import pytest

from gpulint.runtime_check import distributed, html_report, launchers, profile, records, scale, sweep, verdict
from gpulint.runtime_check.attribution import Attribution, Phase
from gpulint.runtime_check.cli import EXIT_INCONCLUSIVE, scale_exit_code
from gpulint.runtime_check.history import History
from gpulint.runtime_check.measure import Command, CommandError, ProcessRun, RunConfig, RunResult, parse_command
from gpulint.runtime_check.script_params import ParamError, set_param
from tests.runtime.helpers import step_stats

BIN = os.path.dirname(sys.executable)


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("pass\n")
    return str(path)


# -- launchers ------------------------------------------------------------------------------
def test_torchrun_is_split_around_the_script(script):
    launch, target = launchers.parse_launch(
        [os.path.join(BIN, "torchrun"), "--nproc-per-node", "2", "--standalone", script, "--lr", "3"]
    )
    assert launch.name == "torchrun" and launch.nproc == 2
    assert launch.prefix[1:] == ["--nproc-per-node", "2", "--standalone"] and target == [script, "--lr", "3"]
    command = Command(launch.prefix[0], [], target, launch)
    assert command.argv("BOOT") == [*launch.prefix, "BOOT", script, "--lr", "3"]
    assert command.script == Path(script)


def test_python_m_torch_distributed_run_with_a_module(script):
    launch, target = launchers.parse_launch(
        [sys.executable, "-u", "-m", "torch.distributed.run", "--nproc_per_node=4", "-m", "pkg.train", "--x"]
    )
    assert launch.prefix[1:] == ["-u", "-m", "torch.distributed.run", "--nproc_per_node=4"]
    assert target == ["-m", "pkg.train", "--x"] and launch.nproc == 4  # the bootstrap runs the module


def test_accelerate_launch(tmp_path, script, monkeypatch):
    accelerate = tmp_path / "bin" / "accelerate"
    accelerate.parent.mkdir()
    accelerate.write_text("#!/bin/sh\n")
    accelerate.chmod(accelerate.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(accelerate.parent) + os.pathsep + os.environ["PATH"])
    launch, target = launchers.parse_launch(
        [
            "accelerate",
            "launch",
            "--multi_gpu",
            "--num-processes",
            "2",
            "--mixed_precision",
            "bf16",
            script,
            "--epochs",
            "1",
        ]
    )
    assert launch.name == "accelerate launch" and launch.nproc == 2 and target == [script, "--epochs", "1"]
    assert launch.prefix == [
        str(accelerate),
        "launch",
        "--multi_gpu",
        "--num-processes",
        "2",
        "--mixed_precision",
        "bf16",
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["torchrun", "--no-python", "train.sh"], "non-Python"),
        (["torchrun", "--run-path", "train.py"], "inside the launcher"),
        (["python", "-m", "torch.distributed.launch", "train.py"], "deprecated"),
        (["torchrun", "--nproc-per-node", "2"], "no training script"),
        (["torchrun", "missing.py"], "does not exist"),
    ],
)
def test_launcher_errors_are_one_line(argv, message, monkeypatch):
    monkeypatch.setenv("PATH", BIN + os.pathsep + os.environ["PATH"])
    with pytest.raises(CommandError, match=message):
        parse_command(argv)


def test_not_a_launcher(script):
    assert launchers.parse_launch([sys.executable, script]) is None
    assert parse_command([sys.executable, script]).launch is None


def test_torchrun_flags_are_in_step_with_torchs_parser():
    from torch.distributed.run import get_args_parser

    flags = {launchers._option_name(o) for a in get_args_parser()._actions if a.nargs == 0 for o in a.option_strings}
    assert flags - {"h", "help"} <= launchers.TORCHRUN_FLAGS


# -- per-rank figures ----------------------------------------------------------------------
def rank_process(
    rank: int,
    step: float,
    waits: tuple[float, float],
    steps: int = 10,
    start: float = 1.0,
    data: float = 0.001,
    times: list[float] | None = None,
) -> ProcessRun:
    """A rank whose DDP timers say it waited `waits[0]` s per step (of `waits[1]` s all-reduce),
    and that waited `data` s per step for its batches; its steps take `step` s each, or `times`."""
    if times is not None:
        steps, step = len(times), sum(times) / len(times)
    stats = step_stats(
        times or [step] * steps,
        [data] * steps,
        warmup=3,
        samples=8 * steps,
        window=(start, start + step * steps),
        batches=steps,
    )
    end = start + step * steps
    # Running means (ns) times the iteration count: 100 iterations before the window, `steps` in it.
    first = [start, 100, 5_000_000, 5_000_000 - 1_000_000]
    total_comm = 100 * 5_000_000 + steps * waits[1] * 1e9
    total_exposed = 100 * 1_000_000 + steps * waits[0] * 1e9
    n = 100 + steps
    last = [end, n, total_comm / n, (total_comm - total_exposed) / n]
    report = {
        "rank": rank,
        "world_size": 2,
        "ddp": [
            {
                "config": {"backend_name": "gloo", "find_unused_parameters": 1},
                "reads": [[start - 1, 50, 1, 1], first, last],
            }
        ],
    }
    return ProcessRun(rank, 1000 + rank, stats, report)


def launched(*processes: ProcessRun) -> RunResult:
    run = RunResult("torchrun train.py", "stopped", 0, 9.0, steps=processes[0].steps)
    run.processes = list(processes)
    return run


def test_collective_wait_from_ddp_timers():
    wait, allreduce, note = distributed.collective_times(rank_process(0, 0.1, (0.03, 0.05)))
    assert wait == pytest.approx(0.03) and allreduce == pytest.approx(0.05) and "DDP" in note


def test_rank_report_calls_out_the_straggler():
    # Rank 1 waits least: it arrives last at every all-reduce.
    report = distributed.rank_report(launched(rank_process(0, 0.1, (0.03, 0.05)), rank_process(1, 0.1, (0.002, 0.02))))
    assert report.slowest == 1 and "rank 1 works 28.0 ms per step longer than the other" in report.slowest_note
    assert report.collective_share == pytest.approx((0.3 + 0.02) / 2)
    assert report.ranks[0].samples_per_step == 8 and report.ddp_config["backend_name"] == "gloo"
    even = distributed.rank_report(launched(rank_process(0, 0.1, (0.03, 0.05)), rank_process(1, 0.1, (0.029, 0.05))))
    assert even.slowest is None and even.slowest_note.startswith("none")


def test_an_excess_within_the_noise_of_the_step_times_is_no_straggler():
    """Two healthy ranks, 50 ms steps, one snapshot in the window that every rank waits for: rank 1
    works 4.2 ms a step more on average -- over 5% of a step, but one step's spike, well within the
    noise of the per-rank step times."""
    times = [0.05] * 19 + [0.134]
    quiet = distributed.rank_report(
        launched(
            rank_process(0, 0, (0.0052, 0.01), times=times),
            rank_process(1, 0, (0.001, 0.01), times=times),
        )
    )
    assert quiet.slowest is None and "within the noise" in quiet.slowest_note, quiet.slowest_note
    # The same average excess on every step is beyond the noise: a straggler.
    rng = random.Random(7)
    steady = [0.05 + rng.gauss(0, 0.001) for _ in range(20)]
    loud = distributed.rank_report(
        launched(
            rank_process(0, 0, (0.0052, 0.01), times=steady),
            rank_process(1, 0, (0.001, 0.01), times=steady),
        )
    )
    assert loud.slowest == 1 and loud.slowest_excess == pytest.approx(0.0042)
    # Too few steps to know the noise: no straggler is called.
    short = distributed.rank_report(
        launched(
            rank_process(0, 0, (0.0052, 0.01), times=steady[:8]), rank_process(1, 0, (0.001, 0.01), times=steady[:8])
        )
    )
    assert short.slowest is None and "too few measured steps" in short.slowest_note


def stepped_rank(rank: int, times: list[float], waits: list[float], start: float = 1.0) -> ProcessRun:
    """A rank whose DDP timers were read at every step end: it waited waits[i] s at the all-reduce
    of step i (of times[i] s); 100 iterations ran before the window, waiting 1 ms each."""
    stats = step_stats(times, [0.001] * len(times), warmup=3, window=(start, start + sum(times)))
    ends, exposed = [start], [100 * 1_000_000.0]
    for step, wait in zip(times, waits, strict=True):
        ends.append(ends[-1] + step)
        exposed.append(exposed[-1] + wait * 1e9)
    iterations = [100 + i for i in range(len(ends))]
    # the running means DDP logs: all-reduce time, and the part of it that overlapped (none)
    reads = [[t, n, e / n, 0.0] for t, n, e in zip(ends, iterations, exposed, strict=True)]
    waits_read = [[t, e] for t, e in zip(ends, exposed, strict=True)]
    report = {
        "rank": rank,
        "world_size": 2,
        "ddp": [{"config": {}, "reads": [reads[0], reads[-1]], "waits": waits_read}],
    }
    return ProcessRun(rank, 1000 + rank, stats, report)


def test_a_steady_straggler_on_a_busy_machine_is_told_step_by_step():
    """MoCo on two ranks beside busy neighbours: the steps took 0.2 to 0.6 s, the same for both
    ranks, and rank 1 worked 40 ms more in every one.  Against the noise of each rank's mean step
    time (+-157 ms) that read as no straggler; step by step the busy machine cancels."""
    rng = random.Random(3)
    times = [rng.uniform(0.2, 0.6) for _ in range(30)]
    report = distributed.rank_report(
        launched(
            stepped_rank(0, times, [0.04 + rng.gauss(0, 0.003) for _ in times]), stepped_rank(1, times, [0.0] * 30)
        )
    )
    assert report.ranks[0].own_times is not None and len(report.ranks[0].own_times) == 30
    assert report.slowest == 1, report.slowest_note
    assert report.slowest_excess == pytest.approx(0.04, abs=0.003)
    # One slow step of rank 0's (a checkpoint every rank waits for) is still no straggler.
    spike = [0.0] * 29 + [1.2]
    once = distributed.rank_report(launched(stepped_rank(0, times, [0.0] * 30), stepped_rank(1, times, spike)))
    assert once.slowest is None and "step-by-step difference" in once.slowest_note, once.slowest_note


def test_a_straggler_is_called_only_for_work_seen_in_its_measured_steps():
    """The timers' excess must show as a phase of the slow rank's measured steps (sampled stacks)
    that grew against the others': else it is no straggler, and the note says why."""
    rng = random.Random(7)
    steady = [0.05 + rng.gauss(0, 0.001) for _ in range(20)]

    def ranks():
        return distributed.rank_report(
            launched(rank_process(0, 0, (0.0052, 0.01), times=steady), rank_process(1, 0, (0.001, 0.01), times=steady))
        )

    def sampled(other: float) -> Attribution:
        return Attribution(
            100, 0.02, [Phase("compute", 1 - other, looks=90), Phase("other host work", other, looks=10)]
        )

    seen = ranks()
    note = profile.straggler_note(seen, {0: sampled(0.0), 1: sampled(0.08)})
    assert seen.slowest == 1 and note.startswith("its other host work takes 4.0 ms a step more")
    unseen = ranks()
    assert profile.straggler_note(unseen, {0: sampled(0.0), 1: sampled(0.0)}) == ""
    assert unseen.slowest is None and unseen.slowest_excess is None
    assert "no phase of its measured steps grew" in unseen.slowest_note
    # a rank whose stack was not sampled: the timers alone decide
    untold = ranks()
    assert profile.straggler_note(untold, {1: sampled(0.0)}) == "" and untold.slowest == 1


def test_collectives_outside_ddp_are_not_measured():
    process = rank_process(0, 0.1, (0.0, 0.0))
    process.report["ddp"] = []
    report = distributed.rank_report(launched(process, rank_process(1, 0.1, (0.0, 0.0))))
    assert report.ranks[0].collective_wait is None and report.slowest is None
    assert "not timed" in report.collective_note


def test_single_process_has_no_rank_report():
    run = RunResult("python train.py", "stopped", 0, 1.0)
    run.processes = [ProcessRun(None, 1, None, {})]
    assert distributed.rank_report(run) is None


def test_communication_advice_follows_the_ddp_settings():
    advice = distributed.communication_advice({"backend_name": "gloo", "find_unused_parameters": 1}, True, 0.2, True)
    codes = [a.code for a in advice]
    assert codes[:2] == ["GL602", "GL603"] and "GL604" in codes and "GL605" in codes
    assert any("bucket_cap_mb" in a.action for a in advice) and any("comm_hook" in a.action for a in advice)
    assert [a.code for a in distributed.communication_advice(None, False, 0.0, False)] == ["", ""]


def test_communication_advice_acts_on_bytes_when_the_all_reduce_is_large():
    """A 16 MB gradient is bandwidth-bound: what cuts the bytes comes first, and
    find_unused_parameters (graph traversal, not bytes) comes after every fix that does."""
    large = {"backend_name": "gloo", "find_unused_parameters": 1, "total_parameter_size_bytes": 16 << 20}
    large["bucket_cap_bytes"] = 25 << 20
    assert distributed.communication_kind(large) == "bandwidth"
    advice = distributed.communication_advice(large, False, 0.0, False)
    assert "compress gradients" in advice[0].action and "16.0 MiB" in advice[0].action
    assert [a.code for a in advice][-1] == "GL604"


def test_communication_advice_sends_fewer_messages_when_the_all_reduce_is_small():
    """84 bytes a step: the collective's fixed cost, not its bytes: nothing that cuts bytes."""
    tiny = {"backend_name": "gloo", "find_unused_parameters": 0, "total_parameter_size_bytes": 84}
    tiny["bucket_cap_bytes"] = 25 << 20
    assert distributed.communication_kind(tiny) == "latency"
    advice = distributed.communication_advice(tiny, True, 0.0, False)
    assert [a.code for a in advice][0] == "GL603"
    assert "fewer, larger all-reduces" in advice[1].action and "84 bytes" in advice[1].action
    assert not any("compress" in a.action or "GL604" == a.code for a in advice)
    assert distributed.communication_kind({"backend_name": "gloo"}) is None


def test_verdict_is_communication_bound_from_ten_percent_collective_wait():
    m = verdict.Measurements("torch", 20, 0.1, data_share=0.01, collective_share=0.25)
    v = verdict.decide(m)
    assert v.kind == "communication-bound" and "fix communication first" in v.advice
    assert v.compute_share == pytest.approx(0.74)
    assert (
        verdict.decide(verdict.Measurements("torch", 20, 0.1, data_share=0.01, collective_share=0.05)).kind
        != "communication-bound"
    )


# -- scaling verdict -----------------------------------------------------------------------
def test_thresholds_are_the_methods():
    assert scale.threshold(2) == pytest.approx(0.9) and scale.threshold(4) == pytest.approx(0.8)


def test_ratio_interval_brackets_the_point():
    point, low, high = scale.ratio_interval([100.0, 104.0, 98.0], [190.0, 195.0, 185.0], 2)
    geomean = statistics.geometric_mean
    assert point == pytest.approx(geomean([190, 195, 185]) / (2 * geomean([100, 104, 98]))) and low < point < high


def test_two_runs_a_size_are_not_taken_for_certainty():
    # Runs 10% apart at each size: a bootstrap of medians over 2 runs put the bar (90%) outside its
    # interval; the spread between runs says 93% could be noise.
    point, low, high = scale.ratio_interval([100.0, 110.0], [186.0, 205.0], 2)
    assert low < scale.threshold(2) < high


def sized(
    nproc: int, step: float, runs: int = 3, collective: float = 0.0, jitter: float = 0.002, data: float = 0.001
) -> scale.SizeRuns:
    size = scale.SizeRuns(nproc)
    for i in range(runs):
        t = step + jitter * (i - 1)
        processes = [rank_process(r, t, (collective, collective + 0.01), data=data * t / step) for r in range(nproc)]
        size.runs.append(launched(*processes))
    return size


def judged(*sizes: scale.SizeRuns, mode: str = "weak") -> scale.ScaleResult:
    result = scale.ScaleResult("train.py", mode, list(sizes), [])
    scale.judge(result)
    return result


def test_near_linear_weak_scaling_scales():
    result = judged(sized(1, 0.100), sized(2, 0.102))
    assert result.unit == "samples/s"
    assert result.efficiencies[0].outcome == "near linear" and result.efficiencies[0].value == pytest.approx(
        100 / 102, rel=1e-4
    )
    assert result.kind == "scales" and "more GPUs will help" in result.advice


def test_collective_wait_growth_is_communication_bound():
    result = judged(sized(1, 0.100, collective=0.001), sized(2, 0.180, collective=0.080))
    efficiency = result.efficiencies[0]
    assert efficiency.outcome == "below" and efficiency.interval[1] < 0.9
    assert result.kind == "communication-bound"
    assert any(r.startswith("collective wait: +79.0 ms") for r in result.reasons)
    # find_unused_parameters=True in the DDP settings: offered, after what acts on the all-reduce
    assert [r.code for r in result.recommendations][-1] == "GL604"


def test_strong_scaling_measures_against_the_ideal_step():
    # Global batch fixed: the per-rank batch halves, so the ideal step at 2 is half the step at 1.
    result = judged(sized(1, 0.100), sized(2, 0.051), mode="strong")
    assert result.kind == "scales"


def test_noise_around_the_bar_is_inconclusive():
    result = judged(sized(1, 0.100, jitter=0.01), sized(2, 0.111, jitter=0.01))
    assert result.efficiencies[0].outcome == "within noise" and result.kind == "inconclusive"
    assert scale_exit_code(result) == EXIT_INCONCLUSIVE


def test_starved_ranks_that_scale_are_not_a_case_for_more_gpus():
    """Ranks that wait for data 91% of every step scale near-linearly, because each starves alone."""
    result = judged(sized(1, 0.100, data=0.091), sized(2, 0.101, data=0.092))
    assert result.efficiencies[0].outcome == "near linear"
    assert result.kind == "input-bound" and "more GPUs will help" not in result.advice
    assert any("wait 91% of every step for data" in r for r in result.reasons)
    assert result.recommendations[0].code == "GL605"
    assert scale_exit_code(result) == 1


def test_ranks_busy_with_checkpoints_that_scale_are_host_bound():
    """Each rank saves a checkpoint in 70% of its step: it scales, and more GPUs would save more."""
    result = scale.ScaleResult("train.py", "weak", [sized(1, 0.100), sized(2, 0.101)], [])
    for size in result.sizes:
        for run in size.runs:
            run.processes[0].report["stacks"] = {
                "interval": 0.002,
                "looks": 2,
                "seconds": 1.0,
                "stacks": [
                    {"fetch": "", "frames": [["train.py", 20, 1], "torch.save"], "seconds": 0.7},
                    {"fetch": "", "frames": [["train.py", 15, 1], "backward"], "seconds": 0.3},
                ],
            }
    scale.judge(result)
    assert result.efficiencies[0].outcome == "near linear"
    assert result.kind == "host-bound"
    assert any("spend 70% of every step on checkpoint writes" in r for r in result.reasons)
    assert result.recommendations[0].code == "GL303"


def test_scale_exit_codes_tell_below_from_inconclusive():
    assert scale_exit_code(judged(sized(1, 0.100), sized(2, 0.102))) == 0
    below = judged(sized(1, 0.100, collective=0.001), sized(2, 0.180, collective=0.080))
    assert scale_exit_code(below) == 1


@pytest.mark.parametrize("command", ["profile", "verify", "scale", "history", "compare", "report"])
def test_every_command_says_its_exit_codes_in_help(command, capsys):
    from gpulint.cli import main

    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Exit codes: 0 " in text and "2 usage error" in text


def test_scale_record_holds_every_figure():
    result = judged(sized(1, 0.100), sized(2, 0.102))
    record = scale.scale_record(result)
    assert record["kind"] == "scale" and record["verdict"] == "scales"
    assert [s["nproc"] for s in record["sizes"]] == [1, 2] and record["sizes"][1]["collective_wait"] is not None
    assert record["efficiencies"][0]["threshold"] == pytest.approx(0.9)
    assert [f.name for f in result.figures] == ["throughput at 1", "throughput at 2", "efficiency at 2"]


def test_a_scaling_run_is_kept_in_the_history_and_renders(tmp_path):
    result = judged(sized(1, 0.100), sized(2, 0.180, collective=0.080))
    command = Command(sys.executable, [], [str(tmp_path / "train.py"), "--lr", "3"])
    stored = records.scale_run_record(result, command, ["--nproc", "1,2"], 1.7e9, 60.0)
    with History.open(tmp_path / "history.db") as history:
        loaded = history.load(history.record(stored))
    assert (loaded.kind, loaded.verdict) == ("scale", "communication-bound")
    assert loaded.figure("efficiency at 2").value == pytest.approx(result.efficiencies[0].value)
    assert [s.name for s in loaded.series] == ["throughput_1", "throughput_2"] and len(loaded.series[1].y) == 3
    page = html_report.render(loaded)
    assert "communication-bound" in page and "efficiency at 2" in page and "throughput per run" in page


@pytest.mark.parametrize("text", ["1", "0,2", "a,b", ""])
def test_bad_sizes(text):
    with pytest.raises(scale.ScaleError):
        scale.parse_sizes(text)


def test_scale_refuses_launchers_and_uneven_strong_batches(script):
    config = RunConfig(steps=5, warmup=2)
    launch = launchers.Launch("torchrun", ["torchrun"], 2)
    with pytest.raises(scale.ScaleError, match="not a launcher"):
        scale.scale(Command("torchrun", [], [script], launch), [1, 2], 2, config)
    with pytest.raises(scale.ScaleError, match="divide evenly"):
        scale.scale(Command(sys.executable, [], [script]), [1, 3], 2, config, strong="batch_size=64")


# -- setting a parameter in a script -------------------------------------------------------
ARGPARSE = b"""import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float)
"""


def test_argparse_default_is_set_in_the_copy():
    copy = set_param(ARGPARSE, ["--lr", "0.1"], "batch_size", "64")
    assert b'add_argument("--batch-size", type=int, default=64)' in copy.source
    assert copy.args == ["--lr", "0.1"] and copy.site.where == "--batch-size (argparse)" and copy.site.current == "32"


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--batch-size", "16"], ["--batch-size", "64"]),
        (["--batch-size=16", "--lr", "1"], ["--batch-size=64", "--lr", "1"]),
    ],
)
def test_argparse_value_given_in_the_arguments_is_replaced(args, expected):
    copy = set_param(ARGPARSE, args, "batch_size", "64")
    assert copy.args == expected and copy.source == ARGPARSE and copy.site.current == "16"


def test_constant_then_dataloader_keyword():
    constant = set_param(b"BATCH_SIZE = 32\ndef f():\n    batch_size = 1\n", [], "batch_size", "128")
    assert constant.source == b"BATCH_SIZE = 128\ndef f():\n    batch_size = 1\n"
    assert constant.site.where == "constant BATCH_SIZE" and constant.site.current == "32"
    keyword = set_param(b"loader = DataLoader(ds, batch_size=8)\n", [], "batch_size", "16")
    assert keyword.source == b"loader = DataLoader(ds, batch_size=16)\n" and keyword.site.current == "8"
    with pytest.raises(ParamError, match="no argparse option --batch-size"):
        set_param(b"x = 1\n", [], "batch_size", "16")


def test_sweep_treats_out_of_memory_as_a_result(tmp_path, monkeypatch):
    path = tmp_path / "train.py"
    path.write_bytes(ARGPARSE)
    seconds = {"32": 0.10, "64": 0.12}
    calls = []

    def run_once(command, config, progress=None):
        size = (
            command.target[command.target.index("--batch-size") + 1]
            if "--batch-size" in command.target
            else Path(config.source).read_text().split("default=")[1].split(")")[0]
        )  # the value's source
        calls.append(size)
        if size == "128":
            error = {"type": "OutOfMemoryError", "message": "CUDA out of memory"}
            return RunResult("cmd", "error", 1, 1.0, error=error)
        result = RunResult("cmd", "stopped", 0, 1.0)
        result.steps = step_stats([seconds[size]] * 4, warmup=2, samples=4 * int(size))
        return result

    monkeypatch.setattr(sweep, "run_once", run_once)
    result = sweep.sweep(path, [], "batch_size=32,64,128", 2, RunConfig(), sys.executable)
    assert calls.count("128") == 1  # out of memory once is a result: not run again
    assert result.failed is None and [c.out_of_memory for c in result.candidates] == [False, False, True]
    assert result.unit == "samples/s" and result.best.value == "64"
    assert result.batch.recommended == "64" and any("out of memory at 128" in line for line in result.batch.lines)
    assert any("multiply it by 2 (64/32" in line for line in result.batch.lines)
