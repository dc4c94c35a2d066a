"""What the project around the linted files says that shapes the fixes: the line length its
formatter keeps, and the oldest PyTorch, TensorFlow and Lightning it declares it runs on.

* line length: fixed lines are wrapped to it, so it is the length the project's formatter keeps
  -- a fix wrapped shorter is joined again by `ruff format` or black, one wrapped longer is split.
  In this order (`line_length_from`):
  1. the formatter the project's pre-commit configuration runs, when it names one (hook `ruff-format`,
     `black`, `yapf`): that tool's setting below, or its default;
  2. a formatter's own setting: ruff's `line-length` (`.ruff.toml`, then `ruff.toml`, then
     `[tool.ruff]`: ruff's own order; ruff has no line length of its own under `[format]`), black's
     `[tool.black] line-length`, yapf's `column_limit` (`.style.yapf [style]`, `setup.cfg [yapf]`,
     `[tool.yapf]`);
  3. a formatter configured without one: its default (ruff and black 88; yapf 79 for its default
     `pep8` style, 80 for `google`, `facebook` and `yapf`);
  4. a linter's limit: flake8's `max-line-length` (`[flake8]` in `.flake8`, `setup.cfg`, `tox.ini`,
     or `[tool.flake8]`), pycodestyle's (`[pycodestyle]`), pylint's (`[tool.pylint.format]`,
     `[FORMAT]` in `.pylintrc` or `pylintrc`);
  5. else 88.
* PyTorch: the lowest version the project's requirements allow for `torch` -- `[project]
  dependencies` and optional dependencies in pyproject.toml, then beside it `requirements*.txt`,
  `setup.py` and `setup.cfg` (their `install_requires`) and a conda `environment.yml`
  (`pytorch=1.8.1`) -- (`torch>=2.1`, `torch==1.13.1`, `torch~=2.2`); a bound that cannot be read,
  or no `torch` requirement at all, means no limit.  `target-torch = "2.1"` in `[tool.gpulint]`
  says it outright, as ruff's `target-version` does for Python.  A fix that needs a newer PyTorch
  (`torch.amp.GradScaler("cuda")` needs 2.3) is then not offered; the finding stays;
* the PyTorch the project documents (`documented_torch`, and `documented_torch_in` the file that
  names it), where no requirement bounds `torch`: the lowest version named by a README beside it,
  an INSTALL.md ("PyTorch 1.8.1", "torch>=1.8", "PyTorch ≥ 1.8"), or a message in setup.py (a
  project that checks its torch at install time: `assert torch_ver >= [1, 8], "Requires PyTorch
  >= 1.8"`, or a build from source: "git clone -b v2.1.0 .../pytorch"), and a README of a
  sub-project between a file and the top (`folder_documented_torch`).  A fix that needs a newer
  PyTorch than that is withheld as well, and the finding says why: a maintainer does not merge a
  change that breaks the version the project documents;
* TensorFlow: the lowest version the same requirements allow for `tensorflow` (also
  `tensorflow-cpu`, `tensorflow-gpu`, `tensorflow-macos`), or `target-tensorflow = "2.10"`.  Rules
  about tf.data defaults read it: TensorFlow 2.13 and later inject a final prefetch by themselves;
* the TensorFlow the project documents (`documented_tensorflow`, and `documented_tensorflow_in`),
  where no requirement bounds `tensorflow`: the lowest version a README, an INSTALL.md or a page
  at the top of `docs/` names ("TensorFlow 2.0", "tensorflow>=1.14", "TF 2.1").  Fixes that need
  a newer TensorFlow (`tf.data.AUTOTUNE` needs 2.4) write the older spelling or none;
* Lightning: the lowest version the same requirements allow for `lightning`,
  `pytorch-lightning` or `pytorch_lightning` (`target_lightning`).  The trainer values a fix
  writes depend on it (`precision="bf16-mixed"` is Lightning 2.0's spelling, `"bf16"` 1.5's).
* the framework the project is (`framework`): its distribution name (`[project] name` in
  pyproject.toml, else `name` in setup.cfg's `[metadata]` or setup.py's `setup(name=...)`) is
  that of a framework whose API fixes write -- `keras`, `tensorflow`, `torch`, `lightning`,
  `transformers`, or the framework's own documentation site, `tensorflow-docs`
  (`FRAMEWORK_DISTRIBUTIONS`; a `name=` given by a constant of setup.py is read through it).  Its
  guides, examples and benchmarks show that API as the framework's users write it, on every setup
  it supports (Keras 3's on each of its backends): a fix that changes how it is called there is
  the framework's own choice to make, so those fixes are withheld (rule.py `FRAMEWORK_APIS`).
  Only the name is read: a folder called `torch/` in a user's project is not PyTorch;
* the quotes written strings take (`quote_style`, "single" or "double"; None: not configured):
  ruff's `[format] quote-style` (its own files, then `[tool.ruff.format]`), or black's double
  quotes where black formats the project without `skip-string-normalization`; the formatter
  its pre-commit configuration runs decides between them, as for the line length;
* how a fixed line too long is wrapped (`layout`, wrap.py's layouts): yapf's where yapf formats the
  project (a `yapf` pre-commit hook and no other formatter's, or no formatter hook and a yapf
  configuration) in its `pep8` or `google` style -- one keyword argument a line, unless the
  project sets `split_before_named_assigns = false` -- and black's everywhere else (`layout_from`).

Also where a file's project starts (`project_root`): the project index reads the whole project a
linted file belongs to, whatever paths the run names.
"""

from __future__ import annotations

import configparser
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpulint.linter.fix.layouts import BLACK, YAPF, YAPF_FILLED
from gpulint.linter.run.safe_files import read_regular_file

DEFAULT_LINE_LENGTH = 88

_REQUIREMENTS_MAX_BYTES = 2**20
# The patterns below read the project's own files, which may be built to hurt: no two repeats in
# a row can take the same characters (`\s*\s*`), so a long run of them costs one pass, not one
# pass per way of sharing it out (tests/test_project_settings.py, the long-line cases).
_TORCH_REQUIREMENT = re.compile(r"^\s*torch\s*(\[[^\]]*\])?\s*(?P<specs>[^;#]*)", re.IGNORECASE)
_TENSORFLOW_REQUIREMENT = re.compile(
    r"^\s*tensorflow(-cpu|-gpu|-macos)?\s*(?:\[[^\]]*\]\s*)?(?P<specs>(?:[<>=!~][^;#]*)?)(?:;.*|#.*)?$", re.IGNORECASE
)
_LOWER_BOUND = re.compile(r"(>=|==|~=|===|>)\s*v?(?P<major>\d+)\.(?P<minor>\d+)")
# A requirement as a string in setup.py (`install_requires=["torch>=1.8", ...]`).
# (`tensorflow`, `tensorflow-cpu`, `tensorflow_macos`: any name that starts so, as before)
_QUOTED_REQUIREMENT = re.compile(
    r"""["'](?P<requirement>(?:torch\b|tensorflow|(?:pytorch[-_])?lightning\b)[^"'\n]*)["']""", re.IGNORECASE
)
_LIGHTNING_REQUIREMENT = re.compile(
    r"^\s*(?:pytorch[-_])?lightning\s*(?:\[[^\]]*\]\s*)?(?P<specs>(?:[<>=!~][^;#]*)?)(?:;.*|#.*)?$", re.IGNORECASE
)
# A conda requirement (`- pytorch=1.8.1`, `- torch>=1.8` in environment.yml): one `=` pins a version.
_CONDA_REQUIREMENT = re.compile(
    r"^\s*-\s*(?:py)?(?P<name>torch|tensorflow[\w-]*|(?:pytorch[-_])?lightning)\s*(?P<spec>[<>=!~].*)$", re.IGNORECASE
)
# A PyTorch version named in prose: "PyTorch 1.8.1", "pytorch >= 1.8", "pytorch1.6.0" (not torchvision,
# not an upper bound "torch<2").
_DOCUMENTED_TORCH = re.compile(
    r"(?<![\w.-])(?:py)?torch(?![a-z_-])[\s(*`]*(?:version\s*)?(?:(?:>=|≥|==|~=|=|v)\s*)?(?P<major>[0-3])\.(?P<minor>\d+)",
    re.IGNORECASE,
)
# A PyTorch built from source at a release tag: `git clone -b v2.1.0 https://github.com/pytorch/pytorch.git`.
_CLONED_TORCH = re.compile(
    r"\bclone\s+(?:-b|--branch)\s+v?(?P<major>[0-3])\.(?P<minor>\d+)(?:\.\d+)?\s+https?://github\.com/pytorch/pytorch\b"
)
# A TensorFlow version named in prose: "TensorFlow 2.0", "tensorflow-gpu>=1.14", "TF 2.1" (not
# tensorflow-datasets, not an upper bound "tensorflow<2").
_DOCUMENTED_TENSORFLOW = re.compile(
    r"(?:(?<![\w.-])(?i:tensorflow)(?:-gpu|-cpu)?(?![a-z_-])|\bTF(?:\s+(?=\d)|(?=\s*[>=≥])))[\s(*`]*"
    r"(?:(?i:version)\s*)?(?:(?:>=|≥|==|~=|=|v)\s*)?(?P<major>[0-2])\.(?P<minor>\d+)"
)
_OLDER_RELEASES = re.compile(
    r"\b(older|previous|earlier|legacy)\s+(versions?|releases?|binaries|builds)\b", re.IGNORECASE
)
# How many folders above a file may hold a README of its own sub-project.
_FOLDERS_UP = 4
_READMES = ("README.md", "README.rst", "README.txt", "README", "readme.md")
# Where a project's prose names the PyTorch it runs on, as a fix's message calls it.
_TORCH_DOCUMENTS = (("README", _READMES), ("INSTALL.md", ("INSTALL.md",)), ("setup.py", ("setup.py",)))
# Where it names the TensorFlow it runs on (also the pages at the top of `docs/`, read by `_docs_pages`).
_TENSORFLOW_DOCUMENTS = (("README", _READMES), ("INSTALL.md", ("INSTALL.md",)))
_DOCS_PAGES_READ = 20  # the first pages of `docs/` by name: an installation page is among them, not deep


@dataclass(frozen=True)
class ProjectFacts:
    line_length: int = DEFAULT_LINE_LENGTH
    target_torch: tuple[int, int] | None = None  # None: no limit known
    target_tensorflow: tuple[int, int] | None = None  # None: no version known
    documented_torch: tuple[int, int] | None = None  # the lowest PyTorch the project's prose names
    documented_torch_in: str | None = None  # where: "README", "INSTALL.md" or "setup.py"
    documented_tensorflow: tuple[int, int] | None = None  # the lowest TensorFlow the project's prose names
    documented_tensorflow_in: str | None = None  # where: "README", "INSTALL.md" or "docs/<page>"
    target_lightning: tuple[int, int] | None = None  # the lowest Lightning its requirements allow
    framework: str | None = None  # the framework the project is ("Keras"); None for a project that uses one
    quote_style: str | None = None  # "single" or "double": the quotes its formatter writes; None: not configured
    layout: str = BLACK  # how its formatter wraps a line too long (wrap.py's layouts)


# The distributions (names normalized as pip compares them) that are a framework whose API fixes
# write, by the framework's name.
FRAMEWORK_DISTRIBUTIONS = {
    "keras": "Keras",
    "keras-nightly": "Keras",
    "tf-keras": "Keras",
    "tensorflow": "TensorFlow",
    "tensorflow-cpu": "TensorFlow",
    "tensorflow-gpu": "TensorFlow",
    "tf-nightly": "TensorFlow",
    "torch": "PyTorch",
    "lightning": "Lightning",
    "pytorch-lightning": "Lightning",
    "transformers": "Transformers",
    # The framework's own documentation site (tensorflow.org's guides and tutorials, whose
    # repository publishes its notebook tools under this name): it shows the API as users write it.
    "tensorflow-docs": "TensorFlow",
}
# `setup(name="...")`, or `setup(name=NAME)` with `NAME = "..."` at the top of setup.py.
_SETUP_PY_NAME = re.compile(
    r"""\bsetup\s*\((?:[^()]|\([^()]*\))*?\bname\s*=\s*(?:["'](?P<name>[\w.-]{1,100})["']|(?P<constant>[A-Za-z_]\w{0,99})\b)"""
)
_SETUP_PY_CONSTANT = r"""^{constant}\s*=\s*["'](?P<name>[\w.-]{{1,100}})["']\s*(?:#.*)?$"""
_QUOTE_STYLES = ("single", "double")


def project_root(path: Path) -> Path | None:
    """The root of the project `path` (a file or folder) belongs to, found as ruff finds it: the
    nearest folder at or above it that holds a pyproject.toml or a .git; None when there is none."""
    directory = Path(os.path.realpath(path))  # (not resolve(): a symbolic link loop must not raise)
    if not directory.is_dir():
        directory = directory.parent
    for folder in (directory, *directory.parents):
        if (folder / "pyproject.toml").is_file() or (folder / ".git").exists():
            return folder
    return None


def parse_version(text: str) -> tuple[int, int]:
    """`"2.1"` -> (2, 1); raises ValueError for anything else."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)(\.\d+)?\s*", text)
    if match is None:
        raise ValueError(f"not a MAJOR.MINOR version: {text!r}")
    return int(match.group(1)), int(match.group(2))


def torch_lower_bound(requirements: Iterable[str]) -> tuple[int, int] | None:
    """The lowest torch version the requirement lines allow (None: no lower bound among them)."""
    bounds = []
    for line in requirements:
        match = _TORCH_REQUIREMENT.match(line)
        if match is None or re.match(r"^\s*torch[\w.-]", line, re.IGNORECASE):  # torchvision, torch-xla
            continue
        for bound in _LOWER_BOUND.finditer(match.group("specs")):
            bounds.append((int(bound.group("major")), int(bound.group("minor"))))
    return max(bounds) if bounds else None


def tensorflow_lower_bound(requirements: Iterable[str]) -> tuple[int, int] | None:
    """The lowest TensorFlow version the requirement lines allow (None: no lower bound among them)."""
    bounds = []
    for line in requirements:
        match = _TENSORFLOW_REQUIREMENT.match(line.strip())
        if match is None:
            continue  # (tensorflow-datasets, tensorflow-addons: other packages)
        for bound in _LOWER_BOUND.finditer(match.group("specs")):
            bounds.append((int(bound.group("major")), int(bound.group("minor"))))
    return max(bounds) if bounds else None


def lightning_lower_bound(requirements: Iterable[str]) -> tuple[int, int] | None:
    """The lowest Lightning version (`lightning`, `pytorch-lightning`, `pytorch_lightning`: one
    numbering) the requirement lines allow (None: no lower bound among them)."""
    bounds = []
    for line in requirements:
        match = _LIGHTNING_REQUIREMENT.match(line.strip())
        if match is None:
            continue  # (lightning-bolts, lightning-utilities: other packages)
        for bound in _LOWER_BOUND.finditer(match.group("specs")):
            bounds.append((int(bound.group("major")), int(bound.group("minor"))))
    return max(bounds) if bounds else None


def facts_from(pyproject: dict[str, Any], directory: Path | None) -> ProjectFacts:
    """The facts of a project from its parsed pyproject.toml (and requirement files in `directory`).
    The tables read here belong to other tools (ruff, black, the packaging metadata): a value of
    another shape than theirs says nothing, and is passed over as if absent."""
    line_length = line_length_from(pyproject, directory)
    project = _table(pyproject, "project")
    requirements = _strings(project.get("dependencies"))
    for group in _table(project, "optional-dependencies").values():
        requirements.extend(_strings(group))
    documented, documented_in = None, None
    documented_tf, documented_tf_in = None, None
    if directory is not None:
        for path in sorted(directory.glob("requirements*.txt")):
            requirements.extend(_lines(path))
        requirements.extend(_lines(directory / "setup.cfg"))
        requirements.extend(
            m["requirement"] for m in _QUOTED_REQUIREMENT.finditer("\n".join(_lines(directory / "setup.py")))
        )
        for name in ("environment.yml", "environment.yaml"):
            requirements.extend(_conda_requirements(_lines(directory / name)))
        for source, names in _TORCH_DOCUMENTS:
            version = documented_torch(line for name in names for line in _lines(directory / name))
            if version is not None and (documented is None or version < documented):
                documented, documented_in = version, source
        pages = [(source, [directory / name for name in names]) for source, names in _TENSORFLOW_DOCUMENTS]
        for source, lines in [
            *((s, [line for p in paths for line in _lines(p)]) for s, paths in pages),
            *_docs_pages(directory),
        ]:
            version = documented_version(_DOCUMENTED_TENSORFLOW, lines)
            if version is not None and (documented_tf is None or version < documented_tf):
                documented_tf, documented_tf_in = version, source
    target = torch_lower_bound(requirements)
    # A requirement says it outright: the README's versions matter only where none does.
    if target is not None:
        documented, documented_in = None, None
    target_tf = tensorflow_lower_bound(requirements)
    if target_tf is not None:
        documented_tf, documented_tf_in = None, None
    return ProjectFacts(
        line_length,
        target,
        target_tf,
        documented,
        documented_in,
        documented_tf,
        documented_tf_in,
        lightning_lower_bound(requirements),
        framework_from(pyproject, directory),
        quote_style_from(pyproject, directory),
        layout_from(pyproject, directory),
    )


def framework_from(pyproject: dict[str, Any], directory: Path | None) -> str | None:
    """The framework the project is, by its distribution name (the module's docstring), or None."""
    name = _table(pyproject, "project").get("name")
    if not isinstance(name, str) and directory is not None:
        name = _ini_files(directory).get(("setup.cfg", "metadata"), {}).get("name")
        if not isinstance(name, str):
            setup_py = "\n".join(_lines(directory / "setup.py"))
            match = _SETUP_PY_NAME.search(setup_py)
            if match is not None and match["constant"] is not None:
                match = re.search(_SETUP_PY_CONSTANT.format(constant=match["constant"]), setup_py, re.MULTILINE)
            name = match["name"] if match is not None else None
    if not isinstance(name, str):
        return None
    return FRAMEWORK_DISTRIBUTIONS.get(re.sub(r"[-_.]+", "-", name.strip()).lower())


def quote_style_from(pyproject: dict[str, Any], directory: Path | None) -> str | None:
    """The quotes the project's formatter writes strings in, "single" or "double"; None where no
    formatter setting says (the module's docstring)."""
    tool = _table(pyproject, "tool")
    ruff = _ruff_format_table(tool, directory)
    ruff_style = ruff.get("quote-style") if ruff.get("quote-style") in _QUOTE_STYLES else None
    black = _table(tool, "black")
    black_style = None if black.get("skip-string-normalization") is True else "double"
    hooks = _formatter_hooks(directory)
    # (yapf keeps the quotes as written: a project it formats may still set them for ruff)
    formatter = next(iter(hooks)) if len(hooks) == 1 else None
    if formatter == "ruff":  # (double unless told otherwise; "preserve" keeps each string's own)
        return ruff_style if "quote-style" in ruff else "double"
    if formatter == "black":
        return black_style
    if ruff_style is not None:
        return ruff_style
    return black_style if "black" in tool else None


def _ruff_format_table(tool: dict[str, Any], directory: Path | None) -> dict[str, Any]:
    """ruff's `[format]` settings: its own files beside pyproject.toml win over `[tool.ruff]`."""
    if directory is not None:
        for name in (".ruff.toml", "ruff.toml"):
            if (directory / name).is_file():
                return _table(_other_tools_toml(directory / name), "format")
    return _table(_table(tool, "ruff"), "format")


def _docs_pages(directory: Path) -> list[tuple[str, list[str]]]:
    """The lines of the pages at the top of the project's `docs/` folder (`docs/install.md`), each
    with its name; none when there is no such folder."""
    docs = directory / "docs"
    try:
        names = sorted(p.name for p in docs.iterdir() if p.suffix in (".md", ".rst", ".txt"))
    except OSError:
        return []
    return [(f"docs/{name}", _lines(docs / name)) for name in names[:_DOCS_PAGES_READ]]


# Each formatter's line length where the project sets none (yapf's: by the style it is based on).
_FORMATTER_DEFAULTS = {"ruff": DEFAULT_LINE_LENGTH, "black": DEFAULT_LINE_LENGTH, "yapf": 79}
_YAPF_STYLE_LIMITS = {"pep8": 79, "google": 80, "facebook": 80, "yapf": 80}
# A pre-commit hook that formats (`- id: ruff-format`); a commented-out one does not match.
_FORMATTER_HOOK = re.compile(
    r"^[ \t]*(?:-[ \t]*)?id:[ \t]*[\"']?(?P<hook>ruff-format|black-jupyter|black|yapf)[\"']?[ \t]*(?:#.*)?$",
    re.MULTILINE,
)


def line_length_from(pyproject: dict[str, Any], directory: Path | None) -> int:
    """The line length the project's formatter keeps, from its parsed pyproject.toml and the tools'
    files in `directory` (the order: the module's docstring).  A value that is not a positive
    whole number says nothing, as does a file that cannot be read or parsed."""
    tool = _table(pyproject, "tool")
    ini = _ini_files(directory)
    declared: dict[str, int | None] = {
        "ruff": _ruff_line_length(tool, directory),
        "black": _positive(_table(tool, "black").get("line-length")),
        "yapf": None,
    }
    yapf = _yapf_tables(tool, ini)
    for table in yapf:
        declared["yapf"] = _positive(table.get("column_limit"))
        if declared["yapf"] is not None:
            break
    configured = {
        "ruff": declared["ruff"] is not None or "ruff" in tool or _any_file(directory, ".ruff.toml", "ruff.toml"),
        "black": "black" in tool,
        "yapf": bool(yapf),
    }
    defaults = dict(_FORMATTER_DEFAULTS)
    defaults["yapf"] = _YAPF_STYLE_LIMITS.get(_yapf_style(yapf), defaults["yapf"])

    hooks = _formatter_hooks(directory)
    if len(hooks) == 1:
        (formatter,) = hooks
        return declared[formatter] or defaults[formatter]
    for formatter in ("ruff", "black", "yapf"):
        value = declared[formatter]
        if value is not None:
            return value
    for formatter in ("ruff", "black", "yapf"):
        if configured[formatter]:
            return defaults[formatter]
    linters: list[dict[str, Any] | None] = [
        ini.get((".flake8", "flake8")),
        ini.get(("setup.cfg", "flake8")),
        ini.get(("tox.ini", "flake8")),
        _table(tool, "flake8"),
        ini.get(("setup.cfg", "pycodestyle")),
        ini.get(("tox.ini", "pycodestyle")),
        _table(_table(tool, "pylint"), "format"),
        _table(_table(tool, "pylint"), "FORMAT"),
        ini.get((".pylintrc", "format")),
        ini.get(("pylintrc", "format")),
    ]
    for linter in linters:
        if linter:
            limit = _positive(linter.get("max-line-length", linter.get("max_line_length")))
            if limit is not None:
                return limit
    return DEFAULT_LINE_LENGTH


def layout_from(pyproject: dict[str, Any], directory: Path | None) -> str:
    """How fixed lines too long are wrapped (wrap.py's layouts): yapf's where yapf formats the
    project -- its pre-commit configuration runs a `yapf` hook and no other formatter, or it has
    no formatter hook and configures yapf -- in its `pep8` or `google` style; black's otherwise
    (ruff format's and black's own, and the nearest to yapf's `facebook` style, which puts `)`
    back at the start of a line as black does)."""
    hooks = _formatter_hooks(directory)
    yapf = _yapf_tables(_table(pyproject, "tool"), _ini_files(directory))
    if hooks - {"yapf"} or not (hooks or yapf) or _yapf_style(yapf) not in ("pep8", "google"):
        return BLACK
    split_before_named_assigns = _yapf_option(yapf, "split_before_named_assigns")
    return YAPF_FILLED if str(split_before_named_assigns).strip().lower() == "false" else YAPF


def _yapf_tables(tool: dict[str, Any], ini: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """yapf's settings, in the order yapf reads its files: `.style.yapf`, `setup.cfg [yapf]`, `[tool.yapf]`."""
    tables = [
        ini.get((".style.yapf", "style")),
        ini.get(("setup.cfg", "yapf")),
        _table(tool, "yapf") if "yapf" in tool else None,
    ]
    return [table for table in tables if table is not None]


def _yapf_option(tables: list[dict[str, Any]], name: str) -> Any:
    """A yapf setting from the first of its files that sets it (yapf reads names in either case); None if none does."""
    for table in tables:
        for key, value in table.items():
            if isinstance(key, str) and key.lower() == name:
                return value
    return None


def _yapf_style(tables: list[dict[str, Any]]) -> str:
    """The style yapf's settings are based on (`based_on_style`; yapf's default `pep8`)."""
    style = _yapf_option(tables, "based_on_style")
    return "pep8" if style is None else str(style).strip().lower()


def _formatter_hooks(directory: Path | None) -> set[str]:
    """The formatters the project's pre-commit configuration runs: "ruff", "black", "yapf"."""
    return {m["hook"].removesuffix("-jupyter").removesuffix("-format") for m in _pre_commit_hooks(directory)}


def _positive(value: Any) -> int | None:
    """A line length as a tool writes it (`100`, or `"100"` in an INI file); None for anything else."""
    if isinstance(value, str) and re.fullmatch(r"\s*\d{1,6}\s*", value):
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _any_file(directory: Path | None, *names: str) -> bool:
    return directory is not None and any((directory / name).is_file() for name in names)


def _ruff_line_length(tool: dict[str, Any], directory: Path | None) -> int | None:
    """ruff's `line-length`: its own files beside pyproject.toml win over `[tool.ruff]`, as in ruff."""
    if directory is not None:
        for name in (".ruff.toml", "ruff.toml"):
            if (directory / name).is_file():
                return _positive(_other_tools_toml(directory / name).get("line-length"))
    return _positive(_table(tool, "ruff").get("line-length"))


def _other_tools_toml(path: Path) -> dict[str, Any]:
    """Another tool's TOML file (ruff's), or {} when it cannot be read or parsed: it gives no
    hint then, and is not gpulint's to report (config.py reads gpulint's own configuration)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib

    try:
        data = tomllib.loads(
            read_regular_file(path, _REQUIREMENTS_MAX_BYTES, "the size of a TOML file").decode("utf-8")
        )
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _ini_files(directory: Path | None) -> dict[tuple[str, str], dict[str, Any]]:
    """The sections of the INI-style files linters and yapf read (`setup.cfg`, `tox.ini`, `.flake8`,
    `.style.yapf`, `.pylintrc`, `pylintrc`), by (file, section name in lower case)."""
    sections: dict[tuple[str, str], dict[str, Any]] = {}
    if directory is None:
        return sections
    for name in ("setup.cfg", "tox.ini", ".flake8", ".style.yapf", ".pylintrc", "pylintrc"):
        lines = _lines(directory / name)
        if not lines:
            continue
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string("\n".join(lines))
        except configparser.Error:
            continue
        for section in parser.sections():
            sections.setdefault((name, section.lower()), dict(parser.items(section)))
    return sections


def _pre_commit_hooks(directory: Path | None) -> list[re.Match[str]]:
    if directory is None:
        return []
    return list(_FORMATTER_HOOK.finditer("\n".join(_lines(directory / ".pre-commit-config.yaml"))))


def _table(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _lines(path: Path) -> list[str]:
    """The lines of a project file beside the pyproject.toml; none when it is absent or cannot be
    read (it then says nothing about the versions)."""
    try:
        text = read_regular_file(path, _REQUIREMENTS_MAX_BYTES, "the size of a requirements file")
    except OSError:
        return []
    return text.decode("utf-8", errors="replace").splitlines()


def _conda_requirements(lines: Iterable[str]) -> list[str]:
    """environment.yml's dependencies as requirement lines: `- pytorch=1.8.1` -> `torch==1.8.1`."""
    found = []
    for line in lines:
        match = _CONDA_REQUIREMENT.match(line)
        if match is not None:
            spec = match["spec"].strip()
            if re.match(r"=[^=]", spec):
                spec = "=" + spec
            found.append(f"{match['name'].lower()}{spec}")
    return found


def documented_torch(lines: Iterable[str]) -> tuple[int, int] | None:
    """The lowest PyTorch version the lines of a README (or INSTALL.md, setup.py) name (None: they
    name none).  A line about older releases ("Binaries of older versions are also provided for
    PyTorch 1.4.0") names what the project once shipped, not what it runs on.  A build from source
    at a release tag (`git clone -b v2.1.0 https://github.com/pytorch/pytorch.git`) names one too."""
    lines = list(lines)
    named = [documented_version(pattern, lines) for pattern in (_DOCUMENTED_TORCH, _CLONED_TORCH)]
    found = [version for version in named if version is not None]
    return min(found) if found else None


def documented_version(pattern: re.Pattern[str], lines: Iterable[str]) -> tuple[int, int] | None:
    """The lowest version `pattern` finds in prose lines, passing over lines about older releases."""
    versions = [
        (int(m["major"]), int(m["minor"]))
        for line in lines
        if not _OLDER_RELEASES.search(line)
        for m in pattern.finditer(line)
    ]
    return min(versions) if versions else None


def folder_documented_torch(path: str) -> tuple[tuple[int, int], str] | None:
    """The lowest PyTorch a README in a folder between the file at `path` and its project's top
    names (a sub-project of a repository of examples that documents its own build: "git clone -b
    v2.1.0 .../pytorch"), and which README; None when none names one.  The top's own README is
    read with the project's facts (`facts_from`)."""
    folder = Path(os.path.realpath(path)).parent
    found: tuple[tuple[int, int], str] | None = None
    for _ in range(_FOLDERS_UP):
        if is_project_top(folder) or folder.parent == folder:
            break
        version = _readme_torch(str(folder))
        if version is not None and (found is None or version < found[0]):
            found = version, f"`{folder.name}/` README"
        folder = folder.parent
    return found


def is_project_top(folder: Path) -> bool:
    """Whether `folder` is the top of a project: it holds a pyproject.toml, a .git or a setup.py."""
    return any((folder / name).exists() for name in ("pyproject.toml", ".git", "setup.py"))


@lru_cache(maxsize=256)
def _readme_torch(folder: str) -> tuple[int, int] | None:
    return documented_torch(line for name in _READMES for line in _lines(Path(folder) / name))


# What a folder's README says when the folder takes no changes.
_FROZEN = re.compile(
    r"(will\s+)?not\s+accept\s+(any\s+)?(further\s+)?changes|no\s+(further\s+)?changes\s+(will\s+be|are)\s+accepted"
    r"|(no\s+longer|not)\s+(actively\s+)?maintained|(will\s+not|won'?t)\s+be\s+updated",
    re.IGNORECASE,
)
_README_MAX_BYTES = 2**20


def frozen_folder(path: str) -> str | None:
    """Why the file at `path` takes no changes, or None: a folder between it and the project's top
    (not the top itself: a whole project that is unmaintained is still the one the user asked to
    fix) whose README says so ("will not accept any changes", "no longer maintained", "will not be
    updated") -- a project's frozen `deprecated/` code, where a maintainer closes any change."""
    folder = Path(path).resolve().parent
    for _ in range(_FOLDERS_UP):
        if is_project_top(folder) or folder.parent == folder:
            return None
        if _says_frozen(str(folder)):
            return f"the README of `{folder.name}/` says it takes no changes"
        folder = folder.parent
    return None


@lru_cache(maxsize=256)
def _says_frozen(folder: str) -> bool:
    for name in _READMES:
        try:
            text = read_regular_file(Path(folder) / name, _README_MAX_BYTES, "the size of a README")
        except OSError:
            continue
        if _FROZEN.search(text.decode("utf-8", errors="replace")):
            return True
    return False
