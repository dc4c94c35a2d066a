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

4. The tree's nodes are counted: a source with more than the `max-syntax-nodes` budget is skipped
   with a message.  The work that follows (libcst's parse, the analyses, the rules) grows with the
   nodes, not the bytes: a budget of nodes bounds it whatever the file holds.

Sources shorter than MAX_NESTING bytes cannot nest deeper than that and skip the checks (the node
budget too: such a source holds at most a thousand or so nodes, work of no account).

One CPython parse per file: the project index (analysis/project.py) summarizes each module of the
run from the tree `index_tree` gives it, and that call leaves what the guard measured on the same
tree (`Measured`, without the tree) for the lint of the same bytes to take (`check_source`), so
the source is not compiled a second time.  The lint may run in a worker process forked after the
index was built; a worker started otherwise, or a source linted without the index (the language
server, a notebook), compiles it here.  A run with workers summarizes its modules in a worker pool
too: each worker hands what it measured back with the summary (`take_measurement`), and the
process that builds the index keeps it (`keep_measurement`) before the lint's workers start.
What is measured includes the code shapes the engine's trigger filter asks about
(analysis/code_shapes.py), so deciding that no rule may fire on a file takes no parse of its own
either.
"""

from __future__ import annotations

import ast
import gc
import hashlib
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpulint.linter import catalog
from gpulint.linter.analysis.code_shapes import ShapeCollector
from gpulint.linter.analysis.isolation import ChildCrashed, call_isolated

MAX_NESTING = 500
# The default `max-syntax-nodes`: about twice the largest module of transformers (its Trainer and
# its largest models: 24,000-27,000 nodes); see docs/performance.md for what a file at the budget
# costs.
DEFAULT_MAX_SYNTAX_NODES = 50_000

# CPython's messages for sources it finds too complex (as opposed to wrong).
_COMPLEXITY_MESSAGES = (
    "too many nested",
    "too many levels of indentation",
    "too many statically nested",
    "too complex",
)


class UnanalysableSource(Exception):
    """A source gpulint does not analyse (too deep, too large, or the parser crashed on it); `str()`
    is the one-line reason, ending in "skipped"."""


@dataclass(frozen=True)
class Measured:
    """What CPython's parse of a source told the guard (the tree itself is not kept)."""

    nodes: int = 0  # the tree's nodes (0 when CPython built none)
    too_deep: bool = False  # deeper than MAX_NESTING as libcst would nest it
    too_complex: str | None = None  # the one-line reason when CPython found it too complex
    syntax_error: SyntaxError | None = None  # CPython's error for a source it rejects
    null_bytes: bool = False  # CPython does not read them: libcst decides
    # The code shapes of the tree (analysis/code_shapes.py) among those `looked_for`, for the
    # engine's trigger filter; None when there is no tree or nobody asked.
    shapes: frozenset[str] | None = None
    looked_for: frozenset[str] = frozenset()


def python_tree(
    source: bytes | str,
    max_nodes: int | None = None,
    measure: bool = True,
    shapes: frozenset[str] = frozenset(),
) -> tuple[ast.Module | None, Measured]:
    """The one CPython parse of a source: its tree (None when CPython rejects the source) and what
    the guard measures on it (its depth unless not `measure`d; its nodes counted up to one past
    `max_nodes`, when there is a budget; which of `shapes` its code holds, when any are asked)."""
    collecting = gc.isenabled()
    # A tree holds no cycles, but building one allocates a node per token: the collector would
    # walk the growing heap again and again (measured: twice the compile time on 1 MiB).
    gc.disable()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the user's code's warnings are not ours to print
            tree = compile(source, "<source>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        if any(text in (exc.msg or "") for text in _COMPLEXITY_MESSAGES):
            return None, Measured(too_complex=f"too deeply nested to analyse ({exc.msg}); skipped")
        return None, Measured(syntax_error=exc)
    except (RecursionError, MemoryError):
        return None, Measured(too_complex="too deeply nested to analyse (Python's own parser gives up); skipped")
    except ValueError:
        return None, Measured(null_bytes=True)
    finally:
        if collecting:
            gc.enable()
    assert isinstance(tree, ast.Module)  # what "exec" mode builds
    collector = ShapeCollector(shapes, source) if shapes else None
    if not measure:
        if collector is not None:
            walk_tree(tree, handlers=collector.handlers)
        return tree, Measured(shapes=collector.found() if collector else None, looked_for=shapes)
    nodes, deep = walk_tree(tree, max_nodes, collector.handlers if collector else None)
    skipped = deep or (max_nodes is not None and nodes > max_nodes)  # (nobody asks for its shapes)
    found = collector.found() if collector is not None and not skipped else None
    return tree, Measured(nodes=nodes, too_deep=deep, shapes=found, looked_for=shapes)


def walk_tree(
    tree: ast.AST,
    max_nodes: int | None = None,
    handlers: Mapping[type, Callable[[Any], None]] | None = None,
    limit: int = MAX_NESTING,
) -> tuple[int, bool]:
    """The one walk of a CPython tree that measures it: its nodes (each `Load`/`Store` context
    counted where it is used), up to one past `max_nodes` -- counting a huge tree to the end
    would cost more than its compile -- and whether libcst would nest it more than `limit` levels
    deep (an `and`/`or` chain of n operands is n-1 levels deep in libcst).  `handlers[type(node)]`
    is called on every node counted of the types it has (the code shapes are collected on the
    same walk)."""
    count, most, deep = 0, -1 if max_nodes is None else max_nodes, False
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        count += 1
        if count == most + 1:
            return count, deep or too_deep(tree, limit)  # (over the budget: the depth decides the message)
        if depth > limit:
            deep = True
        if handlers is not None and (handler := handlers.get(type(node))) is not None:
            handler(node)
        # libcst nests an `and`/`or` chain pairwise: its first operand is n-1 levels down.
        below = depth + (max(len(node.values) - 1, 1) if type(node) is ast.BoolOp else 1)
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        push((item, below))
            elif isinstance(value, ast.AST):
                push((value, below))
    return count, deep


MeasuredKey = tuple[bytes, int | None]  # (the digest of a source's bytes, the node budget)

# What the project index measured, by the digest of the bytes it parsed and the node budget it
# counted to, for the lint of the same bytes (bounded: the index also reads modules that are only
# imported, never linted).
_MEASURED: OrderedDict[MeasuredKey, Measured] = OrderedDict()
_MEASURED_KEPT = 20_000


def _key(source: bytes | str, max_nodes: int | None) -> MeasuredKey:
    data = source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).digest(), max_nodes


def index_tree(source: bytes | str, max_nodes: int | None = None) -> ast.Module | None:
    """`python_tree` for the project index: the tree (None when CPython rejects the source, or it
    has more than `max_nodes` nodes: the lint skips it), and what the guard measured kept for the
    lint of the same source (see the module docstring).  `max_nodes` None: a module the run only
    imports, which nothing lints, so nothing is measured."""
    if max_nodes is None:
        return python_tree(source, measure=False)[0]
    # The module is linted: what the trigger filter will ask of its code is kept too -- the shapes
    # of the built-in rules its bytes spell (a local rule that names others has the lint parse
    # again; a module the project tells something about is not filtered).
    data = source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")
    shapes = catalog.trigger_vocabulary(catalog.spelled_rules(data, catalog.RULES))
    tree, measured = python_tree(source, max_nodes, shapes=shapes)
    if len(source) >= MAX_NESTING:
        keep_measurement(_key(source, max_nodes), measured)
    return None if measured.nodes > max_nodes else tree


def take_measurement(source: bytes | str, max_nodes: int | None) -> tuple[MeasuredKey, Measured] | None:
    """What `index_tree` kept for these bytes and budget, with its key, no longer kept here: a
    worker process that summarized the module hands it to the process that lints it
    (`keep_measurement`)."""
    key = _key(source, max_nodes)
    measured = _MEASURED.pop(key, None)
    return None if measured is None else (key, measured)


def keep_measurement(key: MeasuredKey, measured: Measured) -> None:
    """Keep what `index_tree` measured, here or in another process (`take_measurement`), for the
    lint of the same bytes."""
    _MEASURED[key] = measured
    while len(_MEASURED) > _MEASURED_KEPT:
        _MEASURED.popitem(last=False)


def measure(source: bytes | str, max_nodes: int | None = None, shapes: frozenset[str] = frozenset()) -> Measured:
    """What the guard measures on a source, with which of `shapes` its code holds: what the
    project index measured when it parsed the same bytes (taken: `check_source` is then handed
    it), or a parse of its own.  A source shorter than MAX_NESTING is only parsed for its shapes."""
    short = len(source) < MAX_NESTING
    measured = None if short or not _MEASURED else _MEASURED.pop(_key(source, max_nodes), None)
    if measured is not None and (measured.shapes is None or shapes <= measured.looked_for):
        return measured  # (no tree, or the shapes asked for were looked for)
    return python_tree(source, max_nodes, measure=not short, shapes=shapes)[1]


def check_source(
    source: bytes | str, max_nodes: int | None = None, measured: Measured | None = None
) -> SyntaxError | None:
    """Raise UnanalysableSource for a source libcst should not (or could not) parse, or one with
    more than `max_nodes` syntax nodes.  Returns CPython's SyntaxError when libcst rejects the
    source as a syntax error too (the caller reports it without parsing); None when the source is
    for libcst to parse.  `measured`: what `measure` said of the source (else it is measured here)."""
    if len(source) < MAX_NESTING:
        return None
    if measured is None:
        measured = measure(source, max_nodes)
    if measured.too_complex is not None:
        raise UnanalysableSource(measured.too_complex)
    if measured.syntax_error is not None:
        return measured.syntax_error if _trial_parse(source) == "syntax error" else None
    if measured.null_bytes:
        _trial_parse(source)
        return None
    if measured.too_deep:
        raise UnanalysableSource(f"too deeply nested to analyse (over {MAX_NESTING} levels); skipped")
    if max_nodes is not None and measured.nodes > max_nodes:
        raise UnanalysableSource(
            f"too large to analyse (more than {max_nodes:,} syntax nodes, the max-syntax-nodes budget); skipped"
        )
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
