"""The review bot's token: never sent to another host, never over plain http off this machine,
never printed (not when it is malformed, not when a server echoes it, not inside a URL)."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.integrations.conftest import BASE_SCRIPT, CHANGED_SCRIPT

TOKEN = "ghs_hostileSuiteTOKEN0123456789abcdef"
PASSWORD = "hunter2hunter2"


class Server:
    """A local HTTP server that records every request and answers with `respond(handler)`."""

    def __init__(self, respond) -> None:
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length) if length else b""
                record = {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                server.requests.append(record)
                status, headers, payload = respond(self)
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    made: list[Server] = []

    def make(respond) -> Server:
        made.append(Server(respond))
        return made[-1]

    yield make
    for server in made:
        server.close()


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def repo(sandbox):
    """The sandbox's project as a repository whose `feature` branch adds findings to `main`."""
    project = sandbox.project
    _git(project, "init", "-q", "-b", "main")
    _git(project, "config", "user.email", "dev@example.com")
    _git(project, "config", "user.name", "dev")
    _git(project, "config", "commit.gpgsign", "false")
    (project / "train.py").write_text(BASE_SCRIPT)
    _git(project, "add", ".")
    _git(project, "commit", "-q", "-m", "base")
    _git(project, "checkout", "-q", "-b", "feature")
    (project / "train.py").write_text(CHANGED_SCRIPT)
    _git(project, "commit", "-q", "-am", "change")
    (sandbox.root / "event.json").write_text(json.dumps({"pull_request": {"number": 7, "head": {"sha": "a" * 40}}}))
    return sandbox


def post(repo, api_url: str, token: str = TOKEN):
    environment = {
        "GITHUB_REPOSITORY": "octo/trainer",
        "GITHUB_EVENT_PATH": str(repo.root / "event.json"),
        "GITHUB_TOKEN": token,
        "GITHUB_API_URL": api_url,
    }
    result = repo.run("review", "--base", "main", "--post", env=environment)
    assert token.strip() not in result.stdout + result.stderr
    return result


def comments_then(review_status: int = 200, review_payload: dict | None = None):
    """GitHub's two endpoints: no comments yet; the review answered with this status and body."""

    def respond(handler):
        if handler.command == "GET":
            return 200, {}, []
        return review_status, {}, review_payload or {"id": 1, "html_url": "https://github.com/octo/trainer/pull/7"}

    return respond


def test_cross_host_redirect_does_not_carry_the_token(repo, servers):
    other = servers(comments_then())
    api = servers(lambda handler: (302, {"Location": f"{other.url}{handler.path}"}, {}))
    result = post(repo, api.url)
    assert result.returncode == 2
    assert result.error_lines == [
        f"gpulint: error: the GitHub API redirected to another host (127.0.0.1:{other.httpd.server_port}); "
        "not following it with the token"
    ]
    assert other.requests == []


def test_redirect_to_another_host_name_does_not_carry_the_token(repo, servers):
    other = servers(comments_then())
    api = servers(lambda handler: (307, {"Location": f"http://localhost:{other.httpd.server_port}{handler.path}"}, {}))
    result = post(repo, api.url)
    assert result.returncode == 2 and "redirected to another host (localhost:" in result.one_line("error:")
    assert other.requests == []


def test_same_host_redirect_is_repeated_verbatim(repo, servers):
    def respond(handler):
        if handler.path.startswith("/moved/"):
            return comments_then()(handler)
        return 307, {"Location": "/moved" + handler.path}, {}

    api = servers(respond)
    result = post(repo, api.url)
    assert result.returncode == 1, result.stderr  # findings on added lines, posted
    moved_posts = [r for r in api.requests if r["method"] == "POST" and r["path"].startswith("/moved/")]
    assert len(moved_posts) == 1 and json.loads(moved_posts[0]["body"])["event"] == "COMMENT"
    assert moved_posts[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize("url", ["http://example.invalid", "file:///etc/passwd", "ftp://api.github.com"])
def test_api_url_must_be_https_off_the_loopback(repo, url):
    result = post(repo, url)
    assert result.returncode == 2
    assert result.error_lines == [
        f"gpulint: error: GITHUB_API_URL must be an https:// URL (http:// only on the loopback), not {url}"
    ]


def test_credentials_in_the_api_url_are_refused_and_not_printed(repo):
    result = post(repo, f"https://bot:{PASSWORD}@api.github.com")
    assert result.returncode == 2
    assert PASSWORD not in result.stderr
    assert result.error_lines == [
        "gpulint: error: GITHUB_API_URL must not hold credentials (https://***@api.github.com); "
        "the token is GITHUB_TOKEN"
    ]


@pytest.mark.parametrize(
    "token, problem",
    [
        (TOKEN + "\n", "whitespace (a trailing newline?)"),
        (TOKEN[:10] + "\r\nX-Injected: 1" + TOKEN[10:], "whitespace (a trailing newline?)"),
        (TOKEN + "\x1b]0;", "characters a token cannot have"),
    ],
    ids=["trailing-newline", "header-injection", "escape"],
)
def test_malformed_token_is_refused_without_echoing_it(repo, servers, token, problem):
    api = servers(comments_then())
    result = post(repo, api.url, token)
    assert result.returncode == 2
    assert result.error_lines == [f"gpulint: error: GITHUB_TOKEN is not a valid token: it holds {problem}"]
    assert TOKEN[10:] not in result.stderr and api.requests == []


def test_token_echoed_by_the_server_is_redacted(repo, servers):
    def respond(handler):
        echoed = handler.headers.get("Authorization", "")
        return 401, {}, {"message": f"Bad credentials: {echoed}", "errors": [f"token {echoed.split()[-1]} refused"]}

    api = servers(respond)
    result = post(repo, api.url)
    assert result.returncode == 2
    line = result.one_line("authentication failed")
    assert "Bad credentials: Bearer ***" in line and "token *** refused" in line


def test_review_address_that_echoes_the_token_is_redacted(repo, servers):
    def respond(handler):
        if handler.command == "GET":
            return 200, {}, []
        token = handler.headers.get("Authorization", "").split()[-1]
        return 200, {}, {"id": 1, "html_url": f"https://github.com/octo/trainer/pull/7?t={token}\x1b]0;"}

    api = servers(respond)
    result = post(repo, api.url)
    assert result.returncode == 1, result.stderr  # posted: findings on added lines
    line = result.one_line("Posted a review")
    assert line.endswith("https://github.com/octo/trainer/pull/7?t=***\\x1b]0;")


def test_pagination_link_to_another_host_is_not_followed(repo, servers):
    other = servers(comments_then())

    def respond(handler):
        if handler.command == "GET":
            return 200, {"Link": f'<{other.url}/repos/octo/trainer/pulls/7/comments?page=2>; rel="next"'}, []
        return comments_then()(handler)

    api = servers(respond)
    result = post(repo, api.url)
    assert result.returncode == 1, result.stderr
    assert other.requests == []
