"""`gpulint rules` (the rule list) and `gpulint rule ID` (one rule's documentation)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpulint.cli import EXIT_CLEAN, EXIT_ERROR, error, use_color, warning
from gpulint.cli.check import local_rules_not_loaded, resolve_settings
from gpulint.cli.options import add_no_local_rules, add_selection_options


def add_rules(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--enabled",
        action="store_true",
        help="Only the rules `gpulint check` would run here: the configuration file with --select, --extend-select "
        "and --ignore on top (before per-file-ignores); implied by those options.",
    )
    add_selection_options(parser)
    add_no_local_rules(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text", help="text or json.")
    parser.set_defaults(run=list_rules)


def list_rules(options: argparse.Namespace) -> int:
    """List every rule (or with --enabled, the enabled ones): id, name, default, fix safety."""
    import json

    from gpulint.linter.config import ConfigError
    from gpulint.linter.findings import SYNTAX_ERROR_CODE

    # The catalog entries, not the rule classes: a listing needs no libcst (unless the project
    # has local rules, which are loaded to be listed).
    try:
        settings = resolve_settings([Path(".")], options, load_local_rules=not options.no_local_rules)
    except ConfigError as exc:
        error(str(exc))
        return EXIT_ERROR
    if settings.local_rules_skipped:
        warning(local_rules_not_loaded(settings, "--no-local-rules"))
    rules = settings.catalog()
    selecting = options.select is not None or options.extend_select or options.ignore or options.config is not None
    if options.enabled or selecting:
        enabled = settings.enabled_codes()
        if settings.select is not None and SYNTAX_ERROR_CODE not in settings.expand(
            [*settings.select, *settings.extend_select]
        ):
            # (check reports a file that does not parse whatever is selected, but a listing of what
            # `--select ACME` selects is of those rules: GL000 is listed when it is selected)
            enabled -= {SYNTAX_ERROR_CODE}
        rules = tuple(r for r in rules if r.code in enabled)
    if options.format == "json":
        rows = [
            {
                "code": r.code,
                "name": r.name,
                "default": r.listed_default,
                "fix": r.fix,
                "summary": r.summary,
            }
            for r in rules
        ]
        from gpulint.linter.printable import json_without_workflow_commands  # (local rules' text)

        print(json_without_workflow_commands(json.dumps(rows, indent=2)))
        return EXIT_CLEAN
    if use_color():
        from rich.console import Console
        from rich.table import Table

        table = Table(title="gpulint rules")
        for column in ("id", "name", "default", "fix", "what it finds"):
            table.add_column(column)
        for r in rules:
            table.add_row(r.code, r.name, r.listed_default, r.fix or "-", r.message)
        Console().print(table)
        return EXIT_CLEAN
    from gpulint.linter.printable import printable  # a local rule's message is the project's text

    # Columns as wide as their longest entry: a local rule's code or name may be longer than ours.
    code_width = max((len(r.code) for r in rules), default=0)
    name_width = max((len(r.name) for r in rules), default=0)
    for r in rules:
        message = printable(r.message)
        print(f"{r.code:<{code_width}}  {r.name:<{name_width}}  {r.listed_default:<5} fix:{r.fix or '-':<7} {message}")
    return EXIT_CLEAN


def add_rule(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("key", metavar="RULE", help="A rule id (GL101) or name (dataloader-serial), or a local rule's.")
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="The configuration whose local rules to look in too."
    )
    add_no_local_rules(parser)
    parser.set_defaults(run=show_rule)


def show_rule(options: argparse.Namespace) -> int:
    """Explain one rule: what it finds, why it is slow, an example, and its fix."""
    from gpulint.linter.catalog import RULES
    from gpulint.linter.config import ConfigError
    from gpulint.linter.local_rules import path_of, shown
    from gpulint.linter.selection import not_one_rule
    from gpulint.rules import find_rule
    from gpulint.rules.docs import rule_markdown

    rule = find_rule(options.key)
    local = None
    if rule is None and not options.no_local_rules:  # a local rule of the project here?
        try:
            no_selection = argparse.Namespace(config=options.config, select=None, extend_select=None, ignore=None)
            local = resolve_settings([Path(".")], no_selection, load_local_rules=True).local_rules
        except ConfigError as exc:
            error(str(exc))
            return EXIT_ERROR
        rule = local.find(options.key) if local is not None else None
    if rule is None:
        error(not_one_rule(options.key, [*RULES, *(local.entries if local is not None else ())]))
        return EXIT_ERROR
    text = rule_markdown(rule)
    if local is not None:
        from gpulint.linter.printable import no_workflow_commands, printable

        # A local rule's documentation is the project's text: escaped line by line, as findings are.
        text = no_workflow_commands("\n".join(printable(line) for line in text.split("\n")))
        text += f"\nLocal rule, from {printable(shown(path_of(rule)))}.\n"
    if use_color():
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(text))
    else:
        print(text)
    return EXIT_CLEAN
