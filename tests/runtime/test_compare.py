"""`gpulint compare` and the regression gate on recorded runs built by hand."""

import io

from gpulint.runtime_check.compare import (
    NOISE_NOTE,
    STEP_TIME,
    differences,
    print_compare,
    print_history,
    regression_gate,
    spread_between_runs,
)
from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.history import History
from gpulint.runtime_check.report import Output
from tests.runtime.test_history import run_record


def step_time(record):
    return record.figure(STEP_TIME)


def test_a_change_beyond_only_the_runs_own_noise_is_not_established():
    """Within-run noise is a lower bound of what a rerun changes: two runs of an unchanged script
    differ beyond it often, so without the spread between runs nothing is better or worse."""
    a, b = run_record(0.020), run_record(0.024)
    a.id, b.id = 1, 2
    rows = {d.name: d for d in differences(None, a, b)}
    d = rows[STEP_TIME]
    assert d.relative == 0.2 and d.basis == "within the runs" and d.beyond_noise
    assert d.direction == "" and d.outcome == "not established"
    assert rows["GPU utilization (mean)"].change is None and rows["GPU utilization (mean)"].direction == ""
    out = io.StringIO()
    print_compare(Output(out, color=False), a, b, list(rows.values()))
    text = out.getvalue()
    assert "+20.0%" in text and "not established" in text and "worse" not in text.replace(NOISE_NOTE, "")
    assert NOISE_NOTE in text
    assert all(len(line) <= 400 for line in text.splitlines())


def test_with_three_recorded_runs_the_noise_between_runs_is_used(tmp_path):
    with History.open(tmp_path / "h.db") as history:
        for value in (0.020, 0.022, 0.018, 0.021):
            history.record(run_record(value))
        new = run_record(0.023)
        history.record(new)
        baseline = history.resolve("last", like=new)
        spread = spread_between_runs(history, baseline, STEP_TIME)
        assert spread is not None and spread[1] == 4  # the baseline and the runs before it, not the new run
        assert spread_between_runs(history, history.load(2), STEP_TIME) is None  # two runs up to run 2
        d = {d.name: d for d in differences(history, baseline, new)}[STEP_TIME]
        assert d.basis == "between 4 runs" and d.beyond_noise is False  # +9.5%, the runs differ as much


def test_the_gate_fails_only_beyond_the_allowance_and_the_noise():
    baseline, slower = run_record(0.020), run_record(0.024)
    baseline.id, slower.id = 1, 2
    gate = regression_gate(None, slower, baseline, 10)
    assert gate.failed and gate.line.startswith("gpulint: REGRESSION: step time 24.0 ms vs 20.0 ms in run 1: +20.0%")
    assert not regression_gate(None, slower, baseline, 25).failed
    assert "within the allowance" in regression_gate(None, slower, baseline, 25).line
    noisy = run_record(0.024)
    noisy.id = 3
    noisy.figures[0] = Figure(STEP_TIME, 0.024, "s", better="lower", noise=0.006)
    gate = regression_gate(None, noisy, baseline, 10)
    assert not gate.failed and "within the noise" in gate.line
    unknown = run_record(0.030)
    unknown.figures[0] = Figure(STEP_TIME, 0.030, "s", better="lower")
    assert not regression_gate(None, unknown, baseline, 10).failed
    assert "cannot be told from noise" in regression_gate(None, unknown, baseline, 10).line
    assert regression_gate(None, slower, baseline, None).line.startswith("gpulint: compared: ")


def test_history_listing_is_one_line_per_run():
    runs = [run_record(0.02, git_commit="a" * 40, git_dirty=True, verdict="input-bound (high)")]
    runs[0].id = 7
    out = io.StringIO()
    print_history(Output(out, color=False), runs, "h.db")
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[2].startswith(" 7  ") and "aaaaaaaaaa+" in lines[2] and "20.0 ms" in lines[2]
