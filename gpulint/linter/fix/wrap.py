"""Wrap a line a fix made longer than the project's line length, the way the project's formatter
would: black's layout (also ruff format's), or yapf's in a project yapf formats.

Only a statement a fix changed (or moved), and only at a call that closes the line
(`loader = DataLoader(...)`, `return f(...)`, `ds = ds.map(...).batch(32)`):

1. black's "right hand split": the call's arguments go on a line of their own, one level in, and
   `)` comes back to the start -- at the last call of the line whose opening line then fits, or
   the last call when none does (`ds = ds.map(\\n    f, num_parallel_calls=...\\n).batch(32)`):

       loader = DataLoader(
           train_set, batch_size=64, num_workers=4, pin_memory=True
       )  # the comment stays after the closing bracket

2. when the arguments do not fit on that line either, one argument per line, each with a trailing
   comma; an argument that is still too long and is a call itself is split the same way, and a
   conditional (`precision="bf16-mixed" if ... else "32-true"`) goes in parentheses, one part a
   line, and a list, set or bracketed tuple goes one element a line (black always splits a display so);

3. a method chain assigned or returned, with two or more methods called on results of calls
   (`tf.data.Dataset.from_tensor_slices(x).map(f).batch(32)`), goes in parentheses, one method
   a line (black's "fluent interface" layout):

       ds = (
           tf.data.Dataset.from_tensor_slices(files)
           .map(decode, num_parallel_calls=tf.data.AUTOTUNE)
           .batch(32)
       )

A chain in the fluent layout that a fix leaves with one method called on a result (`.to(device)`
moved into the factory) is joined as black joins it -- `).to(dtype=...)` -- and an assigned or
returned value loses the parentheses that layout needed, then is wrapped as in 1 if still too long.

A call already one argument per line (a magic trailing comma, or a comment, holds it) stays so;
an argument a fix made too long is split as in 2, at any depth of such a layout (an element of a
list that is an argument of a call, each on lines of their own).  A value in parentheses of its
own whose content a fix made too long (`mask = (\n    f(n, device=d)[None] < lens\n)`) is split
before the operators of that content (a comparison, `and`/`or`, arithmetic), as black's delimiter
split does.  A comprehension closing the line goes between its brackets on a line of its own,
split before each `for` and `if` when still too long.  A subscript closing the line is a place to
split as a call is (`y = f(x, d)[\n    :n\n]` when that opening line fits, else
`y = f(\n    x, d\n)[:n]`).  The header of a `for`, `while`, `if` or `with`
(`for x in enumerate(ds.prefetch(...)):`) splits at its last call as in 1.  Statements a fix moved
one level in (under a guard) are wrapped the same way.

In a project yapf formats (its `pep8` or `google` style: the `YAPF` and `YAPF_FILLED` layouts,
which project.py `layout_from` picks), a statement or header is split at the same call, as yapf
splits it (`_aligned_split`): the arguments go on after the `(` and the lines they continue on
align with the column after it (yapf's `CONTINUATION_ALIGN_STYLE = SPACE`), each filled as far as
it goes -- one argument a line in the `YAPF` layout when the list has a keyword argument and does
not fit on the line (yapf's `split_before_named_assigns`, on unless the project turns it off):

    F.nll_loss(model(data.to(device, non_blocking=True)),
               target).backward()

or the arguments of a call before it on the line, when its own do not fit; then, when they do not
fit so or the `(` is in the last 30% of the line (yapf's rule), on one line of their own one step
in, `)` after the last (`model = DistributedDataParallel(\n    model.to(device), device_ids=[rank])`;
a sole argument too long for that line split inside itself); and else in black's layout with its
trailing comma, which yapf keeps one argument a line, an argument still too long split inside
itself the aligned way.  A method chain is split at its call as any line is (yapf has no fluent
layout); a statement a comment or a trailing comma holds split, or one that closes in no call (a
comprehension), is left as it is: yapf weighs the costs of every split, which this module does
not reproduce.  tests/test_wrap_yapf.py checks the layout with yapf itself.

The line length is the project's formatter's (gpulint/linter/project.py says where it is read).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import libcst as cst

from gpulint.linter.fix.layouts import BLACK, YAPF

_MARK = "__gpulint_split_here__"
# How a line is wrapped (gpulint/linter/project.py `layout_from` says which a project gets):
_Bracket = cst.Call | cst.Subscript  # where a line closing in brackets splits


def wrap_statement(
    statement: cst.SimpleStatementLine,
    indent: str,
    step: str,
    line_length: int,
    moved_from: str | None = None,
    layout: str = BLACK,
) -> cst.SimpleStatementLine:
    """`statement` (at indentation `indent`; one level is `step`) wrapped to fit `line_length`,
    or unchanged when it fits, ends in no call, or spans lines in a layout black would keep.

    A statement that spans lines and was moved in (from indentation `moved_from`, by a guard) is
    laid out again only when its lines are what gpulint writes for it at its old place -- a
    formatted file, formatted again; otherwise its author's layout stays, moved in as a whole."""
    statement = _without_lone_links(statement, len(indent), line_length)
    lines = _lines(statement)
    if len(statement.body) != 1 or all(len(indent) + len(line) <= line_length for line in lines):
        return statement
    if len(lines) > 1 and moved_from is not None:
        before = _laid_out(statement, lines, moved_from, step, line_length, layout)
        if _code(before) != _code(statement):
            return statement
    return _laid_out(statement, lines, indent, step, line_length, layout)


class _LoneLinkJoiner(cst.CSTTransformer):
    """Joins each method chain laid out one method a line (black's fluent layout) that has fewer
    than two methods called on results left -- a fix took one out (`.to(device)` moved into the
    factory) -- as black and ruff format do: they break a chain before its dots only for two or more."""

    def __init__(self) -> None:
        super().__init__()
        self.inner: set[int] = set()  # chain members under another member: a chain is judged whole
        self.joined = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        below = getattr(node, "func", None) if isinstance(node, cst.Call) else None
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            below = node.value
        if isinstance(below, (cst.Call, cst.Attribute, cst.Subscript)) and not below.lpar:
            self.inner.add(id(below))
        return True

    def on_leave(self, original_node, updated_node):
        updated = super().on_leave(original_node, updated_node)
        if id(original_node) in self.inner or not isinstance(updated, (cst.Call, cst.Attribute, cst.Subscript)):
            return updated
        bare = updated.with_changes(lpar=[], rpar=[])  # the fluent layout's own parentheses, if any
        links = _links(bare)
        broken = [link for link in links if _breaks_before(link)]
        if not broken or len(links) >= 2 or any(_has_comment(link.dot.whitespace_before) for link in broken):
            return updated
        self.joined = True
        return _replace_link(bare, broken[0]).with_changes(lpar=updated.lpar, rpar=updated.rpar)


def _breaks_before(link: cst.Attribute) -> bool:
    return isinstance(link.dot, cst.Dot) and isinstance(link.dot.whitespace_before, cst.ParenthesizedWhitespace)


def _has_comment(whitespace: cst.BaseParenthesizableWhitespace) -> bool:
    return isinstance(whitespace, cst.ParenthesizedWhitespace) and (
        whitespace.first_line.comment is not None or any(line.comment is not None for line in whitespace.empty_lines)
    )


def _replace_link(node: cst.BaseExpression, link: cst.Attribute) -> cst.BaseExpression:
    """`node` (a chain) with the line break before `link`'s dot taken out."""
    if node is link:
        return link.with_changes(dot=link.dot.with_changes(whitespace_before=cst.SimpleWhitespace("")))
    if isinstance(node, cst.Call):
        return node.with_changes(func=_replace_link(node.func, link))
    assert isinstance(node, (cst.Attribute, cst.Subscript))  # the links of a chain lead down to `link`
    return node.with_changes(value=_replace_link(node.value, link))


def _without_lone_links(statement: cst.SimpleStatementLine, indent: int, line_length: int) -> cst.SimpleStatementLine:
    """`statement` with every chain a fix left with a single method a line joined (see
    `_LoneLinkJoiner`).  An assigned or returned value that was in the parentheses of the fluent
    layout leaves them and goes on one line, to be wrapped as any long line is: black drops
    parentheses the layout no longer needs (`x = (\n    f(a)\n    .to(b)\n)` -> `x = f(a).to(b)`)."""
    joiner = _LoneLinkJoiner()
    joined = statement.visit(joiner)
    assert isinstance(joined, cst.SimpleStatementLine)  # the joiner changes whitespace only
    if not joiner.joined:
        return statement
    small = joined.body[0] if len(joined.body) == 1 else None
    value = getattr(small, "value", None)
    if (
        not isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return))
        or not isinstance(value, (cst.Call, cst.Attribute))
        or len(value.lpar) != 1
        or _has_comment(value.lpar[0].whitespace_after)
        or _has_comment(value.rpar[0].whitespace_before)
    ):
        return joined
    bare = _joined(value.with_changes(lpar=[], rpar=[]))
    return joined if bare is None else joined.with_changes(body=[small.with_changes(value=bare)])


def _lines(statement: cst.SimpleStatementLine) -> list[str]:
    return _code(statement.with_changes(leading_lines=())).rstrip("\n").split("\n")


def _laid_out(
    statement: cst.SimpleStatementLine, lines: list[str], indent: str, step: str, line_length: int, layout: str
) -> cst.SimpleStatementLine:
    """`statement` as gpulint lays it out at `indent`: on one line when it fits (unless a comment
    or a trailing comma holds it split), else wrapped."""
    if len(lines) > 1:
        small = statement.body[0]
        joined = _joined(getattr(small, "value", None))
        if joined is not None:
            one_line = statement.with_changes(body=[small.with_changes(value=joined)])
            if len(indent) + len(_lines(one_line)[0]) <= line_length:
                return one_line
    elif len(indent) + len(lines[0]) <= line_length:
        return statement
    if layout != BLACK:
        return _yapf_wrapped_statement(statement, lines, indent, step, line_length, layout)
    return _wrapped_statement(statement, lines, indent, step, line_length)


def _yapf_wrapped_statement(
    statement: cst.SimpleStatementLine, lines: list[str], indent: str, step: str, line_length: int, layout: str
) -> cst.SimpleStatementLine:
    """`statement` split at its call as yapf splits it (`_aligned_split`); a statement held split by a
    comment, or ending in no call, stays as it is."""
    small = statement.body[0]
    value: cst.BaseExpression | None = getattr(small, "value", None)
    if len(lines) > 1:
        value = _joined(value)
        if value is None:
            return statement
        statement = statement.with_changes(body=[small.with_changes(value=value)])
        small = statement.body[0]
    if value is None or not any(isinstance(call, cst.Call) for call in _calls_closing_the_line(value)):
        return statement

    def line_with(new_value: cst.BaseExpression) -> str:
        return _code(statement.with_changes(leading_lines=(), body=[small.with_changes(value=new_value)]))

    wrapped = _aligned_split(value, line_with, indent, step, line_length, layout)
    return statement.with_changes(body=[small.with_changes(value=wrapped)])


def _wrapped_statement(
    statement: cst.SimpleStatementLine, lines: list[str], indent: str, step: str, line_length: int
) -> cst.SimpleStatementLine:
    small = statement.body[0]
    value: cst.BaseExpression | None = getattr(small, "value", None)  # of an assignment, an expression, a return
    if len(lines) > 1:
        # Split before (by a fix of an earlier pass): black joins it and splits it again, unless a
        # comment or a trailing comma after the last argument holds the layout.
        joined = _joined(value)
        if joined is None:
            refitted = (
                _refit_arguments(value, len(indent), step, line_length)
                or _refit_parenthesized(value, len(indent), step, line_length)
                or _refit_nested(value, len(indent), step, line_length)
            )
            return statement if refitted is None else statement.with_changes(body=[small.with_changes(value=refitted)])
        value = joined
        statement = statement.with_changes(body=[small.with_changes(value=value)])
        small = statement.body[0]
    if isinstance(value, cst.Tuple) and not value.lpar and len(value.elements) > 1:
        # `a, b = x.to(d), y.to(d)`: ruff format puts the tuple in parentheses, one element a line
        # (black keeps that layout too: the trailing comma holds it).
        return statement.with_changes(body=[small.with_changes(value=_exploded_tuple(value, step))])
    if isinstance(value, (cst.ListComp, cst.SetComp, cst.DictComp)) and not value.lpar:
        comprehension = _split_comprehension(value, len(indent), step, line_length)
        return statement.with_changes(body=[small.with_changes(value=comprehension)])
    if value is None or not _calls_closing_the_line(value):
        return statement
    links = _links(value)
    if len(links) >= 2 and isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return)):
        return statement.with_changes(
            body=[small.with_changes(value=_fluent(value, links, len(indent), step, line_length))]
        )

    def line_with(new_value: cst.BaseExpression) -> str:
        return _code(statement.with_changes(leading_lines=(), body=[small.with_changes(value=new_value)]))

    wrapped = _right_hand_split(value, line_with, indent, step, line_length)
    return statement.with_changes(body=[small.with_changes(value=wrapped)])


# The expression of a compound statement's header that black splits, by the statement's type.
_HEADER_EXPRESSION = {cst.For: "iter", cst.While: "test", cst.If: "test"}


def wrap_header(
    statement: cst.BaseCompoundStatement, indent: str, step: str, line_length: int, layout: str = BLACK
) -> cst.BaseCompoundStatement:
    """The header of `statement` (`for ... in <call>:`, `with a, <call> as x:`) split at its last call
    when the header is one line and longer than `line_length`; otherwise `statement` unchanged."""
    if not isinstance(statement.body, cst.IndentedBlock):
        return statement  # a one-line suite (`for x in y: f(x)`): left as it is
    if isinstance(statement, cst.With) and not isinstance(statement.lpar, cst.LeftParen):
        # `with a, b(...) as x:` splits inside its last item's call, as black's right-hand split does.
        *first_items, last_item = statement.items
        value = last_item.item

        def header_with(new_value: cst.BaseExpression) -> str:
            return _header_code(statement.with_changes(items=[*first_items, last_item.with_changes(item=new_value)]))

        def rebuilt(new_value: cst.BaseExpression) -> cst.BaseCompoundStatement:
            return statement.with_changes(items=[*first_items, last_item.with_changes(item=new_value)])

    elif type(statement) in _HEADER_EXPRESSION:
        field = _HEADER_EXPRESSION[type(statement)]
        value = getattr(statement, field)

        def header_with(new_value: cst.BaseExpression) -> str:
            return _header_code(statement.with_changes(**{field: new_value}))

        def rebuilt(new_value: cst.BaseExpression) -> cst.BaseCompoundStatement:
            return statement.with_changes(**{field: new_value})

    else:
        return statement
    header = header_with(value)
    if "\n" in header or len(indent) + len(header) <= line_length or not _calls_closing_the_line(value):
        return statement
    if layout != BLACK:
        if not any(isinstance(call, cst.Call) for call in _calls_closing_the_line(value)):
            return statement
        return rebuilt(_aligned_split(value, header_with, indent, step, line_length, layout))
    return rebuilt(_right_hand_split(value, header_with, indent, step, line_length))


def _header_code(statement: cst.BaseCompoundStatement) -> str:
    """The header of `statement`, its trailing comment included, without the line break."""
    assert isinstance(statement.body, cst.IndentedBlock)  # wrap_header splits no one-line suite
    suite = cst.IndentedBlock(body=[cst.SimpleStatementLine([cst.Pass()])], header=statement.body.header)
    changes = {"orelse": None} if hasattr(statement, "orelse") else {}
    code = _code(statement.with_changes(leading_lines=(), body=suite, **changes))
    return code[: code.rindex("\n", 0, len(code) - 1)]


def _right_hand_split(
    value: cst.BaseExpression, line_with: Callable[[cst.BaseExpression], str], indent: str, step: str, line_length: int
) -> cst.BaseExpression:
    """`value` split at the last call of the line whose opening line fits (or the last call when
    none does); `line_with(v)` renders the line with `v` in place of `value`."""
    chain = _calls_closing_the_line(value)
    fitting = [call for call in chain if len(indent) + _head_length(value, call, line_with) <= line_length]
    target = fitting[0] if fitting else chain[0]
    if isinstance(target, cst.Subscript):
        return _replace(value, target, _fit_subscript(target, 0, step))
    return _replace(value, target, _fit(target, len(indent), step, 0, line_length))


def _aligned_split(
    value: cst.BaseExpression,
    line_with: Callable[[cst.BaseExpression], str],
    indent: str,
    step: str,
    line_length: int,
    layout: str,
) -> cst.BaseExpression:
    """`value` split as yapf's pep8 and google styles split it, at the call black's right hand
    split would choose (`_right_hand_split`):

    1. the arguments go on after the `(`, the lines they continue on aligned with the column after
       it, each filled as far as it goes -- or, in the `YAPF` layout, one argument a line when the
       list has a keyword argument and does not fit on the line; where they do not fit so, the
       arguments of a call before it on the line (of two or more), the rest of the line after its
       `)`;
    2. else all of them on one line of their own, one step in, `)` after the last one (where no
       earlier call of the line has two arguments or more: yapf splits that one instead); a sole
       argument too long for that line, a call, split inside itself as in 1;
    3. else black's layout, one argument a line, one step in, each with a trailing comma and `)`
       back at the start: yapf keeps a list that ends in a comma one element a line (its "ending
       comma heuristic") where its own choice is hard to foresee (a lambda, a comparison among the
       arguments); an argument still too long for its line that is a call is split inside itself
       as in 1."""
    calls = [call for call in _calls_closing_the_line(value) if isinstance(call, cst.Call)]
    opening = [_around(value, call, line_with) for call in calls]
    fitting = [index for index, (head, _) in enumerate(opening) if len(indent) + head <= line_length]
    index = fitting[0] if fitting else 0
    call, (head, closing) = calls[index], opening[index]
    continued = len(indent) + len(step)
    each_line = layout == YAPF
    split = _aligned_arguments(call, len(indent) + head, len(indent), closing, line_length, each_line)
    for earlier, (earlier_head, earlier_closing) in zip(calls[index + 1 :], opening[index + 1 :], strict=True):
        if split is not None:
            break
        # (`kmeans = KMeans(n_clusters=7,\n                random_state=0).fit(x)`: the call before splits)
        if len(earlier.args) > 1 and len(indent) + earlier_head <= line_length:
            aligned = _aligned_arguments(
                earlier, len(indent) + earlier_head, len(indent), earlier_closing, line_length, each_line
            )
            if aligned is not None:
                call, split = earlier, aligned
    one_line = continued + len(", ".join(_arg_code(arg) for arg in call.args)) + closing <= line_length
    # (yapf splits an earlier call of the chain with arguments to spare, aligned, rather than this one
    # after its `(`: `x = f(a,\n      b).to(c,\n            d=1)`)
    if split is None and one_line and all(len(earlier.args) < 2 for earlier in calls[index + 1 :]):
        split = _aligned_arguments(call, continued, len(indent), closing, line_length, each_line=False)
        assert split is not None  # (they fit on one line)
        split = split.with_changes(whitespace_before_args=_column_break(continued, len(indent)))
    if split is None and len(call.args) == 1:
        # (a sole argument takes no trailing comma: on its line one step in, split inside itself)
        split = _aligned_arguments(call, continued, len(indent), closing, line_length, each_line, nested=True)
        if split is not None:
            split = split.with_changes(whitespace_before_args=_column_break(continued, len(indent)))
    if split is None:
        split = _exploded_aligned(call, continued, len(indent), line_length, each_line)
    return _replace(value, call, split)


def _exploded_aligned(call: cst.Call, column: int, block_indent: int, line_length: int, each_line: bool) -> cst.Call:
    """`call` one argument a line from `column` on, each with a trailing comma, `)` back at the
    block's indentation; an argument too long for its line that is a call split inside itself, its
    arguments aligned after its `(` (`_aligned_arguments`)."""
    last = len(call.args) - 1
    args = []
    for index, arg in enumerate(call.args):
        inner = arg.value
        if (
            column + len(_arg_code(arg)) + 1 > line_length
            and isinstance(inner, cst.Call)
            and inner.args
            and not inner.lpar
        ):
            inner_column = column + _opening(arg)
            split = _aligned_arguments(inner, inner_column, block_indent, 2, line_length, each_line, True, force=True)
            assert split is not None  # (forced)
            arg = arg.with_changes(value=split)
        after = _column_break(column if index < last else block_indent, block_indent)
        args.append(
            arg.with_changes(comma=cst.Comma(whitespace_after=after), whitespace_after_arg=cst.SimpleWhitespace(""))
        )
    return call.with_changes(args=args, whitespace_before_args=_column_break(column, block_indent))


def _opening(arg: cst.Arg) -> int:
    """Where, in `arg` (a call, or a keyword argument that is one), the call's arguments start."""
    assert isinstance(arg.value, cst.Call)  # (the callers split a call)
    marked = arg.with_changes(
        value=arg.value.with_changes(args=[cst.Arg(cst.Name(_MARK))], whitespace_before_args=cst.SimpleWhitespace("")),
        comma=cst.MaybeSentinel.DEFAULT,
    )
    return _code(marked).index(_MARK)


def _around(
    value: cst.BaseExpression, call: cst.Call, line_with: Callable[[cst.BaseExpression], str]
) -> tuple[int, int]:
    """How long the line is up to `call`'s `(`, and from its `)` on (the `)` included)."""
    marked = call.with_changes(args=[cst.Arg(cst.Name(_MARK))], whitespace_before_args=cst.SimpleWhitespace(""))
    line = line_with(_replace(value, call, marked)).split("\n")[0]
    head = line.index(_MARK)
    return head, len(line) - head - len(_MARK)


def _aligned_arguments(
    call: cst.Call,
    column: int,
    block_indent: int,
    closing: int,
    line_length: int,
    each_line: bool,
    nested: bool = False,
    force: bool = False,
) -> cst.Call | None:
    """`call`'s arguments from `column` on, each line after the first starting at `column` (yapf's
    `CONTINUATION_ALIGN_STYLE = SPACE`), filled as far as each goes; `closing` characters follow the
    last one (`)` and what comes after it on the line).  `each_line`: one argument a line when one
    of them is a keyword argument and they do not fit on one line (yapf's `split_before_named_assigns`).
    `nested`: an argument too long for a line of its own that is a call is split inside itself the
    same way.  None when a line does not fit, or `column` is in the last 30% of the line (yapf then
    breaks after the `(`), unless `force`."""
    codes = [_arg_code(arg) for arg in call.args]
    last = len(codes) - 1
    fits = column + len(", ".join(codes)) + 2 <= line_length  # (yapf counts the `(` as well)
    if len(codes) > 1 and not fits and line_length - column < 0.3 * line_length and not force:
        return None  # yapf breaks after the `(` instead: "try not to squish all of the arguments off to the right"
    one_a_line = (
        each_line
        and any(arg.keyword is not None for arg in call.args)
        and column + len(", ".join(codes)) + 1 > line_length
    )
    groups: list[list[int]] = []
    width = 0
    for index, code in enumerate(codes):
        after = closing if index == last else 1  # (the comma)
        if groups and not one_a_line and column + width + 2 + len(code) + after <= line_length:
            groups[-1].append(index)
            width += 2 + len(code)
        else:
            groups.append([index])
            width = len(code)
    args = list(call.args)
    for group in groups:
        after = closing if group[-1] == last else 1
        if column + len(", ".join(codes[i] for i in group)) + after <= line_length:
            continue
        arg = args[group[0]]
        inner = arg.value
        if len(group) == 1 and nested and isinstance(inner, cst.Call) and inner.args and not inner.lpar:
            inner_column = column + _opening(arg)
            split = _aligned_arguments(
                inner, inner_column, block_indent, 1 + after, line_length, each_line, nested, force
            )
            if split is not None:
                args[group[0]] = arg.with_changes(value=split)
                continue
        if not force:
            return None
    for group in groups:
        for index in group:
            arg = args[index].with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
            if index == last:
                args[index] = arg
            elif index == group[-1]:
                args[index] = arg.with_changes(comma=cst.Comma(whitespace_after=_column_break(column, block_indent)))
            else:
                args[index] = arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=args, whitespace_before_args=cst.SimpleWhitespace(""))


def _column_break(column: int, block_indent: int) -> cst.ParenthesizedWhitespace:
    """A line break, then the block's indentation and spaces up to `column`."""
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(),
        empty_lines=[],
        indent=True,
        last_line=cst.SimpleWhitespace(" " * (column - block_indent)),
    )


def _refit_arguments(
    value: cst.BaseExpression | None, block_indent: int, step: str, line_length: int
) -> cst.BaseExpression | None:
    """The call closing the line, already one argument per line (black's layout), with each
    argument that is a call or a conditional and too long for its line split too; None when there
    is nothing to split or the call is laid out otherwise."""
    chain = _calls_closing_the_line(value)
    if value is None or not chain or not isinstance(chain[0], cst.Call) or not _one_argument_per_line(chain[0], step):
        return None
    call = chain[0]
    args = []
    for arg in call.args:
        inner = arg.value
        too_long = block_indent + len(step) + len(_arg_code(arg)) + 1 > line_length
        if too_long and "\n" not in _code(inner):
            if isinstance(inner, cst.Call) and inner.args and not inner.lpar:
                arg = arg.with_changes(value=_fit(inner, block_indent, step, 1, line_length))
            elif isinstance(inner, cst.IfExp) and not inner.lpar:
                arg = arg.with_changes(value=_split_conditional(inner, step, 1))
            elif _explodable_collection(inner):
                arg = arg.with_changes(value=_exploded_collection(inner, block_indent, step, 1, line_length))
        args.append(arg)
    if all(new is old for new, old in zip(args, call.args, strict=True)):
        return None
    return _replace(value, call, call.with_changes(args=args))


class _NestedRefitter(cst.CSTTransformer):
    """Splits each argument or element that sits on a line of its own, deep in a layout already one
    item a line, when a fix made that line too long: a call as in 2, a list, set or tuple one
    element a line.  Its indentation is read from the line break before it (a whole number of
    steps, or it is left alone: a layout aligned to a bracket is not black's)."""

    def __init__(self, block_indent: int, step: str, line_length: int) -> None:
        super().__init__()
        self.block_indent, self.step, self.line_length = block_indent, step, line_length
        self.changed = False

    def _refit(self, item: cst.CSTNode | None, inner: cst.BaseExpression, before: object) -> cst.BaseExpression | None:
        if not isinstance(before, cst.ParenthesizedWhitespace) or not before.indent or _has_comment(before):
            return None
        if (
            isinstance(inner, cst.BinaryOperation)
            and not inner.lpar
            and isinstance(getattr(inner.operator, "whitespace_before", None), cst.ParenthesizedWhitespace)
        ):
            # (an operation already split before its operator: its left operand has the line)
            left = self._refit(None, inner.left, before)
            return None if left is None else inner.with_changes(left=left)
        levels, rest = divmod(len(before.last_line.value), len(self.step))
        comma = 1 if isinstance(getattr(item, "comma", None), cst.Comma) else 0
        code = _code(inner)
        if (
            rest
            or "\n" in code
            or self.block_indent + len(before.last_line.value) + len(code) + comma <= self.line_length
        ):
            return None
        if isinstance(inner, cst.Call) and inner.args and not inner.lpar:
            return _fit(inner, self.block_indent, self.step, levels, self.line_length)
        if _explodable_collection(inner):
            return _exploded_collection(inner, self.block_indent, self.step, levels, self.line_length)
        return None

    def _items(self, items: Sequence[Any], first: object) -> list[Any]:
        new_items, before = [], first
        for item in items:
            refit = self._refit(item, item.value, before)
            if refit is not None:
                self.changed = True
                item = item.with_changes(value=refit)
            new_items.append(item)
            before = item.comma.whitespace_after if isinstance(item.comma, cst.Comma) else None
        return new_items

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        return updated_node.with_changes(args=self._items(updated_node.args, updated_node.whitespace_before_args))

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> cst.List:
        return updated_node.with_changes(
            elements=self._items(updated_node.elements, updated_node.lbracket.whitespace_after)
        )

    def leave_Set(self, original_node: cst.Set, updated_node: cst.Set) -> cst.Set:
        return updated_node.with_changes(
            elements=self._items(updated_node.elements, updated_node.lbrace.whitespace_after)
        )

    def leave_Tuple(self, original_node: cst.Tuple, updated_node: cst.Tuple) -> cst.Tuple:
        if not updated_node.lpar:
            return updated_node
        return updated_node.with_changes(
            elements=self._items(updated_node.elements, updated_node.lpar[0].whitespace_after)
        )


def _refit_nested(
    value: cst.BaseExpression | None, block_indent: int, step: str, line_length: int
) -> cst.BaseExpression | None:
    """`value`, laid out one item a line, with each item a fix made too long for its line split
    (`_NestedRefitter`); None when there is none."""
    if value is None:
        return None
    refitter = _NestedRefitter(block_indent, step, line_length)
    refitted = value.visit(refitter)
    return refitted if refitter.changed and isinstance(refitted, cst.BaseExpression) else None


def _refit_parenthesized(
    value: cst.BaseExpression | None, block_indent: int, step: str, line_length: int
) -> cst.BaseExpression | None:
    """A value in parentheses of its own, its content on a line of its own and too long for it, a
    comparison, `and`/`or` chain or operation: split before its operators, one level in, as black's
    delimiter split does (`x = (\n    f(a)[0]\n    < b\n)`); None for anything else."""
    if value is None or len(value.lpar) != 1 or len(value.rpar) != 1:
        return None
    opening, closing = value.lpar[0].whitespace_after, value.rpar[0].whitespace_before
    if not isinstance(opening, cst.ParenthesizedWhitespace) or _has_comment(opening) or _has_comment(closing):
        return None
    content = value.with_changes(lpar=[], rpar=[])
    code = _code(content)
    if "\n" in code or block_indent + len(step) + len(code) <= line_length:
        return None
    if isinstance(content, cst.Comparison):
        targets = [
            target.with_changes(
                operator=target.operator.with_changes(
                    whitespace_before=_break(1, step), whitespace_after=cst.SimpleWhitespace(" ")
                )
            )
            for target in content.comparisons
        ]
        split: cst.BaseExpression = content.with_changes(comparisons=targets)
    elif isinstance(content, cst.BooleanOperation):
        split = _split_boolean(content, type(content.operator), step)
    elif _splittable_operation(content):
        split = _split_operation(content, block_indent, step, 1, line_length)
    else:
        return None
    return split.with_changes(lpar=value.lpar, rpar=value.rpar)


def _split_boolean(node: cst.BaseExpression, kind: type, step: str) -> cst.BaseExpression:
    """`a and b and c` with a line break before each `and` of the chain (`or` likewise)."""
    if not isinstance(node, cst.BooleanOperation) or node.lpar or not isinstance(node.operator, kind):
        return node
    operator = node.operator.with_changes(whitespace_before=_break(1, step), whitespace_after=cst.SimpleWhitespace(" "))
    return node.with_changes(left=_split_boolean(node.left, kind, step), operator=operator)


def _one_argument_per_line(call: cst.Call, step: str) -> bool:
    def breaks_to(whitespace: object, levels: int) -> bool:
        return (
            isinstance(whitespace, cst.ParenthesizedWhitespace)
            and whitespace.indent
            and whitespace.last_line.value == step * levels
        )

    last = len(call.args) - 1
    return breaks_to(call.whitespace_before_args, 1) and all(
        breaks_to(arg.comma.whitespace_after, 1 if index < last else 0)
        if isinstance(arg.comma, cst.Comma)
        else index == last and breaks_to(arg.whitespace_after_arg, 0)
        for index, arg in enumerate(call.args)
    )


# What a line break may sit next to where, joined, it becomes a space: an operator (the space PEP 8
# puts there), a keyword inside an expression (`sum(w\n    for w in ws)`: `for`, `if`, `else`,
# `not`, `await`), which needs one, strings written one after the other, and a colon of a dict or
# a lambda (`{key:\n    value}`: `{key: value}`).
_SPACED = (
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.CompFor,
    cst.CompIf,
    cst.IfExp,
    cst.Not,
    cst.Await,
    cst.ConcatenatedString,  # (`"a, "\n"b"` joined is `"a, " "b"`)
)


class _Joiner(cst.CSTTransformer):
    """Every line break in an expression made a space (after a comma, around an operator or a
    keyword) or nothing (inside brackets)."""

    def __init__(self) -> None:
        super().__init__()
        self.spaced: set[int] = set()  # the line breaks that become a space

    def on_visit(self, node: cst.CSTNode) -> bool:
        for field in dataclasses.fields(node):
            whitespace = getattr(node, field.name)
            if (
                field.name.startswith("whitespace")
                and isinstance(whitespace, cst.ParenthesizedWhitespace)
                and (isinstance(node, _SPACED) or field.name == "whitespace_after_colon")
            ):
                self.spaced.add(id(whitespace))
        return super().on_visit(node)

    def leave_Comma(self, original_node: cst.Comma, updated_node: cst.Comma) -> cst.Comma:
        if isinstance(original_node.whitespace_after, cst.ParenthesizedWhitespace):
            return updated_node.with_changes(whitespace_after=cst.SimpleWhitespace(" "))
        return updated_node

    def leave_ParenthesizedWhitespace(self, original_node, updated_node) -> cst.SimpleWhitespace:
        return cst.SimpleWhitespace(" " if id(original_node) in self.spaced else "")


def _joined(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`value` on one line; None when a comment or a trailing comma after a last argument (black's
    "magic trailing comma") keeps it split, or it is in parentheses of its own."""
    if not isinstance(value, (cst.Call, cst.Attribute, cst.Subscript)) or value.lpar:
        return None
    for node in _with_formatting(value):
        if isinstance(node, cst.ParenthesizedWhitespace) and (
            node.first_line.comment is not None or any(line.comment is not None for line in node.empty_lines)
        ):
            return None
        if isinstance(node, cst.Call) and node.args and isinstance(node.args[-1].comma, cst.Comma):
            return None
        if _magic_trailing_comma(node):
            return None
    joined = value.visit(_Joiner())
    assert isinstance(joined, cst.BaseExpression)  # _Joiner changes whitespace only
    return joined


def _magic_trailing_comma(node: cst.CSTNode) -> bool:
    """A list, set, dict or tuple (not a one-element tuple, whose comma is syntax) that ends in a
    comma: black keeps it one element a line."""
    if not isinstance(node, (cst.List, cst.Set, cst.Dict, cst.Tuple)) or not node.elements:
        return False
    if isinstance(node, cst.Tuple) and len(node.elements) == 1:
        return False
    return isinstance(node.elements[-1].comma, cst.Comma)


def _with_formatting(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every node under it, whitespace and comments included."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _calls_closing_the_line(value: cst.BaseExpression | None) -> list[_Bracket]:
    """`a.b(x).c(y)`: [the `.c(y)` call, the `.b(x)` call] -- calls with arguments, outermost first.
    Black splits a pair (`x, y = a(1), b(2)`) or one operation (`a(1) + b(2)`) at its right part."""
    if isinstance(value, cst.Tuple) and not value.lpar and len(value.elements) == 2:
        value = value.elements[-1].value
    elif isinstance(value, cst.BinaryOperation) and not value.lpar and not isinstance(value.left, cst.BinaryOperation):
        value = value.right
    chain: list[_Bracket] = []
    node = value
    # (through a subscript too: `f(a)[:n]` splits inside the call, `[:n]` kept after its `)`)
    while isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)) and not node.lpar:
        if isinstance(node, cst.Call):
            if node.args:
                chain.append(node)
            node = node.func
        else:
            if isinstance(node, cst.Subscript):
                chain.append(node)
            node = node.value
    return chain


def _links(value: cst.BaseExpression) -> list[cst.Attribute]:
    """The `.name` accesses of a chain made on the result of a call or subscript (`x(1).a(2).b(3)`:
    `.a` and `.b`): where black's fluent layout breaks the line."""
    links = []
    node = value
    while isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)) and not node.lpar:
        if isinstance(node, cst.Attribute) and isinstance(node.value, (cst.Call, cst.Subscript)):
            links.append(node)
        node = node.func if isinstance(node, cst.Call) else node.value
    return links


def _fluent(
    value: cst.BaseExpression, links: list[cst.Attribute], block_indent: int, step: str, line_length: int
) -> cst.BaseExpression:
    """`value` in parentheses, a line break before each of `links`; a segment still too long has
    its call split as well."""
    starts_line = {id(link) for link in links}

    def rebuild(node: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(node, cst.Call):
            call = node.with_changes(func=rebuild(node.func))
            own_line = (
                "." + _code(node.with_changes(func=node.func.attr))
                if isinstance(node.func, cst.Attribute) and id(node.func) in starts_line  # links are attributes
                else _code(node)
            )
            if block_indent + len(step) + len(own_line) > line_length and call.args:
                call = _fit(call, block_indent, step, 1, line_length)
            return call
        if isinstance(node, cst.Attribute):
            rebuilt = node.with_changes(value=rebuild(node.value))
            if id(node) in starts_line:
                rebuilt = rebuilt.with_changes(dot=cst.Dot(whitespace_before=_break(1, step)))
            return rebuilt
        if isinstance(node, cst.Subscript):
            return node.with_changes(value=rebuild(node.value))
        return node

    return rebuild(value).with_changes(
        lpar=[cst.LeftParen(whitespace_after=_break(1, step))], rpar=[cst.RightParen(whitespace_before=_break(0, step))]
    )


def _split_comprehension(
    value: cst.ListComp | cst.SetComp | cst.DictComp, block_indent: int, step: str, line_length: int
) -> cst.BaseExpression:
    """A comprehension that closes the line, as black splits it: its content on a line of its own
    between the brackets, and when that is still too long, a line break before each `for` and `if`."""
    content = len(_code(value)) - 2
    if block_indent + len(step) + content > line_length:

        def broken(comp_for: cst.CompFor) -> cst.CompFor:
            inner = comp_for.inner_for_in
            return comp_for.with_changes(
                whitespace_before=_break(1, step),
                ifs=[comp_if.with_changes(whitespace_before=_break(1, step)) for comp_if in comp_for.ifs],
                inner_for_in=None if inner is None else broken(inner),
            )

        value = value.with_changes(for_in=broken(value.for_in))
    if isinstance(value, cst.ListComp):
        return value.with_changes(
            lbracket=cst.LeftSquareBracket(whitespace_after=_break(1, step)),
            rbracket=cst.RightSquareBracket(whitespace_before=_break(0, step)),
        )
    return value.with_changes(
        lbrace=cst.LeftCurlyBrace(whitespace_after=_break(1, step)),
        rbrace=cst.RightCurlyBrace(whitespace_before=_break(0, step)),
    )


def _exploded_tuple(value: cst.Tuple, step: str, depth: int = 0) -> cst.Tuple:
    """`value` in parentheses, one element a line (`depth` + 1 steps in), each with a trailing comma."""
    last = len(value.elements) - 1
    elements = [
        element.with_changes(comma=cst.Comma(whitespace_after=_break(depth + 1 if index < last else depth, step)))
        for index, element in enumerate(value.elements)
    ]
    return value.with_changes(
        elements=elements, lpar=[cst.LeftParen(whitespace_after=_break(depth + 1, step))], rpar=[cst.RightParen()]
    )


def _replace(expression: cst.BaseExpression, target: _Bracket, new: _Bracket) -> cst.BaseExpression:
    if expression is target:
        return new
    if isinstance(expression, cst.Call):
        return expression.with_changes(func=_replace(expression.func, target, new))
    if isinstance(expression, cst.Tuple):
        elements = list(expression.elements)
        elements[-1] = elements[-1].with_changes(value=_replace(elements[-1].value, target, new))
        return expression.with_changes(elements=elements)
    if isinstance(expression, cst.BinaryOperation):
        return expression.with_changes(right=_replace(expression.right, target, new))
    assert isinstance(expression, (cst.Attribute, cst.Subscript))  # the last kinds of link of a chain to `target`
    return expression.with_changes(value=_replace(expression.value, target, new))


def _head_length(value: cst.BaseExpression, bracket: _Bracket, line_with: Callable[[cst.BaseExpression], str]) -> int:
    """How long the line up to the call's `(` (the subscript's `[`) is."""
    marked: _Bracket
    if isinstance(bracket, cst.Call):
        marked = bracket.with_changes(args=[cst.Arg(cst.Name(_MARK))], whitespace_before_args=cst.SimpleWhitespace(""))
    else:
        marked = bracket.with_changes(
            slice=[cst.SubscriptElement(cst.Index(cst.Name(_MARK)))], lbracket=cst.LeftSquareBracket()
        )
    return line_with(_replace(value, bracket, marked)).index(_MARK)


def _fit_subscript(subscript: cst.Subscript, depth: int, step: str) -> cst.Subscript:
    """`subscript` with what is in its brackets on a line of its own, `depth` + 1 steps in."""
    return subscript.with_changes(
        lbracket=cst.LeftSquareBracket(whitespace_after=_break(depth + 1, step)),
        rbracket=cst.RightSquareBracket(whitespace_before=_break(depth, step)),
    )


def _arg_code(arg: cst.Arg) -> str:
    return _code(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=cst.SimpleWhitespace("")))


def _fit(call: cst.Call, block_indent: int, step: str, depth: int, line_length: int) -> cst.Call:
    """`call` split across lines; its own line is `depth` steps in from the block's indentation."""
    body_indent = block_indent + len(step) * (depth + 1)
    if body_indent + len(", ".join(_arg_code(arg) for arg in call.args)) <= line_length:
        return _split(call, step, depth, one_line=True)
    if len(call.args) == 1 and _splittable_operation(call.args[0].value):
        # A sole argument too long for its line, an operation (`"..." % (a, b)`): black puts it on
        # a line of its own, with no trailing comma, and splits it before its operators.
        operation = _split_operation(call.args[0].value, block_indent, step, depth + 1, line_length)
        return _split(call.with_changes(args=[call.args[0].with_changes(value=operation)]), step, depth, one_line=True)
    args = []
    for arg in call.args:
        inner = arg.value
        if body_indent + len(_arg_code(arg)) + 1 > line_length:
            if isinstance(inner, cst.Call) and inner.args and not inner.lpar:
                arg = arg.with_changes(value=_fit(inner, block_indent, step, depth + 1, line_length))
            elif _splittable_operation(inner):
                arg = arg.with_changes(value=_split_operation(inner, block_indent, step, depth + 1, line_length))
            elif isinstance(inner, cst.IfExp) and not inner.lpar:
                arg = arg.with_changes(value=_split_conditional(inner, step, depth + 1))
            elif _explodable_collection(inner):
                arg = arg.with_changes(value=_exploded_collection(inner, block_indent, step, depth + 1, line_length))
        args.append(arg)
    return _split(call.with_changes(args=args), step, depth, one_line=False)


def _split_conditional(expression: cst.IfExp, step: str, depth: int) -> cst.IfExp:
    """`a if test else b`, too long for its line at `depth`, in parentheses of its own, one part a
    line: the layout black gives it, which ruff format keeps."""
    inner = _break(depth + 1, step)
    return expression.with_changes(
        lpar=[cst.LeftParen(whitespace_after=inner)],
        rpar=[cst.RightParen(whitespace_before=_break(depth, step))],
        whitespace_before_if=inner,
        whitespace_before_else=inner,
    )


def _explodable_collection(expression: cst.BaseExpression) -> bool:
    """A list or set display, or a tuple in brackets of its own, with elements: black splits one
    that does not fit one element a line (a bracket pair that is an atom always splits so)."""
    if isinstance(expression, cst.Tuple):
        return bool(expression.lpar) and len(expression.elements) > 1
    return isinstance(expression, (cst.List, cst.Set)) and bool(expression.elements) and not expression.lpar


def _exploded_collection(
    node: cst.BaseExpression, block_indent: int, step: str, depth: int, line_length: int
) -> cst.BaseExpression:
    """`node` (a list, set or tuple whose own line is `depth` steps in) one element a line, each
    with a trailing comma; an element still too long that is a call is split as well."""
    assert isinstance(node, (cst.List, cst.Set, cst.Tuple))  # _explodable_collection
    element_indent = block_indent + len(step) * (depth + 1)
    last = len(node.elements) - 1
    elements = []
    for index, element in enumerate(node.elements):
        inner = element.value
        if (
            not isinstance(element, (cst.StarredElement,))
            and isinstance(inner, cst.Call)
            and inner.args
            and not inner.lpar
            and element_indent + len(_code(inner)) + 1 > line_length
        ):
            element = element.with_changes(value=_fit(inner, block_indent, step, depth + 1, line_length))
        comma = cst.Comma(whitespace_after=_break(depth + 1 if index < last else depth, step))
        elements.append(element.with_changes(comma=comma))
    opening = _break(depth + 1, step)
    if isinstance(node, cst.Tuple):
        return node.with_changes(
            elements=elements, lpar=[cst.LeftParen(whitespace_after=opening)], rpar=[cst.RightParen()]
        )
    if isinstance(node, cst.List):
        return node.with_changes(
            elements=elements,
            lbracket=cst.LeftSquareBracket(whitespace_after=opening),
            rbracket=cst.RightSquareBracket(),
        )
    return node.with_changes(
        elements=elements, lbrace=cst.LeftCurlyBrace(whitespace_after=opening), rbrace=cst.RightCurlyBrace()
    )


def _splittable_operation(expression: cst.BaseExpression) -> bool:
    return isinstance(expression, cst.BinaryOperation) and not expression.lpar


def _precedence(operator: cst.BaseBinaryOp) -> int:
    for rank, kinds in enumerate(_PRECEDENCE):
        if isinstance(operator, kinds):
            return rank
    return len(_PRECEDENCE)


# Binary operators from the loosest to the tightest binding (Python's grammar).
_PRECEDENCE: tuple[tuple[type[cst.BaseBinaryOp], ...], ...] = (
    (cst.BitOr,),
    (cst.BitXor,),
    (cst.BitAnd,),
    (cst.LeftShift, cst.RightShift),
    (cst.Add, cst.Subtract),
    (cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.MatrixMultiply),
    (cst.Power,),
)


def _split_operation(
    operation: cst.BaseExpression, block_indent: int, step: str, depth: int, line_length: int
) -> cst.BaseExpression:
    """`a % (b, c)` (its lines `depth` steps in) with a line break before each operator of its
    outermost chain (`a + b - c`: both), as black's delimiter split does; an operand still too
    long for its line that is a call or a tuple in brackets is split inside them too."""
    assert isinstance(operation, cst.BinaryOperation)  # _splittable_operation
    rank = _precedence(operation.operator)
    line_indent = block_indent + len(step) * depth

    def operand(node: cst.BaseExpression, prefix: int) -> cst.BaseExpression:
        if line_indent + prefix + len(_code(node)) <= line_length:
            return node
        if isinstance(node, cst.Call) and node.args and not node.lpar:
            return _fit(node, block_indent, step, depth, line_length)
        if isinstance(node, cst.Tuple) and node.lpar and node.elements:
            return _exploded_tuple(node.with_changes(lpar=[], rpar=[]), step, depth)
        return node

    def split(node: cst.BaseExpression) -> cst.BaseExpression:
        if not (isinstance(node, cst.BinaryOperation) and not node.lpar and _precedence(node.operator) == rank):
            return operand(node, 0)
        operator = node.operator.with_changes(
            whitespace_before=_break(depth, step), whitespace_after=cst.SimpleWhitespace(" ")
        )
        prefix = len(_code(node.operator).strip()) + 1
        return node.with_changes(left=split(node.left), operator=operator, right=operand(node.right, prefix))

    return split(operation)


def _break(levels: int, step: str) -> cst.ParenthesizedWhitespace:
    """A line break, then the block's indentation and `levels` more steps."""
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True, last_line=cst.SimpleWhitespace(step * levels)
    )


def _split(call: cst.Call, step: str, depth: int, one_line: bool) -> cst.Call:
    last = len(call.args) - 1
    args = []
    for index, arg in enumerate(call.args):
        arg = arg.with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
        if one_line and index < last:
            arg = arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        elif one_line:
            arg = arg.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=_break(depth, step))
        else:
            arg = arg.with_changes(comma=cst.Comma(whitespace_after=_break(depth + 1 if index < last else depth, step)))
        args.append(arg)
    return call.with_changes(whitespace_before_args=_break(depth + 1, step), args=args)
