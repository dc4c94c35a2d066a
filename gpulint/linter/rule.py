"""The rule API: what a rule declares, how it reports, and the cases that test it.

A rule is a class in its own module under `gpulint.rules` (a folder per family), found there by
the catalog (gpulint/rules/__init__.py):

    class DataLoaderUnpinned(Rule):
        '''
        ## What it finds
        ...
        ## Example
        ```python
        ...                                      # must fire (tests/test_rule_cases.py)
        ```
        Use instead:
        ```python
        ...                                      # must not fire
        ```
        ## Fix (safe)
        ...
        '''

        code = "GL102"
        name = "dataloader-unpinned"
        message = "DataLoader without `pin_memory=True`: ..."
        requires = {TORCH, ACCELERATOR}          # facts about the file (analysis/facts.py)
        tokens = ("DataLoader",)                 # text the pattern itself spells
        fix_applicability = Applicability.SAFE

        def visit_Call(self, node: cst.Call) -> None:
            if is_dataloader(self.ctx, node) and ...:
                self.report(node, fix=set_keyword(...))

        VALID = [Valid("...code the rule must not report...")]
        INVALID = [Invalid("...code...", "4:10", fixed="...the code after the fix...")]

What a rule needs is declared once.  `requires` are facts about the whole file (it imports torch,
it runs on an accelerator, it takes training steps): the engine does not parse a file whose text
rules one of them out, and runs the rule only on files where all of them hold; `visit_` methods do
not check them again.  `tokens` is the text of the rule's own pattern (one of them must occur).
`triggers` are the shapes of code it may fire on, in groups (one shape of each must occur in the
module's code: `((".to(", ".cuda("),)`; analysis/code_shapes.py says how a shape is written): a
rule may fire only where they occur, so a module whose code holds none of them is not parsed with
libcst for it.  They must be *necessary*: every way the rule can report -- through an alias, an
import, a value the module assigns -- holds one of them (tests/test_triggers.py checks the rule's
INVALID cases).  A rule without `triggers` may fire on any code the prefilter lets through.  In a
module the rest of the project says something about, a rule may fire on code without its
triggers (a helper another module runs per step); only the first `site_triggers` groups, the
shapes of the code the rule reports itself (or needs beside it in the module), are checked there.
A group of STEP_LOOP alone says the rule reports per-step work only (what `ctx.loops` runs per
step): in a module whose only per-step code is the functions another module runs per step, its
site groups are checked on those functions' code (analysis/step_region.py;
tests/test_step_region.py checks both claims on the rule's INVALID cases).
`options` are the `[tool.gpulint]` settings the rule reads, each declared once as a RuleOption
(shared ones in gpulint/rules/options.py) and read with `self.option(...)`.

`visit_<NodeType>` methods are called for every node of that type in source order, after the whole
module has been analysed, so `self.ctx.loops` already knows about loops and step functions defined
further down.  `finish()` runs once after the last node, for whole-module rules.  A rule instance
lives for one file: data it works out for itself is a `functools.cached_property`, as the shared
analyses on FileContext are.

VALID and INVALID are the rule's cases, run by one parametrized test with only this rule selected:
a Valid must produce no finding; an Invalid must produce findings at exactly the given
"row:column" positions, and -- with `fixed` -- its fixes (unsafe ones included) must turn it into
exactly `fixed`, which must parse and have nothing left to fix.  A finding reported with
`hint=` (no evidence of a real cost: held back unless hints are shown) counts in a case, which
selects its rule by id and so shows them: a Valid has neither kind, and `Invalid(..., hints=(...))`
says which of the findings are hints and why (None for one a default run shows; a rule held back
by default gives its reason, `MOSTLY_NOT_WANTED`, to each finding no evidence lifts it from).
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any, ClassVar

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.facts import Fact
from gpulint.linter.catalog import (  # noqa: F401 - rules import RuleOption and its checks from here
    RuleInfo,
    RuleOption,
    positive_int,
    worker_expression,
)
from gpulint.linter.findings import Applicability, Fix, RawFinding


class Case:
    """Code a rule is run on in its tests (see Valid and Invalid)."""

    def __init__(
        self,
        code: str,
        *,
        header: str = "",
        options: Mapping[str, Any] | None = None,
        path: str = "case.py",
        select: tuple[str, ...] = (),
        target_tensorflow: tuple[int, int] | None = None,
        target_torch: tuple[int, int] | None = None,
        target_lightning: tuple[int, int] | None = None,
        documented_tensorflow: tuple[int, int] | None = None,
        framework: str | None = None,
    ) -> None:
        self.code = code
        self.header = header
        self.options = dict(options or {})
        self.path = path
        self.select = select  # other rules to enable too (GL900 needs the rules its comments name)
        # The project's TensorFlow, as its requirements or `target-tensorflow` would say.
        self.target_tensorflow = target_tensorflow
        self.target_torch = target_torch  # the project's PyTorch, as its requirements or `target-torch` would say
        self.target_lightning = target_lightning  # the project's Lightning, as its requirements would say
        self.documented_tensorflow = documented_tensorflow  # the TensorFlow its README names
        self.framework = framework  # the framework the project is ("Keras"), as its distribution name says

    @property
    def source(self) -> str:
        """`header` (imports, a CUDA device) as written, then `code` dedented, so cases can be
        indented triple-quoted strings.  Rows count from the header's first line.  (Worked out
        when a test asks: importing the rules must stay cheap.)"""
        return self.header + textwrap.dedent(self.code).lstrip("\n")


class Valid(Case):
    """Code the rule must not report."""


class Invalid(Case):
    """Code the rule must report at exactly `findings` ("row:column", 1-based, in source order).

    `fixed` is the code after the rule's fixes (unsafe ones included; None: no finding offers a
    fix), `applicability` the safety every offered fix must have (default: the rule's), `messages`
    the findings' messages when the case is about them, `hints` their hints (RawFinding.hint: the
    reason a default run holds a finding back, None for one it shows) when the case is about those."""

    def __init__(
        self,
        code: str,
        *findings: str,
        fixed: str | None = None,
        applicability: Applicability | None = None,
        messages: tuple[str, ...] | None = None,
        hints: tuple[str | None, ...] | None = None,
        **case: Any,
    ) -> None:
        super().__init__(code, **case)
        if not findings:
            raise ValueError("an Invalid case names where its findings are")
        self.findings = findings
        self._fixed = fixed
        self.applicability = applicability
        self.messages = messages
        self.hints = hints

    @property
    def fixed(self) -> str | None:
        return None if self._fixed is None else self.header + textwrap.dedent(self._fixed).lstrip("\n")


# The APIs (as rules name the API their fixes write: `Rule.fix_api`) that a framework's own
# repository shows as its users write them.  Keras 3 runs on TensorFlow, JAX and PyTorch, and its
# guides show each backend's calls beside Keras' own.
FRAMEWORK_APIS = {
    "Keras": frozenset({"tensorflow", "torch"}),
    "TensorFlow": frozenset({"tensorflow"}),
    "PyTorch": frozenset({"torch"}),
    "Lightning": frozenset({"lightning"}),
    "Transformers": frozenset({"transformers"}),
}
# The reason a rule that is a hint by default gives its findings (Rule.hint_by_default).
MOSTLY_NOT_WANTED = (
    "held back by default: on whole repositories most of this rule's findings were right but not worth acting on"
)


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    # The message without its `{placeholders}`, for listings and SARIF's shortDescription: needed
    # when `message` has placeholders (short_description() says so).
    title: ClassVar[str | None] = None
    default: ClassVar[str] = "on"  # "on" or "hint" (opt-in: an opportunity, right in most files)
    severity: ClassVar[str] = "warning"
    fix_applicability: ClassVar[Applicability | None] = None  # the fix it offers, for docs and cases
    requires: ClassVar[AbstractSet[Fact]] = frozenset()
    # The frameworks whose API the fix writes ("torch", "tensorflow" -- Keras' too --, "lightning",
    # "transformers"): it is withheld in that framework's own repository (below:
    # `FRAMEWORK_APIS`, by the name project.py `framework_from` reads).  None: read from `requires` (`fix_apis`).
    fix_api: ClassVar[frozenset[str] | None] = None
    # Prefilter: the file must contain at least one of these (as text) to be parsed for this rule.
    tokens: ClassVar[tuple[str, ...]] = ()
    # Trigger filter: the code shapes the rule may fire on (analysis/code_shapes.py), in groups: the
    # module's code must hold one shape of every group.  None: the rule may fire on any code.
    triggers: ClassVar[tuple[tuple[str, ...], ...] | None] = None
    # How many of the trigger groups, from the first, are shapes of the code the rule reports
    # itself (the call it reports), or of code it needs beside it in the same module: nothing another
    # module says stands in for them, so they are checked in a module the rest of the project says
    # something about too, where the others are not.
    site_triggers: ClassVar[int] = 0
    # Prefilter where the project's TensorFlow ends tf.data pipelines with a prefetch by itself
    # (2.13 and later, or a version not known: analysis/vocabulary.py `tensorflow_injects_prefetch`):
    # the file must contain one of these instead of `tokens` -- for a rule that fires there only
    # where the code turns that off.  (): the TensorFlow version makes no difference to the rule.
    tokens_if_prefetch_injected: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[tuple[RuleOption, ...]] = ()
    # False for fixes that change what tests check (trainer configuration, per-step work): not
    # offered in test files unless the `fix-tests` setting says so.
    fixes_test_files: ClassVar[bool] = True
    # False for the performance rules: test code is not training code, so their findings in test
    # files are not reported unless the `lint-tests` setting says so (the summary counts them).
    # True for what holds in any code (a deprecated API, a stale suppression comment).
    reported_in_tests: ClassVar[bool] = False
    # For a rule reported in tests: why its findings there show no real cost (a test exercising a
    # deprecated API on purpose), which makes them hints (RawFinding.hint); None: they are findings.
    hint_in_tests: ClassVar[str | None] = None
    # Why the rule's findings are hints by default (RawFinding.hint: held back unless hints are shown
    # for it), where reading whole repositories found fewer than half its findings wanted
    # (docs/precision.md); None: reported as found.  A finding whose evidence is of a class that
    # was mostly wanted (findings.py `EVIDENCE_THAT_LIFTS_THE_HOLD`, given to `report_with_evidence`)
    # is shown all the same.
    hint_by_default: ClassVar[str | None] = None
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.requires = frozenset(cls.requires)  # written as a set literal; shared by every instance

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.findings: list[RawFinding] = []

    def report(
        self, node: cst.CSTNode, message: str | None = None, fix: Fix | None = None, hint: str | None = None
    ) -> None:
        """Report a finding at `node`.  `hint`: the rule found no evidence that what it reports
        costs anything here (a loop of a handful of steps, a dataset built where it cannot see),
        and says why in a few words: the finding is held back unless hints are shown (findings.py)."""
        self.report_with_evidence(node, None, message, fix, hint)

    def report_with_evidence(
        self,
        node: cst.CSTNode,
        evidence: str | None,
        message: str | None = None,
        fix: Fix | None = None,
        hint: str | None = None,
    ) -> None:
        """`report`, naming the class of evidence of a real cost the rule found (findings.py
        `AUGMENTS_EVERY_ITEM`; None: none of a named class).  The rule only says what it found:
        the engine decides whether that shows a finding of a rule held back by default."""
        self.findings.append(
            RawFinding(
                code=self.code,
                name=self.name,
                message=message or self.message,
                node=node,
                fix=fix,
                severity=self.severity,
                hint=hint,
                evidence=evidence,
            )
        )

    def option(self, option: RuleOption) -> Any:
        """The configured value of one of this rule's options (or its default)."""
        if option not in self.options:
            raise KeyError(f"{self.code} reads `{option.key}` without declaring it in `options`")
        return self.ctx.options.get(option.key, option.default)

    def finish(self) -> None:
        """Called after every node was visited."""

    # -- class-level metadata ----------------------------------------------------------------
    @classmethod
    def prefilter_facts(cls) -> tuple[str, ...]:
        """The names of the required facts whose tokens a file must spell (what the prefilter
        checks, from the catalog, before libcst or this class is imported)."""
        return tuple(sorted({spelled.name for fact in cls.requires for spelled in fact.spelled()}))

    @classmethod
    def catalog_entry(cls) -> RuleInfo:
        """The rule as the catalog describes it (what scripts/gen_docs.py writes for a built-in
        rule, and what a local rule is registered with when it is loaded)."""
        return RuleInfo(
            code=cls.code,
            name=cls.name,
            default=cls.default,
            fix=cls.fix_applicability.value if cls.fix_applicability else None,
            message=cls.short_description(),
            summary=cls.summary(),
            facts=cls.prefilter_facts(),
            tokens=tuple(cls.tokens),
            triggers=None if cls.triggers is None else tuple(tuple(group) for group in cls.triggers),
            site_triggers=cls.site_triggers,
            tokens_if_prefetch_injected=tuple(cls.tokens_if_prefetch_injected),
            reported_in_tests=cls.reported_in_tests,
            hint_by_default=cls.hint_by_default is not None,
            implementation=f"{cls.__module__}:{cls.__qualname__}",
        )

    @classmethod
    def fix_apis(cls) -> frozenset[str]:
        """`fix_api`, or where the rule does not say, the framework each fact it requires names:
        a rule that runs only on torch code fixes torch calls."""
        if cls.fix_api is not None:
            return cls.fix_api
        from gpulint.linter.analysis.facts import TENSORFLOW, TORCH  # (with the rules, not the catalog)

        return frozenset(api for fact, api in ((TORCH, "torch"), (TENSORFLOW, "tensorflow")) if fact in cls.requires)

    @classmethod
    def applies(cls, ctx: FileContext) -> bool:
        """Every fact the rule requires holds for the parsed file."""
        return all(fact.holds(ctx) for fact in cls.requires)

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
    def short_description(cls) -> str:
        """One line that says what the rule finds, with no placeholders."""
        text = cls.title or cls.message
        if re.search(r"\{\w+\}", text):
            raise ValueError(f"{cls.code}'s message has placeholders: give the rule a `title`")
        return text

    @classmethod
    def summary(cls) -> str:
        """The explanation's first paragraph after its first heading, for short listings; a
        paragraph that introduces a list (`...:`) takes the list along, items joined by `;`."""
        paragraphs = [p.splitlines() for p in cls.explanation().split("\n\n")]
        for index, lines in enumerate(paragraphs):
            lines = [line for line in lines if line.strip() and not line.startswith("#")]
            if not lines:
                continue
            if not any(_is_item(line) for line in lines):
                following = paragraphs[index + 1] if index + 1 < len(paragraphs) else []
                if " ".join(lines).rstrip().endswith(":") and following and _is_item(following[0]):
                    lines = lines + following  # the list the paragraph introduces
            intro, items = [], []
            for line in lines:
                if _is_item(line):
                    items.append([line.lstrip()[2:]])
                elif items:
                    items[-1].append(line)  # an item's continuation line
                else:
                    intro.append(line)
            text = " ".join(" ".join(intro).split())
            if items:
                text += " " + "; ".join(" ".join(" ".join(item).split()).rstrip(";.") for item in items) + "."
            return text
        return cls.message


def _is_item(line: str) -> bool:
    return line.lstrip().startswith(("* ", "- "))
