"""What `profile` and `verify` do with a finished run -- record it in the history, hold it
against a baseline (the regression gate), write the HTML report -- and the commands that read
the history: `gpulint history`, `gpulint compare`, `gpulint report`.

The command line only parses options and calls these functions; each prints through a
report.Output and returns the exit code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from gpulint.cli import error
from gpulint.linter.run.safe_files import OutputFile, WriteRefused
from gpulint.runtime_check import compare as compare_mod
from gpulint.runtime_check import html_report, nodes, records, report
from gpulint.runtime_check.history import (
    History,
    HistoryError,
    NoEarlierRun,
    RunRecord,
    git_commit_of,
    history_location,
    parse_since,
    project_root,
)
from gpulint.runtime_check.measure import Command, RunConfig
from gpulint.runtime_check.profile import Profile
from gpulint.runtime_check.report import Output
from gpulint.runtime_check.scale import ScaleResult
from gpulint.runtime_check.sweep import SweepResult
from gpulint.runtime_check.verify import VerifyResult

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE = 0, 1, 2


@dataclass
class HistoryOptions:
    file: Path | None = None  # --history FILE
    record: bool = True  # False with --no-history

    def location(self, start: Path) -> tuple[Path, Path | None] | None:
        """(the database, the project it must lie in) for a run started from `start`; None when
        history is off in the config."""
        from gpulint.linter.config import ConfigError

        try:
            return history_location(start, self.file)
        except ConfigError as exc:
            raise HistoryError(str(exc)) from exc

    def check(self, start: Path, writing: bool) -> None:
        """Refuse (HistoryError) a history that cannot be used, before a run spends minutes
        measuring (History.check: changes nothing)."""
        location = self.location(start)
        if location is not None:
            History.check(*location, writing=writing)

    def open(self, start: Path, create: bool) -> History | None:
        """The history, to record in (`create`) or read-only; None when history is off."""
        location = self.location(start)
        return None if location is None else History.open(location[0], create, within=location[1])


# -- before a run ----------------------------------------------------------------------------
def baseline_error(options: HistoryOptions, command: Command, ref: str) -> str | None:
    """Why `--baseline REF` cannot name a run, found before anything runs (None: it may). A run
    id must be recorded and a git ref must resolve; `last` may name nothing yet (a gate's first
    run becomes the baseline).  Which run of this command it is, is resolved after the run."""
    start = records.run_root(command)
    try:
        if options.location(start) is None:
            return "--baseline needs the run history, which is off in the configuration"
        if ref == "last":
            return None
        if not ref.isdigit() and git_commit_of(ref, start) is None:
            return f"--baseline {ref!r} is neither a run id, `last`, nor a git commit"
        if ref.isdigit():
            history = options.open(start, create=False)
            if history is not None:
                with history:
                    history.load(int(ref))
    except HistoryError as exc:
        return f"--baseline {ref}: {exc}"
    return None


# -- after a run -----------------------------------------------------------------------------
def finish_profile(
    out: Output,
    result: Profile,
    config: RunConfig,
    started_at: float,
    options: HistoryOptions,
    baseline_ref: str | None = None,
    fail_percent: float | None = None,
    html_file: OutputFile | None = None,
    price: float | None = None,
) -> int:
    """Record a measured profile, compare it with `baseline_ref`, gate it, write its report (with
    what it costs at the GPU-hour `price`, when given).
    A history that refuses the run, or a report that cannot be written, is an error line and exit
    2 (as a file --fix may not write); the rest is still done."""
    assert result.command is not None, "a profile that ran knows its command"
    record = records.profile_record(result, config, started_at)
    start = records.run_root(result.command)
    history = None
    refused = False
    try:
        try:
            if options.record:
                history = options.open(start, create=True)
                if history is not None:
                    history.record(record)
                    out.line(f"recorded as run {record.id} in {history.path}")
            elif baseline_ref is not None:
                history = options.open(start, create=False)
        except HistoryError as exc:
            error(f"not recorded: {exc}" if options.record else str(exc))
            if baseline_ref is not None:
                return EXIT_USAGE
            refused = True
        baseline = None
        if baseline_ref is not None:
            if history is None:
                error("--baseline needs the run history, which is off in the configuration")
                return EXIT_USAGE
            try:
                baseline = history.resolve(baseline_ref, like=record, repository=start)
            except NoEarlierRun:
                if baseline_ref != "last" or not options.record:
                    raise
                # A gate's first run (a CI cache that starts empty) has nothing to compare with: it
                # passes, and becomes what the next run is gated against.
                out.line(f"no earlier run of this command to compare with: run {record.id} is the baseline from now on")
        job = job_report(record, history)
        if job is not None:
            report.print_nodes(out, job, MISSING_HINT)
        if html_file is not None:
            try:
                html_report.write(html_file, record, baseline, history, job, price)
                out.line(f"wrote the report to {html_file}")
            except WriteRefused as exc:
                error(f"--html: {exc}; not written")
                refused = True
        if baseline is None:
            return EXIT_USAGE if refused else EXIT_OK
        gate = compare_mod.regression_gate(history, record, baseline, fail_percent)
        out.line(gate.line)
        return EXIT_REGRESSION if gate.failed else EXIT_USAGE if refused else EXIT_OK
    except HistoryError as exc:
        error(str(exc))
        return EXIT_USAGE
    finally:
        if history is not None:
            history.close()


def finish_verify(
    out: Output, result: VerifyResult, command: Command, started_at: float, wall: float, options: HistoryOptions
) -> bool:
    """Record a verify that compared its arms (a failed run is reported, not recorded).  False:
    the history refused it (said in an error line)."""
    if not options.record or result.comparison is None:
        return True
    return _record(out, records.verify_record(result, command, started_at, wall), records.run_root(command), options)


def finish_sweep(
    out: Output, result: SweepResult, command: Command, started_at: float, wall: float, options: HistoryOptions
) -> bool:
    """Record a sweep whose values ran (a failed run is reported, not recorded), as verify's
    comparisons are.  False: the history refused it (said in an error line)."""
    if not options.record or result.failed is not None:
        return True
    return _record(out, records.sweep_record(result, command, started_at, wall), records.run_root(command), options)


def finish_scale(
    out: Output,
    result: ScaleResult,
    command: Command,
    scale_options: list[str],
    started_at: float,
    wall: float,
    options: HistoryOptions,
) -> bool:
    """Record a scaling run that measured every size (a failed run is reported, not recorded).
    False: the history refused it (said in an error line)."""
    if not options.record or result.failed is not None or not result.efficiencies:
        return True
    record = records.scale_run_record(result, command, scale_options, started_at, wall)
    return _record(out, record, records.run_root(command), options)


def _record(out: Output, record: RunRecord, start: Path, options: HistoryOptions) -> bool:
    try:
        history = options.open(start, create=True)
        if history is not None:
            with history:
                history.record(record)
                out.line(f"recorded as run {record.id} in {history.path}")
    except HistoryError as exc:
        error(f"not recorded: {exc}")
        return False
    return True


# -- the nodes of a multi-node job ------------------------------------------------------------
MISSING_HINT = (
    " (each node records in its own history unless they share one: merge them with "
    "`gpulint report RUN --merge THEIR_HISTORY ...`)"
)


def job_report(run: RunRecord, history: History | None, merge: list[Path] | None = None) -> nodes.JobReport | None:
    """The merged view of the multi-node job `run` is part of, from the runs of its nodes in
    `history` and in the history files `merge` names (read only); None for a run of one node.
    Every run is checked as the HTML report checks a stored run: another node's history is input."""
    job = nodes.job_of(run)
    if job is None:
        return None
    runs = [run]
    if history is not None:
        runs += history.job_runs(job["id"])
    for path in merge or []:
        with History.open(path, create=False) as other:
            runs += other.job_runs(job["id"])
    for other_run in runs:
        html_report.check_run(other_run, f"run of job {job['id']}")
    return nodes.merge(runs)


# -- commands on the history -----------------------------------------------------------------
def history_command(
    out: Output,
    options: HistoryOptions,
    script: str | None = None,
    since: str | None = None,
    limit: int | None = 20,
    output_format: str = "text",
) -> int:
    start = Path.cwd()
    try:
        history = options.open(start, create=False)
        if history is None:
            error("the run history is off in the configuration (history = false)")
            return EXIT_USAGE
        with history:
            relative = None if script is None else records.relative_to_project(Path(script), project_root(start))
            runs = history.runs(script=relative, since=None if since is None else parse_since(since), limit=limit)
    except HistoryError as exc:
        error(str(exc))
        return EXIT_USAGE
    if output_format == "json":
        out.line(json.dumps([compare_mod.run_json(r) for r in runs], indent=2))
    else:
        compare_mod.print_history(out, runs, history.path)
    return EXIT_OK


def compare_command(
    out: Output,
    options: HistoryOptions,
    first: str | None = None,
    second: str | None = None,
    output_format: str = "text",
) -> int:
    """`compare`: the last two runs of the latest command; `compare A`: A against the latest run of
    its command; `compare A B`: A (the baseline) against B."""
    try:
        history = options.open(Path.cwd(), create=False)
        if history is None:
            error("the run history is off in the configuration (history = false)")
            return EXIT_USAGE
        with history:
            a, b = _pair(history, first, second)
            rows = compare_mod.differences(history, a, b)
    except HistoryError as exc:
        error(str(exc))
        return EXIT_USAGE
    if output_format == "json":
        out.line(json.dumps(compare_mod.compare_json(a, b, rows), indent=2))
    else:
        compare_mod.print_compare(out, a, b, rows)
    return EXIT_OK


def _pair(history: History, first: str | None, second: str | None) -> tuple[RunRecord, RunRecord]:
    if first is not None and second is not None:
        return history.resolve(first), history.resolve(second)
    if first is not None:
        a = history.resolve(first)
        latest = history.runs(command_key=a.command_key, limit=1)
        if not latest or latest[0].id == a.id:
            raise HistoryError(f"run {a.id} is the latest run of `{a.command}`: name a second run to compare it with")
        return a, history.load(latest[0].saved_id)
    b = history.resolve("last")
    return history.resolve("last", like=b), b


def report_command(
    out: Output,
    options: HistoryOptions,
    ref: str,
    html_file: OutputFile,
    baseline_ref: str | None = None,
    merge: list[Path] | None = None,
    price: float | None = None,
) -> int:
    """`report RUN --html FILE [--baseline REF] [--merge HISTORY ...] [--gpu-hour-price USD]`: the HTML
    report of a stored run; for a node of a multi-node job, merged with the job's other nodes (printed
    too)."""
    try:
        history = options.open(Path.cwd(), create=False)
        if history is None:
            error("the run history is off in the configuration (history = false)")
            return EXIT_USAGE
        with history:
            run = history.resolve(ref)
            baseline = None if baseline_ref is None else history.resolve(baseline_ref, like=run)
            job = job_report(run, history, merge)
            if merge and job is None:
                error(f"--merge: run {run.id} is not part of a multi-node job (torchrun --nnodes 2 or more)")
                return EXIT_USAGE
            html_report.write(html_file, run, baseline, history, job, price)
    except HistoryError as exc:
        error(str(exc))
        return EXIT_USAGE
    except WriteRefused as exc:
        error(f"--html: {exc}; not written")
        return EXIT_USAGE
    if job is not None:
        report.print_nodes(out, job, MISSING_HINT)
    out.line(f"wrote the report of run {run.id} to {html_file}")
    return EXIT_OK
