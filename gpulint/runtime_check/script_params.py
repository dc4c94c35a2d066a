"""Set a named value in a copy of a training script: what `verify --param NAME=V1,V2` sweeps and
what `scale --strong` divides between ranks.

Where the script takes the value from, in this order:
1. an argparse option spelled like NAME (`--batch-size`, `--batch_size`, or `dest="batch_size"`):
   its value in the script's arguments is replaced when given there, else its default is set;
2. a module-level constant named NAME in any case (`BATCH_SIZE = 32`);
3. the keyword NAME on every `DataLoader(...)` call (added, or replaced); a call that takes its
   keywords from a dictionary (`DataLoader(ds, **loader_kwargs)`) gets it in that dictionary when
   the script builds it as a literal (`loader_kwargs = {"batch_size": 32}`, or `dict(...)`).
The user's file is never written: the caller runs the returned source from a temporary copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

CALLS = {"DataLoader"}
# The DataLoader setting each loader rule changes: where the linter's fix cannot apply (a loader
# built from a dictionary of keywords, an explicit `num_workers=0`), `verify --param` measures it.
RULE_SETTINGS = {"GL101": "num_workers", "GL103": "persistent_workers", "GL102": "pin_memory"}


class ParamError(Exception):
    """The value cannot be set in this script: one line for the user."""


@dataclass
class ParamSite:
    kind: str  # "argument", "constant" or "keyword"
    where: str  # for the report: "--batch-size (argparse)", "constant BATCH_SIZE", "DataLoader(batch_size=) x2"
    current: str | None  # the value the script has now, as written; None when it is not a plain literal


@dataclass
class ParamCopy:
    source: bytes
    args: list[str]
    site: ParamSite


def _normalized(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def _literal(node: cst.BaseExpression) -> str | None:
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.Name)):
        return cst.Module([]).code_for_node(node)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _literal(node.expression)
        return f"-{inner}" if inner is not None else None
    return None


def _with_keyword_arg(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value`: replaced where it is, or added as the last argument."""
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == name)]
    if args:  # the new keyword follows the last argument: give that one a plain comma
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    keyword = cst.Arg(
        value=value, keyword=cst.Name(name), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    )
    return call.with_changes(args=[*args, keyword])


def _called_name(call: cst.Call) -> str | None:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)


class _FindOption(cst.CSTVisitor):
    """`parser.add_argument("--batch-size", ...)` calls for NAME."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.options: list[str] = []  # the option strings of the matching call
        self.default: str | None = None

    def visit_Call(self, node: cst.Call) -> None:
        if _called_name(node) != "add_argument":
            return
        strings = [
            a.value.evaluated_value for a in node.args if a.keyword is None and isinstance(a.value, cst.SimpleString)
        ]
        options = [s for s in strings if isinstance(s, str) and s.startswith("-")]
        dest = next(
            (
                a.value.evaluated_value
                for a in node.args
                if a.keyword is not None and a.keyword.value == "dest" and isinstance(a.value, cst.SimpleString)
            ),
            None,
        )
        if not options or (dest != self.name and not any(_normalized(o) == self.name for o in options)):
            return
        self.options = options
        default = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "default"), None)
        self.default = _literal(default) if default is not None else None


class _SetDefault(cst.CSTTransformer):
    def __init__(self, options: list[str], value: str) -> None:
        super().__init__()
        self.options, self.value = options, cst.parse_expression(value)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if _called_name(updated) != "add_argument":
            return updated
        strings = [
            a.value.evaluated_value for a in updated.args if a.keyword is None and isinstance(a.value, cst.SimpleString)
        ]
        if strings != self.options:
            return updated
        return _with_keyword_arg(updated, "default", self.value)


class _SetConstant(cst.CSTTransformer):
    """Module-level `NAME = literal` (any case) gets the new value."""

    def __init__(self, name: str, value: str) -> None:
        super().__init__()
        self.name, self.value, self.count = name.lower(), cst.parse_expression(value), 0
        self.current: str | None = None
        self.targets: list[str] = []
        self.depth = 0

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.depth += 1

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        self.depth -= 1
        return updated

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if self.depth or len(updated.targets) != 1 or not isinstance(updated.targets[0].target, cst.Name):
            return updated
        target = updated.targets[0].target.value
        if target.lower() != self.name or _literal(updated.value) is None:
            return updated
        self.count += 1
        self.current = self.current or _literal(updated.value)
        self.targets.append(target)
        return updated.with_changes(value=self.value)


def _string_key(node: cst.BaseExpression) -> str | None:
    value = node.evaluated_value if isinstance(node, cst.SimpleString) else None
    return value if isinstance(value, str) else None


class _FindDicts(cst.CSTVisitor):
    """The names bound to a dictionary literal with string keys (`{"batch_size": 32}` or
    `dict(batch_size=32)`) and never to anything else: the ones a `**name` can be set through."""

    def __init__(self) -> None:
        super().__init__()
        self.literal: set[str] = set()
        self.other: set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                name = target.target.value
                (self.literal if _dict_keys(node.value) is not None else self.other).add(name)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):
            self.other.add(node.target.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name):
            self.other.add(node.target.value)

    @property
    def names(self) -> set[str]:
        return self.literal - self.other


def _dict_keys(node: cst.BaseExpression) -> dict[str, cst.BaseExpression] | None:
    """key -> value of a dictionary literal with string keys only; None for anything else."""
    if isinstance(node, cst.Dict):
        keys = {}
        for element in node.elements:
            key = _string_key(element.key) if isinstance(element, cst.DictElement) else None
            if key is None:
                return None
            keys[key] = element.value
        return keys
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "dict":
        if any(a.keyword is None for a in node.args):
            return None
        return {a.keyword.value: a.value for a in node.args if a.keyword is not None}
    return None


def _with_dict_key(node: cst.BaseExpression, name: str, value: cst.BaseExpression) -> cst.BaseExpression:
    """The dictionary literal with `name: value`: replaced where it is, or added last."""
    if isinstance(node, cst.Call):
        return _with_keyword_arg(node, name, value)
    assert isinstance(node, cst.Dict)
    elements = list(node.elements)
    for index, element in enumerate(elements):
        if isinstance(element, cst.DictElement) and _string_key(element.key) == name:
            elements[index] = element.with_changes(value=value)
            return node.with_changes(elements=elements)
    if elements:
        elements[-1] = elements[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return node.with_changes(elements=[*elements, cst.DictElement(cst.SimpleString(repr(name)), value)])


class _SetKeyword(cst.CSTTransformer):
    """NAME on every DataLoader call, or in the dictionary literal it takes its keywords from."""

    def __init__(self, name: str, value: str, dicts: set[str]) -> None:
        super().__init__()
        self.name, self.value, self.count = name, cst.parse_expression(value), 0
        self.current: str | None = None
        self.dicts = dicts  # names bound only to dictionary literals (_FindDicts)
        self.through: set[str] = set()  # the dictionaries to set NAME in (_SetDictKey)
        self.keys: dict[str, dict[str, cst.BaseExpression]] = {}

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if _called_name(updated) not in CALLS:
            return updated
        spread = [a for a in updated.args if a.star]
        if any(a.star == "*" for a in spread):
            return updated
        named = [a.value.value for a in spread if isinstance(a.value, cst.Name)]
        inline = [a for a in spread if isinstance(a.value, cst.Dict) and _dict_keys(a.value) is not None]
        if len(named) + len(inline) != len(spread) or any(n not in self.dicts for n in named):
            return updated  # keywords from somewhere this cannot follow
        present = next((a.value for a in updated.args if a.keyword is not None and a.keyword.value == self.name), None)
        holders = [n for n in named if self.name in self.keys.get(n, {})]
        self.count += 1
        if present is None and holders:
            self.through.update(holders)
            if self.current is None:
                self.current = _literal(self.keys[holders[0]][self.name])
            return updated
        inline_value = next((keys[self.name] for a in inline if self.name in (keys := _dict_keys(a.value) or {})), None)
        if present is None and inline_value is not None:
            if self.current is None:
                self.current = _literal(inline_value)
            args = [
                a.with_changes(value=_with_dict_key(a.value, self.name, self.value)) if a in inline else a
                for a in updated.args
            ]
            return updated.with_changes(args=args)
        if present is not None and self.current is None:
            self.current = _literal(present)
        return _with_keyword_arg(updated, self.name, self.value)


class _SetDictKey(cst.CSTTransformer):
    def __init__(self, names: set[str], name: str, value: cst.BaseExpression) -> None:
        super().__init__()
        self.names, self.name, self.value = names, name, value

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        targets = {t.target.value for t in updated.targets if isinstance(t.target, cst.Name)}
        if not targets & self.names:
            return updated
        return updated.with_changes(value=_with_dict_key(updated.value, self.name, self.value))


class _CollectKeys(cst.CSTVisitor):
    """name -> the keys of the dictionary literals bound to it (their union)."""

    def __init__(self, names: set[str], keys: dict[str, dict[str, cst.BaseExpression]]) -> None:
        super().__init__()
        self.names, self.keys = names, keys

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name) and target.target.value in self.names:
                self.keys.setdefault(target.target.value, {}).update(_dict_keys(node.value) or {})


def _in_args(args: list[str], options: list[str], value: str) -> tuple[list[str], str | None] | None:
    """The script's arguments with the option's value replaced, and the value it had; None when
    the option is not given there."""
    for index, arg in enumerate(args):
        if arg == "--":
            return None
        for option in options:
            if arg == option and index + 1 < len(args):
                return [*args[: index + 1], value, *args[index + 2 :]], args[index + 1]
            if arg.startswith(option + "="):
                return [*args[:index], f"{option}={value}", *args[index + 1 :]], arg.split("=", 1)[1]
    return None


def set_param(source: bytes, args: list[str], name: str, value: str) -> ParamCopy:
    """A copy of the script (and its arguments) that takes `value` for `name`.  Raises ParamError,
    or libcst.ParserSyntaxError when the source does not parse."""
    module = cst.parse_module(source)
    finder = _FindOption(name)
    module.visit(finder)
    if finder.options:
        where = f"{finder.options[-1]} (argparse)"
        given = _in_args(args, finder.options, value)
        if given is not None:
            new_args, current = given
            return ParamCopy(source, new_args, ParamSite("argument", where, current))
        changed = module.visit(_SetDefault(finder.options, value))
        return ParamCopy(changed.bytes, list(args), ParamSite("argument", where, finder.default))
    constant = _SetConstant(name, value)
    changed = module.visit(constant)
    if constant.count:
        return ParamCopy(
            changed.bytes, list(args), ParamSite("constant", f"constant {constant.targets[0]}", constant.current)
        )
    dicts = _FindDicts()
    module.visit(dicts)
    keyword = _SetKeyword(name, value, dicts.names)
    module.visit(_CollectKeys(dicts.names, keyword.keys))
    changed = module.visit(keyword)
    if keyword.through:
        changed = changed.visit(_SetDictKey(keyword.through, name, keyword.value))
    if keyword.count:
        calls = f" x{keyword.count}" if keyword.count > 1 else ""
        site = ParamSite("keyword", f"DataLoader({name}=){calls}", keyword.current)
        return ParamCopy(changed.bytes, list(args), site)
    raise ParamError(
        f"no argparse option --{name.replace('_', '-')}, no constant {name.upper()} and no "
        f"DataLoader(...) call to set {name} on"
    )
