"""The profiler's verdict against training scripts that time their own phases
(tests/runtime/ground_truth/train.py): for each built-in bottleneck the verdict must name the
phase the script's own timers show dominant, and the first fix must be one that changes that phase.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpulint.runtime_check.launchers import Launch, torchrun_prefix
from gpulint.runtime_check.measure import Command, RunConfig
from gpulint.runtime_check.profile import profile
from gpulint.runtime_check.verdict import INPUT_HIGH, INPUT_MODERATE

SCRIPT = Path(__file__).parent / "ground_truth" / "train.py"
PHASES = ("data", "compute", "checkpoint", "logging", "validation", "hostsync", "respawn")
# The script's dominant phase -> (verdict kind, its detail, the rule of the first fix)
EXPECTED = {
    "data": ("input-bound", None, "GL101"),
    "compute": ("compute-bound", None, None),
    "checkpoint": ("host-bound", "checkpoint writes", "GL303"),
    "logging": ("host-bound", "logging", "GL302"),
    "validation": ("host-bound", "validation", "GL301"),
    "hostsync": ("sync-bound", None, "GL201"),
    "respawn": ("host-bound", "loader start-up", "GL103"),
}
CASES = {
    "healthy": "compute",
    "loader": "data",
    "checkpoint": "checkpoint",
    "logging": "logging",
    "validation": "validation",
    "hostsync": "hostsync",
    "respawn": "respawn",
}


def dominant(timers: dict) -> str:
    return max(PHASES, key=lambda name: timers[name])


@pytest.mark.slow
@pytest.mark.parametrize("bottleneck", sorted(CASES))
def test_verdict_names_the_phase_the_script_measured(bottleneck, tmp_path, monkeypatch):
    timers_path = tmp_path / "timers.json"
    monkeypatch.setenv("GT_BOTTLENECK", bottleneck)
    monkeypatch.setenv("GT_TIMERS", str(timers_path))
    result = profile(Command(sys.executable, [], [str(SCRIPT)]), RunConfig(steps=30, warmup=3, timeout=300))
    assert result.verdict is not None, result.run.output_tail
    timers = json.loads(timers_path.read_text())
    phase = dominant(timers)
    assert phase == CASES[bottleneck], f"the script's own timers: {timers}"
    kind, detail, rule = EXPECTED[phase]
    verdict = result.verdict
    assert verdict.kind == kind, (verdict.headline, verdict.reasons, timers)
    if detail is not None:
        assert verdict.severity == detail
    if rule is not None:
        first = verdict.recommendations[0]
        assert first.code == rule, [r.code for r in verdict.recommendations]
    if phase == "data":  # the timers' data wait and the profiler's agree
        measured = result.run.steps.data_share
        assert measured is not None and measured > 0.5
    elif phase == "respawn":  # next() waits for the first batch and, at an epoch's end, the workers' exit
        measured = result.run.steps.data_share
        by_timers = timers["data"] / sum(timers[name] for name in PHASES)
        assert measured is not None and abs(measured - by_timers) < 0.1, (measured, timers)
    else:  # no training data wait is made of validation batches
        assert (result.run.steps.data_share or 0.0) < 0.2


def launched_profile(tmp_path, monkeypatch, bottleneck: str, **env: str):
    timers_path = tmp_path / "timers.json"
    monkeypatch.setenv("GT_BOTTLENECK", bottleneck)
    monkeypatch.setenv("GT_TIMERS", str(timers_path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    launch = Launch("torchrun", torchrun_prefix(2, sys.executable), 2)
    result = profile(Command(sys.executable, [], [str(SCRIPT)], launch), RunConfig(steps=20, warmup=3, timeout=300))
    assert result.verdict is not None, result.run.output_tail
    return result, timers_path


@pytest.mark.slow
@pytest.mark.timed  # (two ranks on the cores: a test beside them starves one, which reads as a straggler)
def test_a_large_all_reduce_is_communication_bound(tmp_path, monkeypatch):
    """Every step all-reduces a 16 MB parameter and no rank works longer than the other."""
    result, _ = launched_profile(tmp_path, monkeypatch, "collective")
    verdict = result.verdict
    assert verdict.kind == "communication-bound", (verdict.headline, verdict.reasons)
    assert result.ranks is not None and result.ranks.collective_share is not None
    assert result.ranks.collective_share >= 0.10


@pytest.mark.slow
@pytest.mark.timed  # (two ranks on the cores, against each other)
def test_straggler_is_its_own_verdict(tmp_path, monkeypatch):
    """Rank 1 works GT_STRAGGLE_MS more each step; the all-reduce itself is short: the verdict is
    the straggler, not communication, and it names rank 1."""
    result, timers_path = launched_profile(tmp_path, monkeypatch, "straggler", GT_STRAGGLE_MS="40")
    rank1 = json.loads(Path(f"{timers_path}.rank1").read_text())
    assert rank1["straggle"] > 0.2 * rank1["compute"]  # the script's own view: rank 1 straggles
    verdict = result.verdict
    assert verdict.kind == "straggler", (verdict.headline, verdict.reasons)
    assert verdict.severity == "rank 1"
    assert "balance the work" in verdict.advice
    assert not any("bucket" in r.action or "compress" in r.action for r in verdict.recommendations)


CUSTOM_SCRIPT = Path(__file__).parent / "ground_truth" / "custom_batch.py"
KERAS_SCRIPT = Path(__file__).parent / "ground_truth" / "keras_fit.py"
DATALOADER_FIXES = {"GL101", "GL102", "GL103", "GL104", "GL105"}


def own_profile(script: Path, bottleneck: str, tmp_path, monkeypatch, **config):
    timers_path = tmp_path / "timers.json"
    monkeypatch.setenv("GT_BOTTLENECK", bottleneck)
    monkeypatch.setenv("GT_TIMERS", str(timers_path))
    result = profile(Command(sys.executable, [], [str(script)]), RunConfig(steps=30, warmup=3, timeout=300, **config))
    assert result.verdict is not None, result.run.output_tail
    return result, json.loads(timers_path.read_text())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("bottleneck", "how"), [("slow", "found"), ("healthy", "found"), ("slow", "--data-fn"), ("slow", "not timed")]
)
def test_a_loop_fed_by_its_own_batch_function(bottleneck, how, tmp_path, monkeypatch):
    """nanoGPT's shape, `x, y = get_batch('train')` with no DataLoader: the function's calls are
    data wait (found in the loop, or named with --data-fn), its validation calls are not, and the
    fix named is the function's own, at its line -- never a DataLoader setting."""
    config = {"found": {}, "--data-fn": {"data_fns": ["get_batch"], "find_data_fn": False}}
    result, timers = own_profile(
        CUSTOM_SCRIPT, bottleneck, tmp_path, monkeypatch, **config.get(how, {"find_data_fn": False})
    )
    verdict, steps = result.verdict, result.run.steps
    assert not DATALOADER_FIXES & {r.code for r in verdict.recommendations}, verdict.recommendations
    if how == "not timed":  # nothing names the function: said, and nothing DataLoader-shaped suggested
        assert steps.data_share is None and "--data-fn" in (steps.data_note or "")
        assert verdict.kind != "input-bound"
        return
    assert steps.data_source == "get_batch" and steps.data_function["how"] == how
    own_wait, measured_wait = timers["data"] / timers["steps"], steps.waited / steps.count
    assert abs(measured_wait - own_wait) < 0.003 + 0.1 * own_wait, (measured_wait, own_wait)
    if timers["data"] > timers["compute"]:  # the script's own timers: the function dominates
        assert bottleneck == "slow"
        assert verdict.kind == "input-bound", (verdict.headline, verdict.reasons)
        first = verdict.recommendations[0]
        assert "get_batch" in first.action and first.line is not None
        assert first.line.endswith(f"custom_batch.py:{_def_line(CUSTOM_SCRIPT, 'get_batch')}")
    else:
        assert bottleneck == "healthy", timers
        assert verdict.kind == "compute-bound", (verdict.headline, verdict.reasons)


def _def_line(script: Path, name: str) -> int:
    return next(i for i, line in enumerate(script.read_text().splitlines(), 1) if line.startswith(f"def {name}("))


@pytest.mark.slow
@pytest.mark.parametrize("bottleneck", ["healthy", "generator", "map"])
def test_keras_fit_data_wait(bottleneck, tmp_path, monkeypatch):
    """Inside Keras fit: the wait for a slow Python generator or a slow tf.data map is measured
    (the step's time less the compiled step's own, by the script's timers) and named."""
    result, timers = own_profile(KERAS_SCRIPT, bottleneck, tmp_path, monkeypatch)
    verdict, steps = result.verdict, result.run.steps
    # Stopped after its steps, the script exits by itself: no tf.data iterator left to the
    # interpreter's shutdown, where its producer thread could never finish.
    assert result.run.status == "stopped" and not [n for n in result.run.notes if "did not exit" in n]
    assert steps.source == "Keras batches" and steps.data_share is not None, steps.data_note
    # The script's own view: the step waits at most the step less its compiled compute, and at
    # most what making a batch took (nothing for arrays in memory).
    step = timers["step"] / timers["steps"]
    produce = timers["produce"] / timers["batches"] if timers["batches"] else 0.0
    own_share = max(0.0, min(produce, step - timers["compute"])) / step
    assert own_share >= INPUT_HIGH or own_share < INPUT_MODERATE, timers  # a clear case, either way
    if own_share >= INPUT_HIGH:
        assert bottleneck != "healthy", timers
        assert verdict.kind == "input-bound", (verdict.headline, verdict.reasons)
        assert verdict.recommendations[0].code.startswith("GL70"), verdict.recommendations
        assert abs(steps.data_share - own_share) < 0.2, (steps.data_share, own_share)
    else:
        assert bottleneck == "healthy", timers
        assert verdict.kind == "compute-bound", (verdict.headline, verdict.reasons, timers, steps.data_share)
        assert steps.data_share < 0.05
    assert not DATALOADER_FIXES & {r.code for r in verdict.recommendations}
