"""The `gpulint review` command: lint what a change touches, comment on the lines it adds.

    gpulint review [--base REF] [PATHS] [--format text|json] [--post]

Exit codes: 0 no finding on an added line (or --exit-zero), 1 findings, 2 usage, git or API errors.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import typer

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


@dataclass
class ReviewPlan:
    comments: list  # list[Comment] on added lines, in path/line order
    files_linted: int
    errors: list[str]


def build_review(base: str | None, paths: list[str], settings) -> ReviewPlan:
    """Lint the changed Python files and keep the findings on added lines as comments."""
    import pathspec

    from gpulint.linter.engine import Linter
    from gpulint.linter.reporters.sarif import fingerprints, source_lines
    from gpulint.linter.run.outcome import RunOptions
    from gpulint.linter.run.process import process_file
    from gpulint.review.comments import make_comment
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
            raise typer.BadParameter(f"{p} is outside the repository {root}") from None
    diffs = changed_lines(base or default_base(), specs, cwd=root)
    exclude = pathspec.GitIgnoreSpec.from_lines(settings.exclude) if settings.exclude else None
    linter = Linter(settings)
    options = RunOptions(with_edits=True)
    comments, errors, linted = [], [], 0
    for rel in sorted(diffs):
        diff = diffs[rel]
        absolute = root / rel
        # Notebooks are left out: their finding rows are not the rows of the .ipynb file's diff.
        if not rel.endswith(".py") or not diff.added or not absolute.is_file():
            continue
        if exclude is not None:
            try:
                if exclude.match_file(absolute.resolve().relative_to(settings.root.resolve()).as_posix()):
                    continue
            except ValueError:
                pass
        outcome = process_file(absolute, linter, options)
        linted += 1
        errors.extend(outcome.errors)
        findings = [f for f in outcome.result.findings if f.location.row in diff.added]
        if not findings:
            continue
        lines = source_lines(str(absolute))
        # fingerprints read the file through the finding's path; hash the repository path
        readable = [_with_path(f, str(absolute)) for f in findings]
        for finding, fingerprint in zip(readable, fingerprints(readable, hash_path=lambda _f: rel)):
            comments.append(make_comment(rel, _with_path(finding, rel), fingerprint, lines, diff.commentable))
    return ReviewPlan(comments, linted, errors)


def _with_path(finding, path: str):
    from dataclasses import replace

    return replace(finding, path=path)


def review_payload(comments: list, commit_id: str | None) -> dict:
    count = len(comments)
    body = (
        f"gpulint found {count} problem{'s' if count != 1 else ''} on the lines this pull request adds "
        "that can keep the GPU waiting. Each comment explains why and links to the rule."
    )
    payload = {"event": "COMMENT", "body": body, "comments": [c.payload() for c in comments]}
    if commit_id:
        payload = {"commit_id": commit_id, **payload}
    return payload


def _summary(comments: list) -> str:
    lines = []
    for comment in comments:
        finding = comment.finding
        lines.append(f"{comment.path}:{finding.location.row}:{finding.location.column}: {finding.code} {finding.message}")
        marker = "```suggestion"
        if marker in comment.body:
            block = comment.body.split(marker, 1)[1].split("\n```", 1)[0].strip("\n")
            where = f"lines {comment.start_line}-{comment.line}" if comment.start_line != comment.line else f"line {comment.line}"
            lines.append(f"    suggestion for {where}:")
            lines.extend(f"    | {text}" for text in block.splitlines())
    count = len(comments)
    lines.append(f"{count} comment{'s' if count != 1 else ''} on added lines." if count else "No findings on added lines.")
    return "\n".join(lines)


def _err(message: str) -> None:
    typer.echo(f"gpulint: error: {message}", err=True)


def review(
    paths: Optional[List[Path]] = typer.Argument(None, help="Limit the review to these files or directories."),
    base: Optional[str] = typer.Option(None, "--base", help="Compare with the merge base of this ref (default: origin/$GITHUB_BASE_REF in Actions, else the upstream branch)."),
    post: bool = typer.Option(False, "--post", help="Post the review to the pull request with the GitHub REST API."),
    output_format: str = typer.Option("text", "--format", help="Without --post: text (a summary) or json (the review payload)."),
    repo: Optional[str] = typer.Option(None, "--repo", help="owner/name (default: GITHUB_REPOSITORY)."),
    pr: Optional[int] = typer.Option(None, "--pr", help="Pull request number (default: from GITHUB_EVENT_PATH)."),
    select: Optional[List[str]] = typer.Option(None, "--select", help="Rule ids or prefixes to enable."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Rule ids or prefixes to disable."),
    extend_select: Optional[List[str]] = typer.Option(None, "--extend-select", help="Rule ids or prefixes to add."),
    config: Optional[Path] = typer.Option(None, "--config", help="A pyproject.toml ([tool.gpulint]) or gpulint.toml."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when findings are on added lines."),
) -> None:
    """Review a change: comment on the findings in the lines it adds (a pull-request review)."""
    from gpulint.cli import resolve_settings
    from gpulint.linter.config import ConfigError
    from gpulint.review.diff import GitError, git

    if output_format not in ("text", "json"):
        _err(f"unknown format {output_format!r}; choose text or json")
        raise typer.Exit(EXIT_ERROR)
    path_args = [str(p) for p in paths or []]
    try:
        settings = resolve_settings([Path(p) for p in path_args] or [Path(".")], config, select, extend_select, ignore)
        plan = build_review(base, path_args, settings)
    except (ConfigError, GitError, typer.BadParameter) as exc:
        _err(str(exc.message if isinstance(exc, typer.BadParameter) else exc))
        raise typer.Exit(EXIT_ERROR)
    for line in plan.errors:
        _err(line)
    code = EXIT_FINDINGS if plan.comments and not exit_zero else EXIT_CLEAN
    if plan.errors:
        code = EXIT_ERROR

    if not post:
        if output_format == "json":
            typer.echo(json.dumps(review_payload(plan.comments, None), indent=2))
        else:
            typer.echo(_summary(plan.comments))
        raise typer.Exit(code)

    from gpulint.review.comments import existing_keys, is_duplicate
    from gpulint.review.github import GitHub, GitHubError, pull_request_from_env

    try:
        pull = pull_request_from_env(repo, pr)
        client = GitHub(os.environ.get("GITHUB_TOKEN", ""), os.environ.get("GITHUB_API_URL"))
        fresh = plan.comments
        if fresh:
            markers, places = existing_keys(client.review_comments(pull))
            fresh = [c for c in plan.comments if not is_duplicate(c, markers, places)]
        if not fresh:
            typer.echo(f"Nothing new to post ({len(plan.comments)} finding(s) on added lines already commented).", err=True)
            raise typer.Exit(code)
        commit = pull.head_sha or git(["rev-parse", "HEAD"]).strip()
        created = client.create_review(pull, review_payload(fresh, commit))
    except GitHubError as exc:
        _err(str(exc))
        raise typer.Exit(EXIT_ERROR)
    except GitError as exc:
        _err(str(exc))
        raise typer.Exit(EXIT_ERROR)
    where = created.get("html_url") or f"{pull.repository}#{pull.number}"
    skipped = len(plan.comments) - len(fresh)
    note = f" ({skipped} already there)" if skipped else ""
    typer.echo(f"Posted a review with {len(fresh)} comment{'s' if len(fresh) != 1 else ''}{note}: {where}", err=True)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("review")(review)
