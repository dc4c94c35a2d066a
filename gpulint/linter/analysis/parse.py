"""Parsing a source into a libcst module, and the three ways it can fail.

libcst is imported by the first parse, not with this module: the engine imports it at start-up,
and a run whose files the prefilter rejects never parses.
"""

from __future__ import annotations

import ast
import threading
import warnings
from typing import TYPE_CHECKING

from gpulint.linter.analysis.parse_guard import Measured, check_source

if TYPE_CHECKING:
    import libcst as cst


class SyntaxErrorInSource(Exception):
    """The source is text but not Python: reported as a GL000 finding at `row`, `column`."""

    def __init__(self, message: str, row: int, column: int) -> None:
        super().__init__(message)
        self.row = row
        self.column = column


class UndecodableSource(Exception):
    """Bytes that are not text in the file's declared (or default UTF-8) encoding."""


def parse(source: bytes | str, max_nodes: int | None = None, measured: Measured | None = None) -> cst.Module:
    """libcst's tree of a source; raises SyntaxErrorInSource, UndecodableSource, and
    parse_guard.UnanalysableSource for a source too deep to hand to the parser or with more than
    `max_nodes` syntax nodes (every caller reports it as a problem with the file and goes on).
    `measured`: what the parse guard already measured of the source (parse_guard.measure)."""
    import libcst as cst

    rejected = check_source(source, max_nodes, measured)
    if rejected is not None and rejected.lineno:  # both parsers reject it: CPython names the line
        raise SyntaxErrorInSource(rejected.msg, rejected.lineno, rejected.offset or 1)
    try:
        return _parse_module_unvalidated(source)
    except (UnicodeDecodeError, LookupError) as exc:
        raise UndecodableSource(f"cannot decode: {exc}") from exc
    except SyntaxError as exc:  # raised by the encoding detection, before libcst's own parser
        raise UndecodableSource(f"cannot decode: {exc.msg}") from exc
    except cst.ParserSyntaxError as exc:
        # libcst's positions for tokenizer errors are often off; CPython's compiler, asked only
        # when parsing failed, names the line a person expects.
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the user's code's warnings are not ours to print
                compile(source, "<source>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as python_error:
            if python_error.lineno:
                raise SyntaxErrorInSource(python_error.msg, python_error.lineno, python_error.offset or 1) from exc
        except (ValueError, RecursionError, MemoryError):
            pass
        raise SyntaxErrorInSource(exc.message, exc.raw_line, exc.raw_column + 1) from exc
    except (RecursionError, ValueError, IndexError) as exc:  # pathological inputs
        raise SyntaxErrorInSource(f"cannot parse: {exc.__class__.__name__}", 1, 1) from exc


# The checks are switched off on the class, which every thread shares: one such parse at a time, so
# that no parse puts back what another switched off.
_CHECKS_OFF = threading.Lock()


def _parse_module_unvalidated(source: bytes | str) -> cst.Module:
    """`libcst.parse_module`, without checking the nodes the parser builds.

    Every libcst node checks what its constructor is given (`CSTNode.__post_init__`: parentheses
    that pair up, whitespace that is whitespace...).  The parser builds nodes only from source it
    has just read, so those checks cannot fail there, and they cost about a sixth of a parse
    (measured on the development corpus); libcst's own comment on `__post_init__` says as much.
    Nodes built anywhere else, as fixes build theirs, are still checked: the check is put back as
    soon as the parse ends, whatever its outcome."""
    import libcst as cst

    with _CHECKS_OFF:
        check = cst.CSTNode.__post_init__
        cst.CSTNode.__post_init__ = _unchecked  # type: ignore[method-assign,assignment]
        try:
            return cst.parse_module(source)
        finally:
            cst.CSTNode.__post_init__ = check  # type: ignore[method-assign]


def _unchecked(node: cst.CSTNode) -> None:
    """A parsed node's `__post_init__` (see `_parse_module_unvalidated`)."""
