"""What gpulint hands to libcst's parser, and what it skips with a message.

libcst's parser is native code that recurses on the nesting of the source.  Measured with libcst
1.9 on CPython 3.11 and the default 8 MiB stack: it dies with SIGSEGV at about 2,000 nested
brackets or a 10,000-operand `and` chain, and its time grows faster than the nesting (a chain of
1,000 subscripts takes seconds, 3,000 over a minute).  CPython's own parser stops earlier on most
shapes (200 nested brackets, 100 indentation levels, about 3,000 levels of expression when the
syntax tree is built) but accepts boolean chains of any length.  So before libcst sees a source:

1. CPython compiles it to a syntax tree (C code that guards its own recursion: about a tenth of
   libcst's parse time).  A source that is too complex for CPython is skipped with a message.
2. The tree's nesting is measured the way libcst nests it (an `and`/`or` chain of n operands is n-1
   levels deep in libcst, one in CPython).  Over MAX_NESTING, the source is skipped with a message.
   At the limit libcst takes well under a second on every shape measured; the linter's own
   analysis stops (RecursionError, reported the same way) between 150 and 500 levels anyway.
3. A source CPython rejects for its syntax (an error, or syntax newer than this Python, which libcst
   may still read) cannot be measured: it is parsed once in a forked child first (`isolation`), and
   a crash there is reported instead of killing the run.  When libcst rejects it too, CPython's
   error is what the engine reports anyway (it names the line a person expects), so the source is
   not parsed a second time.

Sources shorter than MAX_NESTING bytes cannot nest deeper than that and skip the checks.
"""

from __future__ import annotations

import ast
import warnings

from gpulint.linter.analysis.isolation import ChildCrashed, call_isolated

MAX_NESTING = 500

# CPython's messages for sources it finds too complex (as opposed to wrong).
_COMPLEXITY_MESSAGES = (
    "too many nested",
    "too many levels of indentation",
    "too many statically nested",
    "too complex",
)


class UnanalysableSource(Exception):
    """A source gpulint does not analyse (too deep, or the parser crashed on it); `str()` is the
    one-line reason, ending in "skipped"."""


def check_source(source: bytes | str) -> SyntaxError | None:
    """Raise UnanalysableSource for a source libcst should not (or could not) parse.  Returns
    CPython's SyntaxError when libcst rejects the source as a syntax error too (the caller reports
    it without parsing); None when the source is for libcst to parse."""
    if len(source) < MAX_NESTING:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the user's code's warnings are not ours to print
            tree = compile(source, "<source>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        if any(text in (exc.msg or "") for text in _COMPLEXITY_MESSAGES):
            raise UnanalysableSource(f"too deeply nested to analyse ({exc.msg}); skipped") from None
        return exc if _trial_parse(source) == "syntax error" else None
    except (RecursionError, MemoryError):
        raise UnanalysableSource("too deeply nested to analyse (Python's own parser gives up); skipped") from None
    except ValueError:  # null bytes: libcst decides
        _trial_parse(source)
        return None
    if too_deep(tree):
        raise UnanalysableSource(f"too deeply nested to analyse (over {MAX_NESTING} levels); skipped")
    return None


def too_deep(tree: ast.AST, limit: int = MAX_NESTING) -> bool:
    """Whether libcst's tree of this module would be more than `limit` levels deep.  A node on one
    line is not entered when its width in bytes shows its subtree cannot reach the limit (each
    level of nesting takes at least one byte)."""
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        # ast.AST declares no positions; a node with an end line has the other three too.
        end_line = getattr(node, "end_lineno", None)
        if end_line is not None and end_line == getattr(node, "lineno", None):
            if depth + getattr(node, "end_col_offset", 0) - getattr(node, "col_offset", 0) + 2 <= limit:
                continue
        # libcst nests an `and`/`or` chain pairwise: its first operand is n-1 levels down.
        step = max(len(node.values) - 1, 1) if isinstance(node, ast.BoolOp) else 1
        stack.extend((child, depth + step) for child in ast.iter_child_nodes(node))
    return False


def _libcst_verdict(source: bytes | str) -> str:
    import libcst as cst  # noqa: PLC0415 - in the child only

    try:
        cst.parse_module(source)
    except cst.ParserSyntaxError:
        return "syntax error"
    except Exception:  # noqa: BLE001 - an encoding problem and the like: the parent parses to say which
        return "other error"
    return "parses"


def _trial_parse(source: bytes | str) -> str:
    """libcst's verdict on the source, reached in a forked child."""
    try:
        return call_isolated(_libcst_verdict, source)
    except ChildCrashed as exc:
        raise UnanalysableSource(f"could not be analysed: the parser crashed ({exc}); skipped") from None
