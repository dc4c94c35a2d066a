"""Lint one source, top to bottom:

    prefilter -> parse -> analyse -> rules -> suppress -> locate

1. prefilter: the rules whose declared facts and tokens the file's bytes can hold (for most files
   of a real repository: none, and they are never parsed).  In a test file only the rules reported
   in test code are candidates unless `lint-tests` is set (config.py `codes_for`,
   analysis/test_files.py): most test files are never parsed.  It reads the generated rule catalog
   (catalog.py), so a run that parses nothing never imports libcst or a rule class.  Where the
   project's TensorFlow prefetches by itself, a rule that fires there only on code turning that
   off asks for its words instead (`Rule.tokens_if_prefetch_injected`);
2. parse, once (analysis/parse.py, behind the guard against sources too deep for the parser or
   over the `max-syntax-nodes` budget).  Before libcst, the trigger filter: of those rules, the
   ones whose triggers (`Rule.triggers`, the shapes of code they may fire on) the module's code
   holds, read from the CPython tree the guard builds anyway (analysis/code_shapes.py) -- a file
   whose bytes spell a rule's tokens in docstrings and comments only is not parsed with libcst.
   In a module the rest of the project says something about, a rule may fire on code that holds
   none of its triggers: there only the facts it requires (ModuleView.may_make_hold) and its site
   triggers (`Rule.site_triggers`, the shapes of the call it reports) are checked -- and where
   its only per-step code is the functions another module runs per step, a rule that reports
   per-step work only is checked on those functions' code (analysis/step_region.py); IGNORE_TRIGGERS
   turns the filter off;
3. analyse: one walk of the tree builds the FileContext; the shared analyses on it (the
   training-loop model, what PyTorch and TensorFlow code does) are computed when a rule first asks;
4. rules: each candidate rule whose required facts hold visits the nodes it subscribes to, in
   source order, then finishes;
5. suppress: findings a comment silences are dropped; the comments that silenced nothing are
   GL900's findings (suppressions.py).  A file with more findings
   than `max-findings-per-file` (counted before suppression) is skipped with a message instead.
   Then findings reported as hints (findings.py: no evidence of a real cost) are held back,
   unless hints are shown for their rule (config.py `Settings.shows_hints_of`), and counted: a
   held-back finding is not reported, counted in the exit status or fixed (fixing runs these
   stages too), but a comment that silences one is not unused;
6. locate: line and column of each finding, and the text edits of its fix when asked
   (fix/fixer.py) -- plain, picklable Findings for reporters, the cache and worker processes.

Suppression comments cost a pass over the file: they are looked for only in files that have
findings.  Positions cost a code generation pass: they are computed once per analysis, only for the
nodes findings need (where each starts and ends, its statement), when comments are matched or
findings located.  Fixing runs stages 1-5 pass after pass (fix/passes.py) and needs positions only
in files with suppression comments.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gpulint.linter import catalog
from gpulint.linter.analysis.code_shapes import STEP_LOOP
from gpulint.linter.analysis.parse import SyntaxErrorInSource, parse
from gpulint.linter.analysis.parse_guard import Measured, UnanalysableSource, measure, python_tree
from gpulint.linter.analysis.step_region import region_shapes
from gpulint.linter.analysis.vocabulary import tensorflow_injects_prefetch
from gpulint.linter.findings import (
    EVIDENCE_THAT_LIFTS_THE_HOLD,
    SYNTAX_ERROR_CODE,
    SYNTAX_ERROR_NAME,
    Edit,
    Finding,
    FixInfo,
    Location,
    RawFinding,
    RelatedLocation,
    SourceLine,
)
from gpulint.linter.suppressions import (
    UNUSED_SUPPRESSION,
    Suppression,
    file_is_ignored,
    find_suppressions,
    silenced,
    unused_suppression_findings,
)

if TYPE_CHECKING:  # libcst and the rule classes are imported once a file passes the prefilter
    import libcst as cst
    from libcst.metadata import CodeRange

    from gpulint.linter.analysis.context import FileContext
    from gpulint.linter.analysis.project import ModuleView
    from gpulint.linter.config import Settings
    from gpulint.linter.rule import Rule

# The rules that visit no tree: GL000 is the parse failing (engine), GL900 the suppression comments.
_NOT_TREE_RULES = frozenset({SYNTAX_ERROR_CODE, UNUSED_SUPPRESSION})
# The tree rules of a default run: which files GL000 checks.
_DEFAULT_TREE_RULES = tuple(r for r in catalog.RULES if r.default == "on" and r.code not in _NOT_TREE_RULES)

# Set (to anything but ""), the trigger filter is off: libcst parses every file the byte prefilter
# lets through, as before the filter.  A debugging switch: findings and fixes must not change.
IGNORE_TRIGGERS = "GPULINT_IGNORE_TRIGGERS"


@dataclass
class Analysis:
    """One parsed source and the rules' findings that no comment silenced, still pointing into
    the tree."""

    ctx: FileContext
    findings: list[RawFinding]
    # The file's suppression comments, with the codes each silenced (empty when there was no
    # finding to match: the comments were not looked for).
    suppressions: dict[int, list[Suppression]] = field(default_factory=dict)
    # The findings held back as hints (not in `findings`): how many, for the summary.
    held_back: int = 0
    _positions: Mapping[cst.CSTNode, CodeRange] | None = field(default=None, repr=False)

    def positions(self) -> Mapping[cst.CSTNode, CodeRange]:
        """The positions of the nodes the findings need (each one's node, where it is reported, its
        statement), computed once, on first use, for all of them (still covering every finding
        after suppressed ones are dropped)."""
        if self._positions is None:
            ctx = self.ctx
            wanted = {n for f in self.findings for n in (f.node, anchor(f.node), ctx.statement_of(f.node))}
            self._positions = ctx.positions(wanted)
        return self._positions


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    parsed: bool = False
    # A test file whose performance rules were not run (`lint-tests = false`): the summary counts them.
    skipped_as_test: bool = False
    # Findings held back as hints (no evidence of a real cost; not in `findings`): the summary counts them.
    held_back: int = 0


class Linter:
    """The rules the settings enable, ready to run on many files."""

    def __init__(self, settings: Settings, trigger_filter: bool | None = None) -> None:
        self.settings = settings
        # Whether rules are run only on code holding their triggers (stage 2 of the module
        # docstring); the IGNORE_TRIGGERS variable turns it off, to check it changes nothing.
        self.trigger_filter = not os.environ.get(IGNORE_TRIGGERS) if trigger_filter is None else trigger_filter
        self._rules_by_codes: dict[frozenset[str], tuple[type[Rule], ...]] = {}
        self._entries_by_codes: dict[frozenset[str], tuple[catalog.RuleInfo, ...]] = {}

    def rules_for(self, path: str, among: frozenset[str] | None = None) -> tuple[type[Rule], ...]:
        """The rule classes enabled for `path` (per-file ignores applied), GL900 included, or
        only those of them `among` these codes; asking imports them (and libcst), and no other
        rule's module: a run over one file imports the rules that may fire on it."""
        codes = self.settings.codes_for(path)
        if among is not None:
            codes = codes & among
        rules = self._rules_by_codes.get(codes)
        if rules is None:
            rules = self._rules_by_codes[codes] = self.settings.rule_classes(codes)
        return rules

    def entries_for(self, path: str) -> tuple[catalog.RuleInfo, ...]:
        """`rules_for` as the catalog describes them: what the prefilter reads, importing nothing."""
        codes = self.settings.codes_for(path)
        entries = self._entries_by_codes.get(codes)
        if entries is None:
            entries = self._entries_by_codes[codes] = tuple(
                self._as_configured(r) for r in self.settings.catalog() if r.code in codes
            )
        return entries

    def _as_configured(self, rule: catalog.RuleInfo) -> catalog.RuleInfo:
        """The rule's entry with the prefilter tokens the project's settings call for: where its
        TensorFlow ends tf.data pipelines with a prefetch by itself, a rule that fires there only
        where the code turns that off asks for those words (`tokens_if_prefetch_injected`).  Part
        of the trigger filter: IGNORE_TRIGGERS turns it off too."""
        if (
            rule.tokens_if_prefetch_injected
            and self.trigger_filter
            and tensorflow_injects_prefetch(self.settings.target_tensorflow)
        ):
            return replace(rule, tokens=rule.tokens_if_prefetch_injected)
        return rule

    def lint_source(
        self,
        source: bytes,
        path: str,
        with_edits: bool = False,
        project: ModuleView | None = None,
        keep_syntax_error: bool = False,
    ) -> FileResult:
        """Every finding in one source, located (with fix edits when asked), in order.  `project`
        is what the rest of the project says about this module (analysis/project.py).  A source
        that does not parse has one GL000 finding, when GL000 is enabled for it (or
        `keep_syntax_error`: the notebook reader needs to know where joined cells fail)."""
        skipped_as_test = self.settings.skips_as_test(path)
        try:
            analysis = self.analyze(source, path, project)
        except SyntaxErrorInSource as exc:
            if not (keep_syntax_error or self.reports_syntax_errors(path)):
                return FileResult(path, skipped_as_test=skipped_as_test)
            failure = syntax_error_finding(path, str(exc), exc.row, exc.column)
            return FileResult(path, with_source_lines([failure], _text_of(source)), skipped_as_test=skipped_as_test)
        findings = self.locate(analysis, path, with_edits) if analysis is not None else []
        held_back = analysis.held_back if analysis is not None else 0
        if UNUSED_SUPPRESSION in self.settings.codes_for(path):
            findings += self._unused_suppressions(source, analysis, path)
        if findings:
            text = analysis.ctx.source_text if analysis is not None else _text_of(source)
            findings = with_source_lines(findings, text)
        if analysis is not None:
            analysis.ctx.release()  # (the findings are plain values now: the tree can go)
        return FileResult(
            path, sorted(findings, key=Finding.sort_key), analysis is not None, skipped_as_test, held_back
        )

    def reports_syntax_errors(self, path: str) -> bool:
        """Whether GL000 is enabled for `path`: it is unless ignored (for the file or the run)."""
        return SYNTAX_ERROR_CODE in self.settings.codes_for(path)

    # -- stages 1-5 --------------------------------------------------------------------------
    def analyze(self, source: bytes, path: str, project: ModuleView | None = None) -> Analysis | None:
        """Prefilter, parse, analyse, run the rules and drop what comments silence; None when the
        prefilter rules the file out (or it asks to be ignored).  Raises UnanalysableSource for a
        file over the budgets of work per file (max-syntax-nodes, max-findings-per-file)."""
        if file_is_ignored(source):
            return None
        entries = self.candidate_rules(source, self.entries_for(path), project)
        if not entries:
            return None
        measured = None
        if self.trigger_filter:
            wanted = catalog.trigger_vocabulary(entries)
            if wanted:
                measured = measure(source, self.settings.max_syntax_nodes, wanted)
                if measured.shapes is not None:  # (no tree: CPython rejects it, libcst decides)
                    # (a module the project tells something about: facts and site triggers, see may_fire)
                    view_may_make, per_step = None, None
                    if project is not None and told_anything(project):
                        view_may_make = project.may_make_hold
                        per_step = per_step_region_shapes(source, measured, project, entries)
                    entries = [r for r in entries if r.may_fire(measured.shapes, view_may_make, per_step)]
                    if not entries:
                        return None
        candidates = frozenset(r.code for r in entries)
        module = parse(source, self.settings.max_syntax_nodes, measured)
        from gpulint.linter.analysis.context import FileContext  # (with libcst, which parse has loaded)

        rules = list(self.rules_for(path, candidates))
        wanted = frozenset().union(*(r.visited_types() for r in rules))
        ctx = FileContext(
            module,
            path,
            self.settings.options,
            wanted,
            source,
            project,
            self.settings.target_tensorflow,
            self._torch_floor(),
            self._tensorflow_floor(),
            self.settings.target_lightning,
        )
        findings = run_rules(ctx, [r for r in rules if r.applies(ctx)])
        budget = self.settings.max_findings_per_file
        if len(findings) > budget:
            raise UnanalysableSource(
                f"too many findings to report ({len(findings):,}, over the max-findings-per-file budget of "
                f"{budget:,}); skipped"
            )
        self._withhold_fixes(rules, findings, path, ctx)
        if any(finding.fix is not None for finding in findings):
            from gpulint.linter.fix.quotes import restyle_fix_strings  # (with libcst, as analyze)

            restyle_fix_strings(
                ctx.index.nodes("SimpleString"),
                (f.fix for f in findings if f.fix is not None),
                self.settings.quote_style,
            )
        self._hint_in_tests(rules, findings, path)
        self._hint_by_default(rules, findings)
        suppressions = find_suppressions(ctx.source_text) if findings else {}
        analysis = Analysis(ctx, findings, suppressions)
        if suppressions:  # (matching needs positions: files without such comments do without)
            positions = analysis.positions()
            analysis.findings = [
                f for f in findings if not silenced(suppressions, f.code, f.name, rows_of(ctx, positions, f.node))
            ]
        shown = [f for f in analysis.findings if f.hint is None or self.settings.shows_hints_of(f.code)]
        analysis.held_back = len(analysis.findings) - len(shown)
        analysis.findings = shown
        return analysis

    def _torch_floor(self) -> tuple[tuple[int, int], str] | None:
        """The oldest PyTorch the project says it runs on, and where: its requirements (or
        `target-torch`) when they bound it, else the prose that names a version."""
        if self.settings.target_torch is not None:
            return self.settings.target_torch, "its requirements or `target-torch`"
        if self.settings.documented_torch is not None:
            return self.settings.documented_torch, f"its {self.settings.documented_torch_in or 'README'}"
        return None

    def _tensorflow_floor(self) -> tuple[tuple[int, int], str] | None:
        """The oldest TensorFlow the project says it runs on, and where: its requirements (or
        `target-tensorflow`) when they bound it, else the prose that names a version."""
        if self.settings.target_tensorflow is not None:
            return self.settings.target_tensorflow, "its requirements or `target-tensorflow`"
        if self.settings.documented_tensorflow is not None:
            return self.settings.documented_tensorflow, f"its {self.settings.documented_tensorflow_in or 'README'}"
        return None

    def _hint_in_tests(self, rules: list[type[Rule]], findings: list[RawFinding], path: str) -> None:
        """In a test file, the findings of the rules that say why a test shows no real cost there
        (`Rule.hint_in_tests`) are hints with that reason."""
        reasons = {rule.code: rule.hint_in_tests for rule in rules if rule.hint_in_tests is not None}
        if not reasons or not self.settings.is_test_file(path):
            return
        for finding in findings:
            if finding.hint is None and finding.code in reasons:
                finding.hint = reasons[finding.code]

    @staticmethod
    def _hint_by_default(rules: list[type[Rule]], findings: list[RawFinding]) -> None:
        """The findings of the rules that are hints by default (`Rule.hint_by_default`) are hints with
        that reason, unless the rule gave a reason of its own, or found evidence of a class that was
        mostly wanted where the rule's findings as a whole were not (`EVIDENCE_THAT_LIFTS_THE_HOLD`)."""
        reasons = {rule.code: rule.hint_by_default for rule in rules if rule.hint_by_default is not None}
        for finding in findings:
            if (
                finding.hint is None
                and finding.code in reasons
                and finding.evidence not in EVIDENCE_THAT_LIFTS_THE_HOLD
            ):
                finding.hint = reasons[finding.code]

    def _withhold_fixes(self, rules: list[type[Rule]], findings: list[RawFinding], path: str, ctx: FileContext) -> None:
        """Drop the fixes the project rules out (the findings stay): in a framework's own repository
        the fixes that write its API (the settings' `framework`, rule.py `FRAMEWORK_APIS`), those that need a newer
        PyTorch than it targets or than its prose names as supported (its README, INSTALL.md, a
        setup.py check: a maintainer does not merge a change that breaks a version the project
        says it runs on, even as an unsafe fix; the finding says why it has none), and in a test
        file the rules' that change what tests check (trainer configuration, per-step work)
        unless `fix-tests` is set; and every fix in code its author keeps as it is on purpose
        (fix/intent.py: a block marked as slow on purpose or as a baseline, a frozen folder)."""
        framework = self.settings.framework
        if framework is not None and any(finding.fix is not None for finding in findings):
            from gpulint.linter.rule import FRAMEWORK_APIS  # (loaded already: the rules' module)

            own = {rule.code for rule in rules if rule.fix_apis() & FRAMEWORK_APIS.get(framework, frozenset())}
            for finding in findings:
                if finding.fix is not None and finding.code in own:
                    finding.fix = None
                    finding.message += (
                        f" (no fix: the project is {framework} itself: its guides and examples show the calls as its "
                        "users write them, on every setup it supports)"
                    )
        if any(finding.fix is not None for finding in findings):
            from gpulint.linter.fix.intent import deliberate_code  # (with libcst, as analyze)

            frozen = self.settings.frozen_folder(path)
            for finding in findings:
                if finding.fix is None:
                    continue
                kept = frozen or deliberate_code(ctx, finding.node)
                if kept is not None:
                    finding.fix = None
                    finding.message += f" (no fix: {kept})"
        target, documented = self.settings.target_torch, self.settings.documented_torch
        where = self.settings.documented_torch_in or "README"
        if target is None and any(f.fix is not None and f.fix.min_torch is not None for f in findings):
            nearer = self.settings.folder_documented_torch(path)
            if nearer is not None and (documented is None or nearer[0] < documented):
                documented, where = nearer[0], nearer[1]
        in_tests = not self.settings.fix_tests and self.settings.is_test_file(path)
        not_in_tests = {rule.code for rule in rules if not rule.fixes_test_files} if in_tests else set()
        for finding in findings:
            fix = finding.fix
            if fix is None:
                continue
            too_new = target is not None and fix.min_torch is not None and fix.min_torch > target
            if finding.code in not_in_tests:
                finding.fix = None
                finding.message += " (no fix: a test file; `fix-tests = true` fixes it)"
            elif too_new:
                assert target is not None and fix.min_torch is not None  # (too_new says so; for the type checker)
                needs, allowed = ".".join(map(str, fix.min_torch)), ".".join(map(str, target))
                finding.fix = None
                finding.message += f" (no fix: it needs PyTorch {needs}; the project supports PyTorch {allowed})"
            elif documented is not None and fix.min_torch is not None and fix.min_torch > documented:
                needs, named = ".".join(map(str, fix.min_torch)), ".".join(map(str, documented))
                finding.fix = None
                finding.message += f" (no fix: it needs PyTorch {needs}; the project's {where} names PyTorch {named})"

    @staticmethod
    def candidate_rules(
        source: bytes, rules: Iterable[catalog.RuleInfo], project: ModuleView | None = None
    ) -> list[catalog.RuleInfo]:
        """The tree rules whose facts and tokens the source's bytes (or its project view) can hold."""
        # GL900 reads comments, not the tree (suppressions.py), and GL000 is the parse failing:
        # neither is a reason to parse a file, but for GL000 selected alone.
        rules = tuple(rules)
        candidates = [r for r in catalog.spelled_rules(source, rules, project) if r.code not in _NOT_TREE_RULES]
        if not candidates and {r.code for r in rules} - {UNUSED_SUPPRESSION} == {SYNTAX_ERROR_CODE}:
            # GL000 reports the files the run parses that do not parse; selected alone (the run
            # parses for no other rule), the files a default run parses.
            if catalog.spelled_rules(source, _DEFAULT_TREE_RULES, project):
                candidates = [r for r in rules if r.code == SYNTAX_ERROR_CODE]
        return candidates

    # -- stage 6 -----------------------------------------------------------------------------
    def locate(self, analysis: Analysis, path: str, with_edits: bool = False) -> list[Finding]:
        """Turn raw findings into located, picklable ones (edits only when asked: computed for the
        whole file at once, fix/fixer.py `file_edits`)."""
        if not analysis.findings:
            return []
        ctx, positions = analysis.ctx, analysis.positions()
        edits_of: dict[int, list[Edit]] = {}
        if with_edits:
            from gpulint.linter.fix.fixer import file_edits

            fixes = [raw.fix for raw in analysis.findings if raw.fix is not None]
            computed = file_edits(ctx, fixes, self.settings.line_length, self.settings.layout)
            edits_of = {id(fix): edits for fix, edits in zip(fixes, computed, strict=True)}
        located = []
        for raw in analysis.findings:
            start, end = positions[anchor(raw.node)].start, positions[raw.node].end
            fix = None
            if raw.fix is not None:
                fix = FixInfo(raw.fix.applicability, raw.fix.message, tuple(edits_of.get(id(raw.fix), ())))
            located.append(
                Finding(
                    code=raw.code,
                    name=raw.name,
                    message=raw.message,
                    path=path,
                    location=Location(start.line, start.column + 1),
                    end_location=Location(end.line, end.column + 1),
                    severity=raw.severity,
                    fix=fix,
                    statement_row=rows_of(ctx, positions, raw.node)[-1],
                    related=chain_to(ctx, raw.node),
                    hint=raw.hint,
                )
            )
        located.sort(key=Finding.sort_key)
        return located

    def _unused_suppressions(self, source: bytes, analysis: Analysis | None, path: str) -> list[Finding]:
        """GL900: the suppression comments that silenced nothing (every comment, in a file that was
        not parsed)."""
        if analysis is not None:
            text, suppressions = analysis.ctx.source_text, analysis.suppressions
        elif file_is_ignored(source):
            return []
        else:
            text, suppressions = source.decode("utf-8", errors="replace"), None
        entries = self.settings.catalog()
        known = frozenset(rule.code for rule in entries)
        names = {rule.name: rule.code for rule in entries}
        return unused_suppression_findings(text, path, suppressions, self.settings.codes_for(path), known, names)


def told_anything(project: ModuleView | None) -> bool:
    """Whether the rest of the project says something about the module (a function run per step,
    a call of a project function that steps or returns a loader...): then a rule may fire on code
    that holds none of its triggers, and the trigger filter checks only the rules' facts and site
    triggers."""
    return project is not None and bool(
        project.makes_rules_fire or project.chains or project.torch_loop_elsewhere or project.accelerator_loop_elsewhere
    )


def per_step_region_shapes(
    source: bytes, measured: Measured, project: ModuleView, entries: list[catalog.RuleInfo]
) -> frozenset[str] | None:
    """For a module whose only per-step code is what other modules run per step -- its code holds
    no STEP_LOOP and it calls no other module's function (one may take a step): the shapes of that
    code (analysis/step_region.py) the per-step rules among `entries` ask about.  None for any other
    module, or when no such rule is a candidate."""
    if STEP_LOOP not in measured.looked_for or STEP_LOOP in (measured.shapes or ()) or project.calls:
        return None
    asked = [r.site_shapes() for r in entries if r.reports_per_step_only]
    if not asked:
        return None
    if not project.per_step:
        return frozenset()  # (no function of it runs per step: it has no per-step code)
    tree, _ = python_tree(source, measure=False)  # (the tree is not kept between the index and the lint)
    return None if tree is None else region_shapes(tree, project.per_step, frozenset().union(*asked))


def run_rules(ctx: FileContext, rules: list[type[Rule]]) -> list[RawFinding]:
    """Every rule's findings: one pass over the walked nodes in source order, each node handed to
    the rules that visit its type, then each rule's `finish()`."""
    instances = [rule(ctx) for rule in rules]
    handlers: dict[str, list] = {}
    for instance in instances:
        for type_name in instance.visited_types():
            handlers.setdefault(type_name, []).append(getattr(instance, f"visit_{type_name}"))
    for node in ctx.index.ordered:
        for handler in handlers.get(type(node).__name__, ()):
            handler(node)
    findings: list[RawFinding] = []
    for instance in instances:
        instance.finish()
        findings.extend(instance.findings)
    return findings


def chain_to(ctx: FileContext, node: cst.CSTNode) -> tuple[RelatedLocation, ...]:
    """How another module's training loop reaches `node`, when that is what makes it run every
    step: the chain of calls to the function it runs in (analysis/project.py `ProjectIndex.chain`)."""
    project = ctx.project
    if not project.chains:
        return ()
    import libcst as cst

    from gpulint.linter.analysis.loops import qualname  # (loaded with FileContext)

    boundary = ctx.loops.step_boundary(node)
    if not isinstance(boundary, cst.FunctionDef):
        return ()  # (a step loop of the module's own explains it)
    return project.chain(qualname(ctx.index, boundary))


def anchor(node: cst.CSTNode) -> cst.CSTNode:
    """Where a finding starts.  A method called on the result of another call
    (`tf.data.Dataset.range(n)\\n    .map(f)`) is reported at its name, not at the start of the
    chain, which may be lines above."""
    import libcst as cst

    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and isinstance(node.func.value, (cst.Call, cst.Subscript))
    ):
        return node.func.attr
    return node


def rows_of(ctx: FileContext, positions: Mapping[cst.CSTNode, CodeRange], node: cst.CSTNode) -> tuple[int, ...]:
    """The finding's own row and the first row of its statement (a suppression comment on either
    silences it), from the analysis's positions."""
    row = positions[anchor(node)].start.line
    statement = ctx.statement_of(node)
    statement_row = positions[statement].start.line if statement in positions else row
    return (row, statement_row) if statement_row != row else (row,)


_LINE_BREAK = re.compile(r"\r\n?|\n")  # Python's line breaks (str.splitlines also splits on \f, \x1c...)


def _text_of(source: bytes) -> str:
    """A source that was not parsed, as text to show lines of (undecodable bytes replaced)."""
    return source.decode("utf-8-sig", errors="replace")


def with_source_lines(findings: list[Finding], text: str) -> list[Finding]:
    """The findings with the text of the line each starts on (`Finding.source_line`): what the
    `full` text format shows under a finding."""
    lines = _LINE_BREAK.split(text.removeprefix("\ufeff"))
    return [
        replace(f, source_line=SourceLine.of(lines[f.location.row - 1], f.location.column))
        if 0 < f.location.row <= len(lines)
        else f
        for f in findings
    ]


def syntax_error_finding(path: str, message: str, row: int, column: int) -> Finding:
    return Finding(
        code=SYNTAX_ERROR_CODE,
        name=SYNTAX_ERROR_NAME,
        message=f"SyntaxError: {message.strip().splitlines()[0] if message.strip() else 'invalid syntax'}",
        path=path,
        location=Location(row, column),
        end_location=Location(row, column),
        severity="error",
    )
