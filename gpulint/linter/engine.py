"""Lint one source: prefilter, parse once, one walk, every enabled rule, suppressions, positions.

The order is chosen for cost (DESIGN §4): most files of a real repository are rejected by a byte
search before any parse; parsed files get one walk that feeds every rule; positions and suppression
comments are computed only for files that have findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from gpulint.linter.analysis.parse import SyntaxErrorInSource, parse
from gpulint.linter.config import Settings
from gpulint.linter.analysis.context import ACCELERATOR_TOKENS, FileContext
from gpulint.linter.findings import (
    SYNTAX_ERROR_CODE,
    SYNTAX_ERROR_NAME,
    Applicability,
    Edit,
    Finding,
    FixInfo,
    Location,
    RawFinding,
)
from gpulint.linter.analysis.loops import STEP_TOKENS
from gpulint.linter.fix.fixer import edits_for
from gpulint.linter.rule import Rule, all_rules
from gpulint.linter.suppressions import Suppression, file_is_ignored, find_suppressions, matching_suppression

# A file that names none of these is not training code for any rule here (DESIGN §2 prefilter).
FRAMEWORK_MARKERS = (b"torch", b"tensorflow", b"keras", b"lightning", b"transformers", b"accelerate", b"tf.")

# GL900 unused-suppression (gpulint.rules.meta) reads suppression comments, not the tree: it is
# never a reason to parse a file and runs after the other rules, in lint_source.
UNUSED_SUPPRESSION = "GL900"


@dataclass
class Analysis:
    """A parsed module with the rules' raw findings, before positions (or None: not parsed)."""

    module: cst.Module
    ctx: FileContext
    findings: list[RawFinding]
    suppressions: dict[int, list[Suppression]] = field(default_factory=dict)
    positions: dict | None = None

    @property
    def text(self) -> str:
        return self.ctx.source_text


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    parsed: bool = False
    # Suppression comments that matched no finding (for --report-unused-suppressions).
    unused_suppressions: list[Suppression] = field(default_factory=list)


class Linter:
    """The enabled rules for one set of settings, ready to run on many files."""

    def __init__(self, settings: Settings, rules: Iterable[type[Rule]] | None = None) -> None:
        self.settings = settings
        self.rules = tuple(rules) if rules is not None else all_rules()
        self._enabled_cache: dict[frozenset[str], tuple[type[Rule], ...]] = {}

    def rules_for(self, path: str) -> tuple[type[Rule], ...]:
        codes = self.settings.codes_for(path)
        rules = self._enabled_cache.get(codes)
        if rules is None:
            rules = self._enabled_cache[codes] = tuple(r for r in self.rules if r.code in codes)
        return rules

    # -- stages ------------------------------------------------------------------------------
    @staticmethod
    def candidate_rules(source: bytes, rules: tuple[type[Rule], ...]) -> list[type[Rule]]:
        """Rules whose prefilter tokens occur in the source (the parse is skipped when none do)."""
        if not any(marker in source for marker in FRAMEWORK_MARKERS):
            return []
        rules = tuple(r for r in rules if r.code != UNUSED_SUPPRESSION)
        steps = any(token in source for token in STEP_TOKENS)
        accelerator = any(token in source for token in ACCELERATOR_TOKENS)
        return [
            r for r in rules
            if (steps or not r.needs_step)
            and (accelerator or not r.needs_accelerator)
            and (not r.tokens or any(t.encode() in source for t in r.tokens))
        ]

    def analyze(self, source: bytes, path: str) -> Analysis | None:
        """Parse and run the rules; None when the prefilter rules the file out."""
        if file_is_ignored(source):
            return None
        rules = self.candidate_rules(source, self.rules_for(path))
        if not rules:
            return None
        module = parse(source)
        return self.analyze_module(module, path, rules, source)

    def analyze_module(self, module: cst.Module, path: str, rules: list[type[Rule]], source: bytes | None = None) -> Analysis:
        wanted = frozenset().union(*(r.visited_types() for r in rules))
        ctx = FileContext(module, path, self.settings.options, wanted, source)
        instances = [r(ctx) for r in rules]
        handlers: dict[str, list] = {}
        for instance in instances:
            for type_name in instance.visited_types():
                handlers.setdefault(type_name, []).append(getattr(instance, f"visit_{type_name}"))
        for node in ctx.index.ordered:
            for handler in handlers.get(type(node).__name__, ()):
                handler(node)
        raw: list[RawFinding] = []
        for instance in instances:
            instance.finish()
            raw.extend(instance.findings)
        analysis = Analysis(module, ctx, raw)
        if raw:
            analysis.findings = self._unsuppressed(analysis)
        return analysis

    def _unsuppressed(self, analysis: Analysis) -> list[RawFinding]:
        analysis.suppressions = find_suppressions(analysis.text)
        if not analysis.suppressions:
            return analysis.findings
        kept = []
        for finding in analysis.findings:
            rows = self.rows_of(analysis, finding.node)
            suppression = matching_suppression(analysis.suppressions, finding.code, rows)
            if suppression is None:
                kept.append(finding)
            else:
                suppression.used.add(finding.code)
        return kept

    @staticmethod
    def anchor(node: cst.CSTNode) -> cst.CSTNode:
        """Where a finding starts.  A method called on the result of another call
        (`tf.data.Dataset.range(n)\\n    .map(f)`) is reported at its name, not at the start of the
        chain, which may be lines above."""
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, (cst.Call, cst.Subscript)):
            return node.func.attr
        return node

    def rows_of(self, analysis: Analysis, node: cst.CSTNode) -> tuple[int, ...]:
        """The finding's own row and the first row of its statement."""
        positions = self.positions(analysis)
        row = positions[self.anchor(node)].start.line
        statement = analysis.ctx.statement_of(node)
        statement_row = positions[statement].start.line if statement in positions else row
        return (row, statement_row) if statement_row != row else (row,)

    @staticmethod
    def positions(analysis: Analysis):
        if analysis.positions is None:
            wrapper = MetadataWrapper(analysis.module, unsafe_skip_copy=True)
            try:
                # The provider alone is one code generation pass.  `wrapper.resolve` adds a full
                # visitor traversal for the batchable providers even when there are none, which
                # cost as much again (measured: positions were 20% of lint time, now half that).
                analysis.positions = PositionProvider()._gen(wrapper)
            except AttributeError:  # a libcst without this internal: the public way
                analysis.positions = wrapper.resolve(PositionProvider)
        return analysis.positions

    def locate(self, analysis: Analysis, path: str, with_edits: bool = False) -> list[Finding]:
        """Turn raw findings into located, picklable ones (edits only when asked: they cost a
        code generation per fixable finding)."""
        positions = self.positions(analysis) if analysis.findings else {}
        located = []
        for raw in analysis.findings:
            start, end = positions[self.anchor(raw.node)].start, positions[raw.node].end
            rows = self.rows_of(analysis, raw.node)
            fix = None
            if raw.fix is not None:
                edits = edits_for(analysis.ctx, raw.fix) if with_edits else ()
                fix = FixInfo(raw.fix.applicability, raw.fix.message, tuple(edits))
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
                    statement_row=rows[-1],
                )
            )
        located.sort(key=Finding.sort_key)
        return located

    # -- whole file --------------------------------------------------------------------------
    def lint_source(self, source: bytes, path: str, with_edits: bool = False) -> FileResult:
        result = FileResult(path)
        try:
            analysis = self.analyze(source, path)
        except SyntaxErrorInSource as exc:
            result.findings.append(syntax_error_finding(path, str(exc), exc.row, exc.column))
            return result
        if analysis is None:
            return self._with_unused_suppressions(result, source, None)
        result.parsed = True
        result.findings = self.locate(analysis, path, with_edits)
        result.unused_suppressions = [
            s for rows in analysis.suppressions.values() for s in rows if not s.used
        ]
        return self._with_unused_suppressions(result, analysis.text, analysis.suppressions)

    def _with_unused_suppressions(self, result: FileResult, text: bytes | str, suppressions) -> FileResult:
        """Add GL900 findings (when enabled) for suppression comments that silenced nothing;
        `suppressions` carry which codes they silenced (None: the file was not parsed)."""
        codes = self.settings.codes_for(result.path)
        if UNUSED_SUPPRESSION not in codes:
            return result
        if isinstance(text, bytes):
            if file_is_ignored(text):
                return result
            text = text.decode("utf-8", errors="replace")
        from gpulint.rules.meta import unused_suppression_findings

        extra = unused_suppression_findings(text, result.path, suppressions, codes)
        if extra:
            result.findings = sorted(result.findings + extra, key=Finding.sort_key)
        return result


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
