"""The phase timers the ground-truth scripts time themselves with (benchmarks/ground_truth/
phase_timers.py), run as benchmarks/runtime_ground_truth.py runs a script: what they write at exit."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "runtime_ground_truth.py"
spec = importlib.util.spec_from_file_location("runtime_ground_truth_env", HARNESS)
assert spec is not None and spec.loader is not None
harness = importlib.util.module_from_spec(spec)
sys.modules["runtime_ground_truth_env"] = harness  # (dataclasses look their module up by name)
spec.loader.exec_module(harness)

# Two steps of a script: data, then compute with a collective nested in it.  The collective sleeps,
# the compute around it does not.
SCRIPT = """
import time
import phase_timers
from phase_timers import new_step, timed

phase_timers.start(("data", "compute", "collectives", "logging"), per_rank={per_rank})
for step in range(2):
    with timed("data"):
        pass
    with timed("compute"):
        with timed("collectives"):
            time.sleep(0.2)
    new_step()
"""


def run_script(tmp_path: Path, env: dict[str, str], per_rank: bool) -> None:
    script = textwrap.dedent(SCRIPT).format(per_rank=per_rank)
    environment = harness.script_environment({"GT_TIMERS": str(tmp_path / "timers.json"), **env})
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("per_rank, rank, written", [(False, None, "timers.json"), (True, "1", "timers.json.rank1")])
def test_the_timers_written_at_exit_per_phase_and_per_step(tmp_path, per_rank, rank, written):
    run_script(tmp_path, {"RANK": rank} if rank else {}, per_rank)
    assert [p.name for p in tmp_path.iterdir()] == [written]
    timers = json.loads((tmp_path / written).read_text())
    # every phase named, even one never timed, then the steps and each step's phases
    assert list(timers) == ["data", "compute", "collectives", "logging", "steps", "per_step"]
    assert timers["steps"] == 2 and timers["logging"] == 0.0
    # a bucket from each optimizer step to the next (the first from the start), and an empty one
    # after the last
    *steps, after_last = timers["per_step"]
    assert len(steps) == 2 and after_last == {}
    for phase in ("data", "compute", "collectives"):
        assert timers[phase] == pytest.approx(sum(step[phase] for step in steps))
    # an inner phase's time is its own, not also its outer's
    for step in steps:
        assert step["collectives"] >= 0.2 > step["compute"]


def test_no_file_without_gt_timers(tmp_path):
    environment = harness.script_environment({})
    environment.pop("GT_TIMERS", None)
    script = textwrap.dedent(SCRIPT).format(per_rank=False)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == []
