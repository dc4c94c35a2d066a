"""The `gpulint` command line.

`gpulint PATH...` is `gpulint check PATH...` (as `ruff check`): the entry point inserts `check`
unless the first argument names another command.  Exit codes follow ruff: 0 nothing to report,
1 findings remain (or --diff would change files), 2 usage error, bad configuration or internal error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from gpulint import __version__
from gpulint.linter.config import ConfigError, Settings, find_config, load_settings, validate

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Find and fix the training code that starves your GPUs.",
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _err(message: str) -> None:
    typer.echo(f"gpulint: error: {message}", err=True)


def _split_ids(values: Optional[List[str]]) -> Optional[List[str]]:
    """`--select GL1,GL2 --select GL7` -> ["GL1", "GL2", "GL7"]."""
    if values is None:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def resolve_settings(
    paths: List[Path],
    config: Optional[Path],
    select: Optional[List[str]] = None,
    extend_select: Optional[List[str]] = None,
    ignore: Optional[List[str]] = None,
    unsafe_fixes: Optional[bool] = None,
) -> Settings:
    """Settings from the config file (given, or the nearest pyproject.toml with [tool.gpulint])
    with the command line on top.  Raises ConfigError."""
    if config is not None and not config.is_file():
        raise ConfigError(f"config file {config} does not exist")
    start = paths[0] if paths else Path.cwd()
    config_file = config if config is not None else find_config(start)
    settings = load_settings(config_file, start)
    if select is not None:
        settings.select = _split_ids(select)
    settings.extend_select += _split_ids(extend_select) or []
    settings.ignore += _split_ids(ignore) or []
    if unsafe_fixes is not None:
        settings.unsafe_fixes = unsafe_fixes
    validate(settings)
    return settings


def _use_color() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


@app.command("check")
def check(
    paths: Optional[List[Path]] = typer.Argument(None, help="Files or directories; `-` reads standard input."),
    fix: bool = typer.Option(False, "--fix", help="Apply safe fixes (and unsafe ones with --unsafe-fixes)."),
    unsafe_fixes: Optional[bool] = typer.Option(None, "--unsafe-fixes/--no-unsafe-fixes", help="Also offer and apply fixes that may change behaviour."),
    diff: bool = typer.Option(False, "--diff", help="Print the diff the fixes would make; write nothing."),
    select: Optional[List[str]] = typer.Option(None, "--select", help="Rule ids or prefixes to enable (comma-separated; ALL for every rule)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Rule ids or prefixes to disable."),
    extend_select: Optional[List[str]] = typer.Option(None, "--extend-select", help="Rule ids or prefixes to add to the selection."),
    output_format: str = typer.Option("text", "--format", help="Output format: text, json, sarif, github, rdjson or gitlab."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when findings remain."),
    statistics: bool = typer.Option(False, "--statistics", help="Count findings per rule instead of listing them."),
    config: Optional[Path] = typer.Option(None, "--config", help="A pyproject.toml ([tool.gpulint]) or gpulint.toml."),
    stdin_filename: Optional[str] = typer.Option(None, "--stdin-filename", help="The name of the file read from standard input."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Worker processes (default: the cores available)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the result cache."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Where to keep the result cache (default: .gpulint_cache in the project root)."),
    add_suppressions: bool = typer.Option(False, "--add-suppressions", help="Write `# gpulint: ignore[ID]` on every current finding's line (adopt gpulint on existing code)."),
    report_unused_suppressions: bool = typer.Option(False, "--report-unused-suppressions", help="Also report suppression comments that suppress nothing (rule GL900)."),
) -> None:
    """Lint training code (the default command)."""
    from gpulint.linter import reporters
    from gpulint.linter.run.outcome import RunOptions, RunResult
    from gpulint.linter.run.runner import run

    if output_format not in reporters.FORMATS:
        _err(f"unknown format {output_format!r}; choose from {', '.join(reporters.FORMATS)}")
        raise typer.Exit(EXIT_ERROR)
    paths = paths or [Path(".")]
    reading_stdin = [str(p) for p in paths] == ["-"]
    try:
        settings = resolve_settings(
            [Path(stdin_filename)] if reading_stdin and stdin_filename else paths,
            config, select, extend_select, ignore, unsafe_fixes,
        )
    except ConfigError as exc:
        _err(str(exc))
        raise typer.Exit(EXIT_ERROR)
    if report_unused_suppressions:
        settings.extend_select.append("GL900")  # the flag is a shorthand for selecting the rule
    if add_suppressions:
        _add_suppressions(paths, settings, reading_stdin, fix or diff)

    options = RunOptions(
        fix=fix,
        diff=diff,
        with_edits=output_format in reporters.NEEDS_EDITS,
    )
    if reading_stdin:
        result, fixed_source = _run_stdin(settings, options, stdin_filename or "-")
    else:
        result, fixed_source = _run_paths(paths, settings, options, jobs, None if no_cache else cache_dir or True), None

    for line in result.errors:
        _err(line)

    report_settings = reporters.ReportSettings(
        settings=settings,
        color=_use_color() and output_format == "text",
        statistics=statistics,
        fix_mode=fix and not diff,
    )
    if diff:
        diffs = [o.diff for o in result.outcomes if o.diff]
        if diffs:
            typer.echo("".join(diffs), nl=False)
        would_fix = sum(o.fixed for o in result.outcomes if o.diff)
        typer.echo(f"Would fix {would_fix} problem{'s' if would_fix != 1 else ''}.", err=True)
        code = EXIT_FINDINGS if diffs and not exit_zero else EXIT_CLEAN
    else:
        if fixed_source is not None:
            sys.stdout.buffer.write(fixed_source)
            sys.stdout.flush()
            typer.echo(reporters.render(output_format, result, report_settings), err=True)
        else:
            typer.echo(reporters.render(output_format, result, report_settings))
        code = EXIT_FINDINGS if result.findings and not exit_zero else EXIT_CLEAN
    if result.path_errors or any(o.errors for o in result.outcomes):
        code = EXIT_ERROR
    raise typer.Exit(code)


def _add_suppressions(paths: List[Path], settings: Settings, reading_stdin: bool, fixing: bool) -> None:
    from gpulint.linter.run.add_suppressions import add_suppressions
    from gpulint.linter.engine import Linter

    if reading_stdin or fixing:
        _err("--add-suppressions edits files in place; it cannot be combined with standard input, --fix or --diff")
        raise typer.Exit(EXIT_ERROR)
    outcome = add_suppressions(paths, Linter(settings))
    for line in outcome.errors:
        _err(line)
    plural = "s" if outcome.added != 1 else ""
    typer.echo(f"Added {outcome.added} suppression{plural} in {outcome.files} file{'s' if outcome.files != 1 else ''}.", err=True)
    raise typer.Exit(EXIT_ERROR if outcome.errors else EXIT_CLEAN)


def _run_paths(paths: List[Path], settings: Settings, options, jobs: Optional[int], cache_dir):
    """Run over files with workers, the cache (`cache_dir`: a folder, True for the default, None
    for none) and a progress bar on long runs at a terminal."""
    from gpulint.linter.run.cache import ResultCache, default_cache_dir
    from gpulint.linter.run.parallel import DelayedProgress, default_jobs
    from gpulint.linter.run.runner import run

    cache = None
    if cache_dir is not None:
        folder = default_cache_dir(settings.root) if cache_dir is True else cache_dir
        cache = ResultCache.for_run(folder, settings.fingerprint(), options)
    progress = DelayedProgress()
    try:
        return run(paths, settings, options, jobs=jobs or default_jobs(), cache=cache, progress=progress)
    finally:
        progress.close()


def _run_stdin(settings: Settings, options, name: str):
    """Lint standard input; with --fix the fixed source goes to stdout (as ruff does for editors)."""
    from gpulint.linter.engine import Linter
    from gpulint.linter.run.outcome import RunResult
    from gpulint.linter.run.process import process_source

    source = sys.stdin.buffer.read()
    if name.endswith(".ipynb"):
        from dataclasses import replace

        from gpulint.linter.run import notebook

        if options.fix and not options.diff:
            _err("--fix on a notebook read from standard input is not supported; use --diff, or name the file")
            raise typer.Exit(EXIT_ERROR)
        outcome = notebook.process_notebook(Path(name), name, source, Linter(settings), replace(options, fix=False))
        return RunResult(outcomes=[outcome]), None
    outcome, final = process_source(Linter(settings), source, name, options)
    result = RunResult(outcomes=[outcome])
    if options.fix and not options.diff:
        return result, final
    return result, None


@app.command("rules")
def list_rules(
    all_rules_flag: bool = typer.Option(True, "--all/--enabled", hidden=True),
    output_format: str = typer.Option("text", "--format", help="text or json."),
) -> None:
    """List every rule: id, name, default (on or hint) and fix safety."""
    import json

    from gpulint.rules import all_rules

    rules = all_rules()
    if output_format == "json":
        typer.echo(
            json.dumps(
                [
                    {
                        "code": r.code,
                        "name": r.name,
                        "default": r.default,
                        "fix": r.fix_applicability.value if r.fix_applicability else None,
                        "summary": r.summary(),
                    }
                    for r in rules
                ],
                indent=2,
            )
        )
        return
    if _use_color():
        from rich.console import Console
        from rich.table import Table

        table = Table(title="gpulint rules")
        for column in ("id", "name", "default", "fix", "what it finds"):
            table.add_column(column)
        for r in rules:
            table.add_row(r.code, r.name, r.default, r.fix_applicability.value if r.fix_applicability else "-", r.short_description())
        Console().print(table)
        return
    for r in rules:
        fix = r.fix_applicability.value if r.fix_applicability else "-"
        typer.echo(f"{r.code}  {r.name:<28} {r.default:<5} fix:{fix:<7} {r.short_description()}")


@app.command("rule")
def show_rule(key: str = typer.Argument(..., help="A rule id (GL101) or name (dataloader-serial).")) -> None:
    """Explain one rule: what it finds, why it is slow, an example, and its fix."""
    from gpulint.rules.docs import rule_markdown
    from gpulint.rules import find_rule

    rule = find_rule(key)
    if rule is None:
        _err(f"no rule {key!r} (see `gpulint rules`)")
        raise typer.Exit(EXIT_ERROR)
    text = rule_markdown(rule)
    if _use_color():
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(text))
    else:
        typer.echo(text)


@app.command("version")
def version() -> None:
    """Print gpulint's version."""
    typer.echo(f"gpulint {__version__}")


# Commands other modules add (runtime checker, review bot) register themselves here.
def _register_extensions() -> None:
    import importlib

    for module_name in EXTENSION_MODULES:
        importlib.import_module(module_name).register(app)


# Each module has `register(app: typer.Typer)`; listed here so the command set is visible in one place.
EXTENSION_MODULES: list[str] = ["gpulint.review.cli", "gpulint.runtime_check.cli"]


def main(argv: Optional[List[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    _register_extensions()
    commands = {command.name or command.callback.__name__ for command in app.registered_commands}
    if args in (["--version"], ["-V"]):
        typer.echo(f"gpulint {__version__}")
        raise SystemExit(EXIT_CLEAN)
    first = next((a for a in args if not a.startswith("-") or a == "-"), None)
    if not args or (first not in commands and args[0] not in ("-h", "--help")):
        args = ["check", *args]
    try:
        app(args=args, prog_name="gpulint", standalone_mode=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise SystemExit(130)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, exit 2
        if os.environ.get("GPULINT_DEBUG"):
            raise
        _err(f"internal error: {exc.__class__.__name__}: {exc} (set GPULINT_DEBUG=1 for the traceback)")
        raise SystemExit(EXIT_ERROR)
