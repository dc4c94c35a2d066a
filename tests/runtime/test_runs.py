"""`gpulint profile` / `verify` on real child processes: step counting, data wait, failures,
timeouts, temporary folders, user files, and end to end on the runtime fixtures (CPU only).

The CLI runs in a subprocess (`python -m gpulint.runtime_check`, the same commands `gpulint`
registers) with TMPDIR pointed at a fresh folder, so leftovers can be seen.
"""

import atexit
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from gpulint.runtime_check.measure import Command, RunConfig, run_once
from gpulint.runtime_check.verify import MAX_RUNS_FACTOR, interleaved

HERE = Path(__file__).parent
SCRIPTS = HERE / "scripts"
ROOT = HERE.parent.parent
FIXTURES = ROOT / "fixtures" / "runtime"
# verify with two A/B pairs of ten measured steps after two warm-up steps: enough for a clear speed-up
TWO_RUNS_OF_TEN = ("--runs", "2", "--steps", "10", "--warmup", "2")


HISTORY_COMMANDS = {"profile", "verify", "scale", "history", "compare", "report"}


# The child processes' temporary folders, removed when the tests end (see child_tmp).
_CHILD_TMPS: list[str] = []
_CHILD_TMPS_LOCK = threading.Lock()
atexit.register(lambda: [shutil.rmtree(folder, ignore_errors=True) for folder in _CHILD_TMPS])


def child_tmp(tmp_path: Path) -> Path:
    """The TMPDIR of the test's child processes, seen as tmp_path/tmp: a fresh folder with a short
    path.  Python's multiprocessing makes Unix sockets in it (DataLoader workers hand their
    batches over through one, torchrun's ranks too), and a socket's path has at most 107 bytes:
    under pytest-xdist's tmp_path, once pytest's numbering passes pytest-99, the sockets could not
    be made and the training runs hung."""
    link = tmp_path / "tmp"
    with _CHILD_TMPS_LOCK:  # (a test may run the CLI from threads: the nodes of one multi-node run)
        if not link.exists():
            _CHILD_TMPS.append(tempfile.mkdtemp(prefix="gl-"))
            link.symlink_to(_CHILD_TMPS[-1], target_is_directory=True)
    return link.resolve()


def gpulint(tmp_path, *args, timeout=300, env=None):
    """The CLI in a child process; the run history goes to tmp_path/history.db unless args say."""
    env = dict(os.environ, TMPDIR=str(child_tmp(tmp_path)), NO_COLOR="1", **(env or {}))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    args = list(args)
    if args and args[0] in HISTORY_COMMANDS and not {"--history", "--no-history"} & set(args):
        args[1:1] = ["--history", str(tmp_path / "history.db")]
    return subprocess.run(
        [sys.executable, "-m", "gpulint.runtime_check", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )


def leftovers(tmp_path):
    return sorted(p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("gpulint-"))


def checksums(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_several_optimizers_and_gradient_accumulation_count_optimizer_steps():
    script = str(SCRIPTS / "multi_optimizer.py")
    result = run_once(Command(sys.executable, [], [script, "--accumulate", "2"]), RunConfig(steps=12, warmup=2))
    assert result.status == "stopped", result.output_tail
    steps = result.steps
    assert steps.source == "optimizer steps"
    assert steps.total == 14 and steps.count == 12  # SGD paces: it steps twice as often as Adam
    # Stopped right after the 14th SGD step, before the 7th Adam step of that iteration.
    assert steps.optimizers["SGD"] == 14 and steps.optimizers["Adam"] == 6
    assert steps.batches == 24  # two batches per optimizer step
    # Data: 4 samples x 1 ms per batch, two batches per step; compute: a 10 ms sleep per step.
    for wait, total in zip(steps.data_waits, steps.times, strict=True):
        assert 0.007 <= wait < total
    assert steps.data_share == pytest.approx(sum(steps.data_waits) / sum(steps.times))
    assert 0.02 < steps.data_share < 0.9


def test_crashing_script_shows_its_error_and_passes_the_exit_code_on(tmp_path):
    run = gpulint(tmp_path, "profile", "--", sys.executable, str(SCRIPTS / "crash.py"))
    assert run.returncode == 1
    assert "raised an exception" in run.stdout
    assert "ValueError: boom: the dataset path does not exist" in run.stdout
    assert "crash.py:6" in run.stdout and "Traceback" in run.stdout  # its own traceback, shown
    exited = gpulint(tmp_path, "profile", "--", sys.executable, str(SCRIPTS / "crash.py"), "7")
    assert exited.returncode == 7 and "exited with code 7" in exited.stdout
    assert leftovers(tmp_path) == []


def test_a_script_run_by_an_interpreter_without_its_framework_gets_a_hint(tmp_path):
    # `python` on PATH outside the virtual environment gpulint is installed in: a fresh environment
    # without torch stands for it, and so does this interpreter without its site-packages (-S)
    import importlib.util

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True, timeout=120)
    other = str(tmp_path / "env" / "bin" / "python")
    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    run = gpulint(tmp_path, "profile", "--no-history", "--", other, str(script), "--lr", "3")
    assert run.returncode == 1 and "ModuleNotFoundError: No module named 'torch'" in run.stdout
    assert f"hint: the script ran under {other}, which cannot import torch" in run.stdout
    if importlib.util.find_spec("torch") is not None:
        assert f"gpulint's own interpreter has torch: gpulint profile -- {sys.executable} {script} --lr 3" in run.stdout
    bare = gpulint(tmp_path, "profile", "--no-history", "--", sys.executable, "-S", str(script))
    assert f"hint: the script ran under {sys.executable}, which cannot import torch" in bare.stdout
    assert f"or name its interpreter: gpulint profile -- /path/to/env/bin/python -S {script}" in bare.stdout
    # a module of the project's own is not the interpreter's fault: no hint
    script.write_text("import acme_helpers\n")
    assert "hint:" not in gpulint(tmp_path, "profile", "--no-history", "--", other, str(script)).stdout


def test_hanging_script_is_stopped_by_the_timeout(tmp_path):
    run = gpulint(tmp_path, "profile", "--timeout", "3", "--", sys.executable, str(SCRIPTS / "hang.py"))
    assert run.returncode == 124
    assert "in time" in run.stdout and "no result after 3 s; stopped; it had made no training step" in run.stdout
    assert "waiting forever" in run.stdout
    assert leftovers(tmp_path) == []


def test_script_that_never_steps_gets_a_clear_report(tmp_path):
    run = gpulint(tmp_path, "profile", "--", sys.executable, str(SCRIPTS / "no_steps.py"))
    assert run.returncode == 3
    assert "never made a training step" in run.stdout
    assert leftovers(tmp_path) == []


def test_script_that_ends_during_warmup_says_so(tmp_path):
    run = gpulint(tmp_path, "profile", "--warmup", "5", "--", sys.executable, str(SCRIPTS / "few_steps.py"))
    assert run.returncode == 3
    assert "only 2 step(s) ran" in run.stdout


def test_module_form_runs_with_sys_path_like_python_m():
    result = run_once(Command(sys.executable, [], ["-m", "no_steps"]), RunConfig(sys_path0=str(SCRIPTS)))
    assert result.status == "finished" and result.steps is None
    assert "evaluated 499500" in result.output_tail


def test_usage_errors_are_one_line(tmp_path):
    run = gpulint(tmp_path, "profile", "--", "bash", "train.sh")
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "python train.py" in run.stderr
    assert "torchrun" in run.stderr  # launchers are named as the other way in
    missing_script = gpulint(tmp_path, "profile", "--", "torchrun", "--nproc-per-node", "2", "train.py")
    assert missing_script.returncode == 2 and "script train.py does not exist" in missing_script.stderr
    missing = gpulint(tmp_path, "verify", str(tmp_path / "missing.py"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_profile_torch_fixture_is_input_bound(tmp_path):
    before = checksums(FIXTURES)
    out = tmp_path / "profile.json"
    run = gpulint(
        tmp_path,
        "profile",
        "--steps",
        "10",
        "--warmup",
        "2",
        "--json",
        str(out),
        "--",
        sys.executable,
        str(FIXTURES / "torch_slow_loader.py"),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Verdict: input-bound (high)" in run.stdout
    assert "GPU utilization" in run.stdout and "not measured" in run.stdout
    report = json.loads(out.read_text())
    assert report["steps"]["measured"] == 10 and report["steps"]["data_share"] >= 0.2
    assert report["verdict"]["kind"] == "input-bound"
    assert report["gpu"] is None and report["gpu_not_measured"]
    assert report["lint"][0]["code"] == "GL101"  # the finding behind the first recommendation
    assert checksums(FIXTURES) == before
    assert leftovers(tmp_path) == []


def test_static_and_runtime_agree_on_a_script_that_names_no_accelerator(tmp_path):
    """The training code only moves batches to the device it is given: the profile measures an
    input-bound run with no loader workers, and the linter reports the serial loader."""
    script = FIXTURES / "torch_loader_any_device.py"
    assert not re.search(r"\b(cuda|gpu|accelerat\w*)\b", script.read_text(), re.IGNORECASE)
    out = tmp_path / "profile.json"
    run = gpulint(
        tmp_path, "profile", "--steps", "10", "--warmup", "2", "--json", str(out), "--", sys.executable, str(script)
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(out.read_text())
    assert report["verdict"]["kind"] == "input-bound" and report["steps"]["data_share"] >= 0.2
    assert report["cpu"]["workers"] == 0
    # The linter on a copy, a project of its own: in place, its project is this whole repository,
    # which an uncached run would index first.
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(script, alone / script.name)
    lint = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulint",
            "check",
            "--select",
            "GL101",
            "--format",
            "json",
            "--no-cache",
            "--exit-zero",
            script.name,
        ],
        capture_output=True,
        text=True,
        cwd=alone,
        check=True,
    )
    loader_line = next(n for n, line in enumerate(script.read_text().splitlines(), 1) if "= DataLoader(" in line)
    assert [(f["code"], f["location"]["row"]) for f in json.loads(lint.stdout)] == [("GL101", loader_line)]
    assert "GL101" in [finding["code"] for finding in report["lint"]]
    assert leftovers(tmp_path) == []


def test_verify_confirms_gl101_and_leaves_the_script_alone(tmp_path):
    before = checksums(FIXTURES)
    out = tmp_path / "verify.json"
    script = str(FIXTURES / "torch_slow_loader.py")
    run = gpulint(
        tmp_path, "verify", script, *TWO_RUNS_OF_TEN, "--select", "GL101", "--json", str(out), env={"COLUMNS": "40"}
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "confirmed" in run.stdout and "num_workers=" in run.stdout
    report = json.loads(out.read_text())
    assert report["diff"].rstrip() in run.stdout  # not wrapped in a pipe, whatever the terminal width: it applies
    assert any(line.startswith("original ") and len(line) > 40 for line in run.stdout.splitlines())
    apply = next(line for line in run.stdout.splitlines() if "to apply the fix:" in line)
    assert apply.endswith(f"gpulint verify {FIXTURES / 'torch_slow_loader.py'} --select GL101 --write")
    # Two interleaved pairs, then a pair more while the noise leaves it undecided (a busy machine
    # takes more), at most MAX_RUNS_FACTOR times --runs of each and the pair that repeats a change.
    order = report["order"]
    pairs = len(order) // 2
    assert len(order) >= 4 and order == interleaved(pairs) and pairs <= MAX_RUNS_FACTOR * 2 + 1
    assert report["comparison"]["outcome"] == "confirmed" and report["comparison"]["speedup"] > 1.2
    assert report["written"] is False
    assert checksums(FIXTURES) == before
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_tf_fixture_profile_input_bound_and_gl701_confirmed(tmp_path):
    before = checksums(FIXTURES)
    script = str(FIXTURES / "tf_slow_map.py")
    profile = gpulint(tmp_path, "profile", "--steps", "10", "--warmup", "2", "--", sys.executable, script)
    assert profile.returncode == 0, profile.stdout + profile.stderr
    assert "Verdict: input-bound" in profile.stdout and "tf.data batches" in profile.stdout
    out = tmp_path / "verify.json"
    verify = gpulint(tmp_path, "verify", script, *TWO_RUNS_OF_TEN, "--select", "GL701", "--json", str(out))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert json.loads(out.read_text())["comparison"]["outcome"] == "confirmed"
    assert checksums(FIXTURES) == before
    assert leftovers(tmp_path) == []


def test_gpulint_registers_profile_and_verify():
    from gpulint.cli import COMMANDS

    assert {COMMANDS[name].setup.partition(":")[0] for name in ("profile", "verify", "scale")} == {
        "gpulint.runtime_check.cli"
    }
    for command in ("profile", "verify", "scale"):
        run = subprocess.run(
            [sys.executable, "-m", "gpulint", command, "--help"], capture_output=True, text=True, cwd=ROOT
        )
        assert run.returncode == 0 and "--steps" in run.stdout, run.stderr


def test_a_loop_without_an_optimizer_counts_its_backward_passes_as_steps():
    """Manual SGD (`w -= lr * w.grad`): it timed out with "it had made no training step"."""
    result = run_once(
        Command(sys.executable, [], [str(SCRIPTS / "manual_sgd.py")]), RunConfig(steps=10, warmup=2, timeout=120)
    )
    assert result.status == "stopped", result.output_tail
    steps = result.steps
    assert steps.source == "optimizer steps" and steps.count == 10
    assert steps.optimizers == {"backward() (no optimizer)": 12}


def test_an_optimizers_steps_stay_the_clock_beside_its_backward_passes():
    script = str(SCRIPTS / "multi_optimizer.py")
    result = run_once(Command(sys.executable, [], [script, "--accumulate", "4"]), RunConfig(steps=6, warmup=2))
    assert result.status == "stopped", result.output_tail
    assert "backward() (no optimizer)" not in result.steps.optimizers and result.steps.count == 6
