"""`gpulint server`: a language server (LSP over stdio) for editors.

`lsp` holds the protocol side (pygls); `engine_adapter` is the one module that calls the linter.
pygls comes with the `lsp` extra (`pip install 'gpulint[lsp]'`), so only this command needs it.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Serve on stdin/stdout; 2 with a one-line message when the `lsp` extra is missing."""
    try:
        from gpulint.server.lsp import serve
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("pygls", "lsprotocol"):
            raise
        print("gpulint: error: `gpulint server` needs pygls: pip install 'gpulint[lsp]'", file=sys.stderr)
        return 2
    serve()
    return 0


def register(app) -> None:
    """Add `gpulint server` to the command line."""

    @app.command("server")
    def server() -> None:
        """Run the language server on standard input and output (for editors)."""
        raise SystemExit(main())
