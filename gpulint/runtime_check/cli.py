"""`gpulint profile`, `verify`, `history`, `compare` and `report`, added to the main app by
`register(app)`.  Options are parsed here; what the commands do is in the modules they call.

Exit codes: 0 measured (profile) or speedup confirmed (verify); 1 verify found no confirmed
speedup, or profile's regression gate failed; 2 usage error; 3 the script never made a training
step; 124 timeout; otherwise the script's own exit code when it failed.
"""

from __future__ import annotations

import sys
import time
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


def _history_options(history_file: Optional[Path], no_history: bool):
    from gpulint.runtime_check.record import HistoryOptions

    return HistoryOptions(history_file, not no_history)


HISTORY_HELP = (
    "The run history database (default: .gpulint/history.db at the project root, or `history` in [tool.gpulint])."
)


def register(app: typer.Typer) -> None:
    @app.command("profile", context_settings={"allow_interspersed_args": False})
    def profile_command(
        command: Optional[List[str]] = typer.Argument(
            None, help="The training command, after `--`: python train.py ARGS or python -m pkg.train ARGS."
        ),
        steps: Optional[int] = typer.Option(
            None, "--steps", help="Optimizer steps to measure after warm-up (default 50)."
        ),
        warmup: int = typer.Option(5, "--warmup", help="Steps to run before timing starts."),
        seconds: Optional[float] = typer.Option(
            None, "--seconds", help="Measure this long after warm-up instead of a step count."
        ),
        timeout: float = typer.Option(
            600.0, "--timeout", help="Stop the run after this many seconds, whatever it is doing."
        ),
        json_file: Optional[Path] = typer.Option(None, "--json", help="Write every figure to this JSON file."),
        show_output: bool = typer.Option(
            False, "--show-output", help="Let the script print to the terminal (no progress bar)."
        ),
        html_file: Optional[Path] = typer.Option(
            None, "--html", help="Write a self-contained HTML report (verdict, figures, plots) to this file."
        ),
        baseline: Optional[str] = typer.Option(
            None,
            "--baseline",
            help="Compare with a recorded run: a run id, a git ref, or `last` (the previous run of this command).",
        ),
        fail_on_regression: Optional[float] = typer.Option(
            None,
            "--fail-on-regression",
            help="With --baseline: exit 1 when step time grew by more than this many percent and beyond the noise.",
        ),
        history_file: Optional[Path] = typer.Option(None, "--history", help=HISTORY_HELP),
        no_history: bool = typer.Option(False, "--no-history", help="Do not record this run."),
    ) -> None:
        """Run a training script and say where its step time goes: input-bound, sync-bound or compute-bound."""
        from gpulint.runtime_check import report
        from gpulint.runtime_check.measure import parse_command
        from gpulint.runtime_check.profile import profile

        from gpulint.runtime_check.record import finish_profile

        try:
            config = _config(steps, warmup, seconds, timeout)
            config.show_output = show_output
            parsed = parse_command(list(command or []))
            if fail_on_regression is not None and (baseline is None or fail_on_regression < 0):
                raise CommandError("--fail-on-regression needs --baseline and a percentage of 0 or more")
        except CommandError as exc:
            _err(str(exc))
            raise typer.Exit(EXIT_USAGE)
        started_at = time.time()
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
                out.line(
                    f"gpulint profile: only {run.steps.total} step(s) ran, "
                    f"none after the {run.steps.warmup} warm-up step(s): "
                    "lower --warmup or let the script train longer"
                )
            raise typer.Exit(EXIT_NO_STEPS)
        report.print_profile(out, result)
        raise typer.Exit(
            finish_profile(
                out,
                result,
                config,
                started_at,
                _history_options(history_file, no_history),
                baseline,
                fail_on_regression,
                html_file,
            )
        )

    @app.command("verify")
    def verify_command(
        script: Path = typer.Argument(..., help="The training script to fix and measure."),
        args: Optional[List[str]] = typer.Argument(None, help="The script's arguments, after `--`."),
        select: Optional[List[str]] = typer.Option(
            None, "--select", help="Rule ids or prefixes whose fixes to verify (default: the default rules)."
        ),
        runs: int = typer.Option(
            3, "--runs", help="Runs of each arm (interleaved A B B A ...) before the first verdict."
        ),
        max_runs: Optional[int] = typer.Option(
            None,
            "--max-runs",
            help="Add A/B pairs while not confirmed, up to this many runs of each (default twice --runs).",
        ),
        steps: int = typer.Option(20, "--steps", help="Measured steps per run."),
        warmup: int = typer.Option(3, "--warmup", help="Warm-up steps per run."),
        timeout: float = typer.Option(600.0, "--timeout", help="Limit for each run, in seconds."),
        python: Optional[str] = typer.Option(
            None, "--python", help="Interpreter to run the script with (default: the one running gpulint)."
        ),
        write: bool = typer.Option(False, "--write", help="Apply the fixes to SCRIPT, only after a confirmed speedup."),
        json_file: Optional[Path] = typer.Option(None, "--json", help="Write every figure to this JSON file."),
        param: Optional[str] = typer.Option(
            None,
            "--param",
            help="Sweep a DataLoader keyword instead of fixing: NAME=V1,V2,... (e.g. num_workers=0,2,4).",
        ),
        history_file: Optional[Path] = typer.Option(None, "--history", help=HISTORY_HELP),
        no_history: bool = typer.Option(False, "--no-history", help="Do not record this run."),
    ) -> None:
        """Apply fixes to a copy, run original and fixed interleaved, and say whether the fix is faster
        (or, with --param, measure each value of a DataLoader keyword and recommend the best)."""
        import shutil

        from gpulint.cli import _split_ids
        from gpulint.runtime_check import report
        from gpulint.runtime_check.measure import Command
        from gpulint.runtime_check.record import finish_verify
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
        started_at = time.time()
        try:
            result = verify(
                script, list(args or []), _split_ids(select), runs, config, interpreter, write, progress, max_runs
            )
        except (VerifyError, CommandError) as exc:
            _err(str(exc))
            raise typer.Exit(EXIT_USAGE)
        if json_file is not None:
            report.write_json(json_file, report.verify_json(result))
        report.print_verify(out, result, list(args or []), None if python is None else interpreter)
        finish_verify(
            out,
            result,
            Command(interpreter, [], [str(script), *(args or [])]),
            started_at,
            time.time() - started_at,
            _history_options(history_file, no_history),
        )
        if result.failed is not None:
            run = result.failed
            if run.status == "timeout":
                raise typer.Exit(EXIT_TIMEOUT)
            if run.status in ("stopped", "finished"):
                raise typer.Exit(EXIT_NO_STEPS)
            raise typer.Exit(run.exit_code or 1)
        raise typer.Exit(0 if result.comparison.outcome == "confirmed" else EXIT_NOT_CONFIRMED)

    register_history(app)


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
        raise typer.Exit(
            EXIT_TIMEOUT if result.failed.status == "timeout" else (result.failed.exit_code or EXIT_NO_STEPS)
        )
    raise typer.Exit(0)


def register_history(app: typer.Typer) -> None:
    @app.command("history")
    def history_command(
        script: Optional[str] = typer.Option(None, "--script", help="Only runs of this script."),
        since: Optional[str] = typer.Option(
            None, "--since", help="Only runs since: 7d, 12h, 30m, or a date (2024-05-01)."
        ),
        limit: int = typer.Option(20, "--limit", help="At most this many runs, newest first."),
        output_format: str = typer.Option("text", "--format", help="text or json."),
        history_file: Optional[Path] = typer.Option(None, "--history", help=HISTORY_HELP),
    ) -> None:
        """List the recorded profile and verify runs."""
        from gpulint.runtime_check.record import history_command as run
        from gpulint.runtime_check.report import Output

        if output_format not in ("text", "json"):
            _err(f"unknown format {output_format!r}; choose text or json")
            raise typer.Exit(EXIT_USAGE)
        raise typer.Exit(run(Output(), _history_options(history_file, False), script, since, limit, output_format))

    @app.command("compare")
    def compare_command(
        first: Optional[str] = typer.Argument(
            None,
            help="The baseline: a run id, a git ref or `last` (default: the run before the latest of its command).",
        ),
        second: Optional[str] = typer.Argument(
            None, help="The run to hold against it (default: the latest run of the same command)."
        ),
        output_format: str = typer.Option("text", "--format", help="text or json."),
        history_file: Optional[Path] = typer.Option(None, "--history", help=HISTORY_HELP),
    ) -> None:
        """Show two recorded runs side by side: every figure, its change, and whether the change is beyond the noise."""
        from gpulint.runtime_check.record import compare_command as run
        from gpulint.runtime_check.report import Output

        if output_format not in ("text", "json"):
            _err(f"unknown format {output_format!r}; choose text or json")
            raise typer.Exit(EXIT_USAGE)
        raise typer.Exit(run(Output(), _history_options(history_file, False), first, second, output_format))

    @app.command("report")
    def report_command(
        run_ref: str = typer.Argument(..., metavar="RUN", help="A run id, a git ref, or `last`."),
        html_file: Path = typer.Option(..., "--html", help="The HTML file to write."),
        baseline: Optional[str] = typer.Option(
            None, "--baseline", help="Show this recorded run beside it (run id, git ref or `last`)."
        ),
        history_file: Optional[Path] = typer.Option(None, "--history", help=HISTORY_HELP),
    ) -> None:
        """Write the self-contained HTML report of a recorded run."""
        from gpulint.runtime_check.record import report_command as run
        from gpulint.runtime_check.report import Output

        raise typer.Exit(run(Output(), _history_options(history_file, False), run_ref, html_file, baseline))
