"""Which lines a change adds: `git diff` of the working tree against the merge base of a ref."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.child_processes import GitRefused, run_git

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,(?P<count>\d+))? @@")


class GitError(Exception):
    """A git problem, as one line for the user."""


@dataclass
class FileDiff:
    path: str  # relative to the repository root, with forward slashes
    added: set[int] = field(default_factory=set)  # new-side rows the change adds
    commentable: set[int] = field(default_factory=set)  # new-side rows in the diff (added or context)


def git(args: list[str], cwd: Path | None = None) -> str:
    """The output of `git ARGS` (run_git: the repository's settings that run commands are off);
    GitError when it fails."""
    try:
        completed = run_git(args, cwd)
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None
    except GitRefused as exc:
        raise GitError(str(exc)) from None
    if completed.returncode != 0:
        detail = (completed.stderr.strip().splitlines() or ["failed"])[-1]
        raise GitError(f"git {args[0]}: {detail}")
    return completed.stdout


def repo_root(cwd: Path | None = None) -> Path:
    try:
        return Path(git(["rev-parse", "--show-toplevel"], cwd).strip())
    except GitError:
        raise GitError("not inside a git repository (gpulint review compares against a base commit)") from None


def default_base() -> str:
    """The base to compare with: the pull request's base branch in GitHub Actions, else the
    current branch's upstream."""
    base_ref = os.environ.get("GITHUB_BASE_REF")
    if base_ref:
        return f"origin/{base_ref}"
    return "@{upstream}"


def merge_base(ref: str, cwd: Path | None = None) -> str:
    try:
        git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd)
    except GitError:
        hint = " (no upstream branch is set: pass --base REF)" if ref == "@{upstream}" else ""
        raise GitError(f"cannot resolve base {ref!r}{hint}") from None
    try:
        return git(["merge-base", ref, "HEAD"], cwd).strip()
    except GitError:
        raise GitError(
            f"no common ancestor between {ref!r} and HEAD (a shallow clone? fetch with fetch-depth: 0)"
        ) from None


# git's C quoting (quote.c): these letters after a backslash, or three octal digits for a byte.
_C_ESCAPES = {ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12, ord("r"): 13}
_OCTAL = re.compile(rb"[0-7]{3}")


def unquote_git_path(path: str) -> str:
    """A path from a diff header.  git C-quotes a name that holds a control character, a double
    quote or a backslash: `"b/\\303\\274\\"x.py"`.  An octal escape is one byte of the name, and the
    bytes are the name's bytes (UTF-8 as a rule); bytes that are not UTF-8 become lone surrogates,
    as `os.fsdecode` makes them, so the name still opens the file."""
    if len(path) < 2 or not path.startswith('"') or not path.endswith('"'):
        return path
    quoted = path[1:-1].encode("utf-8", "surrogateescape")
    name = bytearray()
    index = 0
    while index < len(quoted):
        byte = quoted[index]
        if byte != ord("\\") or index + 1 == len(quoted):
            name.append(byte)
            index += 1
            continue
        octal = _OCTAL.match(quoted, index + 1)
        if octal:
            name.append(int(octal.group(), 8) & 0xFF)
            index = octal.end()
        else:
            escaped = quoted[index + 1]
            name.append(_C_ESCAPES.get(escaped, escaped))  # \\ and \" stand for themselves
            index += 2
    return bytes(name).decode("utf-8", "surrogateescape")


def parse_diff(text: str) -> dict[str, FileDiff]:
    """New-side added and commentable rows per file of a unified diff (a/ b/ prefixes)."""
    files: dict[str, FileDiff] = {}
    current: FileDiff | None = None
    row = 0
    remaining_new = remaining_old = 0
    for line in text.split("\n"):  # not splitlines(): it also splits at \x85, \u2028 and the like
        if remaining_new or remaining_old:
            assert current is not None, "a hunk is counted only under a +++ b/ header"
            tag = line[:1]
            if tag == "+":
                current.added.add(row)
                current.commentable.add(row)
                row += 1
                remaining_new -= 1
            elif tag == "-":
                remaining_old -= 1
            elif tag == " " or line == "":
                current.commentable.add(row)
                row += 1
                remaining_new -= 1
                remaining_old -= 1
            # "\ No newline at end of file" changes nothing
            continue
        if line.startswith("+++ "):
            name = unquote_git_path(line[4:].rstrip("\t"))
            current = None
            if name != "/dev/null" and name.startswith("b/"):
                current = files.setdefault(name[2:], FileDiff(name[2:]))
        elif line.startswith("@@") and current is not None:
            match = _HUNK.match(line)
            if match:
                row = int(match.group("start"))
                remaining_new = int(match.group("count") or 1)
                old = re.match(r"^@@ -\d+(?:,(\d+))?", line)
                remaining_old = int(old.group(1) or 1) if old and old.group(1) is not None else 1
    return files


def changed_lines(base: str, paths: list[str], cwd: Path | None = None) -> dict[str, FileDiff]:
    """The working tree's changes since the merge base of `base` and HEAD, per file."""
    since = merge_base(base, cwd)
    text = git(
        [
            "diff",
            "--no-color",
            "--unified=3",
            "-M",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            "--diff-filter=AMR",
            since,
            "--",
            *paths,
        ],
        cwd,
    )
    return parse_diff(text)
