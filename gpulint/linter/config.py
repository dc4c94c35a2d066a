"""Settings: `[tool.gpulint]` in pyproject.toml, overridden by the command line.

    [tool.gpulint]
    select = ["GL1", "GL2"]          # rule ids or prefixes; "ALL" is every rule, hints included
    extend-select = ["GL401"]        # added to select (or to the default set)
    ignore = ["GL302"]
    per-file-ignores = { "scripts/*.py" = ["GL302"] }
    exclude = ["legacy/"]            # gitignore-style patterns, relative to this file
    unsafe-fixes = false
    num-workers = "min(8, os.cpu_count() or 1)"   # rule options: see `gpulint rule ID`
    log-every = 100
    lint-tests = false               # performance rules report in test files too
    show-hints = false               # report findings held back as hints (no evidence of a real cost)
    test-files = ["tests/", "test_*.py"]   # what is test code (gitignore-style; default: pytest's conventions)
    fix-tests = false                # trainer-config and per-step fixes in test files too
    target-torch = "2.1"             # the oldest PyTorch to write fixes for (default: from the requirements)
    target-tensorflow = "2.10"       # the oldest TensorFlow it runs on (default: from the requirements)
    max-file-size = "2MiB"           # larger files are skipped with a message (bytes, or KiB/MiB/GiB)
    max-syntax-nodes = 50000         # files with more Python syntax nodes are skipped with a message
    max-findings-per-file = 1000     # files with more findings are skipped with a message
                                     # (these three: only lowered, unless the file is named with --config)
    history = ".gpulint/history.db"  # where profile/verify keep their runs (relative); false: nowhere
    local-rules = ["tools/lint_rules/"]   # the project's own rule modules (files or folders, relative)

The project's line length (its formatter's: ruff's or black's `line-length`, yapf's `column_limit`,
else a linter's limit) and the PyTorch its requirements allow are read from the same pyproject.toml
and the tools' files beside it, or the nearest one when there is no `[tool.gpulint]`
(gpulint/linter/project.py).

Local rules (local_rules.py) are project code: they are loaded only when the caller says the
configuration is trusted (`load_settings(..., load_local_rules=True)`: `gpulint check` and the
rule commands do, the review bot and the language server only when told to).  Unloaded, their
ids are still accepted in the selection, as ids that are not gpulint's (no `GL` prefix).

An unknown key, or an id that matches no rule, is an error: a typo must not silently turn a rule off.
So is a configuration file that cannot be read (with its line and the reason), a value of the wrong
type, and a pyproject.toml on the search path that does not parse and mentions gpulint (it may hold
the `[tool.gpulint]` table that would switch rules or fixes off).  A file that nests arrays or
inline tables more than TOML_MAX_NESTING deep is one that does not parse (measured before the
parser, which recurses), as is a NUL character in our table or a pattern that cannot be read.

A configuration arrives with the code it configures, so what it can ask for is bounded: the limits
of work per file (SAFETY_LIMITS) may only be lowered by one found beside the code, and raised only
by the user's own, named with `--config` (`load_settings(..., trusted=True)`; the language server's
`--allow-local-rules` says the same of a workspace's); a raise that is refused is a note the
commands show as a warning.  Its patterns are matched in bounded time (path_patterns.py).  The
tables of other tools gpulint reads hints from (ruff's, black's, `[project]`) are not ours to
check: a value of another shape there gives no hint and no error.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpulint.linter.analysis.parse_guard import DEFAULT_MAX_SYNTAX_NODES
from gpulint.linter.analysis.test_files import is_test_path, matches_test_patterns, project_relative
from gpulint.linter.catalog import OPTIONS, RULES, load_rule
from gpulint.linter.findings import DEFAULT_MAX_FINDINGS_PER_FILE, SYNTAX_ERROR_CODE
from gpulint.linter.project import (
    DEFAULT_LINE_LENGTH,
    facts_from,
    folder_documented_torch,
    frozen_folder,
    parse_version,
    project_root,
)
from gpulint.linter.run.safe_files import DEFAULT_MAX_FILE_BYTES, format_size, read_regular_file
from gpulint.linter.selection import unknown_selector

# How much larger than `max-file-size` a notebook file may be (Settings.size_limit).
NOTEBOOK_SIZE_FACTOR = 16

if TYPE_CHECKING:
    from gpulint.linter.catalog import RuleInfo
    from gpulint.linter.local_rules import LocalRuleSet
    from gpulint.linter.rule import Rule


class ConfigError(Exception):
    """Bad configuration: reported as one line, exit code 2."""


# A configuration file larger than this is not one a person wrote.
CONFIG_MAX_BYTES = 2**20
_CONFIG_LIMIT = "the size of a configuration file"
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
# Arrays and inline tables nested deeper than this are not a person's either.  Python's TOML
# parser recurses once per level and dies of it (RecursionError) from about 330 levels of inline
# tables, in any tool's table: the depth is measured on the text before the parser sees it.
TOML_MAX_NESTING = 100
# What opens or closes a level, a string or a comment in TOML text.
_TOML_STRUCTURE = re.compile(r"""[\[\]{}"'#]""")
_TOML_BASIC_STRING_END = re.compile(r'["\\\n]')  # (a backslash escapes the next character)
_TOML_MULTILINE_BASIC_END = re.compile(r'"""|\\')

STANDARD_KEYS = {
    "select",
    "extend-select",
    "ignore",
    "per-file-ignores",
    "exclude",
    "extend-exclude",
    "unsafe-fixes",
    "max-file-size",
    "max-syntax-nodes",
    "max-findings-per-file",
    "history",
    "gpu-hour-price",
    "fix-tests",
    "lint-tests",
    "show-hints",
    "test-files",
    "target-torch",
    "target-tensorflow",
    "local-rules",
}


@dataclass
class Settings:
    select: list[str] | None = None  # None: the default set (every "on" rule)
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)
    unsafe_fixes: bool = False
    # The performance rules in test files (`is_test_file`): off by default, as test code is not
    # training code; they are not run there (`codes_for`), and the summary counts those files.
    lint_tests: bool = False
    # What is test code: gitignore-style patterns relative to `root`; None for the default
    # conventions (test_files.DEFAULT_TEST_FILES).
    test_files: list[str] | None = None
    # Trainer-config and per-step fixes in test files: off by default, as tests check exactly what
    # those fixes change (per-step logs, precision).
    fix_tests: bool = False
    # Findings a rule reports as hints (findings.py `RawFinding.hint`: no evidence of a real cost)
    # for every rule: off by default, as they are held back unless their rule is named in full.
    show_hints: bool = False
    line_length: int = DEFAULT_LINE_LENGTH  # where fixed lines are wrapped
    target_torch: tuple[int, int] | None = None  # fixes that need a newer PyTorch are not offered
    # The oldest PyTorch the project's prose names (README, INSTALL.md, a setup.py message; which
    # one in documented_torch_in): fixes that need a newer one are withheld, and the finding says why.
    documented_torch: tuple[int, int] | None = None
    documented_torch_in: str | None = None
    target_tensorflow: tuple[int, int] | None = None  # the oldest TensorFlow the project runs on, if known
    # The oldest TensorFlow the project's prose names where no requirement says (README, INSTALL.md,
    # a page of docs/; which one in documented_tensorflow_in).
    documented_tensorflow: tuple[int, int] | None = None
    documented_tensorflow_in: str | None = None
    target_lightning: tuple[int, int] | None = None  # the oldest Lightning its requirements allow, if known
    # The framework the project is, by its distribution name ("Keras"; project.py `framework_from`):
    # the fixes that write that framework's API are withheld in its own repository.
    framework: str | None = None
    # The quotes the project's formatter writes ("single", "double"; None: not configured): the
    # strings fixes write take them (else the file's own prevailing quotes).
    quote_style: str | None = None
    # How fixed lines too long are wrapped (wrap.py's layouts: "black", or yapf's where yapf formats
    # the project; project.py `layout_from`).
    layout: str = "black"
    max_file_size: int = DEFAULT_MAX_FILE_BYTES  # bytes; larger files are skipped with a message
    # Work per file (docs/safety.md, "Work per file"): files with more syntax nodes, or more
    # findings, are skipped with a message.
    max_syntax_nodes: int = DEFAULT_MAX_SYNTAX_NODES
    max_findings_per_file: int = DEFAULT_MAX_FINDINGS_PER_FILE
    options: dict[str, Any] = field(default_factory=dict)
    root: Path = field(default_factory=Path.cwd)  # where relative patterns start
    source: Path | None = None  # the config file, if any
    history: str | bool | None = None  # the runtime checker's run history: a path, or False for none
    gpu_hour_price: float | None = None  # USD per GPU-hour: the runtime reports' cost estimates (costs.py)
    # The rule modules `local-rules` names (absolute), and the rules loaded from them: None when
    # the caller did not trust the configuration enough to run them (or it names none); the files
    # are then the entries' paths as written (a folder is not listed).
    local_rule_files: tuple[Path, ...] = ()
    local_rules: LocalRuleSet | None = None
    # What the configuration asked for and did not get (a limit it may not raise), one line each:
    # the commands show them as warnings.
    notes: list[str] = field(default_factory=list)

    def catalog(self) -> tuple[RuleInfo, ...]:
        """The catalog entry of every rule there is, selected or not: the generated ones
        (gpulint/linter/catalog.py) and the loaded local rules'.  Imports no rule."""
        return RULES if self.local_rules is None else RULES + self.local_rules.entries

    def rule_classes(self, codes: AbstractSet[str]) -> tuple[type[Rule], ...]:
        """The classes of the rules with these codes, in catalog order: a built-in one imported
        from the module its entry names (with libcst), a local one as loaded."""
        local = {rule.code: rule for rule in self.local_rules.rules} if self.local_rules is not None else {}
        return tuple(local.get(entry.code) or load_rule(entry) for entry in self.catalog() if entry.code in codes)

    @property
    def local_rules_skipped(self) -> bool:
        """The configuration names local rules that were not loaded."""
        return bool(self.local_rule_files) and self.local_rules is None

    def expand(self, selectors: Iterable[str]) -> list[str]:
        """`expand_selectors` over this run's rules."""
        if not selectors:
            return []  # (asked for every file: the empty `extend-select` and `ignore` cost nothing)
        return expand_selectors(selectors, self.catalog(), unloaded_local_ids=self.local_rules_skipped)

    def enabled_codes(self) -> frozenset[str]:
        if self.select is None:
            chosen = {r.code for r in self.catalog() if r.default == "on"}
        else:
            # GL000 (the file does not parse, so it was not checked) stays on whatever is
            # selected, as ruff reports syntax errors; only `ignore` turns it off.
            chosen = {*self.expand(self.select), SYNTAX_ERROR_CODE}
        chosen |= set(self.expand(self.extend_select))
        chosen -= set(self.expand(self.ignore))
        return frozenset(chosen)

    def codes_for(self, path: str | Path) -> frozenset[str]:
        """The codes checked in this path: the enabled codes minus the per-file ignores that match
        it, and in a test file, unless `lint-tests` is set, only the rules reported in test code
        (a deprecated API, a stale comment): the others are not run there at all."""
        codes = self.configured_codes_for(path)
        return codes & self._reported_in_tests if self.skips_tests(path) else codes

    def skips_tests(self, path: str | Path) -> bool:
        """Whether `path` is a test file and `lint-tests` is off: the performance rules skip it."""
        return not self.lint_tests and self.is_test_file(path)

    def skips_as_test(self, path: str | Path) -> bool:
        """Whether the performance rules skip `path` as a test file, one of them enabled for it:
        what the summary counts."""
        return self.skips_tests(path) and bool(self.configured_codes_for(path) - self._reported_in_tests)

    def shows_hints_of(self, code: str) -> bool:
        """Whether findings of rule `code` reported as hints are shown (reported, counted, fixed)
        rather than held back: with `show-hints`, or where the selection names the rule itself --
        its full id or its name in `select` or `extend-select`.  A prefix or ALL selects a family
        of rules, not their hints (as with the opt-in rules' findings a person asks for by name)."""
        return self.show_hints or code in self.named_in_full()

    def named_in_full(self) -> frozenset[str]:
        """The codes of the rules the selection names by full id or name (not by prefix or ALL).
        (Worked out when asked: the command line's options are added to a configuration after
        it is read.)"""
        by_name = {rule.name: rule.code for rule in self.catalog()}
        codes = {rule.code for rule in self.catalog()}
        named = set()
        for selector in [*(self.select or []), *self.extend_select]:
            selector = selector.strip()
            if selector.upper() in codes:
                named.add(selector.upper())
            elif selector in by_name:
                named.add(by_name[selector])
        return frozenset(named)

    @property
    def _reported_in_tests(self) -> frozenset[str]:
        return frozenset(rule.code for rule in self.catalog() if rule.reported_in_tests)

    def configured_codes_for(self, path: str | Path) -> frozenset[str]:
        """Enabled codes minus the per-file ignores that match this path."""
        codes = self.enabled_codes()
        if not self.per_file_ignores:
            return codes
        relative = _relative(Path(path), self.root)
        for pattern, ids in self.per_file_ignores.items():
            if _glob_match(relative, pattern):
                codes -= set(self.expand(ids))
        return codes

    def size_limit(self, path: Path) -> int:
        """The most bytes gpulint reads of `path`.  A notebook's bytes are mostly its outputs (images
        as base64), read as JSON and never compiled; its code cells face the syntax-node budget like
        any source, so its file may be NOTEBOOK_SIZE_FACTOR times `max-file-size`."""
        return self.max_file_size * (NOTEBOOK_SIZE_FACTOR if path.suffix == ".ipynb" else 1)

    def folder_documented_torch(self, path: str) -> tuple[tuple[int, int], str] | None:
        """The PyTorch a README of a sub-project between `path` and the project's top names, and
        where (project.py `folder_documented_torch`): the engine reads the file system through the
        settings, not itself."""
        return folder_documented_torch(path)

    def frozen_folder(self, path: str) -> str | None:
        """Why `path` takes no changes (a folder's README says so: project.py `frozen_folder`), or None."""
        return frozen_folder(path)

    def is_test_file(self, path: str | Path) -> bool:
        """Whether `path` is test code: it matches `test-files` (relative to the configuration's
        folder), or by default pytest's conventions (relative to `root`, or for a file outside it
        to its own project).  Answered once per path: a run asks it of each file several times
        (which rules run, what the summary counts, which modules the index reads), and the answer
        resolves the path, a system call per folder in it."""
        known = self._test_file_answers.get(path)
        if known is None:
            known = self._test_file_answers[path] = self._is_test_file(Path(path))
        return known

    def _is_test_file(self, path: Path) -> bool:
        if self.test_files is not None:
            return matches_test_patterns(_relative(path, self.root), tuple(self.test_files))
        try:
            return is_test_path(path.resolve().relative_to(self._real_root).as_posix())
        except ValueError:
            return is_test_path(project_relative(path))

    @functools.cached_property
    def _test_file_answers(self) -> dict[str | Path, bool]:
        """`is_test_file`'s answers by the path asked about."""
        return {}

    @functools.cached_property
    def _real_root(self) -> Path:
        """`root` resolved, once: the project index asks `is_test_file` of every module."""
        return self.root.resolve()

    def fingerprint(self) -> str:
        """A stable digest of everything that changes results (for caches)."""
        payload = {
            "select": self.select,
            "extend_select": self.extend_select,
            "ignore": self.ignore,
            "per_file_ignores": self.per_file_ignores,
            "unsafe_fixes": self.unsafe_fixes,
            "fix_tests": self.fix_tests,
            "lint_tests": self.lint_tests,
            "show_hints": self.show_hints,
            "test_files": self.test_files,
            "line_length": self.line_length,
            "target_torch": self.target_torch,
            "documented_torch": self.documented_torch,
            "documented_torch_in": self.documented_torch_in,
            "target_tensorflow": self.target_tensorflow,
            "documented_tensorflow": self.documented_tensorflow,
            "documented_tensorflow_in": self.documented_tensorflow_in,
            "target_lightning": self.target_lightning,
            "framework": self.framework,
            "quote_style": self.quote_style,
            "layout": self.layout,
            "options": self.options,
            # The local rules' code: editing one re-lints every file.
            "local_rules": self.local_rules.digest() if self.local_rules is not None else None,
            "max_syntax_nodes": self.max_syntax_nodes,
            "max_findings_per_file": self.max_findings_per_file,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def expand_selectors(
    selectors: Iterable[str], rules: Iterable[RuleInfo] = RULES, unloaded_local_ids: bool = False
) -> list[str]:
    """Rule codes matched by ids, prefixes (`GL1`), names (`dataloader-serial`) or `ALL`, among
    `rules`.  With `unloaded_local_ids` (local rules configured, not loaded), a selector that
    matches nothing and is not gpulint's (no `GL` prefix) may be one of theirs: it matches nothing,
    without an error."""
    rules = rules if isinstance(rules, tuple) else tuple(rules)
    codes: list[str] = []
    for raw in selectors:
        selector = raw.strip()
        if not selector:
            continue
        if selector.upper() == "ALL":
            codes.extend(r.code for r in rules)
            continue
        matched = [r.code for r in rules if r.code.startswith(selector.upper()) or r.name == selector]
        maybe_local = unloaded_local_ids and not selector.upper().startswith("GL")
        if not matched and not maybe_local:
            raise ConfigError(unknown_selector(selector, rules))
        codes.extend(matched)
    return codes


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _glob_match(relative: str, pattern: str) -> bool:
    # (fnmatch, unlike the gitignore-style patterns, is safe from a pattern of many stars: CPython
    # translates each star so that it is never tried again, tests/hostile/test_config.py)
    pattern = pattern.rstrip("/")
    if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(relative, pattern + "/*"):
        return True
    # A pattern without a slash matches the file name anywhere, as in .gitignore.
    return "/" not in pattern and fnmatch.fnmatch(relative.rsplit("/", 1)[-1], pattern)


def find_config(start: Path, known: dict[Path, bool] | None = None) -> Path | None:
    """The nearest pyproject.toml with a [tool.gpulint] table, from `start` upwards.  Raises
    ConfigError for one that does not parse and mentions gpulint: it may hold our table.
    `known`: whether each pyproject.toml read so far holds the table, filled as files are read
    (a run asks for every folder it lints, and the folders of a project share their files)."""
    for candidate in _pyprojects_above(start):
        holds = known.get(candidate) if known is not None else None
        if holds is None:
            holds = _holds_gpulint_table(candidate)
            if known is not None:
                known[candidate] = holds
        if holds:
            return candidate
    return None


def _holds_gpulint_table(pyproject: Path) -> bool:
    try:
        data = read_toml(pyproject)
    except ConfigError:
        if _mentions_gpulint(pyproject):
            raise
        return False  # a broken pyproject.toml that cannot hold [tool.gpulint] is not ours to report
    tool = data.get("tool")
    return isinstance(tool, dict) and "gpulint" in tool


def nearest_pyproject(start: Path) -> Path | None:
    """The pyproject.toml nearest above `start` (a file or folder), with or without our table: the
    project whose facts (line length, PyTorch) apply when no configuration file does."""
    return next(_pyprojects_above(start), None)


def _pyprojects_above(start: Path) -> Iterator[Path]:
    """Every pyproject.toml from `start`'s folder upwards, the nearest first."""
    directory = Path(os.path.realpath(start))  # (not resolve(): a symlink loop must not raise)
    if not directory.is_dir():
        directory = directory.parent
    for folder in (directory, *directory.parents):
        if (folder / "pyproject.toml").is_file():
            yield folder / "pyproject.toml"


def _mentions_gpulint(path: Path) -> bool:
    try:
        return b"gpulint" in read_regular_file(path, CONFIG_MAX_BYTES, _CONFIG_LIMIT).lower()
    except OSError:
        return True


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's content; ConfigError naming the file, the line and the reason otherwise."""
    # (imported here: a run with no configuration file, a pre-commit run on a scratch script,
    # pays nothing for the TOML parser)
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib

    try:
        raw = read_regular_file(path, CONFIG_MAX_BYTES, _CONFIG_LIMIT)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); TOML files are UTF-8") from exc
    too_deep = _nested_past(text, TOML_MAX_NESTING)
    if too_deep is not None:
        line = text.count("\n", 0, too_deep) + 1
        column = too_deep - (text.rfind("\n", 0, too_deep) + 1) + 1
        raise ConfigError(
            f"{path}:{line}:{column}: arrays or inline tables nested more than {TOML_MAX_NESTING} deep; not read"
        )
    try:
        return tomllib.loads(text)
    except RecursionError:  # (only a nesting the measure above misread could reach it)
        raise ConfigError(f"{path}: nested too deeply to read") from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        position = _TOML_POSITION.search(message)
        if position is None:
            raise ConfigError(f"{path}: invalid TOML: {message}") from exc
        reason = message[: position.start()]
        raise ConfigError(f"{path}:{position[1]}:{position[2]}: invalid TOML: {reason}") from exc


def _nested_past(text: str, limit: int) -> int | None:
    """Where TOML `text` opens its (limit + 1)th nested array or inline table, or None: brackets
    counted outside strings and comments, in one pass without recursion.  Table headers count
    (`[[a]]` is two levels): no file comes near the limit through them."""
    depth = 0
    position = 0
    while True:
        found = _TOML_STRUCTURE.search(text, position)
        if found is None:
            return None
        char, start = found.group(), found.start()
        if char in "[{":
            depth += 1
            if depth > limit:
                return start
            position = start + 1
        elif char in "]}":
            depth = max(depth - 1, 0)
            position = start + 1
        elif char == "#":
            end = text.find("\n", start)
            position = len(text) if end < 0 else end + 1
        else:
            position = _toml_string_end(text, start, char)


def _toml_string_end(text: str, start: int, quote: str) -> int:
    """Where the TOML string that opens at `start` ends (past its closing quotes; at the end of
    its line for a single-line string left open, where the parser stops with an error)."""
    if text.startswith(quote * 3, start):
        if quote == "'":  # a multi-line literal string: no escapes
            end = text.find("'''", start + 3)
        else:
            position = start + 3
            while True:
                found = _TOML_MULTILINE_BASIC_END.search(text, position)
                if found is None:
                    return len(text)
                if found.group() == '"""':
                    end = found.start()
                    break
                position = found.start() + 2
        if end < 0:
            return len(text)
        end += 3
        # Up to two more quotes close it too: they are the string's last characters.
        for _ in range(2):
            if text.startswith(quote, end):
                end += 1
        return end
    if quote == "'":
        ends = [i for i in (text.find("'", start + 1), text.find("\n", start + 1)) if i >= 0]
        return min(ends) + 1 if ends else len(text)
    position = start + 1
    while True:
        found = _TOML_BASIC_STRING_END.search(text, position)
        if found is None:
            return len(text)
        if found.group() == "\\":
            position = found.start() + 2
        else:
            return found.start() + 1


def load_settings(
    config_file: Path | None, start: Path | None = None, load_local_rules: bool = False, trusted: bool = False
) -> Settings:
    """Settings from a pyproject.toml ([tool.gpulint]) or a gpulint.toml (top level), with the
    project's facts (line length, PyTorch version) from that pyproject.toml -- or, with no config
    file, from the nearest pyproject.toml above `start`.  `load_local_rules`: run the rule modules
    the configuration names (only for a configuration the user trusts: they are its code).
    `trusted`: the configuration is the user's own (named with `--config`), so its safety limits
    apply as written; one found beside the code may only lower them (SAFETY_LIMITS)."""
    if config_file is None:
        settings = Settings()
        project_file = nearest_pyproject(start) if start is not None else None
        if project_file is not None:
            try:
                _apply_project(settings, read_toml(project_file), project_file.parent)
            except ConfigError:
                pass  # a broken pyproject without our table is not ours to report
        elif start is not None:
            # No pyproject.toml: the repository's root (its .git), else the folder linted, says
            # what the project runs on through its requirements and README.
            folder = start if start.is_dir() else start.parent
            _apply_project(settings, {}, project_root(start) or folder)
        return settings
    data = read_toml(config_file)
    table = data
    if config_file.name == "pyproject.toml":
        tool = data.get("tool", {})
        if not isinstance(tool, dict):
            raise ConfigError(f"{config_file}: `tool` must be a table, not {_toml_type(tool)}")
        table = tool.get("gpulint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{config_file}: `[tool] gpulint` must be a table ([tool.gpulint]), not {_toml_type(table)}")
    settings = settings_from_table(table, config_file, load_local_rules, trusted)
    target, target_tf = settings.target_torch, settings.target_tensorflow
    _apply_project(settings, data if config_file.name == "pyproject.toml" else {}, config_file.parent)
    if target is not None:  # said outright: it wins over the requirements and the README
        settings.target_torch = target
        settings.documented_torch = settings.documented_torch_in = None
    if target_tf is not None:
        settings.target_tensorflow = target_tf
        settings.documented_tensorflow = settings.documented_tensorflow_in = None
    return settings


def _apply_project(settings: Settings, pyproject: dict[str, Any], directory: Path) -> None:
    facts = facts_from(pyproject, directory)
    settings.line_length = facts.line_length
    settings.target_torch = facts.target_torch
    settings.documented_torch = facts.documented_torch
    settings.documented_torch_in = facts.documented_torch_in
    settings.target_tensorflow = facts.target_tensorflow
    settings.documented_tensorflow = facts.documented_tensorflow
    settings.documented_tensorflow_in = facts.documented_tensorflow_in
    settings.target_lightning = facts.target_lightning
    settings.framework = facts.framework
    settings.quote_style = facts.quote_style
    settings.layout = facts.layout


def _toml_type(value: Any) -> str:
    names = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "a table",
    }
    return next((name for kind, name in names.items() if isinstance(value, kind)), type(value).__name__)


def settings_from_table(
    table: dict[str, Any], config_file: Path, load_local_rules: bool = False, trusted: bool = False
) -> Settings:
    known_options = OPTIONS
    unknown = sorted(set(table) - STANDARD_KEYS - set(known_options))
    if unknown:
        raise ConfigError(
            f"{config_file}: unknown key(s) {', '.join(unknown)} in [tool.gpulint]; "
            f"known: {', '.join(sorted(STANDARD_KEYS | set(known_options)))}"
        )
    _refuse_nul(table, config_file)

    def id_list(key: str) -> list[str]:
        value = table.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{config_file}: `{key}` must be a list of rule ids")
        return value

    settings = Settings(root=config_file.parent, source=config_file)
    if "select" in table:
        settings.select = id_list("select")
    settings.extend_select = id_list("extend-select")
    settings.ignore = id_list("ignore")
    settings.exclude = _patterns(table, "exclude", config_file) + _patterns(table, "extend-exclude", config_file)
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{config_file}: `per-file-ignores` must be a table of pattern = [ids]")
    for pattern, ids in per_file.items():
        ids = [ids] if isinstance(ids, str) else ids
        if not isinstance(ids, list) or not all(isinstance(v, str) for v in ids):
            raise ConfigError(f"{config_file}: `per-file-ignores` entry {pattern!r} must be a list of rule ids")
        settings.per_file_ignores[str(pattern)] = ids
    for key, (attribute, read, shown) in SAFETY_LIMITS.items():
        if key in table:
            limit = read(table, key, config_file)
            default = getattr(Settings, attribute)
            if limit > default and not trusted:
                settings.notes.append(
                    f"{config_file}: `{key}` = {table[key]!r} is above the default limit ({shown(default)}); a "
                    "configuration found beside the code may only lower it, so the default applies (name your "
                    "own with --config to raise it)"
                )
                limit = default
            setattr(settings, attribute, limit)
    unsafe = table.get("unsafe-fixes", False)
    if not isinstance(unsafe, bool):
        raise ConfigError(f"{config_file}: `unsafe-fixes` must be true or false")
    settings.unsafe_fixes = unsafe
    for key in ("fix-tests", "lint-tests", "show-hints"):
        value = table.get(key, False)
        if not isinstance(value, bool):
            raise ConfigError(f"{config_file}: `{key}` must be true or false")
        setattr(settings, key.replace("-", "_"), value)
    if "test-files" in table:
        patterns = table["test-files"]
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise ConfigError(f'{config_file}: `test-files` must be a list of patterns such as "tests/"')
        settings.test_files = _patterns(table, "test-files", config_file)
    for key, example in (("target-torch", "2.1"), ("target-tensorflow", "2.10")):
        if key in table:
            try:
                setattr(settings, key.replace("-", "_"), parse_version(str(table[key])))
            except ValueError as exc:
                raise ConfigError(f'{config_file}: `{key}` must be a version such as "{example}" ({exc})') from None
    history = table.get("history")
    if history is not None and not (history is False or isinstance(history, str) and history):
        raise ConfigError(f"{config_file}: `history` must be a file path or false")
    settings.history = history
    price = table.get("gpu-hour-price")
    if price is not None:
        if isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 < price < 1e6:
            raise ConfigError(f"{config_file}: `gpu-hour-price` must be a price in USD per GPU-hour above 0, e.g. 2.5")
        settings.gpu_hour_price = float(price)
    for key, option in known_options.items():
        if key in table:
            value = table[key]
            if not isinstance(value, option.type) or isinstance(value, bool) and option.type is int:
                expected, found = _toml_type(option.type()), _toml_type(value)
                raise ConfigError(f"{config_file}: `{key}` must be {expected}, not {found}")
            settings.options[key] = value
    if "local-rules" in table:
        _apply_local_rules(settings, table["local-rules"], config_file, load_local_rules)
    try:
        validate(settings)
    except ConfigError as exc:  # (an id or value of this file: name it, as the checks above do)
        raise ConfigError(f"{config_file}: {exc}") from None
    return settings


def _apply_local_rules(settings: Settings, entries: Any, config_file: Path, load: bool) -> None:
    """The rule modules `local-rules` names, run when `load`.  Otherwise only the entries' text is
    checked: what their paths lead to on disk is not looked at."""
    from gpulint.linter import local_rules

    if not isinstance(entries, list) or not all(isinstance(entry, str) and entry for entry in entries):
        raise ConfigError(f"{config_file}: `local-rules` must be a list of paths to rule modules or folders")
    try:
        if not load:
            settings.local_rule_files = local_rules.entry_paths(entries, config_file)
            return
        settings.local_rule_files = local_rules.rule_files(entries, config_file)
        if settings.local_rule_files:
            settings.local_rules = local_rules.load(settings.local_rule_files)
    except local_rules.LocalRuleError as exc:
        raise ConfigError(str(exc)) from None


def validate(settings: Settings) -> None:
    """Raise ConfigError for ids that match no rule and option values that cannot work."""
    for ids in [settings.select or [], settings.extend_select, settings.ignore, *settings.per_file_ignores.values()]:
        settings.expand(ids)
    for key, value in settings.options.items():
        if key in OPTIONS:
            try:
                OPTIONS[key].validate(value)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None


def _refuse_nul(table: dict[str, Any], config_file: Path) -> None:
    """ConfigError for a NUL character in any key or string of the table: no path, pattern or id
    holds one (a path with one cannot even be asked about)."""
    pending: list[tuple[str, str, Any]] = [(key, key, value) for key, value in table.items()]
    while pending:
        setting, name, value = pending.pop()
        if "\0" in name or isinstance(value, str) and "\0" in value:
            raise ConfigError(f"{config_file}: `{setting}` holds a NUL character")
        if isinstance(value, dict):
            pending.extend((setting, str(key), item) for key, item in value.items())
        elif isinstance(value, list):
            pending.extend((setting, "", item) for item in value)


def _patterns(table: dict[str, Any], key: str, config_file: Path) -> list[str]:
    """The gitignore-style patterns of `key` (a list, or one string for `exclude`), each checked."""
    from gpulint.linter.path_patterns import PatternError, check_pattern

    value = table.get(key, [])
    if isinstance(value, str) and key in ("exclude", "extend-exclude"):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f'{config_file}: `{key}` must be a list of patterns such as "legacy/"')
    for pattern in value:
        try:
            check_pattern(pattern)
        except PatternError as exc:
            raise ConfigError(f"{config_file}: `{key}` pattern {pattern!r} cannot be read: {exc}") from None
    return value


def _positive_int(table: dict, key: str, config_file: Path) -> int:
    value = table[key]
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{config_file}: `{key}` must be a positive whole number, not {value!r}")
    return value


_SIZE = re.compile(r"^\s*(\d+)\s*(|b|kib|kb|k|mib|mb|m|gib|gb|g)\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30}


def _size(table: dict, key: str, config_file: Path) -> int:
    return parse_size(table[key], config_file)


def parse_size(value: Any, config_file: Path) -> int:
    """A size in bytes from an integer or a string such as "10MiB" (kB/MB/GB are read as binary
    units too: the limit is a guard, not an accounting figure)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = _SIZE.match(value) if isinstance(value, str) else None
    if match is None or int(match[1]) == 0:
        raise ConfigError(
            f'{config_file}: `max-file-size` must be a positive size such as 10485760 or "10MiB", not {value!r}'
        )
    return int(match[1]) * _SIZE_UNITS[match[2][:1].lower()]


# The limits that bound the work on one file (docs/safety.md, "Work per file"): each key's Settings
# attribute, how its value is read and how a limit is shown.  A configuration that arrived with the
# code may lower them, never raise them: a fork's pull request could otherwise lift them in the CI
# job that lints it, and one file could then hold the job for as long as it runs.
SAFETY_LIMITS: dict[str, tuple[str, Callable[[dict, str, Path], int], Callable[[int], str]]] = {
    "max-file-size": ("max_file_size", _size, format_size),
    "max-syntax-nodes": ("max_syntax_nodes", _positive_int, "{:,}".format),
    "max-findings-per-file": ("max_findings_per_file", _positive_int, "{:,}".format),
}
