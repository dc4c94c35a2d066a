"""Sync-line capture and mapping, without CUDA: the warning torch's sync debug mode raises is
simulated, so the attribution to the user's line and the rule mapping are tested here; the real
thing runs in scripts/gpu-check.sh."""

import types
import warnings

from gpulint.runtime_check import bootstrap
from gpulint.runtime_check.measure import RunResult
from gpulint.runtime_check.profile import sync_lines
from tests.runtime.helpers import step_stats


def test_sync_warnings_are_counted_at_the_users_line(tmp_path, monkeypatch):
    monkeypatch.setattr(bootstrap, "STATE", bootstrap.State({"out": str(tmp_path / "o.json"), "warmup": 1}))
    modes = []
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(set_sync_debug_mode=modes.append))
    with warnings.catch_warnings():
        saved = warnings.showwarning
        try:
            bootstrap._watch_syncs(fake_torch)

            def step():
                warnings.warn("called a synchronizing CUDA operation", stacklevel=1)  # the line to report

            optimizer = object()
            bootstrap.STATE.optimizer_step(optimizer)  # the end of the warm-up step
            for _ in range(3):
                step()
            bootstrap.STATE.optimizer_step(optimizer)  # the measured step with three syncs ends
            step()  # after the last step: outside the window
            line = step.__code__.co_firstlineno + 1
        finally:
            warnings.showwarning = saved
    assert modes == ["warn"]
    assert bootstrap.STATE.syncs == {f"{__file__}:{line}": 3}


def test_sync_lines_map_to_rules(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("for x in loader:\n    total += loss.item()\n    torch.cuda.synchronize()\n    y = x.nonzero()\n")
    run = RunResult("cmd", "stopped", 0, 1.0, cuda=True)
    run.steps = step_stats([0.1] * 10, warmup=2, syncs={f"{script}:2": 10, f"{script}:3": 10, f"{script}:4": 5})
    lines = {s.where.rsplit(":", 1)[1]: (s.rule, s.per_step) for s in sync_lines(run)}
    assert lines == {"2": ("GL201", 1.0), "3": ("GL204", 1.0), "4": (None, 0.5)}
