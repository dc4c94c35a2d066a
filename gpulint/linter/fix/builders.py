"""Building blocks that rules use to describe their fixes.

Each returns a `Fix` (or None when no correct fix can be written); nothing here touches the file.
The fixer (fixer.py) applies them; passes.py re-parses and re-lints between passes.
"""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.nodes import dotted_name, keyword_arg
from gpulint.linter.analysis.vocabulary import CPU_AFFINITY_CALL, CPU_COUNT_CALLS
from gpulint.linter.findings import Applicability, Fix

# The CPU counts that are always a positive number (os.cpu_count and psutil's may be None).
_CPU_COUNTS_NEVER_NONE = frozenset({"multiprocessing.cpu_count", "torch.multiprocessing.cpu_count"})


def set_keyword(
    ctx: FileContext,
    call: cst.Call,
    keyword: str,
    value_code: str,
    applicability: Applicability,
    message: str,
    imports: tuple[str, ...] = (),
) -> Fix:
    """Set `keyword=value` on a call: replace the value if the keyword is there, else append it in
    the call's own layout (one argument per line stays one argument per line)."""
    value = cst.parse_expression(value_code)
    existing = keyword_arg(call, keyword)
    if existing is not None:
        new_args = [arg.with_changes(value=value) if arg is existing else arg for arg in call.args]
        return Fix(applicability, message, {call: call.with_changes(args=new_args)}, imports)
    return Fix(applicability, message, {call: append_keyword(call, keyword, value)}, imports)


def persistent_workers_value(ctx: FileContext, workers: cst.BaseExpression) -> str:
    """What `persistent_workers=` can say next to `num_workers=<workers>`: `True` where the count
    is positive whatever runs (`4`, GL101's `min(8, os.cpu_count() or 1)`), else `<workers> > 0`
    -- `persistent_workers=True` with zero workers raises."""
    if _always_positive(ctx, workers):
        return "True"
    code = ctx.code(workers)
    # Operators that bind looser than `>` (`a or 4`, `4 if a else 0`) need parentheses.
    loose = isinstance(workers, (cst.BooleanOperation, cst.IfExp, cst.Lambda, cst.Comparison, cst.NamedExpr)) or (
        isinstance(workers, cst.UnaryOperation) and isinstance(workers.operator, cst.Not)
    )
    if loose and not workers.lpar:
        code = f"({code})"
    return f"{code} > 0"


def _always_positive(ctx: FileContext, expression: cst.BaseExpression) -> bool:
    """An integer expression positive on every run: a positive literal, `len(os.sched_getaffinity(0))`,
    `multiprocessing.cpu_count()` (it raises rather than return nothing), `min` of positive ones,
    `max` with one, `<CPU count> or <positive>` (`os.cpu_count()` is positive or None)."""
    if isinstance(expression, cst.Integer):
        return expression.evaluated_value > 0
    if isinstance(expression, cst.Call) and ctx.call_qualified_name(expression) in _CPU_COUNTS_NEVER_NONE:
        return True
    if isinstance(expression, cst.BooleanOperation) and isinstance(expression.operator, cst.Or):
        left = expression.left
        counts_cpus = isinstance(left, cst.Call) and ctx.call_qualified_name(left) in CPU_COUNT_CALLS
        return (counts_cpus or _always_positive(ctx, left)) and _always_positive(ctx, expression.right)
    if not isinstance(expression, cst.Call) or not expression.args:
        return False
    if any(arg.star or arg.keyword is not None for arg in expression.args):
        return False
    function = dotted_name(expression.func)  # the builtins: no import names them
    values = [arg.value for arg in expression.args]
    if function == "len":
        return isinstance(values[0], cst.Call) and ctx.call_qualified_name(values[0]) == CPU_AFFINITY_CALL
    if function == "min":
        return all(_always_positive(ctx, value) for value in values)
    if function == "max":
        return any(_always_positive(ctx, value) for value in values)
    return False


def remove_keyword(call: cst.Call, keyword: str, applicability: Applicability, message: str) -> Fix:
    args = list(call.args)
    index = next(i for i, arg in enumerate(args) if arg.keyword is not None and arg.keyword.value == keyword)
    removed = args.pop(index)
    if args and index == len(args):
        # The last argument went: the one before it takes over its trailing comma and spacing, but
        # keeps the comment that ended its own line (the removed line's comment goes with it).
        before = args[-1]
        comma, after_arg = removed.comma, removed.whitespace_after_arg
        own_line = before.comma.whitespace_after if isinstance(before.comma, cst.Comma) else None
        if isinstance(own_line, cst.ParenthesizedWhitespace):
            if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
                comma = comma.with_changes(
                    whitespace_after=comma.whitespace_after.with_changes(first_line=own_line.first_line)
                )
            elif isinstance(after_arg, cst.ParenthesizedWhitespace):
                after_arg = after_arg.with_changes(first_line=own_line.first_line)
        args[-1] = before.with_changes(comma=comma, whitespace_after_arg=after_arg)
    elif index > 0 and isinstance(removed.comma, cst.Comma) and _breaks_after(removed):
        # The line broke after the removed argument: it breaks after the one before it now (unless
        # that one ends its own line already), so the next line is not joined onto this one.
        before = args[index - 1]
        if isinstance(before.comma, cst.Comma) and not _breaks_after(before):
            line_break = _without_comment(removed.comma.whitespace_after)
            args[index - 1] = before.with_changes(comma=before.comma.with_changes(whitespace_after=line_break))
    return Fix(applicability, message, {call: call.with_changes(args=args)})


def _breaks_after(arg: cst.Arg) -> bool:
    """Whether the line ends after this argument's comma."""
    return isinstance(arg.comma, cst.Comma) and isinstance(arg.comma.whitespace_after, cst.ParenthesizedWhitespace)


def _without_comment(whitespace: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """The same line break and indentation, minus any comment (comments must never be copied)."""
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        return whitespace.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
    return whitespace


def append_keyword(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """Append `keyword=value` in the call's own layout: one line stays one line; one argument per
    line gets a new line at the same indentation; comments stay on the argument they follow; the
    `=` is spaced as the call's last keyword is (`batch_size = 32` gets `pin_memory = True`)."""
    args = list(call.args)
    tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    last_keyword = next((arg for arg in reversed(args) if arg.keyword is not None), None)
    equal = last_keyword.equal if last_keyword is not None else tight
    if not (
        isinstance(equal, cst.AssignEqual)
        and isinstance(equal.whitespace_before, cst.SimpleWhitespace)
        and isinstance(equal.whitespace_after, cst.SimpleWhitespace)
        and equal.whitespace_before.value in ("", " ")
        and equal.whitespace_after.value in ("", " ")
    ):
        equal = tight  # (an `=` across lines or oddly spaced: not a style to copy)
    new_arg = cst.Arg(value=value, keyword=cst.Name(keyword), equal=equal)
    if not args:
        return call.with_changes(args=[new_arg])
    last = args[-1]
    # The break between two arguments, copied from the layout already in use.
    if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
        separator = args[-2].comma.with_changes(whitespace_after=_without_comment(args[-2].comma.whitespace_after))
    elif isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        separator = cst.Comma(whitespace_after=_without_comment(call.whitespace_before_args))
    else:
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    line_break = separator.whitespace_after
    breaks = isinstance(line_break, cst.ParenthesizedWhitespace)

    if isinstance(last.comma, cst.Comma):
        closing = last.comma.whitespace_after  # the comment after the old last argument, then `)`
        if isinstance(line_break, cst.ParenthesizedWhitespace) and isinstance(closing, cst.ParenthesizedWhitespace):
            last_comma = last.comma.with_changes(
                whitespace_after=closing.with_changes(indent=line_break.indent, last_line=line_break.last_line)
            )
            new_comma = cst.Comma(whitespace_after=_without_comment(closing))
        else:
            last_comma, new_comma = separator, last.comma
        args[-1] = last.with_changes(comma=last_comma)
        args.append(new_arg.with_changes(comma=new_comma, whitespace_after_arg=last.whitespace_after_arg))
        return call.with_changes(args=args)

    closing = last.whitespace_after_arg  # no trailing comma: the break before `)` is here
    if breaks and isinstance(closing, cst.ParenthesizedWhitespace):
        separator = separator.with_changes(
            whitespace_after=separator.whitespace_after.with_changes(first_line=closing.first_line)
        )
        closing = _without_comment(closing)
    args[-1] = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    args.append(new_arg.with_changes(whitespace_after_arg=closing))
    return call.with_changes(args=args)


def insert_after(
    statement: cst.SimpleStatementLine,
    code: str,
    applicability: Applicability,
    message: str,
    imports: tuple[str, ...] = (),
    min_torch: tuple[int, int] | None = None,
) -> Fix:
    """Add the statement `code` on the line after `statement`."""
    new = cst.parse_statement(code)
    return Fix(applicability, message, {statement: cst.FlattenSentinel([statement, new])}, imports, min_torch=min_torch)
