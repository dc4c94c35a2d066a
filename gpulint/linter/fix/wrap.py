"""Wrap a line a fix made longer than the project's line length, the way black would.

Only a statement a fix changed (or moved), and only at a call that closes the line
(`loader = DataLoader(...)`, `return f(...)`, `ds = ds.map(...).batch(32)`):

1. black's "right hand split": the call's arguments go on a line of their own, one level in, and
   `)` comes back to the start -- at the last call of the line whose opening line then fits, or
   the last call when none does (`ds = ds.map(\\n    f, num_parallel_calls=...\\n).batch(32)`):

       loader = DataLoader(
           train_set, batch_size=64, num_workers=4, pin_memory=True
       )  # the comment stays after the closing bracket

2. when the arguments do not fit on that line either, one argument per line, each with a trailing
   comma; an argument that is still too long and is a call itself is split the same way;

3. a method chain assigned or returned, with two or more methods called on results of calls
   (`tf.data.Dataset.from_tensor_slices(x).map(f).batch(32)`), goes in parentheses, one method
   a line (black's "fluent interface" layout):

       ds = (
           tf.data.Dataset.from_tensor_slices(files)
           .map(decode, num_parallel_calls=tf.data.AUTOTUNE)
           .batch(32)
       )

A call already one argument per line (a magic trailing comma, or a comment, holds it) stays so;
an argument a fix made too long is split as in 2.  The header of a `for`, `while`, `if` or `with`
(`for x in enumerate(ds.prefetch(...)):`) splits at its last call as in 1.  Statements a fix moved
one level in (under a guard) are wrapped the same way.

The line length is the project's (ruff's or black's `line-length`, else 88: gpulint/linter/project.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

_MARK = "__gpulint_split_here__"


def wrap_statement(
    statement: cst.SimpleStatementLine, indent: str, step: str, line_length: int
) -> cst.SimpleStatementLine:
    """`statement` (at indentation `indent`; one level is `step`) wrapped to fit `line_length`,
    or unchanged when it fits, ends in no call, or spans lines in a layout black would keep."""
    lines = _code(statement.with_changes(leading_lines=())).rstrip("\n").split("\n")
    if len(statement.body) != 1 or all(len(indent) + len(line) <= line_length for line in lines):
        return statement
    small = statement.body[0]
    value: cst.BaseExpression | None = getattr(small, "value", None)  # of an assignment, an expression, a return
    if len(lines) > 1:
        # Split before (by a fix of an earlier pass): black joins it and splits it again, unless a
        # comment or a trailing comma after the last argument holds the layout.
        joined = _joined(value)
        if joined is None:
            refitted = _refit_arguments(value, len(indent), step, line_length)
            return statement if refitted is None else statement.with_changes(body=[small.with_changes(value=refitted)])
        value = joined
        statement = statement.with_changes(body=[small.with_changes(value=value)])
        small = statement.body[0]
    if isinstance(value, cst.Tuple) and not value.lpar and len(value.elements) > 2:
        # `a, b, c = x.to(d), y.to(d), z.to(d)`: black puts the tuple in parentheses, one element a line.
        return statement.with_changes(body=[small.with_changes(value=_exploded_tuple(value, step))])
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
    statement: cst.BaseCompoundStatement, indent: str, step: str, line_length: int
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
    return _replace(value, target, _fit(target, len(indent), step, 0, line_length))


def _refit_arguments(
    value: cst.BaseExpression | None, block_indent: int, step: str, line_length: int
) -> cst.BaseExpression | None:
    """The call closing the line, already one argument per line (black's layout), with each
    argument that is a call and too long for its line split too; None when there is nothing to
    split or the call is laid out otherwise."""
    chain = _calls_closing_the_line(value)
    if value is None or not chain or not _one_argument_per_line(chain[0], step):
        return None
    call = chain[0]
    args = []
    for arg in call.args:
        inner = arg.value
        if (
            block_indent + len(step) + len(_arg_code(arg)) + 1 > line_length
            and isinstance(inner, cst.Call)
            and inner.args
            and not inner.lpar
            and "\n" not in _code(inner)
        ):
            arg = arg.with_changes(value=_fit(inner, block_indent, step, 1, line_length))
        args.append(arg)
    if all(new is old for new, old in zip(args, call.args, strict=True)):
        return None
    return _replace(value, call, call.with_changes(args=args))


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


class _Joiner(cst.CSTTransformer):
    """Every line break in an expression made a space (after a comma) or nothing."""

    def leave_Comma(self, original_node: cst.Comma, updated_node: cst.Comma) -> cst.Comma:
        if isinstance(original_node.whitespace_after, cst.ParenthesizedWhitespace):
            return updated_node.with_changes(whitespace_after=cst.SimpleWhitespace(" "))
        return updated_node

    def leave_ParenthesizedWhitespace(self, original_node, updated_node) -> cst.SimpleWhitespace:
        return cst.SimpleWhitespace("")


def _joined(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`value` on one line; None when a comment or a trailing comma after a last argument (black's
    "magic trailing comma") keeps it split, or it is in parentheses of its own."""
    if not isinstance(value, (cst.Call, cst.Attribute)) or value.lpar:
        return None
    for node in _with_formatting(value):
        if isinstance(node, cst.ParenthesizedWhitespace) and (
            node.first_line.comment is not None or any(line.comment is not None for line in node.empty_lines)
        ):
            return None
        if isinstance(node, cst.Call) and node.args and isinstance(node.args[-1].comma, cst.Comma):
            return None
    joined = value.visit(_Joiner())
    assert isinstance(joined, cst.BaseExpression)  # _Joiner changes whitespace only
    return joined


def _with_formatting(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every node under it, whitespace and comments included."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _calls_closing_the_line(value: cst.BaseExpression | None) -> list[cst.Call]:
    """`a.b(x).c(y)`: [the `.c(y)` call, the `.b(x)` call] -- calls with arguments, outermost first.
    Black splits a pair (`x, y = a(1), b(2)`) or one operation (`a(1) + b(2)`) at its right part."""
    if isinstance(value, cst.Tuple) and not value.lpar and len(value.elements) == 2:
        value = value.elements[-1].value
    elif isinstance(value, cst.BinaryOperation) and not value.lpar and not isinstance(value.left, cst.BinaryOperation):
        value = value.right
    chain = []
    node = value
    while isinstance(node, (cst.Call, cst.Attribute)) and not node.lpar:
        if isinstance(node, cst.Call):
            if node.args:
                chain.append(node)
            node = node.func
        else:
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


def _exploded_tuple(value: cst.Tuple, step: str) -> cst.Tuple:
    last = len(value.elements) - 1
    elements = [
        element.with_changes(comma=cst.Comma(whitespace_after=_break(1 if index < last else 0, step)))
        for index, element in enumerate(value.elements)
    ]
    return value.with_changes(
        elements=elements, lpar=[cst.LeftParen(whitespace_after=_break(1, step))], rpar=[cst.RightParen()]
    )


def _replace(expression: cst.BaseExpression, target: cst.Call, new: cst.Call) -> cst.BaseExpression:
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
    assert isinstance(expression, cst.Attribute)  # the last kind of link of a chain to `target`
    return expression.with_changes(value=_replace(expression.value, target, new))


def _head_length(value: cst.BaseExpression, call: cst.Call, line_with: Callable[[cst.BaseExpression], str]) -> int:
    """How long the line up to the call's `(` is."""
    marked = _replace(
        value, call, call.with_changes(args=[cst.Arg(cst.Name(_MARK))], whitespace_before_args=cst.SimpleWhitespace(""))
    )
    return line_with(marked).index(_MARK)


def _arg_code(arg: cst.Arg) -> str:
    return _code(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=cst.SimpleWhitespace("")))


def _fit(call: cst.Call, block_indent: int, step: str, depth: int, line_length: int) -> cst.Call:
    """`call` split across lines; its own line is `depth` steps in from the block's indentation."""
    body_indent = block_indent + len(step) * (depth + 1)
    if body_indent + len(", ".join(_arg_code(arg) for arg in call.args)) <= line_length:
        return _split(call, step, depth, one_line=True)
    args = []
    for arg in call.args:
        inner = arg.value
        if (
            body_indent + len(_arg_code(arg)) + 1 > line_length
            and isinstance(inner, cst.Call)
            and inner.args
            and not inner.lpar
        ):
            arg = arg.with_changes(value=_fit(inner, block_indent, step, depth + 1, line_length))
        args.append(arg)
    return _split(call.with_changes(args=args), step, depth, one_line=False)


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
