"""`verify --param`: the source transform, the run order, and the choice (runs stubbed)."""

import io
import sys

import pytest

from gpulint.runtime_check import report
from gpulint.runtime_check import sweep as sweep_mod
from gpulint.runtime_check.measure import RunConfig
from gpulint.runtime_check.script_params import ParamError, set_param
from tests.runtime.helpers import measured_run

SOURCE = b"""import torch
from torch.utils.data import DataLoader
a = DataLoader(ds, batch_size=8, num_workers=1,)
b = torch.utils.data.DataLoader(ds)
c = other(ds, num_workers=1)
"""


def test_keyword_set_on_every_dataloader_call_and_nothing_else():
    copy = set_param(SOURCE, ["--x"], "num_workers", "4")
    fixed = copy.source
    assert copy.site.kind == "keyword" and copy.site.where == "DataLoader(num_workers=) x2"
    assert copy.site.current == "1" and copy.args == ["--x"]
    assert b"a = DataLoader(ds, batch_size=8, num_workers=4)" in fixed
    assert b"b = torch.utils.data.DataLoader(ds, num_workers=4)" in fixed
    assert b"c = other(ds, num_workers=1)" in fixed
    compile(fixed, "x.py", "exec")


def test_rotation_puts_each_value_first_as_often():
    order = sweep_mod.rotation(["0", "2", "4"], 3)
    assert order == ["0", "2", "4", "2", "4", "0", "4", "0", "2"]
    for position in range(3):
        assert sorted(order[position::3]) == ["0", "2", "4"]


@pytest.mark.parametrize("text", ["num_workers", "num_workers=2", "=1,2", "num_workers=1,(", "a b=1,2"])
def test_bad_params(text):
    with pytest.raises(sweep_mod.SweepError):
        sweep_mod.parse_param(text)


def test_best_value_is_measured_not_assumed(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_bytes(SOURCE)
    step_for = {"0": 0.30, "2": 0.10, "4": 0.12}

    def run_once(command, config, progress=None):
        assert command.target[0] == str(script)  # run from its own folder
        text = open(config.source).read()
        value = text.split("a = DataLoader(ds, batch_size=8, num_workers=")[1].split(")")[0]
        jitter = 1 + 0.003 * len(calls)  # runs of one value differ a little, as real runs do
        calls.append(value)
        return measured_run([step_for[value] * jitter] * 4)

    calls = []
    monkeypatch.setattr(sweep_mod, "run_once", run_once)
    result = sweep_mod.sweep(script, [], "num_workers=0,2,4", 3, RunConfig(), sys.executable)
    assert result.best.name == "2" and result.clearly_best
    assert script.read_bytes() == SOURCE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_a_runner_up_within_the_noise_is_not_clearly_beaten(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_bytes(SOURCE)
    times = iter([0.100, 0.104, 0.097, 0.103, 0.099, 0.101])  # rotation 2 4, 4 2, 2 4

    def run_once(command, config, progress=None):
        return measured_run([next(times)] * 4)

    monkeypatch.setattr(sweep_mod, "run_once", run_once)
    result = sweep_mod.sweep(script, [], "num_workers=2,4", 3, RunConfig(), sys.executable)
    assert result.best is not None and not result.clearly_best


def test_script_without_dataloader(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    with pytest.raises(sweep_mod.SweepError, match="no DataLoader"):
        sweep_mod.sweep(script, [], "num_workers=0,2", 2, RunConfig(), sys.executable)


BATCH_SOURCE = b"""import torch
from torch.utils.data import DataLoader
loader = DataLoader(ds, batch_size=16)
"""


@pytest.mark.parametrize("param", ["batch_size=32,32", "num_workers=2,2,4"])
def test_a_value_given_twice_is_measured_twice_and_reads_no_difference(param, tmp_path, monkeypatch):
    """An A/A sweep: each copy of the value gets its own runs (it ended in a traceback, no median
    of an empty list), and the same source run twice is no difference, whatever the runs say."""
    script = tmp_path / "train.py"
    script.write_bytes(BATCH_SOURCE if param.startswith("batch_size") else SOURCE)
    times = iter([0.100, 0.080, 0.101, 0.079, 0.102, 0.081, 0.099, 0.080, 0.100])  # the first copy always slower

    def run_once(command, config, progress=None):
        return measured_run([next(times)] * 4)

    monkeypatch.setattr(sweep_mod, "run_once", run_once)
    name, values = sweep_mod.parse_param(param)
    result = sweep_mod.sweep(script, [], param, 3, RunConfig(), sys.executable)
    assert [len(c.run_times) for c in result.candidates] == [3] * len(values)
    out = io.StringIO()
    report.print_sweep(report.Output(out, color=False), result)
    text = out.getvalue()
    if len(set(values)) == 1:
        assert result.same_run and not result.clearly_best
        assert "no difference" in text and "recommended" not in text, text
    else:
        assert "Traceback" not in text and f"{name}=" in text


KWARGS = b"""from torch.utils.data import DataLoader
loader_kwargs = {"batch_size": 8, "shuffle": True}
loader = DataLoader(ds, **loader_kwargs)
"""
KWARGS_ZERO = b"""from torch.utils.data import DataLoader
loader_kwargs = dict(batch_size=8, num_workers=0)
loader = DataLoader(ds, **loader_kwargs)
"""


def test_kwargs_dictionaries_take_the_setting():
    """`DataLoader(ds, **loader_kwargs)` had no call to set `num_workers` on: the dictionary
    literal the script builds takes it (or the call, when the dictionary does not have it)."""
    copy = set_param(KWARGS, [], "num_workers", "2")
    assert b"loader = DataLoader(ds, **loader_kwargs, num_workers=2)" in copy.source
    assert copy.site.current is None
    copy = set_param(KWARGS_ZERO, [], "num_workers", "2")
    assert b"loader_kwargs = dict(batch_size=8, num_workers=2)" in copy.source and copy.site.current == "0"
    held = (
        b'k = {"batch_size": 8, "num_workers": 0}\na = DataLoader(ds, **k)\nb = DataLoader(ds, **{"num_workers": 1})\n'
    )
    copy = set_param(held, [], "num_workers", "4")
    assert copy.source == b'k = {"batch_size": 8, "num_workers": 4}\na = DataLoader(ds, **k)\n' + (
        b'b = DataLoader(ds, **{"num_workers": 4})\n'
    )
    for source in (KWARGS, KWARGS_ZERO):
        compile(set_param(source, [], "num_workers", "2").source, "x.py", "exec")
    # keywords from something the script does not spell out: not guessed
    with pytest.raises(ParamError):
        set_param(b"k = make()\na = DataLoader(ds, **k)\n", [], "num_workers", "2")
    with pytest.raises(ParamError):
        set_param(b"a = DataLoader(*args)\n", [], "num_workers", "2")


def test_a_sweep_is_recorded_in_the_history_as_verify_records(tmp_path, monkeypatch):
    """`verify --param` measured and said its result, and the history had no trace of it."""
    from gpulint.cli import parse
    from gpulint.runtime_check import cli, html_report
    from gpulint.runtime_check.history import History

    script = tmp_path / "train.py"
    script.write_bytes(SOURCE)
    step_for = {"0": 0.30, "2": 0.10}
    calls = []

    def run_once(command, config, progress=None):
        text = open(config.source).read()
        value = text.split("a = DataLoader(ds, batch_size=8, num_workers=")[1].split(")")[0]
        calls.append(value)
        return measured_run([step_for[value] * (1 + 0.003 * len(calls))] * 4)  # runs differ a little

    monkeypatch.setattr(sweep_mod, "run_once", run_once)
    db = tmp_path / "history.db"
    argv = ["verify", str(script), "--param", "num_workers=0,2", "--runs", "3", "--history", str(db), "--", "--lr", "1"]
    assert cli.verify_command(parse(argv)) == 0
    with History.open(db, create=False) as history:
        (run,) = history.runs()
        run = history.load(run.id)
    assert run.kind == "sweep" and run.verdict == "num_workers=2 clearly best"
    assert run.command == f"gpulint verify {script} --param num_workers=0,2 -- --lr 1"
    assert [f.name for f in run.figures] == [
        "throughput, num_workers=0 (median of runs)",
        "throughput, num_workers=2 (median of runs)",
    ]
    assert run.figures[1].value == pytest.approx(10, rel=0.01) and run.figures[1].unit == "steps/s"
    page = html_report.render(run)
    assert "recommended: num_workers=2 -- clearly best" in page
    no_history = argv[:-3] + ["--no-history"] + argv[-3:]
    assert cli.verify_command(parse(no_history)) == 0
    with History.open(db, create=False) as history:
        assert len(history.runs()) == 1
