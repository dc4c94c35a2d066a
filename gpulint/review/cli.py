"""The `gpulint review` command: lint what a change touches, comment on the lines it adds.

    gpulint review [--base REF] [PATHS] [--format text|json] [--post [--fallback annotations]]

Exit codes: 0 no finding on an added line (or --exit-zero), 1 findings, 2 usage, git or API errors.
A review that cannot be posted (the token may not write: a pull request from a fork) is an error,
unless `--fallback annotations` reports the comments as GitHub annotations instead (the exit code
then follows the findings), or `--exit-zero` turns it into a warning.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.cli import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, error, warning
from gpulint.cli.check import resolve_settings
from gpulint.cli.options import add_selection_options
from gpulint.redaction import redact


class ReviewError(Exception):
    """A review that cannot be made as asked (a path outside the repository): one line, exit 2."""


@dataclass
class ReviewPlan:
    comments: list  # list[Comment] on added lines, in path/line order
    files_linted: int
    errors: list[str]
    warnings: list[str] = field(default_factory=list)  # files left out on purpose (links)


def build_review(base: str | None, paths: list[str], settings) -> ReviewPlan:
    """Lint the changed Python files and keep the findings on added lines as comments.

    A changed file is read as the lint walk reads one: a symbolic link is not followed (git stores
    the link, not its target, so a link a change adds may point at a secret anywhere on the
    runner), and only a regular file within `max-file-size` is read, once; the comments quote
    those bytes and nothing read again by name."""
    from gpulint.linter.engine import Linter
    from gpulint.linter.path_patterns import GitIgnore
    from gpulint.linter.reporters.sarif import fingerprints
    from gpulint.linter.run.files import read_source
    from gpulint.linter.run.outcome import RunOptions, read_problem
    from gpulint.linter.run.process import display_path, process_read_file
    from gpulint.review.comments import make_comments
    from gpulint.review.diff import changed_lines, default_base, repo_root

    root = repo_root()
    cwd = Path.cwd()
    # pathspecs for git are relative to where git runs: the repository root
    specs = []
    for p in paths:
        resolved = (cwd / p).resolve()
        try:
            specs.append(resolved.relative_to(root.resolve()).as_posix() or ".")
        except ValueError:
            raise ReviewError(f"{p} is outside the repository {root}") from None
    diffs = changed_lines(base or default_base(), specs, cwd=root)
    exclude = GitIgnore(settings.exclude) if settings.exclude else None
    linter = Linter(settings)
    options = RunOptions(with_edits=True)
    plan = ReviewPlan([], 0, [])
    for rel in sorted(diffs):
        diff = diffs[rel]
        absolute = root / rel
        # Notebooks are left out: their finding rows are not the rows of the .ipynb file's diff.
        if not rel.endswith(".py") or not diff.added:
            continue
        if exclude is not None:
            try:
                if exclude.match_file(absolute.resolve().relative_to(settings.root.resolve()).as_posix()):
                    continue
            except ValueError:
                pass
        name = display_path(absolute)
        try:
            if os.path.islink(absolute):
                plan.warnings.append(f"{name}: symbolic link; not followed, not reviewed")
                continue
            if not _is_utf8(rel):
                plan.warnings.append(f"{name}: the name is not UTF-8, so a review comment cannot name it; not reviewed")
                continue
            source = read_source(absolute, settings.size_limit(absolute))
        except FileNotFoundError:
            continue  # deleted from the working tree since the commit
        except OSError as exc:
            plan.errors.append(read_problem(name, exc))
            continue
        outcome = process_read_file(absolute, name, source, linter, options)
        plan.files_linted += 1
        plan.errors.extend(outcome.errors)
        findings = [f for f in outcome.result.findings if f.location.row in diff.added]
        if not findings:
            continue
        # The lines as read above, split as the SARIF reporter splits them for its fingerprints.
        lines = tuple(source.decode("utf-8", errors="replace").splitlines())
        # fingerprints read the file through the finding's path; hash the repository path
        readable = [_with_path(f, str(absolute)) for f in findings]
        prints = fingerprints(readable, hash_path=_always(rel))
        pairs = [(_with_path(f, rel), fingerprint) for f, fingerprint in zip(readable, prints, strict=True)]
        fixed = _fixed_edits(linter, source, name)
        plan.comments.extend(make_comments(rel, pairs, lines, diff.added, fixed))
    return plan


def _fixed_edits(linter, source: bytes, name: str) -> Callable[[bool], list | None]:
    """`fixed_file_edits` for `source`, computed when first asked for (only lines with several
    fixes need them), once per choice of fixes (safe, or unsafe too)."""
    from gpulint.linter.fix.line_fixes import fixed_file_edits

    done: dict[bool, list | None] = {}

    def edits(unsafe: bool) -> list | None:
        if unsafe not in done:
            done[unsafe] = fixed_file_edits(linter, source, name, unsafe)
        return done[unsafe]

    return edits


def _is_utf8(name: str) -> bool:
    """Whether a path git printed is UTF-8 (bytes that are not were kept as lone surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _always(path: str) -> Callable[[object], str]:
    """A `hash_path` that names every finding's file `path`."""
    return lambda _finding: path


def _with_path(finding, path: str):
    from dataclasses import replace

    return replace(finding, path=path)


def review_payload(comments: list, commit_id: str | None) -> dict:
    count = sum(len(comment.findings) for comment in comments)
    body = (
        f"gpulint found {count} problem{'s' if count != 1 else ''} on the lines this pull request adds "
        "that can keep the GPU waiting. Each comment explains why and links to the rule."
    )
    payload = {"event": "COMMENT", "body": body, "comments": [c.payload() for c in comments]}
    if commit_id:
        payload = {"commit_id": commit_id, **payload}
    return payload


def _summary(comments: list) -> str:
    """The text report: one line per comment and its suggestion, every line escaped (a file name or
    a line of the change may hold a newline and a workflow command, or a terminal escape), and none
    that the Actions runner would read as a command (a file named `::error::x.py` opens a line)."""
    from gpulint.linter.printable import no_workflow_commands, printable

    lines = []
    for comment in comments:
        for finding, _fingerprint in comment.findings:
            lines.append(
                f"{comment.path}:{finding.location.row}:{finding.location.column}: {finding.code} {finding.message}"
            )
        marker = "```suggestion"
        if marker in comment.body:
            block = comment.body.split(marker, 1)[1].split("\n```", 1)[0].strip("\n")
            where = (
                f"lines {comment.start_line}-{comment.line}"
                if comment.start_line != comment.line
                else f"line {comment.line}"
            )
            lines.append(f"    suggestion for {where}:")
            lines.extend(f"    | {text}" for text in block.splitlines())
    count = len(comments)
    lines.append(
        f"{count} comment{'s' if count != 1 else ''} on added lines." if count else "No findings on added lines."
    )
    return no_workflow_commands("\n".join(printable(line) for line in lines))


def add_review(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="*", type=Path, metavar="PATH", help="Limit the review to these files or directories."
    )
    parser.add_argument(
        "--base",
        metavar="REF",
        help="Compare with the merge base of this ref "
        "(default: origin/$GITHUB_BASE_REF in Actions, else the upstream branch).",
    )
    parser.add_argument(
        "--post", action="store_true", help="Post the review to the pull request with the GitHub REST API."
    )
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="Without --post: text (a summary) or json (the review payload).",
    )
    parser.add_argument("--repo", metavar="OWNER/NAME", help="owner/name (default: GITHUB_REPOSITORY).")
    parser.add_argument(
        "--pr", type=int, metavar="NUMBER", help="Pull request number (default: from GITHUB_EVENT_PATH)."
    )
    add_selection_options(parser)
    # Local rules are the project's code, and a review runs on a change someone else wrote (a pull
    # request): they run only when the workflow says so (docs/local-rules.md).
    parser.add_argument(
        "--allow-local-rules",
        action="store_true",
        help="Load the rule modules the configuration names in `local-rules` (project code: only for a "
        "trusted base, never on a pull request from a fork).",
    )
    parser.add_argument(
        "--exit-zero",
        action="store_true",
        help="Exit 0 even when findings are on added lines, or when the review cannot be posted (with a warning).",
    )
    parser.add_argument(
        "--fallback",
        choices=("annotations", "none"),
        default="none",
        help="With --post, when the review cannot be posted: `annotations` prints the comments as GitHub "
        "annotations instead; `none` fails.",
    )
    parser.set_defaults(run=review)


def review(options: argparse.Namespace) -> int:
    """Review a change: comment on the findings in the lines it adds (a pull-request review)."""
    from gpulint.cli.check import local_rules_not_loaded
    from gpulint.linter.config import ConfigError
    from gpulint.review.diff import GitError, git

    path_args = [str(p) for p in options.paths]
    try:
        start = [Path(p) for p in path_args] or [Path(".")]
        settings = resolve_settings(start, options, load_local_rules=options.allow_local_rules)
        for note in settings.notes:
            warning(note)
        if settings.local_rules_skipped:
            warning(local_rules_not_loaded(settings, "no --allow-local-rules"))
        plan = build_review(options.base, path_args, settings)
    except (ConfigError, GitError, ReviewError) as exc:
        error(str(exc))
        return EXIT_ERROR
    for line in plan.errors:
        error(line)
    for line in plan.warnings:
        warning(line)
    code = EXIT_FINDINGS if plan.comments and not options.exit_zero else EXIT_CLEAN
    if plan.errors:
        code = EXIT_ERROR

    if not options.post:
        if options.format == "json":
            from gpulint.linter.printable import json_without_workflow_commands

            print(json_without_workflow_commands(json.dumps(review_payload(plan.comments, None), indent=2)))
        else:
            print(_summary(plan.comments))
        return code

    from gpulint.review.comments import existing_keys, is_duplicate
    from gpulint.review.github import GitHub, GitHubError, pull_request_from_env

    try:
        pull = pull_request_from_env(options.repo, options.pr)
    except GitHubError as exc:  # no pull request to post to: a usage error
        error(str(exc))
        return EXIT_ERROR
    try:
        client = GitHub(os.environ.get("GITHUB_TOKEN", ""), os.environ.get("GITHUB_API_URL"))
        fresh = plan.comments
        if fresh:
            markers, places = existing_keys(client.review_comments(pull))
            fresh = [c for c in plan.comments if not is_duplicate(c, markers, places)]
        if not fresh:
            print(
                f"Nothing new to post ({sum(len(c.findings) for c in plan.comments)} finding(s) on added lines "
                "already commented).",
                file=sys.stderr,
            )
            return code
        commit = pull.head_sha or git(["rev-parse", "HEAD"]).strip()
        created = client.create_review(pull, review_payload(fresh, commit))
    except GitHubError as exc:
        return _not_posted(str(exc), plan.comments, options.fallback, options.exit_zero, code)
    except GitError as exc:
        error(str(exc))
        return EXIT_ERROR
    from gpulint.linter.printable import printable  # (not at import: `review --help` stays light)

    # The address comes from the server: masked and escaped like every other line it can shape.
    where = printable(redact(str(created.get("html_url") or f"{pull.repository}#{pull.number}")))
    skipped = len(plan.comments) - len(fresh)
    note = f" ({skipped} already there)" if skipped else ""
    print(f"Posted a review with {len(fresh)} comment{'s' if len(fresh) != 1 else ''}{note}: {where}", file=sys.stderr)
    return code


def _not_posted(reason: str, comments: list, fallback: str, exit_zero: bool, code: int) -> int:
    """The exit code when the review could not be posted (the token may not write, the API refused
    or could not be reached), after reporting the comments another way if asked to."""
    if fallback == "annotations":
        from gpulint.linter.reporters.github import format_finding

        findings = [finding for comment in comments for finding, _fingerprint in comment.findings]
        for finding in findings:
            print(format_finding(finding))
        count = len(findings)
        warning(
            f"could not post the review: {reason}; "
            f"reported {count} finding{'s' if count != 1 else ''} on added lines as annotations instead"
        )
        return code
    if exit_zero:
        warning(f"could not post the review: {reason}")
        return EXIT_CLEAN if code != EXIT_ERROR else code
    error(reason)
    return EXIT_ERROR
