"""The options several commands share, defined once: rule selection (`check`, `rules`, `review`,
`verify`), and the common options of the lint, which `gpulint check --help` and the top-level
`gpulint --help` both show.  Standard library only: `gpulint --help` loads this module.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path


def rule_ids(value: str) -> list[str]:
    """argparse type for --select and friends: `--select GL1,GL2 --select GL7` (with
    action="extend") gives ["GL1", "GL2", "GL7"]."""
    return [part.strip() for part in value.split(",") if part.strip()]


def _finite_number(zero_allowed: bool) -> Callable[[str], float]:
    wording = "a number of 0 or more" if zero_allowed else "a number above 0"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        # float() also reads "nan" and "inf": a timeout of nan never fires, a duration of inf never ends
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero_allowed):
            raise argparse.ArgumentTypeError(f"must be {wording}, not {text!r}")
        return value

    return parse


# argparse types of every option that takes a number with a fraction: finite, and not negative.
positive_number = _finite_number(zero_allowed=False)
non_negative_number = _finite_number(zero_allowed=True)


def selected_rule_ids(value: str) -> list[str]:
    """argparse type for --select: `rule_ids`, but an empty value is a usage error (it would
    select no rule, and a run that checks nothing must not say "All checks passed!")."""
    ids = rule_ids(value)
    if not ids:
        raise argparse.ArgumentTypeError(
            "an empty selection selects no rule; name rule ids or prefixes (ALL: every rule)"
        )
    return ids


def add_selection_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The options resolve_settings reads."""
    parser.add_argument(
        "--select",
        action="extend",
        type=selected_rule_ids,
        metavar="IDS",
        help="Rule ids or prefixes to enable (comma-separated; ALL for every rule).",
    )
    parser.add_argument(
        "--ignore", action="extend", type=rule_ids, metavar="IDS", help="Rule ids or prefixes to disable."
    )
    parser.add_argument(
        "--extend-select",
        action="extend",
        type=rule_ids,
        metavar="IDS",
        help="Rule ids or prefixes to add to the selection.",
    )
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="A pyproject.toml ([tool.gpulint]) or gpulint.toml."
    )


# The text formats people read; `text` is their old name: `full` at a terminal, `concise` otherwise.
TEXT_FORMATS = ("full", "concise")
OUTPUT_FORMATS = (*TEXT_FORMATS, "json", "sarif", "github", "rdjson", "gitlab")


def add_no_local_rules(parser: argparse.ArgumentParser) -> None:
    """The option of the commands that load the project's local rules by default."""
    parser.add_argument(
        "--no-local-rules",
        action="store_true",
        help="Do not load the rule modules the configuration names in `local-rules` (they are project code: "
        "use this on a tree you do not trust).",
    )


def add_common_check_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The options most runs use.  `gpulint check --help` shows them with the others, and the
    top-level `gpulint --help` shows them too (`gpulint PATH...` is `gpulint check PATH...`)."""
    parser.add_argument("--fix", action="store_true", help="Apply safe fixes (and unsafe ones with --unsafe-fixes).")
    parser.add_argument(
        "--unsafe-fixes",
        action=argparse.BooleanOptionalAction,
        help="Also offer and apply fixes that may change behaviour.",
    )
    parser.add_argument(
        "--show-fixes", action="store_true", help="List what --fix changed (or --diff would): per file, rule and count."
    )
    parser.add_argument("--diff", action="store_true", help="Print the diff the fixes would make; write nothing.")
    add_selection_options(parser)
    parser.add_argument(
        "--output-format",
        "--format",
        dest="output_format",
        metavar="FORMAT",
        help=f"{', '.join(OUTPUT_FORMATS)}.  Default: full (each finding with its source line) at a terminal, "
        "concise (one line per finding) otherwise; `text` is that default.",
    )
    parser.add_argument("--statistics", action="store_true", help="Count findings per rule instead of listing them.")
    parser.add_argument("--exit-zero", action="store_true", help="Exit 0 even when findings remain.")
