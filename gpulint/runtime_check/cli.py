"""`gpulint profile`, `verify`, `scale`, and the commands on the run history `history`, `compare`
and `report` (set up by add_profile, add_verify, add_scale, add_history, add_compare and
add_report; see gpulint.cli).  Options are parsed here; what the commands do is in the modules
they call (record.py for the history).

Exit codes (EXIT_CODES, shown by each command's --help): 0 measured (profile), speedup confirmed
(verify) or near-linear scaling (scale); 1 verify found no confirmed speedup, scale found a size
below the efficiency bar or ranks that mostly wait, or profile's regression gate failed; 4 scale is
inconclusive (within the noise of the bar); 2 usage error, or a run history that refuses the run (a
link, a path outside the project, a read-only or foreign database: checked before the script runs);
3 the script never made a training step; 124 timeout; otherwise the script's own exit code when it
failed (run_exit_code).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from gpulint.cli import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, error
from gpulint.cli.options import non_negative_number, positive_number, rule_ids

if TYPE_CHECKING:  # measuring loads psutil and NVML: only when a command runs
    from gpulint.linter.run.safe_files import OutputFile
    from gpulint.runtime_check.measure import Command, RunConfig, RunResult
    from gpulint.runtime_check.record import HistoryOptions
    from gpulint.runtime_check.report import Output
    from gpulint.runtime_check.scale import ScaleResult

EXIT_NOT_CONFIRMED = EXIT_FINDINGS
EXIT_INCONCLUSIVE = 4  # scale: the efficiency is within the noise of the bar, or a size failed to decide

# What each command's exit codes mean, shown by its --help.
RUN_FAILED = (
    "124 timeout; 3 the script never made a training step; 128+N stopped by signal N (130 Ctrl-C, 143 SIGTERM: "
    "the training processes end with gpulint); otherwise the script's own exit code"
)
EXIT_CODES = {
    "profile": f"Exit codes: 0 measured; 1 the regression gate failed; 2 usage error (a --baseline that names no "
    f"run, or a run history that refuses the run: both refused before the run); {RUN_FAILED}.",
    "verify": f"Exit codes: 0 speedup confirmed (with --param: measured); 1 not confirmed or a slowdown; 2 usage "
    f"error or a refusal; {RUN_FAILED} (of the arm that failed).",
    "scale": "Exit codes: 0 near linear at every size with ranks that do not mostly wait; 1 a size below the "
    "efficiency bar, or ranks that mostly wait (fix the code first); 4 inconclusive: within the noise of the bar; "
    f"2 usage error; {RUN_FAILED} (of the size that failed).",
    "history": "Exit codes: 0 listed; 2 usage error or no history.",
    "compare": "Exit codes: 0 compared (whatever the outcome); 2 usage error, or a run that is not recorded.",
    "report": "Exit codes: 0 written; 2 usage error, or a run that is not recorded.",
}


def _ending_its_runs(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`command` stopped by SIGINT, SIGTERM, SIGHUP or SIGQUIT as by Ctrl-C (measure.stop_on_signals):
    the training run under way ends with it, a line says so, and the exit code is 128 + the
    signal's number, as a shell reports a command a signal ended."""

    def run(options: argparse.Namespace) -> int:
        from gpulint.runtime_check.measure import Stopped, stop_on_signals

        try:
            with stop_on_signals():
                return command(options)
        except Stopped as stop:
            ended = f": ended {stop.ended} and every process it started" if stop.ended else ""
            error(f"stopped by {stop.name}{ended}")
            return 128 + stop.signum

    return run


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
    if warmup < 1:
        raise CommandError("--warmup must be at least 1 (the first step's end is where timing starts)")
    if seconds is not None and steps is None:
        return RunConfig(steps=None, warmup=warmup, seconds=seconds, timeout=timeout)
    return RunConfig(steps=steps or 50, warmup=warmup, seconds=seconds, timeout=timeout)


def _add_measure_options(parser: argparse.ArgumentParser) -> None:
    """How the child measures: the batch functions timed as data wait and the stack sampler."""
    parser.add_argument(
        "--data-fn",
        action="append",
        dest="data_fns",
        metavar="NAME",
        help="Time the calls of this function as data wait: the function that makes the training batches "
        "(`get_batch`, a function of the training loop's module, or `package.module:get_batch`); repeatable. "
        "Without it, a function the training loop calls for its batches is found when the loop assigns its "
        "result and passes it on (`x, y = get_batch('train')` ... `model(x, y)`).",
    )
    parser.add_argument(
        "--no-data-fn-search",
        action="store_true",
        help="Do not look for the training loop's batch function (time only DataLoader, tf.data and --data-fn).",
    )
    parser.add_argument(
        "--no-attribution",
        action="store_true",
        help="Do not sample the training thread's stack (no phases or lines of the step; the least overhead).",
    )
    parser.add_argument(
        "--sample-interval",
        type=positive_number,
        metavar="MS",
        help="Milliseconds between two looks at the training thread's stack (default 20; longer costs less "
        "and sees short phases less often).",
    )


def _apply_measure_options(config: RunConfig, options: argparse.Namespace) -> None:
    from gpulint.runtime_check.measure import CommandError

    data_fns = options.data_fns or []
    for spec in data_fns:
        module, _, name = spec.rpartition(":")
        if not name.isidentifier() or (module and not all(part.isidentifier() for part in module.split("."))):
            raise CommandError(f"--data-fn {spec!r}: give a function name (get_batch) or module:function")
    if options.sample_interval is not None and not 1 <= options.sample_interval <= 10_000:
        raise CommandError("--sample-interval must be between 1 and 10000 milliseconds")
    config.data_fns = list(data_fns)
    config.find_data_fn = not options.no_data_fn_search
    config.attribution = not options.no_attribution
    config.stack_interval = options.sample_interval / 1000 if options.sample_interval is not None else None


def _add_cost_options(parser: argparse.ArgumentParser, counts: bool = True) -> None:
    """What the measured waste costs (costs.py); `counts`: also the job's GPUs and steps per epoch."""
    parser.add_argument(
        "--gpu-hour-price",
        type=positive_number,
        metavar="USD",
        help="Price of one GPU-hour: the report estimates what the measured waste (or a confirmed speed-up) is "
        "worth in GPU-hours and money per epoch and per month, and in GPUs (default: `gpu-hour-price` in "
        "[tool.gpulint]; no money figure without a price).",
    )
    if counts:
        parser.add_argument(
            "--gpus",
            type=int,
            metavar="M",
            help="GPUs the job trains on, for the estimate (default: the processes of the measured run).",
        )
        parser.add_argument(
            "--steps-per-epoch",
            type=int,
            metavar="N",
            help="Optimizer steps per epoch, for the estimate (default: the training DataLoader's length).",
        )


def _cost_settings(options: argparse.Namespace, start: Path) -> tuple[float | None, int | None, int | None]:
    """(price, GPUs, steps per epoch) from the flags, the price else from the configuration;
    CommandError for a value that cannot be used."""
    from gpulint.linter.config import ConfigError
    from gpulint.runtime_check.costs import CostError, check_count, check_price, configured_price
    from gpulint.runtime_check.measure import CommandError

    try:
        price = check_price(options.gpu_hour_price)
        if price is None:
            price = configured_price(start)
        gpus = check_count(getattr(options, "gpus", None), "--gpus")
        steps = check_count(getattr(options, "steps_per_epoch", None), "--steps-per-epoch")
    except (CostError, ConfigError) as exc:
        raise CommandError(str(exc)) from None
    return price, gpus, steps


HISTORY_HELP = (
    "The run history database (default: .gpulint/history.db at the project root, or `history` in [tool.gpulint])."
)


def _add_history_options(parser: argparse.ArgumentParser, record: bool) -> None:
    parser.add_argument("--history", type=Path, dest="history_file", metavar="FILE", help=HISTORY_HELP)
    if record:
        parser.add_argument("--no-history", action="store_true", help="Do not record this run.")


def _history_options(options: argparse.Namespace) -> HistoryOptions:
    from gpulint.runtime_check.record import HistoryOptions

    return HistoryOptions(options.history_file, not getattr(options, "no_history", False))


def _start_of(command: Command) -> Path:
    """Where the configuration of a profiled command is looked for: its script's folder."""
    from gpulint.runtime_check.records import run_root

    return run_root(command)


def _history_refused(history: HistoryOptions, command: Command, writing: bool = True) -> bool:
    """Whether the run history refuses this command's run (said in an error line).  Checked before
    the script runs, so a history that cannot be used costs no measurement."""
    from gpulint.runtime_check.history import HistoryError
    from gpulint.runtime_check.records import run_root

    try:
        history.check(run_root(command), writing)
    except HistoryError as exc:
        error(str(exc))
        return True
    return False


def _will_record(history: HistoryOptions, command: Command) -> bool:
    """Whether a run of this command goes into the history: not with --no-history, nor where the
    configuration turns the history off."""
    from gpulint.runtime_check.history import HistoryError

    try:
        return history.record and history.location(_start_of(command)) is not None
    except HistoryError:
        return False


def add_profile(parser: argparse.ArgumentParser) -> None:
    # REMAINDER: from the first word that is not one of these options, the line is the training
    # command, its own options included (`gpulint profile python train.py --lr 3`).
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="The training command, after `--`: python train.py ARGS, python -m pkg.train ARGS, or under a "
        "launcher (torchrun ..., accelerate launch ...).  On several nodes (torchrun --nnodes N), run it on each "
        "node: each records its ranks under the job's id, and the report merges the nodes recorded.",
    )
    parser.add_argument("--steps", type=int, metavar="N", help="Optimizer steps to measure after warm-up (default 50).")
    parser.add_argument("--warmup", type=int, default=5, metavar="N", help="Steps to run before timing starts.")
    parser.add_argument(
        "--seconds", type=positive_number, metavar="S", help="Measure this long after warm-up instead of a step count."
    )
    parser.add_argument(
        "--timeout",
        type=positive_number,
        default=600.0,
        metavar="S",
        help="Stop the run after this many seconds, whatever it is doing.",
    )
    parser.add_argument(
        "--json", type=Path, dest="json_file", metavar="FILE", help="Write every figure to this JSON file."
    )
    parser.add_argument(
        "--show-output", action="store_true", help="Let the script print to the terminal (no progress bar)."
    )
    parser.add_argument(
        "--flops-per-step",
        type=positive_number,
        metavar="FLOPS",
        help="FLOPs of one training step from the model's own estimate (instead of counting them).",
    )
    parser.add_argument(
        "--peak-tflops",
        type=positive_number,
        metavar="TFLOPS",
        help="The device's peak TFLOP/s for the arithmetic in use, for MFU (instead of gpulint's table).",
    )
    parser.add_argument(
        "--html",
        type=Path,
        dest="html_file",
        metavar="FILE",
        help="Write a self-contained HTML report (verdict, figures, plots over the run) to this file.",
    )
    parser.add_argument(
        "--ops",
        action="store_true",
        help="After the measured steps, profile a few more with torch.profiler and print the top operators by self "
        "time (CPU and CUDA), the share of matmul/conv, elementwise and copies, and what the table says.",
    )
    parser.add_argument(
        "--trace",
        type=Path,
        dest="trace_file",
        metavar="FILE",
        help="Write a Chrome trace (JSON) of those profiled steps: torch's operators and kernels with the step "
        "phases (steps, data wait, compute, checkpoint, logging, validation ...). Opens in Perfetto and TensorBoard.",
    )
    parser.add_argument(
        "--ops-steps",
        type=int,
        default=3,
        metavar="N",
        help="Steps profiled for --ops and --trace (default 3), after one profiler warm-up step; they are not timed.",
    )
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="Compare with a recorded run: a run id, a git ref, or `last` (the previous run of this command).",
    )
    parser.add_argument(
        "--fail-on-regression",
        type=non_negative_number,
        metavar="PCT",
        help="With --baseline: exit 1 when the step time grew by more than PCT percent and beyond the noise.",
    )
    _add_measure_options(parser)
    _add_cost_options(parser)
    _add_history_options(parser, record=True)
    parser.epilog = EXIT_CODES["profile"]
    parser.set_defaults(run=_ending_its_runs(profile_command))


def profile_command(options: argparse.Namespace) -> int:
    """Run a training script and say where its step time goes: input-bound, sync-bound or compute-bound."""
    from gpulint.runtime_check import costs, report
    from gpulint.runtime_check.measure import CommandError, parse_command
    from gpulint.runtime_check.profile import profile
    from gpulint.runtime_check.record import finish_profile

    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    history = _history_options(options)
    try:
        config = _config(options.steps, options.warmup, options.seconds, options.timeout)
        config.show_output = options.show_output
        _apply_measure_options(config, options)
        parsed = parse_command(command)
        if parsed.launch is not None and options.seconds is not None:
            raise CommandError("ranks must stop at the same step: use --steps, not --seconds, with a launcher")
        if options.fail_on_regression is not None and options.baseline is None:
            raise CommandError("--fail-on-regression needs --baseline")
        if options.ops_steps < 1:
            raise CommandError("--ops-steps must be at least 1")
        within = [_start_of(parsed)]
        json_file = _output(options.json_file, "--json", within)
        html_file = _output(options.html_file, "--html", within)
        trace_file = _output(options.trace_file, "--trace", within)
        if options.ops or options.trace_file is not None:
            config.ops = {"steps": options.ops_steps, "trace": options.trace_file is not None}
        price, gpus, steps_per_epoch = _cost_settings(options, _start_of(parsed))
    except CommandError as exc:
        error(str(exc))
        return EXIT_ERROR
    if (history.record or options.baseline is not None) and _history_refused(history, parsed, history.record):
        return EXIT_ERROR
    if options.baseline is not None:  # a baseline that names no run is refused before the run, not after
        from gpulint.runtime_check.record import baseline_error

        problem = baseline_error(history, parsed, options.baseline)
        if problem is not None:
            error(problem)
            return EXIT_ERROR
    started_at = time.time()
    out = report.Output()
    progress = None if options.show_output else report.Progress()
    try:
        result = profile(parsed, config, progress, options.flops_per_step, options.peak_tflops)
    except CommandError as exc:
        error(str(exc))
        return EXIT_ERROR
    finally:
        if progress is not None:
            progress.close()
    result.cost = costs.profile_basis(result, gpus, steps_per_epoch)
    result.recorded = _will_record(history, parsed)
    if not options.ops:
        result.ops = None  # profiled for --trace alone: the table is printed on request
    json_failed = json_file is not None and not _wrote(
        "--json", lambda: report.write_json(json_file, report.profile_json(result))
    )
    run = result.run
    if not run.ok:
        if run.status not in ("stopped", "finished"):
            report.print_failure(out, run)
            report.print_interpreter_hint(out, run, parsed)
        elif run.steps is None:
            report.print_no_steps(out, run)
        else:
            out.line(
                f"gpulint profile: only {run.steps.total} step(s) ran, none after the {run.steps.warmup} "
                "warm-up step(s): lower --warmup or let the script train longer"
            )
        return run_exit_code(run)
    report.print_profile(out, result)
    report.print_costs(
        out,
        result.cost,
        price,
        "the run's data wait, and so its waste, was not measured"
        if costs.on_accelerator(result.run)
        else costs.NO_ACCELERATOR,
    )
    trace_failed = trace_file is not None and not _write_trace(out, result, trace_file)
    code = finish_profile(
        out,
        result,
        config,
        started_at,
        history,
        options.baseline,
        options.fail_on_regression,
        html_file,
        price,
    )
    return EXIT_ERROR if (trace_failed or json_failed) and code == 0 else code


def _output(path: Path | None, option: str, within: Iterable[Path] = ()) -> OutputFile | None:
    """The file named with `option` for gpulint's output, checked before anything runs (a link,
    a FIFO, a folder, a read-only file, a link on the way inside the project ...: CommandError),
    so a file gpulint will not write costs no training run."""
    from gpulint.linter.run.safe_files import OutputFile, WriteRefused
    from gpulint.runtime_check.measure import CommandError

    if path is None:
        return None
    try:
        return OutputFile.checked(path, within)
    except WriteRefused as exc:
        raise CommandError(f"{option}: {exc}") from None


def _wrote(option: str, write: Callable[[], None]) -> bool:
    """Whether `write` wrote the output file named with `option`; when not, a line says why."""
    from gpulint.linter.run.safe_files import WriteRefused

    try:
        write()
    except WriteRefused as exc:
        error(f"{option}: {exc}; not written")
        return False
    return True


def _write_trace(out, result, target: OutputFile) -> bool:
    """Write the trace of the profiled steps; False (and a line saying why) when there is none."""
    from gpulint.runtime_check import operators

    document = operators.trace_document(result.run.processes[0].report) if result.run.processes else None
    if document is None:
        error(f"no trace written to {target}: no step was profiled after the measured ones")
        return False
    if not _wrote("--trace", lambda: operators.write_trace(target, document)):
        return False
    ops = result.run.processes[0].report["ops"]
    first, count = ops["first_step"], len(ops["steps"])
    which = f"step {first}" if count == 1 else f"steps {first}-{first + count - 1}"
    out.line(
        f"wrote the trace of {which} to {target} "
        "(open it in Perfetto, TensorBoard or chrome DevTools' Performance panel)"
    )
    return True


def add_verify(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Apply fixes to a copy, run original and fixed interleaved, and say whether the fix is faster "
        "(or, with --param, measure each value of a parameter and recommend the best)."
    )
    parser.add_argument("script", type=Path, metavar="SCRIPT", help="The training script to fix and measure.")
    parser.add_argument("script_args", nargs="*", metavar="ARGS", help="The script's arguments, after `--`.")
    parser.add_argument(
        "--select",
        action="extend",
        type=rule_ids,
        metavar="IDS",
        help="Rule ids or prefixes whose fixes to verify (default: the default rules).",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        metavar="N",
        help="Runs of each arm (interleaved A B B A ...) before the first verdict.",
    )
    parser.add_argument(
        "--max-runs",
        type=int,
        metavar="N",
        help="Add A/B pairs while not confirmed, up to this many runs of each (default three times --runs).",
    )
    parser.add_argument("--steps", type=int, default=20, metavar="N", help="Measured steps per run.")
    parser.add_argument("--warmup", type=int, default=3, metavar="N", help="Warm-up steps per run.")
    parser.add_argument(
        "--timeout", type=positive_number, default=600.0, metavar="S", help="Limit for each run, in seconds."
    )
    parser.add_argument(
        "--python", metavar="INTERPRETER", help="Interpreter to run the script with (default: the one running gpulint)."
    )
    parser.add_argument(
        "--write", action="store_true", help="Apply the fixes to SCRIPT, only after a confirmed speedup."
    )
    parser.add_argument(
        "--launcher",
        metavar="COMMAND",
        help="Run each arm under this launcher, as one shell word: e.g. 'torchrun --nproc-per-node 2' "
        "(every rank runs the arm; the step time is rank 0's).",
    )
    parser.add_argument(
        "--json", type=Path, dest="json_file", metavar="FILE", help="Write every figure to this JSON file."
    )
    parser.add_argument(
        "--param",
        metavar="NAME=VALUES",
        help="Sweep a value instead of fixing: NAME=V1,V2,... (e.g. num_workers=0,2,4 or batch_size=32,64,128), "
        "set through the script's argparse option, constant or DataLoader keyword.",
    )
    _add_measure_options(parser)
    _add_cost_options(parser)
    _add_history_options(parser, record=True)
    parser.epilog = EXIT_CODES["verify"]
    parser.set_defaults(run=_ending_its_runs(verify_command))


def verify_command(options: argparse.Namespace) -> int:
    """Apply fixes to a copy, run original and fixed interleaved, and say whether the fix is faster
    (or, with --param, measure each value of a parameter and recommend the best)."""
    import shutil

    from gpulint.runtime_check import costs, report
    from gpulint.runtime_check.measure import Command, CommandError
    from gpulint.runtime_check.record import finish_verify
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
    if options.max_runs is not None and options.max_runs < options.runs:
        error("--max-runs must be at least --runs")
        return EXIT_ERROR
    try:
        config = _config(options.steps, options.warmup, None, options.timeout)
        _apply_measure_options(config, options)
        price, gpus, steps_per_epoch = _cost_settings(options, options.script.resolve().parent)
        json_file = _output(options.json_file, "--json", [_start_of(Command(interpreter, [], [str(options.script)]))])
    except CommandError as exc:
        error(str(exc))
        return EXIT_ERROR
    out = report.Output()

    def progress(index: int, total: int, arm: str) -> None:
        if sys.stderr.isatty():
            print(f"run {index + 1} (at most {total}): {arm}", file=sys.stderr)

    if options.param is not None:
        if options.launcher is not None:
            error("--param runs one process per value; it does not combine with --launcher")
            return EXIT_ERROR
        return _sweep(out, options, config, interpreter, progress, json_file)
    history = _history_options(options)
    command = Command(interpreter, [], [str(options.script), *options.script_args])
    if history.record and _history_refused(history, command):
        return EXIT_ERROR
    launch = None
    if options.launcher is not None:
        try:
            launch = verify_launch(options.launcher, options.script)
        except CommandError as exc:
            error(str(exc))
            return EXIT_ERROR
    started_at = time.time()
    try:
        result = verify(
            options.script,
            options.script_args,
            options.select,
            options.runs,
            config,
            interpreter,
            options.write,
            progress,
            options.max_runs,
            launch,
        )
    except (VerifyError, CommandError) as exc:
        error(str(exc))
        return EXIT_ERROR
    if launch is not None and gpus is None:
        gpus = launch.nproc
    result.cost = costs.verify_basis(result, gpus, steps_per_epoch)
    json_failed = json_file is not None and not _wrote(
        "--json", lambda: report.write_json(json_file, report.verify_json(result))
    )
    report.print_verify(out, result, options.script_args, None if options.python is None else interpreter)
    if result.failed is None:
        confirmed = result.comparison is not None and result.comparison.outcome == "confirmed"
        report.print_costs(
            out, result.cost, price, costs.NO_ACCELERATOR if confirmed else "no confirmed speed-up to price"
        )
    recorded = finish_verify(out, result, command, started_at, time.time() - started_at, history)
    if result.failed is not None:
        return run_exit_code(result.failed)
    if not recorded or json_failed:
        return EXIT_ERROR
    assert result.comparison is not None  # verify() compares whenever no run failed
    return EXIT_CLEAN if result.comparison.outcome == "confirmed" else EXIT_NOT_CONFIRMED


def verify_launch(text: str, script: Path):
    """The Launch of `--launcher 'torchrun --nproc-per-node 2'` for SCRIPT."""
    import shlex

    from gpulint.runtime_check.launchers import LaunchError, parse_launch
    from gpulint.runtime_check.measure import CommandError

    try:
        launched = parse_launch([*shlex.split(text), str(script)])
    except (LaunchError, ValueError) as exc:
        raise CommandError(f"--launcher {text!r}: {exc}") from None
    if launched is None or launched[1] != [str(script)]:
        raise CommandError(
            f"--launcher {text!r} is not a launcher command: give e.g. 'torchrun --nproc-per-node 2' "
            "or 'accelerate launch --num_processes 2', without the script"
        )
    return launched[0]


def _sweep(
    out: Output,
    options: argparse.Namespace,
    config: RunConfig,
    interpreter: str,
    progress,
    json_file: OutputFile | None,
) -> int:
    from gpulint.runtime_check import report
    from gpulint.runtime_check.measure import Command, CommandError
    from gpulint.runtime_check.record import finish_sweep
    from gpulint.runtime_check.sweep import SweepError, sweep

    if options.select or options.write:
        error("--param measures values; it does not combine with --select or --write")
        return EXIT_ERROR
    history = _history_options(options)
    command = Command(interpreter, [], [str(options.script), *options.script_args])
    if history.record and _history_refused(history, command):
        return EXIT_ERROR
    started_at = time.time()
    try:
        result = sweep(options.script, options.script_args, options.param, options.runs, config, interpreter, progress)
    except (SweepError, CommandError) as exc:
        error(str(exc))
        return EXIT_ERROR
    json_failed = json_file is not None and not _wrote(
        "--json", lambda: report.write_json(json_file, report.sweep_json(result))
    )
    report.print_sweep(out, result)
    recorded = finish_sweep(out, result, command, started_at, time.time() - started_at, history)
    if result.failed is not None:
        return run_exit_code(result.failed)
    return EXIT_ERROR if json_failed or not recorded else EXIT_CLEAN


def add_scale(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="The training script, after `--`: train.py ARGS or python -m pkg.train ARGS.",
    )
    parser.add_argument(
        "--nproc",
        required=True,
        metavar="N,N,...",
        help="Process counts to compare, e.g. 1,2,4 (the smallest is the base).",
    )
    parser.add_argument("--runs", type=int, default=3, metavar="N", help="Runs at each size, in rotating order.")
    parser.add_argument("--steps", type=int, default=20, metavar="N", help="Measured steps per run.")
    parser.add_argument("--warmup", type=int, default=3, metavar="N", help="Warm-up steps per run.")
    parser.add_argument(
        "--timeout", type=positive_number, default=600.0, metavar="S", help="Limit for each run, in seconds."
    )
    parser.add_argument(
        "--strong",
        metavar="NAME=GLOBAL",
        help="Strong scaling: keep the global batch, NAME=GLOBAL (e.g. batch_size=256); each size runs with "
        "GLOBAL/N per rank.",
    )
    parser.add_argument(
        "--nnodes",
        type=int,
        metavar="N",
        help="Across N nodes: run this same command on every node (with --rdzv-endpoint); --nproc counts "
        "processes per node, and the figures are this node's ranks'.",
    )
    parser.add_argument(
        "--rdzv-endpoint",
        metavar="HOST:PORT",
        help="With --nnodes: where the nodes meet (torchrun's c10d rendezvous); run i of the sweep uses PORT + i.",
    )
    parser.add_argument(
        "--rdzv-id",
        default="gpulint-scale",
        metavar="ID",
        help="With --nnodes: the rendezvous id, the same on every node (run i uses ID-i).",
    )
    parser.add_argument(
        "--json", type=Path, dest="json_file", metavar="FILE", help="Write every figure to this JSON file."
    )
    _add_measure_options(parser)
    _add_cost_options(parser, counts=False)
    parser.add_argument(
        "--steps-per-epoch",
        type=int,
        metavar="N",
        help="Optimizer steps per epoch at the largest size, for the cost estimate.",
    )
    _add_history_options(parser, record=True)
    parser.epilog = EXIT_CODES["scale"]
    parser.set_defaults(run=_ending_its_runs(scale_command))


def scale_command(options: argparse.Namespace) -> int:
    """Run the script under torchrun at each process count and say whether throughput scales
    near-linearly (about 90% efficiency at 2x, 80% at 4x), and what to fix when it does not."""
    from gpulint.runtime_check import costs, report
    from gpulint.runtime_check.launchers import LaunchError
    from gpulint.runtime_check.measure import CommandError, parse_command
    from gpulint.runtime_check.record import finish_scale
    from gpulint.runtime_check.scale import ScaleError, parse_sizes, scale, scale_record

    if options.runs < 2:
        error("--runs must be at least 2 for an interval")
        return EXIT_ERROR

    def progress(index: int, total: int, what: str) -> None:
        if sys.stderr.isatty():
            print(f"run {index + 1}/{total}: {what}", file=sys.stderr)

    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    started_at = time.time()
    history = _history_options(options)
    try:
        config = _config(options.steps, options.warmup, None, options.timeout)
        _apply_measure_options(config, options)
        parsed = parse_command(command)
        price, _, steps_per_epoch = _cost_settings(options, _start_of(parsed))
        sizes = parse_sizes(options.nproc)
        rendezvous = _rendezvous(options)
        json_file = _output(options.json_file, "--json", [_start_of(parsed)])
        if history.record and _history_refused(history, parsed):
            return EXIT_ERROR
        result = scale(parsed, sizes, options.runs, config, options.strong, progress, rendezvous)
    except (ScaleError, CommandError, LaunchError) as exc:
        error(str(exc))
        return EXIT_ERROR
    result.cost = costs.scale_basis(result, steps_per_epoch)
    json_failed = json_file is not None and not _wrote(
        "--json", lambda: report.write_json(json_file, scale_record(result))
    )
    out = report.Output()
    report.print_scale(out, result)
    if result.failed is None:
        missing = "no efficiency measured at a larger size"
        if result.efficiencies:
            missing = costs.INCONCLUSIVE_SCALING if result.kind == "inconclusive" else costs.NO_ACCELERATOR
        report.print_costs(out, result.cost, price, missing)
    scale_options = ["--nproc", options.nproc, *(["--strong", options.strong] if options.strong else [])]
    if rendezvous is not None:
        scale_options += ["--nnodes", str(rendezvous.nnodes), "--rdzv-endpoint", options.rdzv_endpoint]
        scale_options += ["--rdzv-id", rendezvous.job]
    recorded = finish_scale(out, result, parsed, scale_options, started_at, time.time() - started_at, history)
    if result.failed is None and (not recorded or json_failed):
        return EXIT_ERROR
    return scale_exit_code(result)


def _rendezvous(options: argparse.Namespace):
    """The multi-node rendezvous of `scale --nnodes N --rdzv-endpoint HOST:PORT`; None on one node."""
    from gpulint.runtime_check.launchers import LaunchError, Rendezvous

    if options.nnodes is None and options.rdzv_endpoint is None:
        return None
    if options.nnodes is None or options.rdzv_endpoint is None:
        raise LaunchError("--nnodes and --rdzv-endpoint go together: every node runs `gpulint scale` with both")
    return Rendezvous.parse(options.nnodes, options.rdzv_endpoint, options.rdzv_id)


def scale_exit_code(result: ScaleResult) -> int:
    """0 scales; 1 below the bar or starved ranks; 4 inconclusive; a failed run's own code."""
    if result.failed is not None:
        return run_exit_code(result.failed)
    if result.kind == "scales":
        return EXIT_CLEAN
    return EXIT_INCONCLUSIVE if result.kind == "inconclusive" else EXIT_NOT_CONFIRMED


# -- the run history -----------------------------------------------------------------------
def _output_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", dest="output_format", choices=("text", "json"), default="text", help="Output format."
    )


def add_history(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--script", metavar="PATH", help="Only runs of this script.")
    parser.add_argument("--since", metavar="WHEN", help="Only runs since: 7d, 12h, 30m, or a date (2024-05-01).")
    parser.add_argument("--limit", type=int, default=20, metavar="N", help="At most this many runs, newest first.")
    _output_format(parser)
    _add_history_options(parser, record=False)
    parser.epilog = EXIT_CODES["history"]
    parser.set_defaults(run=history_command)


def history_command(options: argparse.Namespace) -> int:
    from gpulint.runtime_check.record import history_command as run
    from gpulint.runtime_check.report import Output

    return run(Output(), _history_options(options), options.script, options.since, options.limit, options.output_format)


def add_compare(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "first",
        nargs="?",
        metavar="A",
        help="The baseline: a run id, a git ref or `last` (default: the run before the latest of its command).",
    )
    parser.add_argument(
        "second", nargs="?", metavar="B", help="The run to hold against it (default: the latest run of its command)."
    )
    _output_format(parser)
    _add_history_options(parser, record=False)
    parser.epilog = EXIT_CODES["compare"]
    parser.set_defaults(run=compare_command)


def compare_command(options: argparse.Namespace) -> int:
    from gpulint.runtime_check.record import compare_command as run
    from gpulint.runtime_check.report import Output

    return run(Output(), _history_options(options), options.first, options.second, options.output_format)


def add_report(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ref", metavar="RUN", help="A run id, a git ref, or `last`.")
    parser.add_argument(
        "--html", type=Path, dest="html_file", required=True, metavar="FILE", help="The HTML file to write."
    )
    parser.add_argument(
        "--baseline", metavar="REF", help="Show this recorded run beside it (a run id, a git ref or `last`)."
    )
    parser.add_argument(
        "--merge",
        type=Path,
        action="append",
        metavar="HISTORY",
        help="For a node of a multi-node job (torchrun --nnodes N): also read the job's other nodes from this "
        "run history (another node's file; repeatable), merged into one view: each node, the slowest, the "
        "collective wait split into intra-node and inter-node.",
    )
    _add_cost_options(parser, counts=False)
    _add_history_options(parser, record=False)
    parser.epilog = EXIT_CODES["report"]
    parser.set_defaults(run=report_command)


def report_command(options: argparse.Namespace) -> int:
    from gpulint.runtime_check.measure import CommandError
    from gpulint.runtime_check.record import report_command as run
    from gpulint.runtime_check.report import Output

    try:
        price, _, _ = _cost_settings(options, Path.cwd())
        html_file = _output(options.html_file, "--html")
    except CommandError as exc:
        error(str(exc))
        return EXIT_ERROR
    assert html_file is not None  # (a required option)
    return run(Output(), _history_options(options), options.run_ref, html_file, options.baseline, options.merge, price)
