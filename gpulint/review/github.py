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

A server cannot hold a review: each request has one deadline from connecting to the last byte,
redirects included (`REQUEST_DEADLINE_S`; the socket timeout alone bounds each read, which a server
dripping a byte at a time never trips), and all the requests of one client together have another
(`REVIEW_DEADLINE_S`).  When one passes, a watchdog shuts the connection down and the request is
an error.  An answer larger than `MAX_RESPONSE_BYTES` is an error, not read to the end, and the
event file is read as the linter reads a source file (regular files only, bounded).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from email.message import Message

from gpulint import __version__
from gpulint.linter.run.safe_files import NotLintable, format_size, read_regular_file
from gpulint.redaction import redact, register_secret

API_VERSION = "2022-11-28"
DEFAULT_API_URL = "https://api.github.com"
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')
# RFC 6750's b64token: what a bearer token may hold (no whitespace, no control characters).
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_REDIRECTS = (301, 302, 303, 307, 308)
# Module settings rather than options: the tests lower them to run in seconds.
REQUEST_DEADLINE_S = 120.0  # one request, connect to last byte, redirects included
REVIEW_DEADLINE_S = 600.0  # every request one client makes (one review: list comments, post)
READ_TIMEOUT_S = 30.0  # one read of the socket
# A page of 100 review comments at GitHub's 65,536-character limit each is about 7 MB.
MAX_RESPONSE_BYTES = 32 * 2**20
MAX_ERROR_BODY_BYTES = 64 * 2**10  # only a message is taken from an error's body
# GitHub caps a webhook payload, which the event file holds, at 25 MB.
MAX_EVENT_FILE_BYTES = 25 * 2**20


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
            event = json.loads(read_regular_file(event_path, MAX_EVENT_FILE_BYTES, "the event file limit"))
        except NotLintable as exc:  # a FIFO or /dev/zero: refused, not waited on or read forever
            reason = str(exc).removesuffix("; skipped")
            raise GitHubError(f"cannot read the event file GITHUB_EVENT_PATH={event_path}: {reason}") from None
        except (OSError, ValueError, RecursionError) as exc:
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


class _Watchdog:
    """Shuts down the connections of one request when its deadline passes.

    A socket timeout bounds each read, not a request: a server that sends a byte every few seconds
    never trips it.  Shutting the socket down from this timer's thread wakes the read that waits on
    it, which then fails; `fired` tells that failure from the server's own."""

    def __init__(self, deadline: float) -> None:
        self.fired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.fired:  # connected just as the deadline passed
                _shut_down(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shut_down(sock)

    def stop(self) -> None:
        self._timer.cancel()


def _shut_down(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed (Python then holds no descriptor to reuse)
        pass


class _WatchedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args, watchdog: _Watchdog, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._watchdog = watchdog

    def connect(self) -> None:
        super().connect()  # bounded by the timeout, which is at most the time left
        self._watchdog.watch(self.sock)


class _WatchedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args, watchdog: _Watchdog, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._watchdog = watchdog

    def connect(self) -> None:
        super().connect()  # the TLS handshake too is bounded by the timeout as a whole
        self._watchdog.watch(self.sock)


class _WatchedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def http_open(self, req):
        return self.do_open(_WatchedHTTPConnection, req, watchdog=self._watchdog)


class _WatchedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def https_open(self, req):
        return self.do_open(_WatchedHTTPSConnection, req, watchdog=self._watchdog)


class GitHub:
    def __init__(self, token: str, api_url: str | None = None) -> None:
        check_token(token)
        register_secret(token)
        self._token = token
        self.api_url = check_api_url(api_url or DEFAULT_API_URL)
        self._review_deadline = time.monotonic() + REVIEW_DEADLINE_S

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
        now = time.monotonic()
        if now + REQUEST_DEADLINE_S <= self._review_deadline:
            deadline, limit = now + REQUEST_DEADLINE_S, f"the request's deadline ({REQUEST_DEADLINE_S:g} s)"
        else:
            deadline, limit = self._review_deadline, f"the review's deadline ({REVIEW_DEADLINE_S:g} s in all)"
        if deadline <= now:
            raise GitHubError(f"{method} {_path_of(url)}: not sent: {limit} has passed")
        watchdog = _Watchdog(deadline)
        opener = urllib.request.build_opener(
            _WatchedHTTPHandler(watchdog), _WatchedHTTPSHandler(watchdog), _SameOriginRedirects(_origin(self.api_url))
        )
        try:
            with opener.open(request, timeout=min(READ_TIMEOUT_S, deadline - now)) as response:
                raw = _read_at_most(response, MAX_RESPONSE_BYTES, f"{method} {_path_of(url)}")
                response_headers = {k.lower(): v for k, v in response.headers.items()}
        except (OSError, ValueError, http.client.HTTPException) as exc:  # HTTPError and URLError are OSErrors
            # The watchdog cut the connection, or the socket's own timeout (set to the same deadline)
            # ran out first: whatever the failure looks like, the deadline is why.
            if watchdog.fired or time.monotonic() >= deadline:
                raise GitHubError(_past_deadline(method, url, limit)) from None
            raise GitHubError(self._failure_line(method, url, exc)) from None
        finally:
            watchdog.stop()
        if watchdog.fired:  # an answer without a length ends where the connection was cut
            raise GitHubError(_past_deadline(method, url, limit))
        try:
            payload = json.loads(raw) if raw.strip() else None
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            raise GitHubError(f"{method} {_path_of(url)}: the API answered with something that is not JSON") from None
        return payload, response_headers

    def _failure_line(self, method: str, url: str, exc: Exception) -> str:
        if isinstance(exc, urllib.error.HTTPError):
            return _http_error_line(method, url, exc)
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        return f"cannot reach the GitHub API at {self.api_url}: {reason}"

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


def _past_deadline(method: str, url: str, limit: str) -> str:
    return f"{method} {_path_of(url)}: no complete answer from the GitHub API within {limit}; gave up"


def _read_at_most(response, most: int, what: str) -> bytes:
    """The body of a response of at most `most` bytes; GitHubError past that, without reading on."""
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > most:
        raise GitHubError(
            f"{what}: the answer is larger than {format_size(most)} ({format_size(int(length))}); not read"
        )
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = response.read(min(1 << 16, most + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > most:
            raise GitHubError(f"{what}: the answer is larger than {format_size(most)}; not read to the end")


def _http_error_line(method: str, url: str, exc: urllib.error.HTTPError) -> str:
    """One line that says what went wrong and what to do about it."""
    where = f"{method} {_path_of(url)}"
    message = ""
    try:
        body = json.loads(exc.read(MAX_ERROR_BODY_BYTES) or b"{}")
        if isinstance(body, dict):
            message = str(body.get("message") or "")
            errors = body.get("errors")
            if isinstance(errors, list) and errors:
                details = [e if isinstance(e, str) else str(e.get("message") or e) for e in errors[:3]]
                message += f" ({'; '.join(details)})"
    except (ValueError, OSError, RecursionError, http.client.HTTPException):
        pass  # no message, or one cut off at the limit: the status says enough
    message = " ".join(message.split())[:300]
    headers: Message | dict[str, str] = exc.headers or {}
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
