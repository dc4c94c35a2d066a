"""Local rules: rule modules a project keeps in its own repository and names in its configuration.

    [tool.gpulint]
    local-rules = ["tools/lint_rules/no_hardcoded_cuda_index.py", "tools/more_rules/"]

Each entry is a Python file, or a folder whose `*.py` files (not those starting with `_`) are
each a rule module, relative to the configuration file that names it and inside its folder (no
absolute path, no `..` out of it, no symbolic link out of it).  A module defines `Rule`
subclasses (gpulint/linter/rule.py) exactly as a built-in rule module does: docstring, `code`,
`name`, `message`, `requires`, `tokens`, VALID and INVALID cases.  Loading one runs it, so only the
callers that trust the configuration load them (docs/local-rules.md says which).

The generated catalog (catalog.py) knows only the built-in rules, so a local rule's catalog entry
(what selection, listings and the prefilter read) is worked out here, when it is loaded, from the
same class attributes the generator reads.  Its ids must not be the built-ins': a local code is
letters then digits and must not start with `GL` (gpulint's own namespace, future rules included);
a code or name that is taken is an error naming both modules.

A loaded set pickles as the sources it executed, so a worker process started with `spawn` runs the
very bytes the parent hashed into the cache key, not whatever the file holds by then.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import sys
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

from gpulint.linter import catalog
from gpulint.linter.run.safe_files import read_regular_file

if TYPE_CHECKING:
    from gpulint.linter.rule import Rule

# A rule module larger than this is not one a person wrote.
LOCAL_RULE_MAX_BYTES = 2**20
_LIMIT = "the size of a local rule module"
# Letters then digits (`ACME001`, `TEAM12`), as ruff's and flake8's codes are.
LOCAL_CODE = re.compile(r"^[A-Z]{1,10}[0-9]{1,6}$")
RESERVED_PREFIX = "GL"
_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
# The package the modules are registered under in sys.modules (never importable from disk).
_PACKAGE = "gpulint_local_rules"


class LocalRuleError(Exception):
    """A local rule that cannot be used: said in one line (the configuration turns it into a
    ConfigError, exit 2)."""


def entry_paths(entries: Sequence[str], config_file: Path) -> tuple[Path, ...]:
    """The paths `local-rules` names, in the configuration file's folder, worked out from the text
    alone: nothing on disk is looked at, so a run that does not load local rules learns nothing of
    what their paths lead to.  LocalRuleError for an entry that is absolute or whose `..` leave the
    folder: the configuration may name project code only, not any file the user can read."""
    base = Path(os.path.abspath(config_file.parent))
    paths = []
    for entry in entries:
        normal = os.path.normpath(entry)
        if PurePath(entry).anchor or normal == os.pardir or normal.startswith(os.pardir + os.sep):
            raise LocalRuleError(
                f"{config_file}: `local-rules` entry {entry!r} must be a path relative to the configuration "
                "file's folder, inside it"
            )
        paths.append(base / normal)
    return tuple(paths)


def rule_files(entries: Sequence[str], config_file: Path) -> tuple[Path, ...]:
    """The rule modules `local-rules` names, resolved relative to the configuration file's folder:
    a file, or every `*.py` of a folder (not those starting with `_`), in order, each once.  Each
    must be inside that folder once symbolic links are followed (LocalRuleError otherwise)."""
    folder = os.path.realpath(config_file.parent)
    found: list[Path] = []
    for entry, named in zip(entries, entry_paths(entries, config_file), strict=True):
        path = Path(os.path.realpath(named))  # (not resolve(): a symbolic link loop must not raise)
        _check_inside(path, folder, entry, config_file)
        if path.is_dir():
            modules = sorted(p for p in path.glob("*.py") if not p.name.startswith("_") and p.is_file())
            for module in modules:
                _check_inside(Path(os.path.realpath(module)), folder, entry, config_file)
            if not modules:
                raise LocalRuleError(f"{config_file}: `local-rules` entry {entry!r}: no rule module (*.py) in {path}")
        elif path.is_file() and path.suffix == ".py":
            modules = [path]
        elif path.exists():
            raise LocalRuleError(f"{config_file}: `local-rules` entry {entry!r} is not a Python file or a folder")
        else:
            raise LocalRuleError(f"{config_file}: `local-rules` entry {entry!r}: {path} does not exist")
        found.extend(module for module in modules if module not in found)
    return tuple(found)


def _check_inside(path: Path, folder: str, entry: str, config_file: Path) -> None:
    if not path.is_relative_to(folder):
        raise LocalRuleError(
            f"{config_file}: `local-rules` entry {entry!r} leads outside the configuration file's folder "
            "through a symbolic link"
        )


@dataclass(frozen=True, eq=False)
class LocalRuleSet:
    """The rule classes of the local rule modules, their catalog entries, and the sources they
    were executed from."""

    sources: tuple[tuple[str, bytes], ...]  # (file, its bytes), in the configured order
    rules: tuple[type[Rule], ...]  # Rule subclasses, sorted by code
    entries: tuple[catalog.RuleInfo, ...]  # their catalog entries, in the same order

    def digest(self) -> str:
        """What changes a run's results: each module's path and bytes."""
        digest = hashlib.sha256()
        for path, source in self.sources:
            digest.update(f"{path}\0{len(source)}\0".encode("utf-8", "surrogateescape"))
            digest.update(source)
        return digest.hexdigest()

    def find(self, key: str) -> type[Rule] | None:
        """A local rule by code (`ACME001`) or name."""
        return next((rule for rule in self.rules if key.upper() == rule.code or key == rule.name), None)

    def __reduce__(self):
        return (from_sources, (self.sources,))


def load(files: Iterable[Path]) -> LocalRuleSet:
    """Read and run the rule modules (once per file content in a process); LocalRuleError for a
    module that cannot be read or run, defines no rule, or whose ids are not allowed."""
    sources = []
    for path in files:
        try:
            sources.append((str(path), read_regular_file(path, LOCAL_RULE_MAX_BYTES, _LIMIT)))
        except OSError as exc:
            raise LocalRuleError(f"local rule {shown(path)}: cannot read it: {exc.strerror or exc}") from None
    return from_sources(tuple(sources))


_loaded: dict[tuple[str, str], tuple[type[Rule], ...]] = {}


def from_sources(sources: tuple[tuple[str, bytes], ...]) -> LocalRuleSet:
    """The rule set of these (file, bytes) pairs: each module run once per process and content."""
    from gpulint.linter.rule import Rule  # libcst: only projects with local rules pay for it here

    builtin = {entry.code: entry for entry in catalog.RULES}
    builtin_names = {entry.name: entry.code for entry in catalog.RULES}
    claimed: dict[str, str] = {}  # code or name -> the file that defines it
    rules: list[type[Rule]] = []
    for path, source in sources:
        key = (path, hashlib.sha256(source).hexdigest())
        if key not in _loaded:
            for stale in [k for k in _loaded if k[0] == path]:  # an edited module (the language server)
                del _loaded[stale]
            _loaded[key] = _run_module(path, source, Rule)
        for rule in _loaded[key]:
            _check_ids(rule, path, builtin, builtin_names, claimed)
            rules.append(rule)
    rules.sort(key=lambda rule: rule.code)
    return LocalRuleSet(tuple(sources), tuple(rules), tuple(catalog_entry(rule, path_of(rule)) for rule in rules))


def path_of(rule: type[Rule]) -> str:
    """The file a local rule was loaded from (absolute)."""
    return getattr(rule, "__gpulint_local_file__", "?")


def shown(path: str | Path) -> str:
    """A module's path as messages show it: relative to the working directory, as file names are."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def _run_module(path: str, source: bytes, base: type[Rule]) -> tuple[type[Rule], ...]:
    """Execute one rule module under a name of its own; its Rule subclasses with a `code`."""
    name = (
        f"{_PACKAGE}.{re.sub(r'[^0-9A-Za-z_]', '_', Path(path).stem)}_{hashlib.sha256(path.encode()).hexdigest()[:12]}"
    )
    module = types.ModuleType(name)
    module.__file__ = path
    previous = sys.modules.get(name)
    sys.modules[name] = module  # dataclasses and typing look the module up while it runs
    try:
        exec(compile(source, path, "exec", dont_inherit=True), module.__dict__)  # noqa: S102 - the point of a plugin
    except SyntaxError as exc:
        _restore(name, previous)
        raise LocalRuleError(
            f"local rule {shown(path)}:{exc.lineno or 0}: cannot be loaded: SyntaxError: {exc.msg}"
        ) from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever the module raises, one line names it
        _restore(name, previous)
        raise LocalRuleError(
            f"local rule {shown(path)}{_where(exc, path)}: cannot be loaded: {_describe(exc)}"
        ) from None
    found = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, base)
        and obj is not base
        and "code" in vars(obj)
        and obj.__module__ == name
    ]
    if not found:
        raise LocalRuleError(
            f"local rule {shown(path)}: defines no rule (a subclass of gpulint.linter.rule.Rule with a `code`)"
        )
    for rule in found:
        setattr(rule, "__gpulint_local_file__", path)  # noqa: B010 - (a name mypy does not know)
    return tuple(found)


def failure_in_local_rule(exc: BaseException) -> str | None:
    """What to say when a local rule's code raised `exc` while linting (None: the exception did not
    come from a local rule, it is gpulint's own to report): the module, its line and the error."""
    where = None
    traceback = exc.__traceback__
    while traceback is not None:
        frame = traceback.tb_frame
        if str(frame.f_globals.get("__name__", "")).startswith(f"{_PACKAGE}."):
            where = f"{shown(frame.f_code.co_filename)}:{traceback.tb_lineno}"
        traceback = traceback.tb_next
    return None if where is None else f"local rule {where} failed: {_describe(exc)}; file skipped"


def _restore(name: str, previous: types.ModuleType | None) -> None:
    if previous is None:
        sys.modules.pop(name, None)
    else:
        sys.modules[name] = previous


def _where(exc: BaseException, path: str) -> str:
    """`:LINE` of the module's own line the exception went through last, if any."""
    line = None
    traceback = exc.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename == path:
            line = traceback.tb_lineno
        traceback = traceback.tb_next
    return f":{line}" if line is not None else ""


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {text[0]}" if text else exc.__class__.__name__


def _check_ids(
    rule: type[Rule],
    path: str,
    builtin: dict[str, catalog.RuleInfo],
    builtin_names: dict[str, str],
    claimed: dict[str, str],
) -> None:
    code, name = getattr(rule, "code", None), getattr(rule, "name", None)
    where = f"local rule {shown(path)}: {rule.__name__}"
    if not isinstance(code, str) or not LOCAL_CODE.match(code):
        raise LocalRuleError(f"{where}: code {code!r} must be capital letters then digits, such as 'ACME001'")
    if code.startswith(RESERVED_PREFIX):
        reason = f"is gpulint's {builtin[code].name}" if code in builtin else "starts with GL, which is gpulint's own"
        raise LocalRuleError(f"{where}: code {code} {reason}; give local rules a prefix of your own (ACME001)")
    if not isinstance(name, str) or not _NAME.match(name):
        raise LocalRuleError(f"{where}: name {name!r} must be lowercase words joined by '-', such as 'no-item-in-eval'")
    if name in builtin_names:
        raise LocalRuleError(f"{where}: name {name!r} is gpulint's {builtin_names[name]}; choose another")
    for key in (code, name):
        if key in claimed and claimed[key] != f"{shown(path)}:{rule.__qualname__}":
            raise LocalRuleError(f"{where}: {key} is also claimed by {claimed[key]}")
        claimed[key] = f"{shown(path)}:{rule.__qualname__}"
    tokens = getattr(rule, "tokens", ())
    if not isinstance(tokens, (tuple, list)) or not all(isinstance(token, str) and token for token in tokens):
        raise LocalRuleError(f"{where}: `tokens` must be a tuple of strings, such as ('synchronize',)")
    triggers = getattr(rule, "triggers", None)
    if triggers is not None and not (
        isinstance(triggers, (tuple, list))
        and triggers
        and all(
            isinstance(group, (tuple, list)) and group and all(isinstance(shape, str) and shape for shape in group)
            for group in triggers
        )
    ):
        raise LocalRuleError(
            f"{where}: `triggers` must be None or a tuple of tuples of strings, such as (('.item(',),)"
        )
    if not isinstance(getattr(rule, "message", None), str):
        raise LocalRuleError(f"{where}: needs a `message` (one line: what it finds)")
    if rule.default not in ("on", "hint"):
        raise LocalRuleError(f"{where}: default must be 'on' or 'hint', not {rule.default!r}")
    for option in rule.options:
        if catalog.OPTIONS.get(option.key) != option:
            raise LocalRuleError(
                f"{where}: reads `{option.key}`, which is not one of gpulint's options (local rules may read "
                "the built-in ones: see `gpulint rule ID`)"
            )


def catalog_entry(rule: type[Rule], path: str) -> catalog.RuleInfo:
    """A local rule's entry in the catalog, as scripts/gen_docs.py writes a built-in's.  A fact the
    generated catalog does not know (one a local module made itself) is left to the check after
    parsing: the prefilter may only rule out files where a fact cannot hold."""
    try:
        entry = rule.catalog_entry()
    except Exception as exc:  # noqa: BLE001 - a placeholder message without a title, bad tokens...
        raise LocalRuleError(f"local rule {shown(path)}: {rule.__name__}: {_describe(exc)}") from None
    spelled = {spelled.name: spelled for fact in rule.requires for spelled in fact.spelled()}
    facts = tuple(
        name
        for name in entry.facts
        if catalog.FACT_TOKENS.get(name) == spelled[name].tokens
        and catalog.FACT_SHAPES.get(name, ()) == spelled[name].shapes
    )
    # (loaded from its file, not imported by name: the rule set holds the class)
    return catalog.RuleInfo(**{**entry.__dict__, "facts": facts, "implementation": ""})
