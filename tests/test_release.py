"""Versions and releases (docs/releasing.md): the version is written once, the docs pin no tag (a
commit SHA, which every copy of the repository has), the changelog has a section for the version,
and scripts/release.py moves the version and the changelog to a new one."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys

import pytest

from gpulint import __version__
from tests.helpers import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def _release_script():
    spec = importlib.util.spec_from_file_location("release", ROOT / "scripts" / "release.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


release = _release_script()


def test_the_version_is_written_once():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "gpulint.__version__"}
    assert release.current_version(ROOT) == __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_no_document_pins_a_release_tag():
    """pre-commit and the Action fail on a `rev:` that does not exist where they fetch, and a tag
    exists only where it was pushed (a clone made with --no-tags, a mirror or an export has none):
    what users copy pins a commit SHA.  docs/releasing.md shows tags as the release procedure's."""
    shown = [ROOT / "README.md", ROOT / ".pre-commit-hooks.yaml", *sorted((ROOT / "docs").glob("*.md"))]
    pinned = {
        path.relative_to(ROOT).as_posix(): re.findall(r"(?:rev: |gpulint/gpulint@)v\d[\w.]*", path.read_text("utf-8"))
        for path in shown
        if path.name != "releasing.md"
    }
    assert not {path: pins for path, pins in pinned.items() if pins}
    assert "rev: COMMIT-SHA" in (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")


def test_the_changelog_has_unreleased_and_the_current_release():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in text
    assert re.search(rf"^## \[{re.escape(__version__)}\] - \d{{4}}-\d\d-\d\d$", text, re.MULTILINE)
    assert re.search(rf"^\[{re.escape(__version__)}\]: https://", text, re.MULTILINE)


@pytest.fixture
def checkout(tmp_path):
    """The files a release changes, copied: the script runs on them, not on this checkout."""
    for name in ("gpulint/__init__.py", "CHANGELOG.md", "README.md", ".pre-commit-hooks.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    return tmp_path


def _next_minor(version: str) -> str:
    major, minor, _ = (int(part) for part in version.split("."))
    return f"{major}.{minor + 1}.0"


def test_the_release_script_moves_everything_to_the_new_version(checkout, capsys):
    new = _next_minor(__version__)
    unreleased = (checkout / "CHANGELOG.md").read_text().split("## [Unreleased]")[1].split("\n## [")[0].strip()
    assert release.main([new, "--root", str(checkout), "--date", "2030-01-02"]) == 0
    assert f'__version__ = "{new}"' in (checkout / "gpulint/__init__.py").read_text()
    changelog = (checkout / "CHANGELOG.md").read_text()
    assert f"## [Unreleased]\n\n## [{new}] - 2030-01-02\n\n{unreleased}\n\n## [{__version__}]" in changelog
    assert f"[Unreleased]: https://github.com/gpulint/gpulint/compare/v{new}...HEAD" in changelog
    assert f"[{new}]: https://github.com/gpulint/gpulint/compare/v{__version__}...v{new}" in changelog
    assert f"[{__version__}]: https://" in changelog
    printed = capsys.readouterr().out
    assert f"git tag -a v{new}" in printed and f"git push origin main v{new}" in printed
    assert f"git ls-remote --tags origin v{new}" in printed
    # Released: the next release needs its own entries first.
    assert release.main([_next_minor(new), "--root", str(checkout)]) == 2
    assert "Unreleased section of CHANGELOG.md is empty" in capsys.readouterr().err


@pytest.mark.parametrize("version, reason", [("1.0", "MAJOR.MINOR.PATCH"), ("v9.0.0", "MAJOR.MINOR.PATCH")])
def test_the_release_script_refuses_a_malformed_version(checkout, capsys, version, reason):
    assert release.main([version, "--root", str(checkout)]) == 2
    assert reason in capsys.readouterr().err


def test_the_release_script_refuses_a_version_not_above_the_current_one(checkout, capsys):
    before = {path: path.read_bytes() for path in checkout.rglob("*") if path.is_file()}
    assert release.main([__version__, "--root", str(checkout)]) == 2
    assert "is not above the current version" in capsys.readouterr().err
    assert before == {path: path.read_bytes() for path in checkout.rglob("*") if path.is_file()}


def test_a_dry_run_writes_nothing(checkout, capsys):
    before = {path: path.read_bytes() for path in checkout.rglob("*") if path.is_file()}
    assert release.main([_next_minor(__version__), "--root", str(checkout), "--dry-run"]) == 0
    assert capsys.readouterr().out == ("Would change: CHANGELOG.md, gpulint/__init__.py\n")
    assert before == {path: path.read_bytes() for path in checkout.rglob("*") if path.is_file()}
