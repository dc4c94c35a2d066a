"""Where a fix puts a process-wide switch (TF32 matmuls, cuDNN autotuning): once, at start-up.

Such a switch holds for the whole process, so it is written where the module's start-up code is:

* next to the settings the module already makes (seeds, `torch.backends.*`,
  `torch.use_deterministic_algorithms`), after the last of them;
* else at the top of the entry point: `main()` (or the training function) when the
  `if __name__ == "__main__":` block calls it, that block itself, or, in a script that trains at
  module level, after the module's imports;
* never in a loop, a class (a constructor, a per-batch method) or a function nothing starts.

Library code with no entry point gets no fix: the place belongs to whoever calls it.  Where the
script has its own option for the switch (`--benchmark`), the new line is written under it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.nodes import dotted_name
from gpulint.linter.analysis.walk import names_under
from gpulint.linter.analysis.workers import is_main_guard
from gpulint.linter.findings import Applicability, Fix

# Calls that set process-wide state, by their last name (seeds from any library, the user's own
# `set_seed` helper included) or their full name.
_SETTING_CALL_NAMES = frozenset(
    {"manual_seed", "manual_seed_all", "seed_everything", "set_seed", "use_deterministic_algorithms"}
)
_SETTING_CALLS = frozenset(
    {
        "random.seed",
        "numpy.random.seed",
        "torch.set_float32_matmul_precision",
        "torch.set_num_threads",
        "torch.set_default_dtype",
        "torch.set_flush_denormal",
    }
)
_SETTING_ASSIGNED = "torch.backends."
# The calls that seed the random generators, by their last name.
_SEED_CALL_NAMES = frozenset({"manual_seed", "manual_seed_all", "seed_everything", "set_seed"})

_Block = cst.Module | cst.IndentedBlock


@dataclass(frozen=True)
class StartupSetting:
    """One switch: `line` holds `{target}` where `target` (a dotted torch name) goes, spelled as the
    module's imports spell it; `comment` says what it does; `options` are the command-line flags
    (`--benchmark`) that, where the script defines one, decide whether it is set."""

    target: str
    line: str
    comment: str
    description: str
    options: tuple[str, ...] = ()
    min_torch: tuple[int, int] | None = None


def startup_setting_fix(ctx: FileContext, training: cst.CSTNode, setting: StartupSetting) -> tuple[Fix | None, str]:
    """The unsafe fix that writes `setting` once at start-up, or (None, why there is no sound place)."""
    text, imports = ctx.reference(setting.target)
    place = _after_settings(ctx, training) or _entry_point(ctx, training, text.split(".", 1)[0])
    if place is None:
        return None, "library code without an entry point: set it once where the program starts"
    block, index = place
    code = setting.line.format(target=text)
    flag = _option(ctx, setting.options)
    if flag is not None:
        namespace = _namespace_at(ctx, block, index)
        if namespace is None:
            return None, f"the script's `{flag[0]}` option decides it, and is not read here"
        index = max(index, namespace[1])
        code = f"if {namespace[0]}.{flag[1]}:\n{ctx.module.default_indent}{code}\n"
    new = cst.parse_statement(code, config=ctx.module.config_for_parsing)
    comment = cst.EmptyLine(comment=cst.Comment(f"# {setting.comment}"))
    after_imports = index > 0 and _is_import(block.body[index - 1])
    new = new.with_changes(leading_lines=[cst.EmptyLine()] * after_imports + [comment])
    body = list(block.body)
    if index < len(body):
        anchor = body[index]
        replacement = cst.FlattenSentinel([new, anchor])
    else:
        anchor = body[index - 1]
        replacement = cst.FlattenSentinel([anchor, new])
    fix = Fix(Applicability.UNSAFE, setting.description, {anchor: replacement}, imports, min_torch=setting.min_torch)
    return fix, ""


def seeds_random_numbers(ctx: FileContext) -> bool:
    """Whether the module seeds the random generators (`torch.manual_seed`, `seed_everything`,
    `set_seed`): it expects the same numbers from run to run."""
    return any(
        (ctx.call_qualified_name(call) or dotted_name(call.func) or "").rsplit(".", 1)[-1] in _SEED_CALL_NAMES
        for call in ctx.index.nodes("Call")
    )


def _is_setting(ctx: FileContext, statement: cst.CSTNode) -> bool:
    """A line that sets process-wide state: a seed, `torch.backends.* = ...`, deterministic kernels."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            qualified = ctx.call_qualified_name(small.value) or dotted_name(small.value.func) or ""
            if qualified in _SETTING_CALLS or qualified.rsplit(".", 1)[-1] in _SETTING_CALL_NAMES:
                return True
        elif isinstance(small, cst.Assign) and len(small.targets) == 1:
            qualified = ctx.qualified_name(small.targets[0].target) or ""
            if qualified.startswith(_SETTING_ASSIGNED):
                return True
    return False


def _after_settings(ctx: FileContext, training: cst.CSTNode) -> tuple[_Block, int] | None:
    """After the last of the module's own start-up settings that run before training, in the block
    of the first of them (a seed set under `if args.seed:` counts as its `if` statement)."""
    seen: set[int] = set()
    for node in ctx.index.ordered:
        if not isinstance(node, (cst.Call, cst.Assign)):
            continue
        line = ctx.statement_of(node)
        if id(line) in seen or not _is_setting(ctx, line) or _runs_repeatedly(ctx, line):
            continue
        seen.add(id(line))
        block, top = _top_statement(ctx, line)
        if block is None:
            continue
        body = list(block.body)
        index = next(i for i, statement in enumerate(body) if statement is top) + 1
        while index < len(body) and _is_setting(ctx, body[index]):
            index += 1
        training_top = next((s for s in body if _holds(ctx, s, training)), None)
        if training_top is not None and body.index(training_top) < index:
            continue  # set after training started: not a start-up setting
        return block, index
    return None


def _entry_point(ctx: FileContext, training: cst.CSTNode, needs: str) -> tuple[_Block, int] | None:
    """The top of `main()` (or the training function the main guard calls), the main guard's
    block, or the line after a script's imports; None for library code."""
    module = ctx.module
    guard = next((s for s in module.body if is_main_guard(s)), None)
    functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    outermost = _outermost_function(ctx, training)
    if guard is not None:
        assert isinstance(guard, cst.If)
        if not ctx.workers.runs_as_main_program(training):
            return None
        called = names_under(guard.body)
        for name in ("main", outermost.name.value if outermost is not None else None):
            function = functions.get(name) if name in called else None
            if isinstance(function, cst.FunctionDef) and isinstance(function.body, cst.IndentedBlock):
                return function.body, _after_docstring(function.body.body)
        if isinstance(guard.body, cst.IndentedBlock):
            return guard.body, 0
        return None
    run_at_module_level = set()
    for statement in module.body:
        if not isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            run_at_module_level |= names_under(statement)
    if outermost is not None and outermost.name.value not in run_at_module_level:
        return None
    training_top = next((s for s in module.body if _holds(ctx, s, training) or s is outermost), None)
    if training_top is None:
        return None
    # After the imports at the top (a notebook's first cell), or after the later import that binds
    # the name the setting is written with, not after whatever import comes last before training.
    body = list(module.body)
    index = _after_docstring(body)
    while index < len(body) and _is_import(body[index]):
        index += 1
    for i, statement in enumerate(body[: body.index(training_top)]):
        if _is_import(statement) and needs in _bound_by(statement):
            index = max(index, i + 1)
    return module, index


def _option(ctx: FileContext, flags: Sequence[str]) -> tuple[str, str] | None:
    """(the flag, its attribute name) of the script's own command-line option for the switch."""
    if not flags:
        return None
    for option in ctx.command_line:
        flag = next((name for name in option.flags if name in flags), None)
        if flag is not None:
            return flag, option.dest
    return None


def _namespace_at(ctx: FileContext, block: _Block, index: int) -> tuple[str, int] | None:
    """(the name of the parsed arguments, the index in `block` after which it is bound), where the
    setting goes: bound by `... = parser.parse_args()` earlier in the block, or a parameter of the
    function the block belongs to that has the name the arguments are bound to elsewhere."""
    parsed = {name for _assign, name in ctx.parsed_arguments}
    for i, statement in enumerate(block.body):
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and any(dotted_name(t.target) in parsed for t in small.targets):
                    return dotted_name(small.targets[0].target) or "", i + 1
    owner = ctx.parent(block)
    if isinstance(owner, cst.FunctionDef):
        for param in owner.params.params:
            if param.name.value in parsed:
                return param.name.value, index
    return None


def _top_statement(ctx: FileContext, line: cst.CSTNode) -> tuple[_Block | None, cst.CSTNode]:
    """The statement holding `line` that stands directly in its function's body, the main guard's
    block or the module (a seed under `if args.seed:` is that `if`)."""
    child = line
    for ancestor in ctx.ancestors(line):
        if isinstance(ancestor, cst.IndentedBlock):
            owner = ctx.parent(ancestor)
            if owner is None:
                break
            if isinstance(owner, cst.FunctionDef) or (
                is_main_guard(owner) and isinstance(ctx.parent(owner), cst.Module)
            ):
                return ancestor, child
        elif isinstance(ancestor, cst.Module):
            return ancestor, child
        if isinstance(ancestor, cst.BaseStatement):
            child = ancestor
    return None, line


def _runs_repeatedly(ctx: FileContext, line: cst.CSTNode) -> bool:
    """Whether `line` may run more than once at start-up: in a loop, in a class (a constructor, a
    per-batch method), or in a function called from a loop (a per-step function that seeds)."""
    if ctx.in_loop(line) or any(isinstance(ancestor, cst.ClassDef) for ancestor in ctx.ancestors(line)):
        return True
    function = ctx.enclosing_function(line)
    if function is None:
        return False
    name = function.name.value
    return any(
        ctx.in_loop(call)
        for call in ctx.index.nodes("Call")
        if (dotted_name(call.func) or "").rsplit(".", 1)[-1] == name
    )


def _outermost_function(ctx: FileContext, node: cst.CSTNode) -> cst.FunctionDef | None:
    functions = [a for a in ctx.ancestors(node) if isinstance(a, cst.FunctionDef)]
    return functions[-1] if functions else None


def _holds(ctx: FileContext, statement: cst.CSTNode, node: cst.CSTNode) -> bool:
    return statement is node or any(ancestor is statement for ancestor in ctx.ancestors(node))


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )


def _bound_by(statement: cst.CSTNode) -> set[str]:
    """The names an import line binds (`torch` for `import torch.nn`, `cudnn` for `... as cudnn`)."""
    bound: set[str] = set()
    if not isinstance(statement, cst.SimpleStatementLine):
        return bound
    for small in statement.body:
        if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
            for alias in small.names:
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    bound.add(alias.asname.name.value)
                else:
                    bound.add((dotted_name(alias.name) or "").split(".", 1)[0])
    return bound


def _after_docstring(body: Sequence[cst.BaseStatement]) -> int:
    first = body[0] if body else None
    if (
        isinstance(first, cst.SimpleStatementLine)
        and isinstance(first.body[0], cst.Expr)
        and isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    ):
        return 1
    return 0
