"""`gpulint check` (the default command): lint, fix or diff files, directories or standard input.

Also how the rule selection options (gpulint/cli/options.py) combine with the configuration file,
shared by `rules` and `review`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpulint.cli import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, error, use_color, warning
from gpulint.cli.options import TEXT_FORMATS, add_common_check_options, add_no_local_rules

if TYPE_CHECKING:  # the linter imports libcst: loaded when a command runs, not to parse its line
    from gpulint.linter.config import Settings
    from gpulint.linter.run.outcome import RunOptions, RunResult


def resolve_settings(paths: list[Path], options: argparse.Namespace, load_local_rules: bool = False) -> Settings:
    """Settings from the config file (--config, or the nearest pyproject.toml with [tool.gpulint]
    above the first path) with the selection options on top; the local rules it names are loaded
    only with `load_local_rules` (they are project code).  A file named with --config is the
    user's own: it may raise the safety limits, which one found beside the code may only lower
    (the refusals are in `settings.notes`, for the caller to show).  Raises ConfigError."""
    from gpulint.linter.config import ConfigError, find_config, load_settings

    config = options.config
    if config is not None and not config.is_file():
        raise ConfigError(f"config file {config} does not exist")
    start = paths[0] if paths else Path.cwd()
    config_file = config if config is not None else find_config(start)
    settings = load_settings(config_file, start, load_local_rules, trusted=config is not None)
    _apply_selection(settings, options)
    return settings


def _apply_selection(settings: Settings, options: argparse.Namespace) -> None:
    from gpulint.linter.config import validate

    if options.select is not None:
        settings.select = options.select
    settings.extend_select += options.extend_select or []
    settings.ignore += options.ignore or []
    validate(settings)


class SettingsPerProject:
    """Each file's settings, from its nearest project, as ruff's hierarchical configuration does:
    the nearest pyproject.toml with [tool.gpulint] above the file (its line length and PyTorch
    too), else the defaults with the facts of the nearest pyproject.toml; the command line's
    options on top of each.  `--config` is the configuration of every file.  The settings of the
    first path (`base`) serve every file whose project gives the same; one Settings object per
    configuration, so the runner lints a project's files with one linter.  Raises ConfigError for
    a project whose configuration is broken."""

    def __init__(self, base: Settings, start: Path, options: argparse.Namespace, load_local_rules: bool) -> None:
        self.base = base
        self.options = options
        self.load_local_rules = load_local_rules
        self.by_origin: dict[tuple[str, Path | None], Settings] = {}
        self.by_folder: dict[str, Settings] = {}
        self.holds_table: dict[Path, bool] = {}  # (find_config's `known`: each file read once)
        if options.config is None:
            self.by_origin[self._origin(start)] = base

    def _origin(self, path: Path) -> tuple[str, Path | None]:
        """Where a path's settings come from: its configuration file, or (with none) the
        pyproject.toml whose facts apply."""
        from gpulint.linter.config import find_config, nearest_pyproject

        config_file = find_config(path, self.holds_table)
        return ("config", config_file) if config_file is not None else ("facts", nearest_pyproject(path))

    def __call__(self, path: Path) -> Settings:
        from gpulint.linter.config import load_settings

        if self.options.config is not None:
            return self.base
        folder = os.path.realpath(path)
        if not os.path.isdir(folder):
            folder = os.path.dirname(folder)
        settings = self.by_folder.get(folder)
        if settings is None:
            origin = self._origin(Path(folder))
            settings = self.by_origin.get(origin)
            if settings is None:
                kind, file = origin
                settings = load_settings(file if kind == "config" else None, Path(folder), self.load_local_rules)
                for note in settings.notes:
                    warning(note)
                _apply_selection(settings, self.options)
                _apply_check_options(settings, self.options)
                self.by_origin[origin] = settings
            self.by_folder[folder] = settings
        return settings


def _apply_check_options(settings: Settings, options: argparse.Namespace) -> None:
    """What `gpulint check`'s own options change in a configuration."""
    if options.unsafe_fixes is not None:
        settings.unsafe_fixes = options.unsafe_fixes
    if options.lint_tests:
        settings.lint_tests = True
    if options.show_hints:
        settings.show_hints = True
    if options.report_unused_suppressions:
        settings.extend_select.append("GL900")  # the flag is a shorthand for selecting the rule


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return number


def add_check(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="*", type=Path, metavar="PATH", help="Files or directories; `-` reads standard input."
    )
    add_common_check_options(parser)
    parser.add_argument("--stdin-filename", metavar="NAME", help="The name of the file read from standard input.")
    parser.add_argument(
        "--jobs", "-j", type=_positive_int, metavar="N", help="Worker processes (default: the cores available)."
    )
    parser.add_argument("--no-cache", action="store_true", help="Neither read nor write the result cache.")
    parser.add_argument(
        "--no-project-index",
        action="store_true",
        help="Lint each file on its own, without the index of what the project's functions do across modules.",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="Where to keep the result cache (default: .gpulint_cache in the project root).",
    )
    parser.add_argument(
        "--add-suppressions",
        action="store_true",
        help="Write `# gpulint: ignore[ID]` on every current finding's line (adopt gpulint on existing code).",
    )
    parser.add_argument(
        "--lint-tests",
        action="store_true",
        help="Run the performance rules on test files too (the `lint-tests` setting; off: they skip test files).",
    )
    parser.add_argument(
        "--show-hints",
        action="store_true",
        help="Also report the findings held back as hints: no evidence of a real cost was found (the `show-hints` "
        "setting; naming a rule by its id in --select or --extend-select shows its hints too).",
    )
    parser.add_argument(
        "--report-unused-suppressions",
        action="store_true",
        help="Also report suppression comments that suppress nothing (rule GL900).",
    )
    add_no_local_rules(parser)
    parser.set_defaults(run=check)


def check(options: argparse.Namespace) -> int:
    """Lint training code (the default command)."""
    from gpulint.linter import reporters
    from gpulint.linter.config import ConfigError
    from gpulint.linter.run.outcome import RunOptions, diff_output

    output_format = options.output_format or "text"
    if output_format == "text":
        output_format = "full" if sys.stdout.isatty() else "concise"
    if output_format not in reporters.FORMATS:
        error(f"unknown output format {output_format!r}; choose from {', '.join(reporters.FORMATS)}")
        return EXIT_ERROR
    paths = options.paths or [Path(".")]
    reading_stdin = [str(p) for p in paths] == ["-"]
    stdin_name = options.stdin_filename or "-"
    try:
        config_start = [Path(options.stdin_filename)] if reading_stdin and options.stdin_filename else paths
        settings = resolve_settings(config_start, options, load_local_rules=not options.no_local_rules)
    except ConfigError as exc:
        error(str(exc))
        return EXIT_ERROR
    for note in settings.notes:
        warning(note)
    if settings.local_rules_skipped:
        warning(local_rules_not_loaded(settings, "--no-local-rules"))
    _apply_check_options(settings, options)
    if options.add_suppressions:
        return _add_suppressions(paths, settings, options, reading_stdin)
    if reading_stdin and stdin_name.endswith(".ipynb") and options.fix and not options.diff:
        error("--fix on a notebook read from standard input is not supported; use --diff, or name the file")
        return EXIT_ERROR

    run_options = RunOptions(
        fix=options.fix,
        diff=options.diff,
        with_edits=output_format in reporters.NEEDS_EDITS,
        project_index=not options.no_project_index,
    )
    if reading_stdin:
        result, fixed_source = _run_stdin(settings, run_options, stdin_name)
    else:
        cache_dir = None if options.no_cache else options.cache_dir or True
        settings_for = SettingsPerProject(settings, config_start[0], options, not options.no_local_rules)
        try:
            result = _run_paths(paths, settings, run_options, options.jobs, cache_dir, settings_for)
        except ConfigError as exc:  # the configuration of a project other than the first path's
            error(str(exc))
            return EXIT_ERROR
        fixed_source = None

    for line in result.errors:
        error(line)
    for line in result.warnings:
        warning(line)

    report_settings = reporters.ReportSettings(
        settings=settings,
        color=use_color() and output_format in TEXT_FORMATS,
        statistics=options.statistics,
        fix_mode=options.fix and not options.diff,
        show_fixes=options.show_fixes,
    )
    if options.diff:
        from gpulint.linter.printable import fenced_from_the_runner
        from gpulint.linter.reporters.text import fixes_listing

        diffs = [o.diff for o in result.outcomes if o.diff]
        # bytes: a latin-1 file's diff must apply; they quote the file, so the runner must not read them
        sys.stdout.buffer.write(fenced_from_the_runner(diff_output(result)))
        sys.stdout.flush()
        would_fix = sum(len(o.fixed_codes) for o in result.outcomes if o.diff)
        listing = fixes_listing(result.outcomes, "Would fix") if options.show_fixes else ""
        print(listing or f"Would fix {would_fix} problem{'s' if would_fix != 1 else ''}.", file=sys.stderr)
        code = EXIT_FINDINGS if diffs and not options.exit_zero else EXIT_CLEAN
    else:
        report = reporters.render(output_format, result, report_settings)
        if result.held_back and output_format not in TEXT_FORMATS:
            from gpulint.linter.reporters.text import held_back_note

            # (the text formats end their summary with it; a machine format's output stays its own)
            print(held_back_note(result.held_back), file=sys.stderr)
        if fixed_source is not None:
            sys.stdout.buffer.write(fixed_source)
            sys.stdout.flush()
            print(report, file=sys.stderr)
        else:
            print(report)
        code = EXIT_FINDINGS if result.findings and not options.exit_zero else EXIT_CLEAN
    return EXIT_ERROR if result.errors else code


def local_rules_not_loaded(settings: Settings, why: str) -> str:
    """The warning for a configuration whose local rules were not run (`why`: the option that says so)."""
    from gpulint.linter.printable import printable

    # (The files or folders the configuration names: what a folder holds is not looked at.)
    count = len(settings.local_rule_files)
    entries = "1 `local-rules` entry" if count == 1 else f"{count} `local-rules` entries"
    return printable(f"{settings.source}: {entries} not loaded ({why})")


def _add_suppressions(paths: list[Path], settings: Settings, options: argparse.Namespace, reading_stdin: bool) -> int:
    """Lint as `gpulint check` does (the project index, each file's project settings, the cache),
    then write a comment for each finding, so the same check then reports nothing.  Exits 0 as
    ruff's --add-noqa does when every file was read and written, even where findings stay (a
    notebook): each of those is a warning."""
    from gpulint.linter.config import ConfigError
    from gpulint.linter.run.add_suppressions import add_suppressions
    from gpulint.linter.run.outcome import RunOptions
    from gpulint.linter.run.safe_files import WriteScope

    if reading_stdin or options.fix or options.diff:
        error("--add-suppressions edits files in place; it cannot be combined with standard input, --fix or --diff")
        return EXIT_ERROR
    settings_for = SettingsPerProject(settings, paths[0], options, not options.no_local_rules)
    cache_dir = None if options.no_cache else options.cache_dir or True
    run_options = RunOptions(project_index=not options.no_project_index)
    try:
        result = _run_paths(paths, settings, run_options, options.jobs, cache_dir, settings_for)
    except ConfigError as exc:
        error(str(exc))
        return EXIT_ERROR
    outcome = add_suppressions(result, WriteScope.of(paths), lambda path: settings_for(path).size_limit(path))
    for line in [*result.errors, *outcome.errors]:
        error(line)
    for line in [*result.warnings, *outcome.left]:
        warning(line)
    plural = "s" if outcome.added != 1 else ""
    print(
        f"Added {outcome.added} suppression{plural} in {outcome.files} file{'s' if outcome.files != 1 else ''}.",
        file=sys.stderr,
    )
    return EXIT_ERROR if result.errors or outcome.errors else EXIT_CLEAN


def _run_paths(
    paths: list[Path],
    settings: Settings,
    options: RunOptions,
    jobs: int | None,
    cache_dir,
    settings_for: SettingsPerProject | None = None,
) -> RunResult:
    """Run over files with workers, the cache (`cache_dir`: a folder, True for the default, None
    for none) and a progress bar on long runs at a terminal; `settings_for` gives each file its
    project's settings (`settings`, the first path's, serve the rest)."""
    from gpulint.linter.run.cache import ResultCache, default_cache_dir
    from gpulint.linter.run.parallel import DelayedProgress, default_jobs
    from gpulint.linter.run.runner import run

    cache = None
    if cache_dir is not None:
        folder = default_cache_dir(settings.root) if cache_dir is True else cache_dir
        cache = ResultCache.for_run(folder, settings.fingerprint(), options)
    progress = DelayedProgress()
    try:
        return run(
            paths,
            settings,
            options,
            jobs=jobs or default_jobs(),
            cache=cache,
            progress=progress,
            settings_for=settings_for,
        )
    finally:
        progress.close()


def _run_stdin(settings: Settings, options: RunOptions, name: str) -> tuple[RunResult, bytes | None]:
    """Lint standard input; with --fix the fixed source goes to stdout (as ruff does for editors)."""
    from gpulint.linter.engine import Linter
    from gpulint.linter.run.outcome import RunResult
    from gpulint.linter.run.process import process_source

    source = sys.stdin.buffer.read()
    if name.endswith(".ipynb"):
        from dataclasses import replace

        from gpulint.linter.run import notebook

        outcome = notebook.process_notebook(Path(name), name, source, Linter(settings), replace(options, fix=False))
        return RunResult(outcomes=[outcome]), None
    outcome, final = process_source(Linter(settings), source, name, options)
    result = RunResult(outcomes=[outcome])
    if options.fix and not options.diff:
        return result, final
    return result, None
