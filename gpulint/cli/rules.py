"""`gpulint rules` (the rule list) and `gpulint rule ID` (one rule's documentation)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpulint.cli import EXIT_CLEAN, EXIT_ERROR, error, use_color
from gpulint.cli.check import resolve_settings
from gpulint.cli.options import add_selection_options


def add_rules(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--enabled",
        action="store_true",
        help="Only the rules `gpulint check` would run here: the configuration file with --select, --extend-select "
        "and --ignore on top (before per-file-ignores); implied by those options.",
    )
    add_selection_options(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text", help="text or json.")
    parser.set_defaults(run=list_rules)


def list_rules(options: argparse.Namespace) -> int:
    """List every rule (or with --enabled, the enabled ones): id, name, default, fix safety."""
    import json

    from gpulint.linter.catalog import RULES  # not the rule classes: a listing needs no libcst
    from gpulint.linter.config import ConfigError

    rules = RULES
    selecting = options.select is not None or options.extend_select or options.ignore or options.config is not None
    if options.enabled or selecting:
        try:
            enabled = resolve_settings([Path(".")], options).enabled_codes()
        except ConfigError as exc:
            error(str(exc))
            return EXIT_ERROR
        rules = tuple(r for r in rules if r.code in enabled)
    if options.format == "json":
        rows = [
            {
                "code": r.code,
                "name": r.name,
                "default": r.default,
                "fix": r.fix,
                "summary": r.summary,
            }
            for r in rules
        ]
        print(json.dumps(rows, indent=2))
        return EXIT_CLEAN
    if use_color():
        from rich.console import Console
        from rich.table import Table

        table = Table(title="gpulint rules")
        for column in ("id", "name", "default", "fix", "what it finds"):
            table.add_column(column)
        for r in rules:
            table.add_row(r.code, r.name, r.default, r.fix or "-", r.message)
        Console().print(table)
        return EXIT_CLEAN
    for r in rules:
        print(f"{r.code}  {r.name:<28} {r.default:<5} fix:{r.fix or '-':<7} {r.message}")
    return EXIT_CLEAN


def add_rule(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("key", metavar="RULE", help="A rule id (GL101) or name (dataloader-serial).")
    parser.set_defaults(run=show_rule)


def show_rule(options: argparse.Namespace) -> int:
    """Explain one rule: what it finds, why it is slow, an example, and its fix."""
    from gpulint.linter.catalog import RULES
    from gpulint.linter.selection import not_one_rule
    from gpulint.rules import find_rule
    from gpulint.rules.docs import rule_markdown

    rule = find_rule(options.key)
    if rule is None:
        error(not_one_rule(options.key, RULES))
        return EXIT_ERROR
    text = rule_markdown(rule)
    if use_color():
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(text))
    else:
        print(text)
    return EXIT_CLEAN
