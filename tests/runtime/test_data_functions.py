"""Batches made by the user's own function: the loop shapes whose batch function is found
(bootstrap._loop_batch_call), its calls timed as data wait (train vs held-out), and the verdict
and fixes when no DataLoader is in play.  And the stack sampler's switch and interval."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpulint.runtime_check import bootstrap
from gpulint.runtime_check.measure import Command, RunConfig
from gpulint.runtime_check.profile import profile
from gpulint.runtime_check.verdict import NAME_THE_BATCH_FUNCTION, Measurements, decide


def loop_call(tmp_path, source: str) -> str | None:
    """Run `source` as a user's script and return what _loop_batch_call finds from the frame that
    calls `step()` (where the optimizer would step)."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    found: list = []

    def step():
        found.append(bootstrap._loop_batch_call(sys._getframe(1)))

    namespace = {"step": step, "__name__": "__main__"}
    exec(compile(script.read_text(), str(script), "exec"), namespace)
    return found[0]


def test_nanogpt_fetches_the_next_batch_in_its_micro_step_loop(tmp_path):
    source = """
    def get_batch(split):
        return 1, 2

    def get_lr(it):
        return 0.1

    X, Y = get_batch('train')
    for it in range(2):
        lr = get_lr(it)
        for micro_step in range(2):
            logits, loss = model(X, Y) if False else (0, 0)
            X, Y = get_batch('train')
        step()
        break
    """
    assert loop_call(tmp_path, source) == "get_batch"


def test_a_call_that_opens_the_loop_and_feeds_it_is_found_whatever_its_name(tmp_path):
    source = """
    def draw(rng):
        return [rng]

    def main():
        for i in range(3):
            examples = draw(i)
            print(examples)
            step()
            return

    main()
    """
    assert loop_call(tmp_path, source) == "draw"


@pytest.mark.parametrize(
    "body",
    [
        "lr = get_lr(i)\n        step()",  # the result is not passed to a call: not the batch
        "print(i)\n        x = compute(i)\n        print(x)\n        step()",  # not first, not named like a batch
        "x = len([i])\n        print(x)\n        step()",  # a builtin, not the user's function
    ],
)
def test_other_calls_in_the_loop_are_not_taken_for_the_batch(tmp_path, body):
    source = f"""
    def get_lr(i):
        return 0.1

    def compute(i):
        return i

    for i in range(3):
        {body}
        break
    """
    assert loop_call(tmp_path, source) is None


@pytest.fixture
def state(tmp_path):
    bootstrap.STATE = bootstrap.State({"out": str(tmp_path / "out.json"), "steps": None, "warmup": 1})
    yield bootstrap.STATE
    bootstrap.STATE = None  # type: ignore[assignment]


def test_timed_function_counts_training_calls_only(state):
    batch = SimpleNamespace(shape=(8, 3))

    def get_batch(split):
        return batch

    timed = bootstrap._timed_data_function(get_batch, "get_batch")
    assert timed("train") == get_batch("train")
    timed("val")  # a held-out split: validation, not the training loop's data wait
    timed(split="eval")
    seconds, calls, samples = state.fetched
    assert calls == 1 and samples == 8 and seconds >= 0
    assert state.sources == {"get_batch": [pytest.approx(seconds), 1]}
    assert state.fetching is None


def test_wrapping_by_name_replaces_the_global_the_loop_reads(state, tmp_path):
    def get_batch():
        return 1

    namespace = {"get_batch": get_batch}
    frame = type("Frame", (), {"f_globals": namespace})()
    assert bootstrap._wrap_named("get_batch", [frame])
    assert namespace["get_batch"] is not get_batch and namespace["get_batch"]() == 1
    assert state.data_functions[0]["name"] == "get_batch" and state.data_functions[0]["how"] == "--data-fn"
    assert not bootstrap._wrap_named("missing", [frame])


def measurements(**changes) -> Measurements:
    base = {"framework": "torch", "steps": 30, "step_median": 0.03, "data_share": 0.6, "loader": None}
    return Measurements(**{**base, **changes})


def test_a_batch_function_without_a_dataloader_gets_its_own_fix_at_its_line():
    verdict = decide(
        measurements(data_source="get_batch", data_function="`get_batch` at train.py:30", data_function_line="/p:30")
    )
    assert verdict.kind == "input-bound"
    assert "`get_batch` at train.py:30" in verdict.reasons[0]
    assert [(r.code, r.line) for r in verdict.recommendations] == [("", "/p:30")]


def test_a_batch_function_over_a_dataloader_keeps_the_loader_fixes():
    verdict = decide(
        measurements(
            data_source="get_batch",
            data_function="`get_batch` at train.py:30",
            loader={"num_workers": 0, "persistent_workers": False},
            cores=4,
        )
    )
    assert verdict.recommendations[0].code == "GL101"


def test_unmeasured_data_wait_without_a_dataloader_suggests_naming_the_function():
    verdict = decide(measurements(data_share=None))
    assert verdict.kind == "inconclusive"
    assert [r.action for r in verdict.recommendations] == [NAME_THE_BATCH_FUNCTION]


def test_a_call_from_another_thread_is_not_the_training_thread_waiting(state):
    import threading

    timed = bootstrap._timed_data_function(lambda: SimpleNamespace(shape=(4,)), "get_batch")
    worker = threading.Thread(target=timed)  # a prefetching thread: its time overlaps the step
    worker.start()
    worker.join()
    assert state.fetched[1] == 0
    timed()
    assert state.fetched[1] == 1


FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "runtime" / "torch_step_sleep.py"


@pytest.mark.slow
@pytest.mark.parametrize(("attribution", "interval"), [(False, None), (True, 0.05)])
def test_the_stack_sampler_can_be_switched_off_or_slowed(attribution, interval):
    config = RunConfig(steps=20, warmup=2, timeout=120, attribution=attribution, stack_interval=interval)
    result = profile(Command(sys.executable, [], [str(FIXTURE)]), config)
    assert result.run.ok, result.run.output_tail
    stacks = result.run.processes[0].report["stacks"]
    if not attribution:
        assert stacks is None and result.attribution is None
    else:
        assert stacks["interval"] == interval and result.attribution is not None
