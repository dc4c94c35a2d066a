"""verify on an unchanged script (A/A): it must say "not confirmed" nearly always, on run times
recorded on a busy machine and on synthetic noisy ones; and it must still confirm a real
speedup.  The runs are stubbed: verify's own schedule and verdict decide, from given timings.

tests/runtime/data/aa_run_times.json: mean step times of consecutive runs of an unchanged
fixtures/runtime/torch_slow_loader.py (20 steps after 3 warm-up, as verify runs them), recorded on
two CPU cores shared with other jobs.
"""

import json
import math
import random
import sys
from pathlib import Path

import pytest

from gpulint.runtime_check import verify as verify_mod
from gpulint.runtime_check.measure import RunConfig
from tests.runtime.helpers import measured_run

RECORDED = Path(__file__).parent / "data" / "aa_run_times.json"
SOURCE = b"""import torch
from torch.utils.data import DataLoader
device = torch.device("cuda")
if __name__ == "__main__":
    loader = DataLoader(load_images("data"))  # a dataset read from disk (not in memory)
    for x in loader:
        opt.step()
"""


def verify_with(tmp_path, monkeypatch, run_time, runs=3):
    """verify's outcome and runs made, each run's mean step time from run_time(arm, index)."""
    script = tmp_path / "train.py"
    script.write_bytes(SOURCE)
    made = []

    def run_once(command, config, progress=None):
        arm = "B" if config.source else "A"
        made.append(arm)
        return measured_run([run_time(arm, len(made) - 1)] * 5)

    monkeypatch.setattr(verify_mod, "run_once", run_once)
    result = verify_mod.verify(script, [], ["GL101"], runs, RunConfig(), sys.executable)
    return result.comparison.outcome, len(made)


def noisy_machine(seed: int, effect: float = 1.0):
    """Run times of a busy machine: 8% noise between runs, a load that wanders, and now and then a
    run 20-60% slower (a neighbour's burst).  B runs are `effect` times faster."""
    rng = random.Random(seed)
    load = [0.0]

    def run_time(arm: str, index: int) -> float:
        load[0] = 0.7 * load[0] + rng.gauss(0, 0.04)
        burst = 1 + rng.uniform(0.2, 0.6) if rng.random() < 0.1 else 1.0
        return 0.1 * math.exp(rng.gauss(0, 0.08) + load[0]) * burst / (effect if arm == "B" else 1.0)

    return run_time


def test_aa_on_synthetic_noisy_runs_is_not_confirmed_19_times_of_20(tmp_path, monkeypatch):
    outcomes = [verify_with(tmp_path, monkeypatch, noisy_machine(seed))[0] for seed in range(20)]
    assert outcomes.count("not confirmed") >= 19, outcomes


def test_aa_on_recorded_runs_is_not_confirmed(tmp_path, monkeypatch):
    times = [r["mean_step_seconds"] for r in json.loads(RECORDED.read_text())["runs"]]
    outcomes = []
    for start in range(len(times) - 20):  # each call reads consecutive recorded runs, at most 20
        outcomes.append(verify_with(tmp_path, monkeypatch, lambda arm, index, start=start: times[start + index])[0])
    assert len(outcomes) >= 20
    assert outcomes.count("not confirmed") == len(outcomes), outcomes


@pytest.mark.slow
def test_aa_false_calls_stay_near_two_percent_over_many_calls(tmp_path, monkeypatch):
    outcomes = [verify_with(tmp_path, monkeypatch, noisy_machine(1000 + seed))[0] for seed in range(300)]
    assert outcomes.count("not confirmed") >= 0.96 * len(outcomes)


def test_a_real_speedup_is_still_confirmed_on_the_noisy_machine(tmp_path, monkeypatch):
    results = [verify_with(tmp_path, monkeypatch, noisy_machine(seed, effect=1.5)) for seed in range(20)]
    assert sum(outcome == "confirmed" for outcome, _ in results) >= 16
    # decided at the second look when it can be: the first finds it, the next pair repeats it
    assert min(made for _, made in results) == 8


def one_distribution(seed: int, kind: str) -> tuple[list[float], list[float]]:
    """Ten run times per arm, all drawn from the same distribution: nothing changed."""
    rng = random.Random(seed)

    def draw() -> float:
        if kind == "normal":
            return 0.1 * (1 + rng.gauss(0, 0.08))
        burst = 1 + rng.uniform(0.2, 0.6) if rng.random() < 0.1 else 1.0  # a neighbour's burst
        return 0.1 * math.exp(rng.gauss(0, 0.08)) * burst

    return [draw() for _ in range(10)], [draw() for _ in range(10)]


@pytest.mark.parametrize("kind", ["normal", "bursts"])
def test_the_decision_never_claims_a_change_between_draws_of_one_distribution(kind):
    """The decision alone (no timing): 200 A/A calls, every look verify makes (3 runs of each up
    to 10), and neither a speedup nor a slowdown is claimed once."""
    outcomes = [verify_mod.sequential(*one_distribution(seed, kind), 3).outcome for seed in range(200)]
    assert outcomes.count("not confirmed") == 200, [o for o in outcomes if o != "not confirmed"]


def test_a_slowdown_needs_the_same_proof_as_a_speedup():
    """Mirror images: the slowdown is called exactly where the speedup is, and a change found at
    one look only (here the last) is pending, not reported."""
    for seed in range(50):
        a, b = one_distribution(seed, "normal")
        faster = verify_mod.sequential(a, [x / 1.3 for x in b], 3)
        slower = verify_mod.sequential([x / 1.3 for x in b], a, 3)
        assert (faster.outcome == "confirmed") == (slower.outcome == "slowdown")
        assert faster.interval[0] == pytest.approx(1 / slower.interval[1])
    # the interval clears 1 at 4 runs of each, not at 3: one more pair decides
    a, b = [1.019, 0.972, 0.986, 1.007], [0.83, 0.849, 0.854, 0.833]
    assert verify_mod.compare(a, b).outcome == "confirmed"
    lone = verify_mod.sequential(a, b, 3)
    assert lone.outcome == "not confirmed" and lone.pending and "repeats it" in lone.reason
