"""`gpulint test-rules`: run the VALID and INVALID cases of the project's local rules (and, with
--builtin, gpulint's own), as `fixit test` does for Fixit's rules.

    gpulint test-rules                 # the local rules of the configuration found from here
    gpulint test-rules --select ACME1  # some of them
    gpulint test-rules --builtin       # gpulint's rules too

One line per failed case (the rule, which case, the module it comes from, what went wrong), then a
count, on standard output (what cannot be run at all goes to standard error).  Exit 0 when every
case passed, 1 when one failed, 2 for a configuration or a local rule that cannot be loaded, or
nothing to test.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpulint.cli import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, error
from gpulint.cli.options import selected_rule_ids


def add_test_rules(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="The configuration that names the local rules (default: found from here).",
    )
    parser.add_argument(
        "--select",
        action="extend",
        type=selected_rule_ids,
        metavar="IDS",
        help="Only these rules (ids, prefixes or names).",
    )
    parser.add_argument("--builtin", action="store_true", help="Run the cases of gpulint's own rules too.")
    parser.set_defaults(run=test_rules)


def test_rules(options: argparse.Namespace) -> int:
    """Run the cases; report the failures."""
    from gpulint.cli.check import resolve_settings
    from gpulint.linter.case_runner import run_cases
    from gpulint.linter.config import ConfigError
    from gpulint.linter.local_rules import path_of, shown
    from gpulint.linter.printable import no_workflow_commands, printable
    from gpulint.rules import all_rules

    no_selection = argparse.Namespace(config=options.config, select=None, extend_select=None, ignore=None)
    try:
        settings = resolve_settings([Path(".")], no_selection, load_local_rules=True)
        chosen = set(settings.expand(options.select)) if options.select else None
    except ConfigError as exc:
        error(str(exc))
        return EXIT_ERROR
    local = settings.local_rules
    rules = [*(all_rules() if options.builtin else ()), *(local.rules if local is not None else ())]
    rules = [rule for rule in rules if chosen is None or rule.code in chosen]
    if not rules:
        where = f"in {settings.source}" if settings.source else "(no [tool.gpulint] configuration found)"
        error(f"no rule to test: no local rules {where}; `local-rules` names them, --builtin tests gpulint's own")
        return EXIT_ERROR
    ran = failed = 0
    for result in run_cases(rules, local):
        ran += 1
        if not result.failures:
            continue
        failed += 1
        origin = f" ({shown(path_of(result.rule))})" if local is not None and result.rule in local.rules else ""
        for failure in result.failures:
            first, *more = failure.splitlines() or [""]
            print(printable(f"FAIL {result.rule.code} {result.label}{origin}: {first}"))
            for line in more:  # a diff of the fixed code
                print(no_workflow_commands("    " + printable(line)))
    count = len(rules)
    summary = f"Ran {ran} case{'s' if ran != 1 else ''} of {count} rule{'s' if count != 1 else ''}"
    print(f"{summary}: {failed} failed." if failed else f"{summary}: all passed.")
    return EXIT_FINDINGS if failed else EXIT_CLEAN
