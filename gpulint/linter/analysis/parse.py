"""Parsing a source into a libcst module, and the three ways it can fail.

libcst is imported by the first parse, not with this module: the engine imports it at start-up,
and a run whose files the prefilter rejects never parses.
"""

from __future__ import annotations

import ast
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
        return cst.parse_module(source)
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
