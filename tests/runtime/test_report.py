"""The terminal report: runnable commands, honest wording, plain tables that never wrap."""

import io
import os
import sys
from pathlib import Path

import pytest

from gpulint.runtime_check import report
from gpulint.runtime_check.cli import verify_launch
from gpulint.runtime_check.measure import Command, CommandError, ProcessRun, parse_command
from gpulint.runtime_check.profile import LintHit, Profile, measurements_of
from gpulint.runtime_check.verdict import decide
from tests.runtime.helpers import measured_run


def profile_of(command: Command, cuda: bool = False, codes: tuple[str, ...] = ("GL102", "GL101")) -> Profile:
    run = measured_run([0.1] * 20, cuda=cuda)
    # a DataLoader read in the loop (its wait not measured): the DataLoader fixes can act on it
    run.processes = [ProcessRun(None, 1, run.steps, {"loader": {"num_workers": 0, "persistent_workers": False}})]
    result = Profile(run, "torch", command=command)
    result.measurements = measurements_of(run, "torch")
    result.verdict = decide(result.measurements)
    result.lint = [LintHit(code, 9, "finding", True) for code in codes]
    return result


def test_the_suggested_verify_has_the_real_arguments_and_can_show_an_effect_here():
    command = Command(sys.executable, [], ["train.py", "--lr", "0.1 x"])
    assert report.suggested_verify(profile_of(command)) == "gpulint verify train.py --select GL101 -- --lr '0.1 x'"
    assert (
        report.suggested_verify(profile_of(command, cuda=True, codes=("GL102",)))
        == "gpulint verify train.py --select GL102 -- --lr '0.1 x'"
    )
    # the verdict's first fix, not the first line the linter found
    assert (
        report.suggested_verify(profile_of(command, cuda=True))
        == "gpulint verify train.py --select GL101 -- --lr '0.1 x'"
    )
    assert report.suggested_verify(profile_of(command, codes=("GL999",))) is None  # a fix the verdict does not name
    assert (
        report.suggested_verify(profile_of(Command(sys.executable, [], ["train.py"])))
        == "gpulint verify train.py --select GL101"
    )
    assert report.suggested_verify(profile_of(Command("/opt/py/bin/python3", [], ["t.py"]))).endswith(
        "--python /opt/py/bin/python3"
    )
    assert report.suggested_verify(profile_of(Command(sys.executable, [], ["-m", "pkg.train"]))) is None


def test_the_suggested_verify_of_a_launched_run_keeps_the_launcher(tmp_path, monkeypatch):
    """It used to drop `--nproc-per-node` and measure one rank."""
    monkeypatch.chdir(tmp_path)
    # torchrun is found on PATH, as in an activated environment (the suite may run as .venv/bin/python).
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    (tmp_path / "train.py").write_text("")
    launched = parse_command(["torchrun", "--standalone", "--nproc-per-node", "2", "train.py", "--lr", "1"])
    suggestion = report.suggested_verify(profile_of(launched))
    assert suggestion == (
        "gpulint verify train.py --select GL101 --launcher 'torchrun --standalone --nproc-per-node 2' -- --lr 1"
    )
    launch = verify_launch("torchrun --standalone --nproc-per-node 2", Path("train.py"))
    assert launch.nproc == 2 and launch.prefix[-2:] == ["--nproc-per-node", "2"]
    with pytest.raises(CommandError, match="not a launcher"):
        verify_launch("python", Path("train.py"))


def test_the_profile_report_says_how_the_run_ended_and_never_wraps():
    out = io.StringIO()
    report.print_profile(report.Output(out, color=False), profile_of(Command(sys.executable, [], ["train.py", "-x"])))
    text = out.getvalue()
    assert "stopped after 20 measured steps" in text and "stopped: stopped" not in text
    assert "\033[" not in text
    row = next(line for line in text.splitlines() if line.startswith("steps "))
    assert row.endswith("optimizer steps; 1 warm-up step(s) skipped; stopped after 20 measured steps")


def test_tables_align_and_keep_long_cells_on_one_line():
    lines = report.table_lines("T", ["a", "value"], [["x" * 150, "1.0 ms"], ["y", "12.5 ms"]], right=(1,))
    assert lines[0] == "T" and len(lines) == 5
    assert lines[3].endswith(" 1.0 ms") and lines[4].endswith("12.5 ms") and len(lines[3]) == len(lines[4])
    assert report.Output(io.StringIO()).color is False  # not a terminal


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_redrawn_at_a_terminal_and_logged_every_30_seconds_elsewhere(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(report.time, "monotonic", lambda: clock[0])
    terminal = Terminal()
    progress = report.Progress(terminal)
    clock[0] += 1
    progress({"steps": 2, "warmup": 5})
    clock[0] += 1
    progress({"steps": 900, "warmup": 5, "seconds": 600, "measure_start": 90.0})
    progress.close()
    assert terminal.getvalue() == (
        "\r\033[Kgpulint profile: warm-up: step 2 of 5"
        "\r\033[Kgpulint profile: measuring: 895 steps, 12 of 600 s\r\033[K"
    )
    log = io.StringIO()
    progress = report.Progress(log)
    for _ in range(90):  # 90 s, a state every second
        clock[0] += 1
        progress({"steps": 50, "warmup": 5, "steps_wanted": 100, "measure_start": 100.0})
    assert log.getvalue().count("\n") == 3 and "measuring: step 45 of 100" in log.getvalue()


@pytest.mark.parametrize(
    ("batches", "says"),
    [(1500, "gradient accumulation (2 batches per optimizer step)"), (214, "no accumulation")],
)
def test_batches_per_step_is_accumulation_only_near_a_whole_number(batches, says):
    """A `next(iter(loader))` once an epoch makes 1.07 batches a step: read as no accumulation."""
    result = profile_of(Command(sys.executable, [], ["train.py"]))
    result.run.steps.count, result.run.steps.batches = 200 if batches == 214 else 750, batches
    out = io.StringIO()
    report.print_profile(report.Output(out, color=False), result)
    row = next(line for line in out.getvalue().splitlines() if line.startswith("batches per step"))
    assert says in row, row
    assert ("gradient accumulation" in row) == (batches == 1500)
