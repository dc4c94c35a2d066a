"""`gpulint server`: a language server (LSP over stdio) for editors.

`lsp` holds the protocol side (pygls), `transport` reads its frames from stdin; `worker` runs the
lints in a child process with limits; `engine_adapter` is the one module that calls the linter.
pygls comes with the `lsp` extra (`pip install 'gpulint[lsp]'`), so only this command needs it.
"""

from __future__ import annotations

import argparse

from gpulint.cli import EXIT_ERROR, error
from gpulint.cli.options import positive_number
from gpulint.server.limits import DEFAULT_MEMORY_LIMIT, DEFAULT_TIME_LIMIT_S


def add_server(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--memory-limit",
        type=_positive(int),
        default=DEFAULT_MEMORY_LIMIT // 2**20,
        metavar="MIB",
        help="Address space a lint may use, in MiB; past it the file is skipped with a message (default: %(default)s).",
    )
    parser.add_argument(
        "--time-limit",
        type=positive_number,
        default=DEFAULT_TIME_LIMIT_S,
        metavar="SECONDS",
        help="Time a lint may take; past it the file is skipped with a message (default: %(default)g).",
    )
    # An editor opens whatever folder it is given: a workspace's local rules (project code) run
    # only when the editor's configuration of the server says so (docs/local-rules.md).
    parser.add_argument(
        "--allow-local-rules",
        action="store_true",
        help="Trust a workspace's configuration: load the rule modules it names in `local-rules` (project "
        "code), and let it raise max-file-size and the other safety limits (only for workspaces you trust).",
    )
    parser.set_defaults(run=main)


def _positive(kind):
    def parse(text: str):
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, not {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its error message
    return parse


def main(options: argparse.Namespace | None = None) -> int:
    """Serve on stdin/stdout until the client says exit (its exit code: 0 after a shutdown
    request); 2 with a one-line message when the `lsp` extra is missing."""
    try:
        from gpulint.server.lsp import serve
        from gpulint.server.worker import Limits
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("pygls", "lsprotocol"):
            raise
        error("`gpulint server` needs pygls: pip install 'gpulint[lsp]'")
        return EXIT_ERROR
    limits = Limits()
    if options is not None:
        limits = Limits(memory_limit=options.memory_limit * 2**20, time_limit=options.time_limit)
    return serve(limits, allow_local_rules=bool(options is not None and options.allow_local_rules))
