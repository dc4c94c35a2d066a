"""The rule interface and the registry of every rule.

A rule is a class in a module of `gpulint.rules` (found automatically, one module per family):

    class DataLoaderSerial(Rule):
        '''## What it finds ... ## Why it is slow ... ## Example ... ## Fix ...'''
        code = "GL101"
        name = "dataloader-serial"
        message = "DataLoader loads batches in the training process (num_workers=0)"
        tokens = ("DataLoader",)       # prefilter: a file without any of these is not parsed
        fix_applicability = Applicability.UNSAFE

        def visit_Call(self, node: cst.Call) -> None:
            if ...:
                self.report(node, fix=...)

`visit_<NodeType>` methods are called for every node of that type in source order, after the whole
module has been analysed, so `self.ctx.loops` already knows about loops and step functions defined
further down.  `finish()` runs once after the last node, for whole-module rules.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.findings import Applicability, Fix, RawFinding


@dataclass(frozen=True)
class RuleOption:
    """A `[tool.gpulint]` setting a rule reads (`num-workers`, `log-every`, ...)."""

    default: Any
    help: str
    type: type = str


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    default: ClassVar[str] = "on"  # "on" or "hint" (opt-in: an opportunity, right in most files)
    severity: ClassVar[str] = "warning"
    fix_applicability: ClassVar[Applicability | None] = None  # what fix it can offer, for docs
    # Prefilter tokens: the file must contain at least one of them (as text) to be parsed.
    tokens: ClassVar[tuple[str, ...]] = ()
    # For rules that only report per-step work: the file must also spell a training step
    # (loopmodel.STEP_TOKENS), or nothing in it can run per step.  Most files of a model library
    # print, log and call `.to(` without ever taking a step.
    needs_step: ClassVar[bool] = False
    # For device rules, which fire only in accelerated modules (FileContext.accelerated): the file
    # must also spell an accelerator (context.ACCELERATOR_TOKENS).  A library's modeling code that
    # never names CUDA is not parsed for them.
    needs_accelerator: ClassVar[bool] = False
    options: ClassVar[dict[str, RuleOption]] = {}

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.findings: list[RawFinding] = []

    def report(self, node: cst.CSTNode, message: str | None = None, fix: Fix | None = None) -> None:
        self.findings.append(
            RawFinding(
                code=self.code,
                name=self.name,
                message=message or self.message,
                node=node,
                fix=fix,
                severity=self.severity,
            )
        )

    def option(self, key: str) -> Any:
        return self.ctx.options.get(key, self.options[key].default)

    def finish(self) -> None:
        """Called after every node was visited."""

    # -- class-level metadata ----------------------------------------------------------------
    @classmethod
    def visited_types(cls) -> frozenset[str]:
        return frozenset(name[len("visit_") :] for name in dir(cls) if name.startswith("visit_"))

    @classmethod
    def explanation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def message_template(cls) -> str:
        """The message for listings and Markdown: a `{placeholder}` reads `<placeholder>` inside a
        code span and `…` in prose (where Markdown would take `<word>` for an HTML tag)."""
        parts = cls.message.split("`")
        for index, part in enumerate(parts):
            parts[index] = re.sub(r"\{(\w+)\}", r"<\1>" if index % 2 else "…", part)
        return "`".join(parts)

    @classmethod
    def summary(cls) -> str:
        """The explanation's first paragraph after its first heading, for short listings."""
        for paragraph in cls.explanation().split("\n\n"):
            lines = [line for line in paragraph.splitlines() if not line.startswith("#")]
            if lines:
                return " ".join(" ".join(lines).split())
        return cls.message


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class in `gpulint.rules`, sorted by code."""
    import gpulint.rules as package

    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, Rule) and obj is not Rule and "code" in vars(obj):
                if obj.code in found and found[obj.code] is not obj:
                    raise RuntimeError(f"two rules claim {obj.code}: {found[obj.code].__name__}, {obj.__name__}")
                found[obj.code] = obj
    return tuple(found[code] for code in sorted(found))


def rules_by_code() -> dict[str, type[Rule]]:
    return {rule.code: rule for rule in all_rules()}


def rule_options() -> dict[str, RuleOption]:
    """Every rule option, by its config key."""
    options: dict[str, RuleOption] = {}
    for rule in all_rules():
        options.update(rule.options)
    return options


def find_rule(key: str) -> type[Rule] | None:
    """A rule by code (`GL101`) or name (`dataloader-serial`)."""
    for rule in all_rules():
        if key.upper() == rule.code or key == rule.name:
            return rule
    return None
