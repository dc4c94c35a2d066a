"""A minimal GitHub REST client (standard library only) for posting one pull-request review.

Endpoints (REST API version 2022-11-28):
- GET  /repos/{owner}/{repo}/pulls/{pull_number}/comments   the review comments already there
- POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews    a review with line comments

The token goes only into the Authorization header; no message this module produces contains it.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from gpulint import __version__

API_VERSION = "2022-11-28"
DEFAULT_API_URL = "https://api.github.com"
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


class GitHubError(Exception):
    """An API or configuration problem, as one line (never containing the token)."""


@dataclass(frozen=True)
class PullRequest:
    repository: str  # owner/name
    number: int
    head_sha: str | None = None


def pull_request_from_env(repository: str | None = None, number: int | None = None) -> PullRequest:
    """The pull request from options, falling back to GITHUB_REPOSITORY and the Actions event file."""
    repository = repository or os.environ.get("GITHUB_REPOSITORY")
    head_sha = None
    event_path = os.environ.get("GITHUB_EVENT_PATH")
    if event_path:
        try:
            event = json.loads(Path(event_path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise GitHubError(f"cannot read the event file GITHUB_EVENT_PATH={event_path}: {exc}") from None
        pull = event.get("pull_request") if isinstance(event, dict) else None
        if isinstance(pull, dict):
            if number is None and isinstance(pull.get("number"), int):
                number = pull["number"]
            head = pull.get("head")
            if isinstance(head, dict) and isinstance(head.get("sha"), str):
                head_sha = head["sha"]
    if not repository or "/" not in repository:
        raise GitHubError("no repository: set GITHUB_REPOSITORY=owner/name or pass --repo")
    if number is None:
        raise GitHubError("no pull request number: run on a pull_request event or pass --pr N")
    return PullRequest(repository, number, head_sha)


class GitHub:
    def __init__(self, token: str, api_url: str | None = None, timeout: float = 30.0) -> None:
        if not token:
            raise GitHubError("GITHUB_TOKEN is not set (needed to post; give the job `pull-requests: write`)")
        self._token = token
        self.api_url = (api_url or DEFAULT_API_URL).rstrip("/")
        self.timeout = timeout

    def _headers(self) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self._token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": f"gpulint/{__version__}",
        }

    def request(self, method: str, url: str, body: dict | None = None) -> tuple[object, dict[str, str]]:
        if not url.startswith(("http://", "https://")):
            url = self.api_url + url
        data = None
        headers = self._headers()
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
                response_headers = {k.lower(): v for k, v in response.headers.items()}
        except urllib.error.HTTPError as exc:
            raise GitHubError(_http_error_line(method, url, exc)) from None
        except urllib.error.URLError as exc:
            raise GitHubError(f"cannot reach the GitHub API at {self.api_url}: {exc.reason}") from None
        except (TimeoutError, OSError) as exc:
            raise GitHubError(f"cannot reach the GitHub API at {self.api_url}: {exc}") from None
        try:
            payload = json.loads(raw) if raw.strip() else None
        except ValueError:
            raise GitHubError(f"{method} {_path_of(url)}: the API answered with something that is not JSON") from None
        return payload, response_headers

    def review_comments(self, pull: PullRequest) -> list[dict]:
        """Every review comment on the pull request (all pages)."""
        url: str | None = f"/repos/{pull.repository}/pulls/{pull.number}/comments?per_page=100"
        comments: list[dict] = []
        for _ in range(100):  # at most 10,000 comments; a bound against a misbehaving server
            if url is None:
                break
            payload, headers = self.request("GET", url)
            if not isinstance(payload, list):
                raise GitHubError(f"GET {_path_of(url)}: expected a list of comments")
            comments.extend(c for c in payload if isinstance(c, dict))
            match = _NEXT.search(headers.get("link", ""))
            # follow the next page only on the same API host: the token must not travel elsewhere
            url = match.group(1) if match and match.group(1).startswith(self.api_url + "/") else None
        return comments

    def create_review(self, pull: PullRequest, review: dict) -> dict:
        payload, _ = self.request("POST", f"/repos/{pull.repository}/pulls/{pull.number}/reviews", review)
        return payload if isinstance(payload, dict) else {}


def _path_of(url: str) -> str:
    return urllib.parse.urlsplit(url).path


def _http_error_line(method: str, url: str, exc: urllib.error.HTTPError) -> str:
    """One line that says what went wrong and what to do about it."""
    where = f"{method} {_path_of(url)}"
    message = ""
    try:
        body = json.loads(exc.read() or b"{}")
        if isinstance(body, dict):
            message = str(body.get("message") or "")
            errors = body.get("errors")
            if isinstance(errors, list) and errors:
                details = [e if isinstance(e, str) else str(e.get("message") or e) for e in errors[:3]]
                message += f" ({'; '.join(details)})"
    except (ValueError, OSError):
        pass
    message = " ".join(message.split())[:300]
    headers = exc.headers or {}
    remaining = headers.get("x-ratelimit-remaining")
    if exc.code == 429 or (exc.code == 403 and (remaining == "0" or "rate limit" in message.lower())):
        reset = headers.get("x-ratelimit-reset")
        when = ""
        if reset and reset.isdigit():
            when = f"; it resets at {time.strftime('%H:%M:%S UTC', time.gmtime(int(reset)))}"
        retry = headers.get("retry-after")
        if retry:
            when += f"; retry after {retry} s"
        return f"GitHub API rate limit exceeded ({where}){when}"
    hints = {
        401: "authentication failed: GITHUB_TOKEN is missing, expired or invalid",
        403: "forbidden: the token may not write to this pull request (give the job `pull-requests: write`)",
        404: "not found: check the repository and pull request number, and that the token can see them",
        422: "GitHub rejected the review: a comment may be on a line outside the pull request's diff",
    }
    hint = hints.get(exc.code, f"HTTP {exc.code}")
    detail = f": {message}" if message else ""
    return f"{hint} ({where} returned {exc.code}{detail})"
