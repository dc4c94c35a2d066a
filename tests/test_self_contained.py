"""The repository stands alone: a clone of HEAD in any folder has everything its docs link to and its
tests read, and no tracked file points outside it (a design-notes file, a sibling folder, a machine
path, an issue tracker's numbers)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

# What a file of a clone must not mention: another checkout's folders, a path on one machine, the
# design notes that are not in the repository (by name or section sign), an issue tracker's numbers.
# Each pattern is spelled in pieces, so this file does not contain what it looks for and is checked
# like every other file.
_NOTES = "DESIGN"
OUTSIDE_REFERENCES = re.compile(
    "|".join(
        [
            re.escape("../" + "shared") + r"\b",
            re.escape("/" + "work/"),
            rf"\b{_NOTES}\.md\b",
            rf"\b{_NOTES}\s*§",
            r"\b(?i:iss" r"ue)\s*#?\d+",
        ]
    )
)

_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    try:
        _git("rev-parse", "HEAD", cwd=ROOT)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: nothing to clone")
    target = tmp_path_factory.mktemp("elsewhere") / "gpulint"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(target)], check=True, capture_output=True)
    return target


def _tracked_texts(root: Path):
    for name in _git("ls-files", "-z", cwd=root).split("\0"):
        if not name:
            continue
        try:
            yield name, (root / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary files; a submodule entry


def test_no_tracked_file_points_outside_the_repository(clone):
    found: dict[str, list[str]] = {}
    for name, text in _tracked_texts(clone):
        for number, line in enumerate(text.splitlines(), start=1):
            match = OUTSIDE_REFERENCES.search(line)
            if match:
                found.setdefault(name, []).append(f"{name}:{number}: {match.group(0)!r} in {line.strip()[:100]!r}")
    assert not found, "\n".join(line for _, lines in sorted(found.items()) for line in lines)


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def _anchors(markdown: str) -> set[str]:
    return {github_anchor(h) for h in _HEADING.findall(_FENCE.sub("", markdown))}


def test_docs_relative_links_resolve_in_the_clone(clone):
    broken = []
    checked = 0
    for name, text in _tracked_texts(clone):
        if not name.endswith(".md"):
            continue
        page = clone / name
        for target in _LINK.findall(_FENCE.sub("", text)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto:
                continue
            path_part, _, fragment = target.partition("#")
            destination = (page.parent / path_part).resolve() if path_part else page
            checked += 1
            if clone.resolve() not in (destination, *destination.parents):
                broken.append(f"{name}: {target} leaves the repository")
            elif not destination.exists():
                broken.append(f"{name}: {target} does not exist")
            elif fragment and destination.suffix == ".md" and fragment not in _anchors(destination.read_text("utf-8")):
                broken.append(f"{name}: {target}: no heading #{fragment} there")
    assert checked > 40, checked  # the README's rules table alone has 33 links
    assert not broken, "\n".join(broken)


def test_github_anchor_matches_githubs_slugs():
    assert github_anchor("Where the time goes") == "where-the-time-goes"
    assert github_anchor("`gpulint profile [OPTIONS] -- python train.py ARGS...`") == (
        "gpulint-profile-options----python-trainpy-args"
    )


@pytest.mark.slow
def test_tests_pass_from_a_clone_in_another_folder(clone):
    """The tests that read data files (the vendored schemas, the fixtures, the generated rule docs)
    pass when run from the clone, importing the clone's gpulint."""
    env = {**os.environ, "PYTHONPATH": str(clone), "PYTHONDONTWRITEBYTECODE": "1"}
    where = subprocess.run(
        [sys.executable, "-c", "import gpulint, tests.helpers as h; print(gpulint.__file__); print(h.ROOT)"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(p).resolve().is_relative_to(clone.resolve()) for p in where), where
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/integrations/test_formats.py",
            "tests/test_rule_catalog.py",
        ],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", run.stdout) and " skipped" not in run.stdout, run.stdout[-500:]
