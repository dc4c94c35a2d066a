"""`gpulint server`: a language server (LSP over stdio) for editors.

`lsp` holds the protocol side (pygls); `engine_adapter` is the one module that calls the linter.
pygls comes with the `lsp` extra (`pip install 'gpulint[lsp]'`), so only this command needs it.
"""

from __future__ import annotations

import argparse

from gpulint.cli import EXIT_CLEAN, EXIT_ERROR, error


def add_server(parser: argparse.ArgumentParser) -> None:
    # An editor opens whatever folder it is given: a workspace's local rules (project code) run
    # only when the editor's configuration of the server says so (docs/local-rules.md).
    parser.add_argument(
        "--allow-local-rules",
        action="store_true",
        help="Load the rule modules a workspace's configuration names in `local-rules` (project code: only "
        "for workspaces you trust).",
    )
    parser.set_defaults(run=main)


def main(options: argparse.Namespace | None = None) -> int:
    """Serve on stdin/stdout until the client says exit; 2 with a one-line message when the `lsp`
    extra is missing."""
    try:
        from gpulint.server.lsp import serve
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("pygls", "lsprotocol"):
            raise
        error("`gpulint server` needs pygls: pip install 'gpulint[lsp]'")
        return EXIT_ERROR
    serve(allow_local_rules=bool(options is not None and options.allow_local_rules))
    return EXIT_CLEAN
