"""`gpulint profile` and `gpulint verify`, added to the main app by `register(app)`.

Exit codes: 0 measured (profile) or speedup confirmed (verify); 1 verify found no confirmed
speedup; 2 usage error; 3 the script never made a training step; 124 timeout; otherwise the
script's own exit code when it failed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from gpulint.runtime_check.measure import EXIT_NO_STEPS, EXIT_TIMEOUT, CommandError, RunConfig

EXIT_USAGE = 2
EXIT_NOT_CONFIRMED = 1


def _err(message: str) -> None:
    typer.echo(f"gpulint: error: {message}", err=True)


def _config(steps: Optional[int], warmup: int, seconds: Optional[float], timeout: float) -> RunConfig:
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


def register(app: typer.Typer) -> None:
    @app.command("profile", context_settings={"allow_interspersed_args": False})
    def profile_command(
        command: Optional[List[str]] = typer.Argument(None, help="The training command, after `--`: python train.py ARGS or python -m pkg.train ARGS."),
        steps: Optional[int] = typer.Option(None, "--steps", help="Optimizer steps to measure after warm-up (default 50)."),
        warmup: int = typer.Option(5, "--warmup", help="Steps to run before timing starts."),
        seconds: Optional[float] = typer.Option(None, "--seconds", help="Measure this long after warm-up instead of a step count."),
        timeout: float = typer.Option(600.0, "--timeout", help="Stop the run after this many seconds, whatever it is doing."),
        json_file: Optional[Path] = typer.Option(None, "--json", help="Write every figure to this JSON file."),
        show_output: bool = typer.Option(False, "--show-output", help="Let the script print to the terminal (no progress bar)."),
    ) -> None:
        """Run a training script and say where its step time goes: input-bound, sync-bound or compute-bound."""
        from gpulint.runtime_check import report
        from gpulint.runtime_check.measure import parse_command
        from gpulint.runtime_check.profile import profile

        try:
            config = _config(steps, warmup, seconds, timeout)
            config.show_output = show_output
            parsed = parse_command(list(command or []))
        except CommandError as exc:
            _err(str(exc))
            raise typer.Exit(EXIT_USAGE)
        out = report.Output()
        progress = None if show_output else report.Progress()
        try:
            result = profile(parsed, config, progress)
        except CommandError as exc:
            _err(str(exc))
            raise typer.Exit(EXIT_USAGE)
        finally:
            if progress is not None:
                progress.close()
        if json_file is not None:
            report.write_json(json_file, report.profile_json(result))
        run = result.run
        if run.status not in ("stopped", "finished"):
            report.print_failure(out, run)
            raise typer.Exit(EXIT_TIMEOUT if run.status == "timeout" else (run.exit_code or 1))
        if run.steps is None or run.steps.count == 0:
            if run.steps is None:
                report.print_no_steps(out, run)
            else:
                out.line(f"gpulint profile: only {run.steps.total} step(s) ran, none after the {run.steps.warmup} warm-up step(s): "
                         "lower --warmup or let the script train longer")
            raise typer.Exit(EXIT_NO_STEPS)
        report.print_profile(out, result)
        raise typer.Exit(0)

    @app.command("verify")
    def verify_command(
        script: Path = typer.Argument(..., help="The training script to fix and measure."),
        args: Optional[List[str]] = typer.Argument(None, help="The script's arguments, after `--`."),
        select: Optional[List[str]] = typer.Option(None, "--select", help="Rule ids or prefixes whose fixes to verify (default: the default rules)."),
        runs: int = typer.Option(3, "--runs", help="Runs of each arm (interleaved A B B A ...) before the first verdict."),
        max_runs: Optional[int] = typer.Option(None, "--max-runs", help="Add A/B pairs while not confirmed, up to this many runs of each (default twice --runs)."),
        steps: int = typer.Option(20, "--steps", help="Measured steps per run."),
        warmup: int = typer.Option(3, "--warmup", help="Warm-up steps per run."),
        timeout: float = typer.Option(600.0, "--timeout", help="Limit for each run, in seconds."),
        python: Optional[str] = typer.Option(None, "--python", help="Interpreter to run the script with (default: the one running gpulint)."),
        write: bool = typer.Option(False, "--write", help="Apply the fixes to SCRIPT, only after a confirmed speedup."),
        json_file: Optional[Path] = typer.Option(None, "--json", help="Write every figure to this JSON file."),
        param: Optional[str] = typer.Option(None, "--param", help="Sweep a DataLoader keyword instead of fixing: NAME=V1,V2,... (e.g. num_workers=0,2,4)."),
    ) -> None:
        """Apply fixes to a copy, run original and fixed interleaved, and say whether the fix is faster
        (or, with --param, measure each value of a DataLoader keyword and recommend the best)."""
        import shutil

        from gpulint.cli import _split_ids
        from gpulint.runtime_check import report
        from gpulint.runtime_check.verify import VerifyError, verify

        interpreter = sys.executable
        if python is not None:
            interpreter = shutil.which(python) or ""
            if not interpreter:
                _err(f"interpreter {python!r} not found")
                raise typer.Exit(EXIT_USAGE)
        if runs < 2:
            _err("--runs must be at least 2 to compare spreads")
            raise typer.Exit(EXIT_USAGE)
        if max_runs is not None and max_runs < runs:
            _err("--max-runs must be at least --runs")
            raise typer.Exit(EXIT_USAGE)
        try:
            config = _config(steps, warmup, None, timeout)
        except CommandError as exc:
            _err(str(exc))
            raise typer.Exit(EXIT_USAGE)
        out = report.Output()

        def progress(index: int, total: int, arm: str) -> None:
            if sys.stderr.isatty():
                print(f"run {index + 1} (at most {total}): {arm}", file=sys.stderr)

        if param is not None:
            _sweep(out, script, list(args or []), param, select, write, runs, config, interpreter, json_file, progress)
        try:
            result = verify(script, list(args or []), _split_ids(select), runs, config, interpreter, write, progress, max_runs)
        except (VerifyError, CommandError) as exc:
            _err(str(exc))
            raise typer.Exit(EXIT_USAGE)
        if json_file is not None:
            report.write_json(json_file, report.verify_json(result))
        report.print_verify(out, result, list(args or []), None if python is None else interpreter)
        if result.failed is not None:
            run = result.failed
            if run.status == "timeout":
                raise typer.Exit(EXIT_TIMEOUT)
            if run.status in ("stopped", "finished"):
                raise typer.Exit(EXIT_NO_STEPS)
            raise typer.Exit(run.exit_code or 1)
        raise typer.Exit(0 if result.comparison.outcome == "confirmed" else EXIT_NOT_CONFIRMED)


def _sweep(out, script, args, param, select, write, runs, config, interpreter, json_file, progress) -> None:
    from gpulint.runtime_check import report
    from gpulint.runtime_check.sweep import SweepError, sweep

    if select or write:
        _err("--param measures values; it does not combine with --select or --write")
        raise typer.Exit(EXIT_USAGE)
    try:
        result = sweep(script, args, param, runs, config, interpreter, progress)
    except (SweepError, CommandError) as exc:
        _err(str(exc))
        raise typer.Exit(EXIT_USAGE)
    if json_file is not None:
        report.write_json(json_file, report.sweep_json(result))
    report.print_sweep(out, result)
    if result.failed is not None:
        raise typer.Exit(EXIT_TIMEOUT if result.failed.status == "timeout" else (result.failed.exit_code or EXIT_NO_STEPS))
    raise typer.Exit(0)
