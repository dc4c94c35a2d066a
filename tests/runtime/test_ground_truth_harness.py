"""The scoring of benchmarks/runtime_ground_truth.py (the verdicts on real scripts), on canned
timers and verdicts: no script runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "runtime_ground_truth.py"
spec = importlib.util.spec_from_file_location("runtime_ground_truth", HARNESS)
assert spec is not None and spec.loader is not None
harness = importlib.util.module_from_spec(spec)
sys.modules["runtime_ground_truth"] = harness  # (dataclasses look their module up by name)
spec.loader.exec_module(harness)


def timers(*steps: dict) -> dict:
    """A script's timers: the set-up bucket, the given steps, and a last step the stop cut short."""
    return {"per_step": [{"data": 5.0}, *steps, {"compute": 0.001}], "steps": len(steps) + 1}


def verdict(kind: str, severity: str | None = None, *codes: str) -> dict:
    return {"kind": kind, "severity": severity, "recommendations": [{"code": c, "action": ""} for c in codes]}


def test_the_warm_up_set_up_and_last_steps_are_not_measured():
    canned = timers({"validation": 9.0}, {"compute": 0.05, "data": 0.01}, {"compute": 0.05, "data": 0.02})
    assert harness.measured_phases(canned, warmup=1) == {"compute": 0.1, "data": 0.03}
    truth = harness.ground_truth({0: canned}, warmup=1)
    assert truth.phase == "compute" and round(truth.shares["data"], 2) == 0.23


def test_a_verdict_is_right_only_with_the_phase_and_a_fix_that_changes_it():
    checkpoint = harness.ground_truth({0: timers(*[{"checkpoint": 0.09, "compute": 0.03}] * 4)}, warmup=1)
    assert checkpoint.phase == "checkpoint"
    assert harness.score(checkpoint, verdict("host-bound", "checkpoint writes", "GL303"))[0] == "right"
    assert harness.score(checkpoint, verdict("host-bound", "checkpoint writes", "GL403"))[0] == "vague"
    assert harness.score(checkpoint, verdict("host-bound", "logging", "GL302"))[0] == "wrong"
    assert harness.score(checkpoint, verdict("compute-bound", None, "GL403"))[0] == "wrong"
    assert harness.score(checkpoint, verdict("inconclusive"))[0] == "vague"
    assert harness.score(checkpoint, None)[0] == "wrong"
    healthy = harness.ground_truth({0: timers(*[{"compute": 0.09, "data": 0.01}] * 4)}, warmup=1)
    assert harness.score(healthy, verdict("compute-bound"))[0] == "right"  # nothing to fix in the code
    assert harness.score(healthy, verdict("compute-bound", None, "GL301"))[0] == "vague"  # a secondary's fix first


def test_a_rank_working_longer_is_the_straggler():
    even = {"compute": 0.10, "collectives": 0.01}
    slow = timers(*[{"compute": 0.10, "straggle": 0.04}] * 4)
    waiting = timers(*[{**even, "compute": 0.14}] * 4)  # its wait in DDP's all-reduce reads as compute
    truth = harness.ground_truth({0: waiting, 1: slow}, warmup=1)
    assert (truth.phase, truth.rank) == ("straggler", 1)
    assert harness.score(truth, verdict("straggler", "rank 1"))[0] == "right"
    assert harness.score(truth, verdict("straggler", "rank 0"))[0] == "wrong"
    assert harness.score(truth, verdict("compute-bound", None, "GL403"))[0] == "wrong"
    level = harness.ground_truth({0: timers(*[even] * 4), 1: timers(*[even] * 4)}, warmup=1)
    assert level.phase == "compute" and level.rank is None
    slight = timers(*[{"compute": 0.10, "straggle": 0.004}] * 4)  # under 5% of its step
    assert harness.ground_truth({0: timers(*[even] * 4), 1: slight}, warmup=1).phase == "compute"


def test_a_verify_or_sweep_claim_beyond_no_difference_is_counted():
    assert harness.false_claim({"comparison": {"outcome": "not confirmed"}}) is None
    assert harness.false_claim({"comparison": {"outcome": "confirmed"}}) == "confirmed"
    assert harness.false_claim({"comparison": {"outcome": "slowdown"}}) == "slowdown"
    assert harness.false_claim({"param": "lr", "best": "0.1", "clearly_best": False}) is None
    assert harness.false_claim({"param": "lr", "best": "0.1", "clearly_best": True}) == "lr=0.1 clearly best"
