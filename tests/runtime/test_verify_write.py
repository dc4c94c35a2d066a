"""`verify --write` writes only after a confirmed speedup (runs stubbed with fixed step times)."""

import sys

import pytest

from gpulint.runtime_check import verify as verify_mod
from gpulint.runtime_check.measure import RunConfig
from tests.runtime.helpers import measured_run

SOURCE = b"""import torch
from torch.utils.data import DataLoader
device = torch.device("cuda")
if __name__ == "__main__":
    loader = DataLoader(load_images("data"))  # a dataset read from disk (not in memory)
    for x in loader:
        opt.step()
"""


def fake_runs(monkeypatch, original: float, fixed: float):
    runs = []

    def run_once(command, config, progress=None):
        step = fixed if config.source else original
        runs.append(step)
        return measured_run([step * (1 + 0.01 * len(runs))] * 4)  # runs differ a little, as real ones do

    monkeypatch.setattr(verify_mod, "run_once", run_once)


@pytest.mark.parametrize("original, fixed, written", [(0.2, 0.1, True), (0.1, 0.1, False), (0.1, 0.2, False)])
def test_write_only_after_confirmed_speedup(tmp_path, monkeypatch, original, fixed, written):
    script = tmp_path / "train.py"
    script.write_bytes(SOURCE)
    fake_runs(monkeypatch, original, fixed)
    result = verify_mod.verify(script, [], ["GL101"], 3, RunConfig(), sys.executable, write=True)
    assert result.written is written
    assert (script.read_bytes() != SOURCE) is written
    if written:
        assert b"num_workers=" in script.read_bytes()
        compile(script.read_bytes(), str(script), "exec")


def test_nothing_to_fix_is_an_error(tmp_path):
    script = tmp_path / "train.py"
    script.write_bytes(b"import torch\nprint(1)\n")
    with pytest.raises(verify_mod.VerifyError, match="nothing to fix"):
        verify_mod.verify(script, [], ["GL101"], 2, RunConfig(), sys.executable)


def test_a_fix_that_changes_no_executed_line_is_no_difference(tmp_path, monkeypatch):
    """An A/A by construction: nothing to time, and no run is made to find a change."""
    script = tmp_path / "train.py"
    script.write_bytes(SOURCE)
    relaid = SOURCE.replace(b"opt.step()", b"opt.step()  # the same call")
    monkeypatch.setattr(verify_mod, "fix_script", lambda script, codes: (SOURCE, relaid, 1, ["GL101"]))
    monkeypatch.setattr(verify_mod, "run_once", lambda *args, **kwargs: pytest.fail("no run is needed"))
    with pytest.raises(verify_mod.VerifyError, match="no difference to measure"):
        verify_mod.verify(script, [], ["GL101"], 3, RunConfig(), sys.executable)
    assert verify_mod.same_program(SOURCE, relaid)
    assert not verify_mod.same_program(SOURCE, SOURCE.replace(b"opt.step()", b"pass"))


def test_write_refuses_a_linked_script_before_any_run(tmp_path, monkeypatch):
    """As `--fix` does not write through a link named on the command line, `--write` does not
    write the target of a linked script: refused before the first run, the target unchanged."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "train.py"
    target.write_bytes(SOURCE)
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").symlink_to(target)
    runs: list[object] = []
    monkeypatch.setattr(verify_mod, "run_once", lambda *args, **kwargs: runs.append(args))
    with pytest.raises(verify_mod.VerifyError, match="symbolic link"):
        verify_mod.verify(project / "train.py", [], ["GL101"], 3, RunConfig(), sys.executable, write=True)
    assert runs == []
    assert target.read_bytes() == SOURCE
