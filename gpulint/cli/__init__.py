"""The `gpulint` command line: one argparse parser per command, each command's code imported only
when that command runs, so `gpulint --version`, `--help` and parsing any command line load the
standard library and this module, never libcst, torch or the runtime checker.

`gpulint PATH...` is `gpulint check PATH...` (as `ruff check`): a first argument that is not a command
is taken as a path.  A first argument that looks like a command word but is neither a command nor an
existing path (`gpulint prof`) is a usage error naming the closest command.

Exit codes, the same for every command: 0 nothing to report, 1 findings remain (or --diff would
change files, or verify found no confirmed speed-up), 2 usage error, bad configuration or internal
error.  The runtime commands add 3 (the script made no measured step) and 124 (timeout), defined
with the measurement in gpulint.runtime_check.measure, and otherwise pass a failed script's code on.

Adding a command
----------------
Put the command with its feature, say gpulint/history/cli.py:

    from gpulint.cli import EXIT_CLEAN, EXIT_ERROR, error

    def add_history(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--since", help="Only runs after this date.")
        parser.set_defaults(run=history)

    def history(options: argparse.Namespace) -> int:
        from gpulint.history.store import load  # heavy imports inside the command, not at the top

        ...
        return EXIT_CLEAN

then add one line to COMMANDS below: the name, "module:function" of the setup function, and the one
line `gpulint --help` shows for it.  The module is imported only when its command is named, so keep
its top level to the standard library and gpulint.cli (tests/test_cli.py checks that --version,
--help and parsing import nothing heavier).  Report a problem with `error()` and return an exit
code; do not call sys.exit.  Options may follow positionals (`gpulint a.py --fix b.py`: the line is
parsed with `parse_intermixed_args`) unless the command takes the rest of the line verbatim
(`takes_rest`, for an argparse.REMAINDER positional).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from typing import NamedTuple, NoReturn

from gpulint import __version__
from gpulint.cli.options import add_common_check_options

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # as a shell reports Ctrl-C


class Command(NamedTuple):
    setup: str  # "module:function"; the function adds the arguments and set_defaults(run=...)
    summary: str  # one line, for `gpulint --help` and the top of `gpulint NAME --help`
    takes_rest: bool = False  # an argparse.REMAINDER positional: parsed with parse_args, not intermixed


COMMANDS: dict[str, Command] = {
    "check": Command("gpulint.cli.check:add_check", "Lint training code (the default command)."),
    "rules": Command("gpulint.cli.rules:add_rules", "List the rules: id, name, default (on or hint) and fix safety."),
    "rule": Command(
        "gpulint.cli.rules:add_rule", "Explain one rule: what it finds, why it is slow, an example, and its fix."
    ),
    "test-rules": Command(
        "gpulint.cli.test_rules:add_test_rules",
        "Run the VALID and INVALID cases of the project's local rules (--builtin: gpulint's own too).",
    ),
    "profile": Command(
        "gpulint.runtime_check.cli:add_profile",
        "Run a training script and say where its step time goes: input-bound, sync-bound or compute-bound.",
        takes_rest=True,
    ),
    "verify": Command(
        "gpulint.runtime_check.cli:add_verify",
        "Apply fixes to a copy, run original and fixed interleaved, and say whether the fix is faster.",
    ),
    "scale": Command(
        "gpulint.runtime_check.cli:add_scale",
        "Run the script under torchrun at 1, 2, 4... processes and say whether throughput scales near-linearly.",
        takes_rest=True,
    ),
    "history": Command("gpulint.runtime_check.cli:add_history", "List the recorded profile and verify runs."),
    "compare": Command(
        "gpulint.runtime_check.cli:add_compare",
        "Show two recorded runs side by side: each figure, its change, and whether it is beyond the noise.",
    ),
    "report": Command(
        "gpulint.runtime_check.cli:add_report", "Write the self-contained HTML report of a recorded run."
    ),
    "review": Command(
        "gpulint.review.cli:add_review",
        "Review a change: comment on the findings in the lines it adds (a pull-request review).",
    ),
    "server": Command(
        "gpulint.server:add_server", "Run the language server for editors (LSP over standard input and output)."
    ),
    "version": Command("gpulint.cli:add_version", "Print gpulint's version."),
}

# A first argument of this shape that is not a command and not a path is a mistyped command.
_COMMAND_WORD = re.compile(r"[a-z][a-z0-9-]*")


def error(message: str) -> None:
    """The one way a command reports a problem: `gpulint: error: ...` on standard error, with
    secrets masked and control characters escaped (a file name can carry a workflow command)."""
    from gpulint.linter.printable import printable  # small, standard library only
    from gpulint.redaction import redact

    print(f"gpulint: error: {printable(redact(message))}", file=sys.stderr)


def warning(message: str) -> None:
    """`gpulint: warning: ...` on standard error, masked and escaped as `error` does."""
    from gpulint.linter.printable import printable
    from gpulint.redaction import redact

    print(f"gpulint: warning: {printable(redact(message))}", file=sys.stderr)


def use_color() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default where it says something (not for None or a False flag)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def add_version(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(run=_print_version)


def _print_version(options: argparse.Namespace) -> int:
    print(f"gpulint {__version__}")
    return EXIT_CLEAN


def top_parser() -> argparse.ArgumentParser:
    """`gpulint --help` and `--version`: the commands are listed, not loaded."""
    parser = argparse.ArgumentParser(
        prog="gpulint",
        usage="gpulint [OPTIONS] [PATH ...]\n       gpulint COMMAND [OPTIONS] ...",
        description="Find and fix the training code that starves your GPUs.",
        epilog="`gpulint PATH...` is `gpulint check PATH...`; `gpulint COMMAND --help` explains a command "
        "(`gpulint check --help`: every option of the lint).",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("-V", "--version", action="version", version=f"gpulint {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name, command in COMMANDS.items():
        commands.add_parser(name, help=command.summary)
    add_common_check_options(parser.add_argument_group("common options of `gpulint [check] PATH...`"))
    return parser


def command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of one command, with the arguments its module adds (importing that module)."""
    command = COMMANDS[name]
    # allow_abbrev=False: `--sel` is an error, not --select (an option added later would change what it means)
    parser = argparse.ArgumentParser(
        prog=f"gpulint {name}", description=command.summary, formatter_class=HelpFormatter, allow_abbrev=False
    )
    module_name, _, function = command.setup.partition(":")
    getattr(importlib.import_module(module_name), function)(parser)
    return parser


def parse(args: list[str]) -> argparse.Namespace:
    """The parsed command line; `options.run(options)` runs it.  Exits 0 after --help or
    --version and 2 on a usage error, as argparse does."""
    first = args[0] if args else None
    if first in ("-h", "--help", "-V", "--version"):
        top_parser().parse_args(args)  # prints and exits; `gpulint -V x` or `-h x` do the same
    if first in COMMANDS:
        name, rest = first, args[1:]
    elif first is not None and _COMMAND_WORD.fullmatch(first) and not os.path.lexists(first):
        _unknown_command(first)
    else:
        name, rest = "check", args
    parser = command_parser(name)
    parse_known = parser.parse_known_args if COMMANDS[name].takes_rest else parser.parse_known_intermixed_args
    options, unknown = parse_known(rest)
    if unknown:
        parser.error(_unrecognized(parser, unknown))  # exits 2
    return options


def _unrecognized(parser: argparse.ArgumentParser, words: list[str]) -> str:
    """argparse's message for arguments no option takes, naming the closest option of each
    mistyped one (`--fixx`: did you mean --fix?).  Python 3.14's `suggest_on_error` does this for
    choices only; with `allow_abbrev=False` a prefix is a mistyped option too."""
    import difflib

    known = [option for action in parser._actions for option in action.option_strings]
    close = {}  # mistyped option -> the closest known one
    for word in words:
        option = word.partition("=")[0]
        match = difflib.get_close_matches(option, known, n=1) if option.startswith("--") else []
        if match:
            close[option] = match[0]
    if len(close) == 1 and len(words) == 1:
        hint = f" (did you mean {next(iter(close.values()))}?)"
    else:
        hint = f" (did you mean {', '.join(f'{new} for {old}' for old, new in close.items())}?)" if close else ""
    return f"unrecognized arguments: {' '.join(words)}{hint}"


def _unknown_command(word: str) -> NoReturn:
    import difflib

    close = difflib.get_close_matches(word, COMMANDS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else " (see `gpulint --help`)"
    error(f"no such command or path: {word!r}{hint}")
    raise SystemExit(EXIT_ERROR)


def console() -> NoReturn:
    """The `gpulint` command (and `python -m gpulint`): `main`, then leave the process without
    tearing the interpreter down.  Freeing every module and object one by one at exit -- libcst's
    hundreds of node classes, the rules, the project index -- took 0.02 s of a 0.27 s one-file
    run and does nothing for a process that is about to end; mypy leaves the same way.  What a
    normal exit runs first still runs: the `atexit` handlers (multiprocessing's finalizers among
    them: where workers are spawned, as on macOS, they unregister the pools' semaphores, which its
    resource tracker would otherwise report as leaked), then what standard output and error still
    buffer is written.  `main` itself exits normally: a program or a test that calls it keeps its
    interpreter."""
    code: object = 0
    try:
        main()
    except SystemExit as finished:
        code = finished.code
    if not isinstance(code, int):
        if code is not None:  # (a message: print it as Python would)
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    import atexit

    atexit._run_exitfuncs()  # (what the interpreter's own exit runs before its teardown)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # (the reader left; a stream already closed)
            pass
    os._exit(code)


def main(argv: list[str] | None = None) -> NoReturn:
    """Parse, run the command, exit with its code (SystemExit)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        options = parse(args)
        code = options.run(options)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except BrokenPipeError:  # `gpulint rules | head`: the reader left; stop quietly
        # Send what is still buffered to /dev/null, or flushing it at exit raises again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, exit 2
        if os.environ.get("GPULINT_DEBUG"):
            raise
        error(f"internal error: {exc.__class__.__name__}: {exc} (set GPULINT_DEBUG=1 for the traceback)")
        code = EXIT_ERROR
    raise SystemExit(code)
