"""`gpulint profile` and `gpulint verify` (set up by add_profile and add_verify; see gpulint.cli).

Exit codes: 0 measured (profile) or speedup confirmed (verify); 1 verify found no confirmed
speedup; 2 usage error; 3 the script never made a training step; 124 timeout; otherwise the
script's own exit code when it failed (run_exit_code).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpulint.cli import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, error, rule_ids

if TYPE_CHECKING:  # measuring loads psutil and NVML: only when a command runs
    from rich.console import Console

    from gpulint.runtime_check.measure import RunConfig, RunResult

EXIT_NOT_CONFIRMED = EXIT_FINDINGS


def run_exit_code(run: RunResult) -> int:
    """The exit code for a run that gave no measurement: 124 it timed out, 3 it ended (or was
    stopped) without a measured step, else the script's own exit code (1 if it reported none)."""
    from gpulint.runtime_check.measure import EXIT_NO_STEPS, EXIT_TIMEOUT

    if run.status == "timeout":
        return EXIT_TIMEOUT
    if run.status in ("stopped", "finished"):
        return EXIT_NO_STEPS
    return run.exit_code or 1


def _config(steps: int | None, warmup: int, seconds: float | None, timeout: float) -> RunConfig:
    from gpulint.runtime_check.measure import CommandError, RunConfig

    if steps is not None and steps < 1:
        raise CommandError("--steps must be at least 1")
    if seconds is not None and seconds <= 0:
        raise CommandError("--seconds must be positive")
    if warmup < 1:
        raise CommandError("--warmup must be at least 1 (the first step's end is where timing starts)")
    if timeout <= 0:
        raise CommandError("--timeout must be positive")
    if seconds is not None and steps is None:
        return RunConfig(steps=None, warmup=warmup, seconds=seconds, timeout=timeout)
    return RunConfig(steps=steps or 50, warmup=warmup, seconds=seconds, timeout=timeout)


def _progress_bar(console: Console, total: int | None, warmup: int):
    """A rich progress bar fed from the child's progress file; a no-op off a terminal."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    if not console.is_terminal:
        return None, None
    bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} steps"),
                   TimeElapsedColumn(), console=console, transient=True)
    task = bar.add_task("starting", total=(total or 0) + warmup)

    def update(state: dict) -> None:
        done = state.get("steps", 0)
        bar.update(task, completed=done, description="warm-up" if done < warmup else "measuring")

    return bar, update


def add_profile(parser: argparse.ArgumentParser) -> None:
    # REMAINDER: from the first word that is not one of these options, the line is the training
    # command, its own options included (`gpulint profile python train.py --lr 3`).
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="COMMAND",
        help="The training command, after `--`: python train.py ARGS or python -m pkg.train ARGS.",
    )
    parser.add_argument("--steps", type=int, metavar="N", help="Optimizer steps to measure after warm-up (default 50).")
    parser.add_argument("--warmup", type=int, default=5, metavar="N", help="Steps to run before timing starts.")
    parser.add_argument(
        "--seconds", type=float, metavar="S", help="Measure this long after warm-up instead of a step count."
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, metavar="S",
        help="Stop the run after this many seconds, whatever it is doing.",
    )
    parser.add_argument(
        "--json", type=Path, dest="json_file", metavar="FILE", help="Write every figure to this JSON file."
    )
    parser.add_argument(
        "--show-output", action="store_true", help="Let the script print to the terminal (no progress bar)."
    )
    parser.set_defaults(run=profile_command)


def profile_command(options: argparse.Namespace) -> int:
    """Run a training script and say where its step time goes: input-bound, sync-bound or compute-bound."""
    from rich.console import Console

    from gpulint.runtime_check import report
    from gpulint.runtime_check.measure import CommandError, parse_command
    from gpulint.runtime_check.profile import profile

    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    try:
        config = _config(options.steps, options.warmup, options.seconds, options.timeout)
        config.show_output = options.show_output
        parsed = parse_command(command)
    except CommandError as exc:
        error(str(exc))
        return EXIT_ERROR
    console = Console()
    bar, update = None, None
    if not options.show_output:
        bar, update = _progress_bar(Console(stderr=True), config.steps, config.warmup)
    try:
        if bar is not None:
            with bar:
                result = profile(parsed, config, update)
        else:
            result = profile(parsed, config, None)
    except CommandError as exc:
        error(str(exc))
        return EXIT_ERROR
    if options.json_file is not None:
        report.write_json(options.json_file, report.profile_json(result))
    run = result.run
    if not run.ok:
        if run.status not in ("stopped", "finished"):
            report.print_failure(console, run)
        elif run.steps is None:
            report.print_no_steps(console, run)
        else:
            console.print(f"gpulint profile: only {run.steps.total} step(s) ran, none after the {run.steps.warmup} "
                          "warm-up step(s): lower --warmup or let the script train longer", highlight=False)
        return run_exit_code(run)
    report.print_profile(console, result)
    return EXIT_CLEAN


def add_verify(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Apply fixes to a copy, run original and fixed interleaved, and say whether the fix is faster "
        "(or, with --param, measure each value of a DataLoader keyword and recommend the best)."
    )
    parser.add_argument("script", type=Path, metavar="SCRIPT", help="The training script to fix and measure.")
    parser.add_argument("script_args", nargs="*", metavar="ARGS", help="The script's arguments, after `--`.")
    parser.add_argument(
        "--select", action="extend", type=rule_ids, metavar="IDS",
        help="Rule ids or prefixes whose fixes to verify (default: the default rules).",
    )
    parser.add_argument("--runs", type=int, default=3, metavar="N", help="Runs of each arm (interleaved A B B A ...).")
    parser.add_argument("--steps", type=int, default=20, metavar="N", help="Measured steps per run.")
    parser.add_argument("--warmup", type=int, default=3, metavar="N", help="Warm-up steps per run.")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S", help="Limit for each run, in seconds.")
    parser.add_argument(
        "--python", metavar="INTERPRETER", help="Interpreter to run the script with (default: the one running gpulint)."
    )
    parser.add_argument(
        "--write", action="store_true", help="Apply the fixes to SCRIPT, only after a confirmed speedup."
    )
    parser.add_argument(
        "--json", type=Path, dest="json_file", metavar="FILE", help="Write every figure to this JSON file."
    )
    parser.add_argument(
        "--param", metavar="NAME=VALUES",
        help="Sweep a DataLoader keyword instead of fixing: NAME=V1,V2,... (e.g. num_workers=0,2,4).",
    )
    parser.set_defaults(run=verify_command)


def verify_command(options: argparse.Namespace) -> int:
    """Apply fixes to a copy, run original and fixed interleaved, and say whether the fix is faster
    (or, with --param, measure each value of a DataLoader keyword and recommend the best)."""
    import shutil

    from rich.console import Console

    from gpulint.runtime_check import report
    from gpulint.runtime_check.measure import CommandError
    from gpulint.runtime_check.verify import VerifyError, verify

    interpreter = sys.executable
    if options.python is not None:
        interpreter = shutil.which(options.python) or ""
        if not interpreter:
            error(f"interpreter {options.python!r} not found")
            return EXIT_ERROR
    if options.runs < 2:
        error("--runs must be at least 2 to compare spreads")
        return EXIT_ERROR
    try:
        config = _config(options.steps, options.warmup, None, options.timeout)
    except CommandError as exc:
        error(str(exc))
        return EXIT_ERROR
    console = Console()
    err_console = Console(stderr=True)

    def progress(index: int, total: int, arm: str) -> None:
        if err_console.is_terminal:
            err_console.print(f"run {index + 1}/{total}: {arm}", highlight=False)

    if options.param is not None:
        return _sweep(console, options, config, interpreter, progress)
    try:
        result = verify(options.script, options.script_args, options.select, options.runs, config, interpreter,
                        options.write, progress)
    except (VerifyError, CommandError) as exc:
        error(str(exc))
        return EXIT_ERROR
    if options.json_file is not None:
        report.write_json(options.json_file, report.verify_json(result))
    report.print_verify(console, result)
    if result.failed is not None:
        return run_exit_code(result.failed)
    return EXIT_CLEAN if result.comparison.outcome == "confirmed" else EXIT_NOT_CONFIRMED


def _sweep(console: Console, options: argparse.Namespace, config: RunConfig, interpreter: str, progress) -> int:
    from gpulint.runtime_check import report
    from gpulint.runtime_check.measure import CommandError
    from gpulint.runtime_check.sweep import SweepError, sweep

    if options.select or options.write:
        error("--param measures values; it does not combine with --select or --write")
        return EXIT_ERROR
    try:
        result = sweep(options.script, options.script_args, options.param, options.runs, config, interpreter, progress)
    except (SweepError, CommandError) as exc:
        error(str(exc))
        return EXIT_ERROR
    if options.json_file is not None:
        report.write_json(options.json_file, report.sweep_json(result))
    report.print_sweep(console, result)
    if result.failed is not None:
        return run_exit_code(result.failed)
    return EXIT_CLEAN
