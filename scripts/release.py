"""Prepare a release: write the new version everywhere it is written, date the changelog's
Unreleased section, and print the commands that commit and tag it (docs/releasing.md).

    python scripts/release.py 0.2.0            # in a clean checkout of main
    python scripts/release.py 0.2.0 --dry-run  # say what would change, write nothing

What it changes:
- `__version__` in gpulint/__init__.py, the one place the version is written (pyproject.toml reads
  it: `dynamic = ["version"]`);
- CHANGELOG.md: the Unreleased section becomes `## [X.Y.Z] - DATE` under a new, empty Unreleased,
  and the compare links at the bottom follow.
The docs pin gpulint by commit SHA, not by tag (a tag is only where it was pushed): nothing there
names the version.

It refuses a version that is not X.Y.Z, one not above the current version, and an empty
Unreleased section (a release says what changed).  It never commits, tags or pushes: it prints
those commands for a person to run after reading the diff.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = "https://github.com/gpulint/gpulint"

_SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")
_VERSION_LINE = re.compile(r'^__version__ = "([^"]+)"$', re.MULTILINE)
_UNRELEASED = "## [Unreleased]"


class ReleaseError(Exception):
    """Why the release cannot be prepared: printed as one line, exit 2."""


def _version_tuple(version: str) -> tuple[int, int, int]:
    match = _SEMVER.fullmatch(version)
    if match is None:
        raise ReleaseError(f"{version!r} is not a version of the form MAJOR.MINOR.PATCH (0.2.0)")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def current_version(root: Path) -> str:
    match = _VERSION_LINE.search((root / "gpulint" / "__init__.py").read_text(encoding="utf-8"))
    if match is None:
        raise ReleaseError('gpulint/__init__.py has no `__version__ = "X.Y.Z"` line')
    return match[1]


_LINK = re.compile(r"^\[[^\]]+\]: \S+$", re.MULTILINE)


def dated_changelog(text: str, old: str, new: str, date: str) -> str:
    """The changelog with its Unreleased section released as `new`, and the link references at
    its end (`[0.2.0]: .../compare/v0.1.0...v0.2.0`) following."""
    if _UNRELEASED not in text:
        raise ReleaseError(f"CHANGELOG.md has no `{_UNRELEASED}` section")
    links = _LINK.findall(text)
    text = _LINK.sub("", text).rstrip() + "\n"
    head, _, rest = text.partition(_UNRELEASED)
    body, separator, older = rest.partition("\n## [")
    if not body.strip():
        raise ReleaseError("the Unreleased section of CHANGELOG.md is empty: say what changed first")
    text = f"{head}{_UNRELEASED}\n\n## [{new}] - {date}\n\n{body.strip()}\n"
    if separator:
        text += f"\n## [{older.rstrip()}\n"
    links = [
        f"[Unreleased]: {REPOSITORY}/compare/v{new}...HEAD",
        f"[{new}]: {REPOSITORY}/compare/v{old}...v{new}",
        *(link for link in links if not link.startswith("[Unreleased]")),
    ]
    return text + "\n" + "\n".join(links) + "\n"


def prepare(root: Path, new: str, date: str, dry_run: bool = False) -> list[Path]:
    """Write the release's changes (unless `dry_run`); returns the files changed."""
    old = current_version(root)
    if _version_tuple(new) <= _version_tuple(old):
        raise ReleaseError(f"{new} is not above the current version {old}")
    changes: dict[Path, str] = {}
    init = root / "gpulint" / "__init__.py"
    changes[init] = _VERSION_LINE.sub(f'__version__ = "{new}"', init.read_text(encoding="utf-8"), count=1)
    changelog = root / "CHANGELOG.md"
    changes[changelog] = dated_changelog(changelog.read_text(encoding="utf-8"), old, new, date)
    if not dry_run:
        for path, text in changes.items():
            path.write_text(text, encoding="utf-8")
    return sorted(changes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="The new version, MAJOR.MINOR.PATCH (see docs/releasing.md).")
    parser.add_argument("--date", default=datetime.date.today().isoformat(), help="The release date (YYYY-MM-DD).")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)  # (tests run it on a copy)
    parser.add_argument("--dry-run", action="store_true", help="Say what would change; write nothing.")
    options = parser.parse_args(argv)
    try:
        changed = prepare(options.root, options.version, options.date, options.dry_run)
    except ReleaseError as exc:
        print(f"release: error: {exc}", file=sys.stderr)
        return 2
    verb = "Would change" if options.dry_run else "Changed"
    print(f"{verb}: " + ", ".join(str(path.relative_to(options.root)) for path in changed))
    if not options.dry_run:
        tag = f"v{options.version}"
        print(
            "\nRead `git diff`, then:\n"
            f'  git commit -am "Release {options.version}"\n'
            f'  git tag -a {tag} -m "gpulint {options.version}"\n'
            f"  git push origin main {tag}\n"
            f"  git ls-remote --tags origin {tag}   # the tag is where users fetch from"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
