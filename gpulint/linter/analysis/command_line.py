"""The command-line options a module declares with argparse (`parser.add_argument(...)`): each
option's flags, the attribute the parsed namespace holds it in, its default and its action; and
the names the module binds the parsed command line to (`args = parser.parse_args()`).

Read once per module (`FileContext.command_line`) for every analysis that asks about the script's
options: what `--epochs` or `--num-workers` defaults to (loops.py, item_cost.py), which option picks
the device (the GL102 fix), which flag already switches a setting (fix/startup.py), which
architecture `--arch` names by default (GL404).  The attribute follows argparse's own rule, so an
option spelled `-c, --cpu` is `args.cpu`, as the script reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from gpulint.linter.analysis.nodes import keyword_arg, method_name
from gpulint.linter.analysis.walk import TreeIndex


@dataclass(frozen=True)
class Option:
    call: cst.Call  # the `add_argument(...)` call
    flags: tuple[str, ...]  # its option strings, as written ("-c", "--cpu")
    dest: str  # the attribute of the parsed arguments that holds it ("cpu")
    default: cst.BaseExpression | None  # `default=`, as written
    action: str | None  # `action=`, when a string ("store_true")


def declared_options(index: TreeIndex) -> tuple[Option, ...]:
    """Every `add_argument(...)` of the module whose name can be read (string flags or a string
    `dest=`), in source order."""
    found = []
    for call in index.nodes("Call"):
        if method_name(call) != "add_argument":
            continue
        flags = tuple(
            arg.value.evaluated_value
            for arg in call.args
            if arg.keyword is None
            and isinstance(arg.value, cst.SimpleString)
            and isinstance(arg.value.evaluated_value, str)
        )
        dest = _string(keyword_arg(call, "dest")) or _dest_of(flags)
        if not dest:
            continue
        default = keyword_arg(call, "default")
        action = _string(keyword_arg(call, "action"))
        found.append(Option(call, flags, dest, default.value if default is not None else None, action))
    return tuple(found)


def parsed_arguments(index: TreeIndex) -> tuple[tuple[cst.Assign, str], ...]:
    """(the assignment, the name) for each `NAME = ....parse_args()` of the module, in source
    order: where the script binds its parsed command line, and under which name."""
    found = []
    for assign in index.nodes("Assign"):
        target = assign.targets[0].target
        if isinstance(assign.value, cst.Call) and method_name(assign.value) == "parse_args":
            if isinstance(target, cst.Name):
                found.append((assign, target.value))
    return tuple(found)


def _dest_of(flags: tuple[str, ...]) -> str:
    """argparse's attribute for an option without `dest=`: its first long flag, else its first
    flag, without the leading dashes and with the others as underscores."""
    first = next((flag for flag in flags if flag.startswith("--")), flags[0] if flags else "")
    return first.lstrip("-").replace("-", "_")


def _string(arg: cst.Arg | None) -> str | None:
    value = arg.value if arg is not None else None
    if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
        return value.evaluated_value
    return None
