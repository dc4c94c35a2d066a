"""`verify --param`: the source transform, the run order, and the choice (runs stubbed)."""

import sys

import pytest

from gpulint.runtime_check import sweep as sweep_mod
from gpulint.runtime_check.measure import RunConfig, RunResult, StepStats
from gpulint.runtime_check.script_params import set_param

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
        text = open(command.target[0]).read()
        value = text.split("a = DataLoader(ds, batch_size=8, num_workers=")[1].split(")")[0]
        result = RunResult("cmd", "stopped", 0, 1.0)
        result.steps = StepStats("optimizer steps", 5, 1, [step_for[value]] * 4, None)
        return result

    monkeypatch.setattr(sweep_mod, "run_once", run_once)
    result = sweep_mod.sweep(script, [], "num_workers=0,2,4", 2, RunConfig(), sys.executable)
    assert result.best.value == "2" and result.clearly_best
    assert script.read_bytes() == SOURCE


def test_script_without_dataloader(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    with pytest.raises(sweep_mod.SweepError, match="no DataLoader"):
        sweep_mod.sweep(script, [], "num_workers=0,2", 2, RunConfig(), sys.executable)
