"""Every fix profile recommends comes with a command that works on the script: verify of the
linter's fix where the fixer applies it, else the `--param` sweep of the setting it changes, else
a profile against this run after the change by hand; and nothing is recommended that the script
does not have.  The verdicts are built from synthetic measurements (no run)."""

from __future__ import annotations

import io
import shlex
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpulint.runtime_check import html_report, records, report
from gpulint.runtime_check import sweep as sweep_mod
from gpulint.runtime_check.attribution import Attribution, Line, Phase
from gpulint.runtime_check.measure import Command, ProcessRun, RunConfig
from gpulint.runtime_check.profile import Profile, measurements_of, settle_fixes
from gpulint.runtime_check.verdict import decide
from gpulint.runtime_check.verify import fix_script, same_program
from tests.runtime.helpers import measured_run, step_stats

HEAD = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.randn(4)


model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""
LOOP = """
for epoch in range(2):
    for x in loader:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
"""
# The loader built three ways the linter's GL101 fix does not touch, and one it does.
KWARGS = (
    HEAD + 'loader_kwargs = {"batch_size": 8, "shuffle": True}\nloader = DataLoader(Slow(), **loader_kwargs)\n' + LOOP
)
KWARGS_ZERO = (
    HEAD + "loader_kwargs = dict(batch_size=8, num_workers=0)\nloader = DataLoader(Slow(), **loader_kwargs)\n" + LOOP
)
EXPLICIT_ZERO = HEAD + "loader = DataLoader(Slow(), batch_size=8, num_workers=0)\n" + LOOP
# (the fix sets workers only where they can start under every start method: under the main guard)
PLAIN = (
    HEAD + 'if __name__ == "__main__":\n    loader = DataLoader(Slow(), batch_size=8)\n' + textwrap.indent(LOOP, "    ")
)
REITERATED = PLAIN.replace("for epoch in range(2):\n", "for epoch in range(2):\n        steps = len(list(loader))\n")


def input_bound(script: Path, loader: dict | None = None, **cpu) -> Profile:
    """A profile of `script` whose steps wait 60% for a loader with no workers, as profile makes it."""
    run = measured_run([0.1] * 20)
    run.steps = step_stats([0.1] * 20, [0.06] * 20)
    report_ = {"loader": loader or {"num_workers": 0, "persistent_workers": False}}
    run.processes = [ProcessRun(None, 1, run.steps, report_)]
    result = Profile(run, "torch", command=Command(sys.executable, [], [str(script), "--lr", "0.1"]))
    result.measurements = measurements_of(run, "torch")
    for name, value in cpu.items():
        setattr(result.measurements, name, value)
    result.verdict = decide(result.measurements)
    assert result.verdict.kind == "input-bound", result.verdict.headline
    settle_fixes(result)
    return result


def works_on(command: str, script: Path, monkeypatch) -> None:
    """Run the next command's own code on the script, the runs stubbed: it reaches a measurement."""
    words = shlex.split(command)
    assert words[:3] == ["gpulint", "verify", str(script)], command
    if "--select" in words:
        source, fixed, applied, _ = fix_script(script, [words[words.index("--select") + 1]])
        assert applied and not same_program(source, fixed), command
        return
    param = words[words.index("--param") + 1]
    monkeypatch.setattr(sweep_mod, "run_once", lambda command, config, progress=None: measured_run([0.1] * 4))
    result = sweep_mod.sweep(script, ["--lr", "0.1"], param, 2, RunConfig(), sys.executable)
    assert result.failed is None and result.best is not None, command


@pytest.mark.parametrize("source", [KWARGS, KWARGS_ZERO, EXPLICIT_ZERO, PLAIN])
def test_the_workers_fix_ends_with_a_command_that_works_on_the_script(source, tmp_path, monkeypatch):
    """A loader built from `**loader_kwargs` or with `num_workers=0` got GL101, then a verify that
    found nothing to fix and a `--param` that found no DataLoader call; now the sweep answers it."""
    script = tmp_path / "train.py"
    script.write_text(source)
    result = input_bound(script, cores=4, other_cores=0.0, main_cores=1.0)
    assert [r.code for r in result.verdict.recommendations] == ["GL101"]  # no loader read again: no GL105
    suggestion = report.profile_next(result)
    assert suggestion is not None
    if source is PLAIN:
        assert "--select GL101" in suggestion.command
    else:
        assert "--param num_workers=0,2,3" in suggestion.command and suggestion.command.endswith("-- --lr 0.1")
    works_on(suggestion.command, script, monkeypatch)
    out = io.StringIO()
    report.print_profile(report.Output(out, color=False), result)
    assert suggestion.line in out.getvalue().splitlines()


def test_a_loader_read_again_each_epoch_gets_gl105_with_its_fix(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(REITERATED)
    result = input_bound(script)
    assert [r.code for r in result.verdict.recommendations] == ["GL101", "GL105"]
    workers, again = (report.next_for(result, r) for r in result.verdict.recommendations)
    works_on(workers.command, script, monkeypatch)
    # no automatic fix for `len(list(loader))`: changed by hand at the line the rule finds
    assert again.why == "Change train.py:19 by hand, then measure it against this run"
    assert again.command.startswith("gpulint profile --baseline last -- ")
    out = io.StringIO()
    report.print_profile(report.Output(out, color=False), result)
    assert f"  then GL105: change train.py:19 by hand, then measure it against this run: {again.command}" in (
        out.getvalue().splitlines()
    )


CHECKPOINT = (
    HEAD
    + """

def save_checkpoint(model, path="ck.pt"):
    torch.save(model.state_dict(), path)


for step in range(20):
    opt.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
    save_checkpoint(model)
"""
)


def checkpoint_bound(script: Path, measured_at: str | None) -> Profile:
    run = measured_run([0.1] * 20)
    lines = [Line(measured_at, "save_checkpoint(model)", 0.5)] if measured_at else []
    attribution = Attribution(40, 0.01, [Phase("checkpoint writes", 0.5, lines, looks=20), Phase("compute", 0.5)])
    result = Profile(run, "torch", command=Command(sys.executable, [], [str(script)]), attribution=attribution)
    result.measurements = measurements_of(run, "torch", attribution=attribution)
    result.verdict = decide(result.measurements)
    from gpulint.runtime_check.profile import _place

    _place(result.verdict.recommendations, attribution)
    settle_fixes(result)
    return result


def test_a_save_in_a_helper_is_measured_and_answered_by_a_profile_against_this_run(tmp_path):
    """GL303 "(measured)" at a `save_checkpoint()` helper the fixer cannot rewrite used to end
    with nothing to run (and verify found nothing to fix)."""
    script = tmp_path / "train.py"
    script.write_text(CHECKPOINT)
    result = checkpoint_bound(script, f"{script}:28")
    assert [r.code for r in result.verdict.recommendations] == ["GL303"]
    suggestion = report.profile_next(result)
    assert suggestion.why == "Change train.py:28 by hand, then measure it against this run"
    assert suggestion.command == shlex.join(
        ["gpulint", "profile", "--baseline", "last", "--", Path(sys.executable).name, str(script)]
    )
    page = html_report.render(records.profile_record(result, RunConfig(), time.time()))
    assert "Change train.py:28 by hand, then measure it against this run:<br><code>gpulint profile" in page


def test_a_secondary_phase_measured_at_its_line_does_not_go_before_the_named_phases_fixes(tmp_path):
    """MoCo saving a checkpoint every step: compute-bound (69%), checkpoint writes secondary (26%).
    The checkpoint's fix, measured at its line, was sorted first: the verdict named compute and
    its first fix acted on something else."""
    script = tmp_path / "train.py"
    script.write_text(CHECKPOINT)
    run = measured_run([0.1] * 20)
    lines = [Line(f"{script}:28", "save_checkpoint(model)", 0.26)]
    attribution = Attribution(400, 0.01, [Phase("compute", 0.74), Phase("checkpoint writes", 0.26, lines, looks=100)])
    result = Profile(run, "torch", command=Command(sys.executable, [], [str(script)]), attribution=attribution)
    result.measurements = measurements_of(run, "torch", attribution=attribution)
    result.verdict = decide(result.measurements)
    from gpulint.runtime_check.profile import _place

    _place(result.verdict.recommendations, attribution)
    settle_fixes(result)
    assert result.verdict.headline == "compute-bound; secondary: checkpoint writes 26%"
    codes = [r.code for r in result.verdict.recommendations]
    assert codes[-1] == "GL303" and codes[0] in {"GL401", "GL403", "GL404"}, codes
    assert result.verdict.recommendations[-1].line == f"{script}:28"


def test_a_run_not_recorded_is_not_named_as_the_baseline(tmp_path):
    """With --no-history the next command was `profile --baseline last`, which then compared with
    an older run of the command, or failed with none recorded: it profiles again without one."""
    script = tmp_path / "train.py"
    script.write_text(CHECKPOINT)
    result = checkpoint_bound(script, f"{script}:28")
    result.recorded = False
    suggestion = report.profile_next(result)
    assert suggestion.command == shlex.join(["gpulint", "profile", "--", Path(sys.executable).name, str(script)])
    assert "--baseline" not in suggestion.line and "not recorded" in suggestion.why


def test_host_work_fixes_need_the_measured_line_or_the_finding(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(CHECKPOINT)
    assert checkpoint_bound(script, None).verdict.recommendations == []


def test_verify_of_the_workers_fix_on_such_a_loader_points_at_the_sweep(tmp_path):
    """`verify --select GL101` said only "nothing to fix" where the loader takes its keywords from
    a dictionary: the sweep of the setting measures what the fix would."""
    from gpulint.runtime_check.verify import VerifyError, verify

    script = tmp_path / "train.py"
    script.write_text(KWARGS)
    with pytest.raises(VerifyError, match="nothing to fix .* measure it with --param num_workers=0,2$"):
        verify(script, [], ["GL101"], 2, RunConfig(), sys.executable)


def test_sync_fixes_need_a_sync_line_this_run_counted_or_a_finding(tmp_path):
    """A sync-bound CUDA run suggested every sync rule (synchronize(), TF reads, logging) whatever
    the script does; now only those at a line the run counted, or that the linter finds."""
    from gpulint.runtime_check.profile import SyncLine

    script = tmp_path / "train.py"
    script.write_text(HEAD + "\ndef read(t):\n    return t.detach().cpu()\n")
    run = measured_run([0.1] * 20, cuda=True)
    run.steps.syncs = {f"{script}:18": 40}
    result = Profile(run, "torch", command=Command(sys.executable, [], [str(script)]))
    result.measurements = measurements_of(run, "torch")
    result.verdict = decide(result.measurements)
    assert result.verdict.kind == "sync-bound"
    assert [r.code for r in result.verdict.recommendations] == ["GL201", "GL204", "GL706", "GL302"]
    result.syncs = [SyncLine(f"{script}:18", 40, 2.0, "return t.detach().cpu()", "GL201")]
    settle_fixes(result)
    assert [r.code for r in result.verdict.recommendations] == ["GL201"]
    then = report.next_for(result, result.verdict.recommendations[0])
    assert then is not None and then.why == "Change train.py:18 by hand, then measure it against this run"
    assert then.command.startswith("gpulint profile --baseline last -- ")
