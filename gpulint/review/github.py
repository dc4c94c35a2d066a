"""A minimal GitHub REST client (standard library only) for posting one pull-request review.

Endpoints (REST API version 2022-11-28):
- GET  /repos/{owner}/{repo}/pulls/{pull_number}/comments   the review comments already there
- POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews    a review with line comments

The token goes only into the Authorization header, and only to the API's own origin (scheme, host
and port of GITHUB_API_URL): the URL must be https (http only on this machine's loopback, for a
local test server) and hold no credentials; a redirect is followed only within that origin, and
repeated verbatim as GitHub's REST documentation asks (a redirect elsewhere is an error, not a
request without the token); a pagination link elsewhere is not followed.  The token's shape is
checked (RFC 6750 token characters) before it is put in a header, and every message this module
produces goes through `redaction.redact`, so neither the token nor URL credentials are printed
even when a server echoes them.
"""

from __future__ import annotations

import ipaddress
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
from gpulint.redaction import redact, register_secret

API_VERSION = "2022-11-28"
DEFAULT_API_URL = "https://api.github.com"
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')
# RFC 6750's b64token: what a bearer token may hold (no whitespace, no control characters).
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_REDIRECTS = (301, 302, 303, 307, 308)


class GitHubError(Exception):
    """An API or configuration problem, as one line (never containing the token)."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


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


def check_token(token: str) -> None:
    """GitHubError unless the token has a bearer token's shape (the message never shows it)."""
    if not token:
        raise GitHubError("GITHUB_TOKEN is not set (needed to post; give the job `pull-requests: write`)")
    if not _TOKEN.fullmatch(token):
        spaced = any(c.isspace() for c in token)
        problem = "whitespace (a trailing newline?)" if spaced else "characters a token cannot have"
        raise GitHubError(f"GITHUB_TOKEN is not a valid token: it holds {problem}")


_DEFAULT_PORTS = {"https": 443, "http": 80}


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in, as browsers compare origins."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_api_url(url: str) -> str:
    """The API base URL without a trailing slash; GitHubError unless it is https (or http on the
    loopback), names a host, and holds no credentials, whitespace or control characters."""
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise GitHubError("GITHUB_API_URL holds whitespace or control characters")
    try:
        scheme, host, _port = _origin(url)  # a port that is not a number raises ValueError
    except ValueError as exc:
        raise GitHubError(f"GITHUB_API_URL is not a URL ({exc})") from None
    if "@" in urllib.parse.urlsplit(url).netloc:
        raise GitHubError(f"GITHUB_API_URL must not hold credentials ({url}); the token is GITHUB_TOKEN")
    if not host or not (scheme == "https" or scheme == "http" and _is_loopback(host)):
        raise GitHubError(f"GITHUB_API_URL must be an https:// URL (http:// only on the loopback), not {url}")
    return url.rstrip("/")


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only within the API's origin, repeating the request verbatim (method,
    body, headers) except after 303, which means GET."""

    def __init__(self, origin: tuple[str, str, int | None]) -> None:
        super().__init__()
        self.origin = origin

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if code not in _REDIRECTS:
            return None
        if _origin(newurl) != self.origin:
            _scheme, host, port = _origin(newurl)
            where = f"{host}:{port}" if port else host or newurl
            raise GitHubError(f"the GitHub API redirected to another host ({where}); not following it with the token")
        method = "GET" if code == 303 else req.get_method()
        data = None if code == 303 else req.data
        return urllib.request.Request(newurl, data=data, method=method, headers=dict(req.header_items()))


class GitHub:
    def __init__(self, token: str, api_url: str | None = None, timeout: float = 30.0) -> None:
        check_token(token)
        register_secret(token)
        self._token = token
        self.api_url = check_api_url(api_url or DEFAULT_API_URL)
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_SameOriginRedirects(_origin(self.api_url)))

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
        if _origin(url) != _origin(self.api_url):
            raise GitHubError(f"{method} {_path_of(url)}: not on the API's host; not sent")
        data = None
        headers = self._headers()
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = response.read()
                response_headers = {k.lower(): v for k, v in response.headers.items()}
        except urllib.error.HTTPError as exc:
            raise GitHubError(_http_error_line(method, url, exc)) from None
        except urllib.error.URLError as exc:
            raise GitHubError(f"cannot reach the GitHub API at {self.api_url}: {exc.reason}") from None
        except (TimeoutError, OSError, ValueError) as exc:
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
