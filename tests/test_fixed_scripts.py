"""Fixed scripts still run: the training scripts in tests/fixed_scripts/ are run, fixed with
`gpulint --fix --unsafe-fixes --select ALL --show-hints`, and run again; a script that ran before
must run after (a hint, shown, offers its fix like any finding: these small synthetic datasets give
the loader rules no evidence of a cost).  The scripts check their own results (each item once, the
last checkpoint written, one log line per step in the test file), so a fix that silently changes
what a script does fails here too.

Every rule that offers a fix must have it applied to at least one of these scripts
(`test_every_fix_is_applied_to_a_script`): a new fix comes with a script that runs it.

The runs are CPU-only and take a few steps each; they run two at a time.  The unfixed scripts run
only when their fixed version fails, to say whether the script or a fix is at fault.  A script whose framework
is not installed (TensorFlow, transformers, Lightning: the `tf` and `trainers` extras) is skipped
with the reason.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.fix.passes import fix_source
from gpulint.rules import all_rules

SCRIPTS = Path(__file__).resolve().parent / "fixed_scripts"
LAUNCHER = "launch.py"
TIMEOUT_S = 600  # a hang's limit: the slowest script (Lightning's) takes 40 s on a loaded two-core machine


@dataclass(frozen=True)
class Run:
    script: str
    needs: str = "torch"  # the module the script imports
    start_method: str | None = None  # run through launch.py with this multiprocessing start method
    args: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return "-".join(
            [self.script.removesuffix(".py"), *([self.start_method] if self.start_method else []), *self.args]
        )

    def command(self) -> list[str]:
        if self.script.startswith("test_"):
            return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", self.script]
        if self.start_method is not None:
            return [sys.executable, LAUNCHER, self.start_method, self.script, *self.args]
        return [sys.executable, self.script, *self.args]


RUNS = [
    Run("train_main.py", start_method="fork"),
    Run("train_main.py", start_method="spawn"),
    Run("train_module_level.py", start_method="fork"),
    Run("train_module_level.py", start_method="spawn"),
    Run("iterable_stream.py", start_method="spawn", args=("--workers", "0")),
    Run("iterable_stream.py", start_method="fork", args=("--workers", "2")),
    Run("one_shot_save.py"),
    Run("test_training_smoke.py"),
    Run("amp_legacy.py"),
    Run("compiled_fp32.py"),
    Run("conv_fixed_size.py"),
    Run("checkpoint_roundtrip.py"),
    Run("dict_options.py"),
    Run("ddp_gloo.py", start_method="spawn"),
    Run("tf_keras_fit.py", needs="tensorflow"),
    Run("tf_custom_loop.py", needs="tensorflow"),
    Run("hf_trainer.py", needs="transformers", start_method="spawn"),
    Run("lightning_fit.py", needs="lightning"),
]

# Keep the runs small and quiet, and on the CPU even where a GPU is visible.
RUN_ENVIRONMENT = {
    "CUDA_VISIBLE_DEVICES": "",
    "OMP_NUM_THREADS": "1",
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "TF_NUM_INTEROP_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}


def script_names() -> list[str]:
    return sorted(p.name for p in SCRIPTS.glob("*.py") if p.name != LAUNCHER)


def fix_settings() -> Settings:
    return Settings(select=["ALL"], unsafe_fixes=True, show_hints=True)


def test_every_script_is_run():
    assert sorted({run.script for run in RUNS}) == script_names()


def test_every_fix_is_applied_to_a_script():
    linter = Linter(fix_settings())
    applied: set[str] = set()
    for name in script_names():
        outcome = fix_source(linter, (SCRIPTS / name).read_bytes(), name, unsafe=True)
        assert not outcome.errors, outcome.errors
        applied |= set(outcome.applied_codes)
    with_fixes = {rule.code for rule in all_rules() if rule.fix_applicability is not None}
    assert with_fixes - applied == set(), "fixes that no script in tests/fixed_scripts/ exercises"


@dataclass
class Result:
    returncode: int
    output: str


def _execute(run: Run, directory: Path) -> Result:
    try:
        completed = subprocess.run(
            run.command(),
            cwd=directory,
            env={**os.environ, **RUN_ENVIRONMENT},
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        return Result(-1, f"timed out after {TIMEOUT_S} s\n{exc.stdout or ''}{exc.stderr or ''}")
    return Result(completed.returncode, completed.stdout + completed.stderr)


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@dataclass
class FixedRuns:
    """Every run of the fixed scripts (two at a time), and the folder of the scripts as they were."""

    after: dict[str, Result]
    unfixed: Path
    diff: str


@pytest.fixture(scope="module")
def fixed_runs(tmp_path_factory) -> FixedRuns:
    before, after = tmp_path_factory.mktemp("before"), tmp_path_factory.mktemp("after")
    for directory in (before, after):
        for path in SCRIPTS.glob("*.py"):
            shutil.copy(path, directory / path.name)
    fixed = subprocess.run(
        [sys.executable, "-m", "gpulint", ".", "--select", "ALL", "--show-hints", "--fix", "--unsafe-fixes"],
        cwd=after,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert fixed.returncode in (0, 1) and "error" not in fixed.stderr, fixed.stderr
    runs = [run for run in RUNS if _available(run.needs)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outputs = pool.map(lambda run: _execute(run, after), runs)
    return FixedRuns(
        after={run.id: result for run, result in zip(runs, outputs, strict=True)},
        unfixed=before,
        diff="\n".join(_diff(before / n, after / n) for n in script_names()),
    )


def _diff(before: Path, after: Path) -> str:
    import difflib

    return "".join(
        difflib.unified_diff(
            before.read_text().splitlines(True), after.read_text().splitlines(True), str(before.name), str(after.name)
        )
    )


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=lambda run: run.id)
def test_fixed_script_still_runs(run: Run, fixed_runs):
    """The fixed script runs.  The unfixed one is run only when the fixed one fails, to say whose
    fault it is: every script here runs unfixed (its own checks pass), so running it again before
    each fix would only double the suite's time."""
    if not _available(run.needs):
        pytest.skip(f"{run.needs} is not installed")
    after = fixed_runs.after[run.id]
    if after.returncode == 0:
        return
    before = _execute(run, fixed_runs.unfixed)
    assert before.returncode == 0, (
        f"{run.script} does not run unfixed (the script is wrong, not a fix):\n{before.output[-3000:]}"
    )
    raise AssertionError(
        f"{run.script} ran before `gpulint --fix --unsafe-fixes` and fails after it:\n"
        f"{after.output[-3000:]}\n--- the fixes ---\n{fixed_runs.diff}"
    )
