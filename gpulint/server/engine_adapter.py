"""Everything the language server asks of the linter, in one module.

The server speaks in `Problem`s and `TextChange`s (plain records defined here); only this module
knows the linter's own types and where they live, so a change in the engine touches this file and
no other file of the server.  It uses the same entry points as `gpulint - --stdin-filename NAME`:
settings from the nearest configuration file, `process_source` to lint (and fix) one source, the
notebook module to lint cells as one module, the suppression writer of `--add-suppressions`.

A Python document is linted with its view of its whole project, as `gpulint .` gives it
(run/project.py): the other files are read from disk, the document as the editor holds it; the
summaries are kept by content in memory and in the command line's cache folder, so a re-lint
summarizes only what changed, and an edit that changes no summary reuses the solved index.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.linter.analysis.project import ModuleSummary, ModuleView, summarize
from gpulint.linter.config import ConfigError, find_config, load_settings, nearest_pyproject
from gpulint.linter.engine import Linter
from gpulint.linter.findings import SYNTAX_ERROR_CODE, Applicability, Edit, Finding
from gpulint.linter.fix.fixer import line_edits
from gpulint.linter.fix.line_fixes import covered_rows, fixed_file_edits, grow_over
from gpulint.linter.run import notebook
from gpulint.linter.run.add_suppressions import suppress_source
from gpulint.linter.run.cache import ResultCache, content_hash, default_cache_dir
from gpulint.linter.run.outcome import RunOptions
from gpulint.linter.run.process import process_source
from gpulint.linter.run.project import RememberedWalk, RunIndex, project_files
from gpulint.linter.run.safe_files import format_size
from gpulint.rules import find_rule
from gpulint.rules.docs import rule_markdown, rule_url

SettingsError = ConfigError  # a bad configuration file, said in one line

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextChange:
    """Replace the text from (start_row, start_column) to (end_row, end_column) with `text`;
    rows and columns 1-based, columns in code points, the end exclusive."""

    start_row: int
    start_column: int
    end_row: int
    end_column: int
    text: str


@dataclass(frozen=True)
class Problem:
    """One finding, located in the linted text (in its cell, for a notebook)."""

    code: str
    name: str
    message: str
    start: tuple[int, int]  # (row, column), 1-based, column in code points
    end: tuple[int, int]
    # "error" (the text does not parse), "warning", or "hint" (an opt-in rule, or a finding held back
    # as a hint that the settings show: `show-hints`, or its rule selected by id)
    level: str
    fix_title: str | None = None  # what the fix does, when the rule offers one here
    unsafe_fix: bool = False  # the fix may change behaviour (applied only on request)
    cell: int | None = None  # notebooks: the cell's 1-based number among the linted cells
    unused_suppression: bool = False  # GL900: the comment is the problem (shown as unnecessary code)
    suppressible: bool = True  # a suppression comment can silence it (not a syntax error, not GL900)
    # How another module's training loop reaches it: (absolute path, row, column, message) per call
    # on the way, outermost first (Finding.related; absolute because the worker's working folder
    # is the one its relative paths name).
    related: tuple[tuple[str, int, int, str], ...] = ()
    _finding: Finding | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class LineFixes:
    """The fixes of some problems on the same lines, as the editor offers them: each distinct fix
    once, with the problems it fixes (two rules whose fixes make the same edit share it), and all
    of them applied together."""

    each: list[tuple[list[int], list[TextChange]]]  # indices into the problems asked about; the fix's edits
    # Every fix on those lines as `gpulint --fix` writes them; None when there is only one distinct
    # fix (or fixing the file failed).
    together: list[TextChange] | None


@dataclass
class Report:
    problems: list[Problem]
    errors: list[str]  # one-line problems with the text itself (undecodable, too deeply nested)


def _problem(finding: Finding) -> Problem:
    rule = find_rule(finding.code)
    unused_suppression = rule is not None and rule.name == "unused-suppression"
    if finding.code == SYNTAX_ERROR_CODE or finding.severity == "error":
        level = "error"
    else:
        opt_in = rule is not None and rule.default == "hint"
        level = "hint" if opt_in or finding.hint is not None else "warning"
    fix = finding.fix
    return Problem(
        code=finding.code,
        name=finding.name,
        message=finding.shown_message,
        start=(finding.location.row, finding.location.column),
        end=(finding.end_location.row, finding.end_location.column),
        level=level,
        fix_title=fix.message if fix is not None else None,
        unsafe_fix=fix is not None and fix.applicability is Applicability.UNSAFE,
        cell=finding.extra.get("cell"),
        unused_suppression=unused_suppression,
        suppressible=finding.code != SYNTAX_ERROR_CODE and not unused_suppression,
        related=tuple((os.path.abspath(r.path), r.location.row, r.location.column, r.message) for r in finding.related),
        _finding=finding,
    )


def _changes(edits) -> list[TextChange]:
    return [
        TextChange(e.location.row, e.location.column, e.end_location.row, e.end_location.column, e.content)
        for e in edits
    ]


class Project:
    """The settings of one configuration file (or the defaults) and a linter built from them.

    The linter is built on first use: the server's protocol process reads a project's settings
    (its file-size limit, whether fix-all may apply unsafe fixes) and leaves linting to its worker."""

    def __init__(
        self, config_file: Path | None, allow_local_rules: bool = False, facts_file: Path | None = None
    ) -> None:
        """`facts_file`: with no configuration file, the pyproject.toml whose line length and
        PyTorch requirement apply (as on the command line)."""
        self.config_file = config_file
        # A workspace's local rules are its code: loaded only when the server was told to trust it,
        # and only then may its configuration raise the safety limits.  (raises SettingsError)
        self.settings = load_settings(
            config_file, facts_file, load_local_rules=allow_local_rules, trusted=allow_local_rules
        )
        self._last_index: RunIndex | None = None  # the project index of the last lint (reused while it holds)
        self._walks: dict[Path, RememberedWalk] = {}  # the project roots' walks (project_files)

    @functools.cached_property
    def linter(self) -> Linter:
        return Linter(self.settings)

    @functools.cached_property
    def _is_test_file(self) -> Callable[[Path], bool]:
        """`settings.is_test_file`, remembered by path: every edit builds the project's index again,
        and asked it of every module (two paths resolved each: a fifth of a 500-module project's
        re-index)."""
        return functools.lru_cache(maxsize=None)(self.settings.is_test_file)

    @property
    def applies_unsafe_fixes(self) -> bool:
        """Whether `fix_all` applies unsafe fixes too (`unsafe-fixes = true` in the configuration)."""
        return self.settings.unsafe_fixes

    @property
    def max_file_size(self) -> int:
        """`max-file-size` in bytes: a larger source is not linted (as on the command line)."""
        return self.settings.max_file_size

    # -- Python sources ---------------------------------------------------------------------
    def lint(self, text: str, name: str) -> Report:
        """The findings in `text` (as `gpulint NAME` reports them), without fix edits: those cost
        a code generation each and are computed only when asked for (`fix_changes`)."""
        source = text.encode("utf-8", "surrogatepass")
        outcome, _ = process_source(self.linter, source, name, RunOptions(), self._project_view(source, name))
        return Report([_problem(f) for f in outcome.result.findings], outcome.errors)

    def fix_changes(self, text: str, name: str, problem: Problem) -> list[TextChange] | None:
        """The edits of `problem`'s fix, or None when it has none in this text (any more).  Only its
        rule runs, so the cost is one parse and this rule's fixes, not every rule's."""
        edits = self._fix_edits(text, name, problem)
        return _changes(edits) if edits is not None else None

    def line_fixes(self, text: str, name: str, problems: list[Problem]) -> LineFixes:
        """The fixes of `problems` (fixable ones on the same lines of `text`), each distinct one
        once, and all together: the lines their edits cover, grown over whatever else the fixer
        changes in them, as `gpulint --fix` (with `--unsafe-fixes` when one of them is unsafe)
        writes them."""
        each: list[tuple[list[int], list[Edit]]] = []
        for index, problem in enumerate(problems):
            edits = self._fix_edits(text, name, problem)
            if edits is None:
                continue
            same = next((indices for indices, known in each if known == edits), None)
            if same is not None:
                same.append(index)
            else:
                each.append(([index], edits))
        together = None
        if len(each) > 1:
            unsafe = any(problems[i].unsafe_fix for indices, _ in each for i in indices)
            fixed = fixed_file_edits(self.linter, text.encode("utf-8", "surrogatepass"), name, unsafe)
            rows = [row for _, edits in each for edit in edits for row in covered_rows(edit)]
            if fixed is not None:
                _start, _end, taken, _elsewhere = grow_over(fixed, min(rows), max(rows))
                if taken and all(taken != edits for _, edits in each):
                    together = _changes(taken)
        return LineFixes([(indices, _changes(edits)) for indices, edits in each], together)

    def fix_all(self, text: str, name: str) -> str | None:
        """`text` with every fix `gpulint --fix` would apply (safe ones, and unsafe ones when the
        configuration allows them); None when nothing changes or the fixes failed."""
        source = text.encode("utf-8", "surrogatepass")
        outcome, final = process_source(
            self.linter, source, name, RunOptions(fix=True), self._project_view(source, name)
        )
        if outcome.errors or final == source:
            return None
        return final.decode("utf-8", "surrogatepass")

    # -- notebooks --------------------------------------------------------------------------
    def lint_cells(self, cells: list[str], name: str) -> Report:
        """The findings in a notebook's code cells (their texts, in order), linted as one module;
        each problem names its cell (1-based) and is located in it."""
        result, _ = notebook.lint_cells(self.linter, _cells(cells), name, with_edits=False)
        return Report([_problem(f) for f in result.findings], [])

    def cell_fix_changes(self, cells: list[str], name: str, problem: Problem) -> list[TextChange] | None:
        """`fix_changes` for a problem of a notebook cell: the edits, in that cell."""
        result, _ = notebook.lint_cells(self._single_rule_linter(problem.code), _cells(cells), name, with_edits=True)
        edits = self._edits_of(problem, result.findings)
        return _changes(edits) if edits is not None else None

    # ---------------------------------------------------------------------------------------
    def _project_view(self, source: bytes, name: str) -> ModuleView | None:
        """The document's view of its project (None for a name that is not an absolute path of a
        Python file: nothing to place it in a project)."""
        path = Path(name)
        if path.suffix != ".py" or not path.is_absolute():
            return None
        settings = self.settings
        others, _too_large = project_files(
            [path], lambda root: (settings.exclude, settings.root), remembered=self._walks
        )
        index = RunIndex(
            [path],
            self._summary,
            settings.max_syntax_nodes,
            is_test=self._is_test_file,
            project=others,
            sources={path: source},
            previous=self._last_index,
            real_paths=others,
            read_if_imported=None if settings.lint_tests else self._is_test_file,
        )
        self._last_index = index
        return index.view(path)

    @functools.cached_property
    def _summary_cache(self) -> ResultCache | None:
        """The command line's cache folder (summaries are keyed by content alone, so the two share
        them), or None where it cannot serve."""
        cache = ResultCache(default_cache_dir(self.settings.root), "")
        return cache if cache.unusable_reason() is None else None

    def _summary(self, path: Path, source: bytes, dotted: str, package: bool, budget: int | None):
        """A module's summary: remembered in this process, else from the cache folder (so a first
        lint of a large project that runs out of time leaves its work for the next), else made."""
        key = (dotted, package, content_hash(source), budget)
        if key in _SUMMARIES:
            return _SUMMARIES[key]
        cache = self._summary_cache
        cache_key = cache.summary_key(dotted, package, key[2], budget) if cache is not None else ""
        found, summary = cache.get_summary(cache_key) if cache is not None else (False, None)
        if not found:
            summary = summarize(source, dotted, package, budget)
            if cache is not None:
                cache.put_summary(cache_key, summary)
        if len(_SUMMARIES) >= _MAX_REMEMBERED_SUMMARIES:
            _SUMMARIES.clear()
        _SUMMARIES[key] = summary
        return summary

    def _single_rule_linter(self, code: str) -> Linter:
        return Linter(dataclasses.replace(self.settings, select=[code], extend_select=[], ignore=[]))

    def _fix_edits(self, text: str, name: str, problem: Problem) -> list[Edit] | None:
        """`fix_changes`, as the linter's whole-line edits."""
        linter = self._single_rule_linter(problem.code)
        source = text.encode("utf-8", "surrogatepass")
        view = self._project_view(source, name)
        outcome, _ = process_source(linter, source, name, RunOptions(with_edits=True), view)
        return self._edits_of(problem, outcome.result.findings)

    @staticmethod
    def _edits_of(problem: Problem, findings: list[Finding]) -> list[Edit] | None:
        for finding in findings:
            same = (finding.location.row, finding.location.column) == problem.start and finding.code == problem.code
            if same and finding.fix is not None and finding.fix.edits:
                return list(finding.fix.edits)
        return None


# Project-index summaries by (dotted name, package, content hash, node budget), kept between jobs
# of a worker; emptied when it holds this many.
_SUMMARIES: dict[tuple[str, bool, str, int | None], ModuleSummary | None] = {}
_MAX_REMEMBERED_SUMMARIES = 50_000


def _cells(texts: list[str]) -> list[notebook.Cell]:
    return [notebook.make_cell(number, text) for number, text in enumerate(texts, start=1)]


class Projects:
    """Projects by configuration file, rebuilt when the file changes (by its modification time),
    or one of the local rule modules it loaded does."""

    def __init__(self, allow_local_rules: bool = False) -> None:
        self.allow_local_rules = allow_local_rules  # `gpulint server --allow-local-rules`
        self._cache: dict[Path | None, tuple[tuple[int, ...], Project]] = {}

    def for_path(self, path: Path) -> Project:
        """The project that lints `path` (a file that may not exist yet): its nearest
        pyproject.toml with [tool.gpulint], as on the command line.  Raises SettingsError, which
        names the file, also for a configuration that could not be read for a reason the reader
        did not foresee (a bug: its traceback goes to the log)."""
        settings_file: Path | None = None  # the file read, once it is known
        try:
            config_file = find_config(path.parent)
            # With no configuration file, the nearest pyproject.toml still says the line length and
            # the PyTorch the fixes are written for.
            facts_file = nearest_pyproject(path.parent) if config_file is None else None
            settings_file = config_file or facts_file
            return self._project(config_file, facts_file)
        except MemoryError:
            raise
        except SettingsError as exc:
            if settings_file is None or str(settings_file) in str(exc):
                raise
            raise SettingsError(f"{settings_file}: {exc}") from exc
        except Exception as exc:
            log.exception("gpulint: reading the configuration for %s failed", path)
            where = settings_file or path.parent
            raise SettingsError(
                f"{where}: the configuration could not be read (internal error: {type(exc).__name__}: {exc})"
            ) from exc

    def _project(self, config_file: Path | None, facts_file: Path | None) -> Project:
        key = config_file or facts_file
        cached = self._cache.get(key)
        if cached is not None and cached[0] == _stamp(key, cached[1]):
            return cached[1]
        project = Project(config_file, self.allow_local_rules, facts_file)
        self._cache[key] = (_stamp(key, project), project)
        return project


def _stamp(settings_file: Path | None, project: Project) -> tuple[int, ...]:
    local = project.settings.local_rule_files if project.settings.local_rules is not None else ()
    return (_mtime(settings_file), *(_mtime(module) for module in local))


def _mtime(path: Path | None) -> int:
    try:
        return os.stat(path).st_mtime_ns if path is not None else 0
    except OSError:
        return -1


def suppression_changes(text: str, problem: Problem) -> list[TextChange] | None:
    """The edit that adds `# gpulint: ignore[CODE]` where it silences `problem` (its line, or the
    first line of its statement), as `--add-suppressions` writes it; None when no line can take it."""
    if problem._finding is None or not problem.suppressible:
        return None
    new_text, added, _skipped = suppress_source(text, [problem._finding])
    if not added:
        return None
    return _changes(line_edits(text, new_text))


def source_size(text: str) -> int:
    """The size in bytes the text has in a file (UTF-8), as `max-file-size` counts it."""
    return len(text.encode("utf-8", "surrogatepass"))


def too_large(size: int, limit: int) -> str:
    """Why a source over `max-file-size` is not linted, in the words of the command line."""
    return f"larger than max-file-size ({format_size(size)} > {format_size(limit)}); skipped"


def rule_help(code: str) -> tuple[str, str] | None:
    """A rule's explanation (Markdown) and the address of its page, by id; None for no rule."""
    rule = find_rule(code)
    if rule is None:
        return None
    return rule_markdown(rule), rule_url(rule)


def rule_page(code: str) -> str | None:
    rule = find_rule(code)
    return rule_url(rule) if rule is not None else None
