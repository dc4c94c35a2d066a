"""The review bot on a hostile change or server.

Its token: never sent to another host, never over plain http off this machine, never printed (not
when it is malformed, not when a server echoes it, not inside a URL).  The change: a link it adds is
not followed, odd file names are reviewed and printed escaped, a long line does not make a comment
GitHub refuses.  The server: one that drips, pages forever or answers too much is cut off, and the
event file is read as a source file is.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.hostile.conftest import workflow_commands
from tests.integrations.conftest import BASE_SCRIPT, CHANGED_SCRIPT

TOKEN = "ghs_hostileSuiteTOKEN0123456789abcdef"
PASSWORD = "hunter2hunter2"


class Server:
    """A local HTTP server that records every request and answers with `respond(handler)`: a
    (status, headers, JSON payload) triple, or None when `respond` wrote the answer itself."""

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
                answer = respond(self)
                if answer is None:
                    return
                status, headers, payload = answer
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
        # (shutdown() waits for the serving loop's next look: every 0.5 s by default)
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

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


def post(repo, api_url: str, token: str = TOKEN, event_path: str | None = None, **limits: float):
    """`gpulint review --post` against `api_url`; `limits` lower the client's settings of the same
    name (REQUEST_DEADLINE_S=2.0) so that a case about a deadline or a size runs in seconds."""
    environment = {
        "GITHUB_REPOSITORY": "octo/trainer",
        "GITHUB_EVENT_PATH": event_path or str(repo.root / "event.json"),
        "GITHUB_TOKEN": token,
        "GITHUB_API_URL": api_url,
    }
    script = None
    if limits:
        settings = "".join(f"github.{name} = {value!r}\n" for name, value in limits.items())
        script = f"import gpulint.review.github as github\n{settings}from gpulint.cli import main\nmain()\n"
    result = repo.run("review", "--base", "main", "--post", env=environment, script=script)
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


# -- the change -------------------------------------------------------------------------------------
SECRET = "sk-live-4f8a1c9e2b7d6035"


def test_links_the_change_adds_are_not_followed(repo):
    """A link to a file outside the repository, or to /proc/self/environ, is not read: before, the
    target's line (with its secret) came back in a ```suggestion block."""
    (repo.outside / "secret.py").write_text(
        f"import torch; loader = torch.utils.data.DataLoader(ds, batch_size=32); x.cuda()  # SECRET_API_KEY={SECRET}\n"
    )
    os.symlink(repo.outside / "secret.py", repo.project / "leak.py")
    os.symlink("/proc/self/environ", repo.project / "env.py")
    _git(repo.project, "add", ".")
    _git(repo.project, "commit", "-q", "-m", "links")
    for output in ("json", "text"):
        result = repo.run("review", "--base", "main", "--format", output, env={"GPULINT_PROBE": SECRET})
        assert SECRET not in result.stdout + result.stderr
        assert result.returncode == 1, result.stderr  # train.py's findings, reviewed
        assert result.stderr.splitlines() == [
            "gpulint: warning: env.py: symbolic link; not followed, not reviewed",
            "gpulint: warning: leak.py: symbolic link; not followed, not reviewed",
        ]
        if output == "json":
            assert {c["path"] for c in json.loads(result.stdout)["comments"]} == {"train.py"}


ODD_NAMES = ['ü"x.py', '日"x.py', "tab\tback\\slash.py", "sep\u2028x.py"]


def _commit_copies(repo, names: list[str]) -> None:
    for name in names:
        (repo.project / name).write_text(CHANGED_SCRIPT)
    _git(repo.project, "add", ".")
    _git(repo.project, "commit", "-q", "-m", "copies")


def test_quoted_file_names_are_reviewed_under_their_own_names(repo):
    """git C-quotes these names, its octal escapes being UTF-8 bytes: before, `日"x.py` crashed the
    review and `ü"x.py` was silently not reviewed.  A name that is not UTF-8 cannot be named to
    GitHub: one warning line."""
    _commit_copies(repo, [*ODD_NAMES, os.fsdecode(b"caf\xe9.py")])
    result = repo.run("review", "--base", "main", "--format", "json")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "gpulint: warning: caf\\xe9.py: the name is not UTF-8, so a review comment cannot name it; not reviewed"
    ]
    comments = json.loads(result.stdout)["comments"]
    assert {c["path"] for c in comments} == {"train.py", *ODD_NAMES}
    per_name = {name: len([c for c in comments if c["path"] == name]) for name in ODD_NAMES}
    assert len(set(per_name.values())) == 1, per_name  # every copy has the same findings

    result = repo.run("review", "--base", "main")
    assert "\ntab\\tback\\slash.py:" in result.stdout and "\nsep\\u2028x.py:" in result.stdout


def test_file_name_cannot_put_a_workflow_command_in_the_summary(repo):
    name = "evil\n::error title=pwned::gotcha.py"
    _commit_copies(repo, [name])
    result = repo.run("review", "--base", "main")
    assert result.returncode == 1, result.stderr
    assert not [line for line in result.stdout.splitlines() if line.startswith("::")], result.stdout
    assert "\nevil\\n::error title=pwned::gotcha.py:" in result.stdout


def test_file_names_and_the_change_cannot_print_a_workflow_command(repo):
    """No newline needed: before, a file named `::error::start.py` opened its summary lines, and a
    comment in a suggested line could hold the older `##[warning]` syntax."""
    names = ["::error::start.py", "  ::notice::indented.py", "##[warning]old.py", "esc\x1b]0;x\x07\u202e.py"]
    quoting = CHANGED_SCRIPT.replace("batch_size=64)", "batch_size=64)  # ##[error]in the change")
    for name in names:
        (repo.project / name).write_text(quoting)
    _git(repo.project, "add", ".")
    _git(repo.project, "commit", "-q", "-m", "names")
    result = repo.run("review", "--base", "main")
    assert result.returncode == 1, result.stderr
    output = result.stdout + "\n" + result.stderr
    assert workflow_commands(output) == [], output
    assert "\x1b" not in output and "\x07" not in output and "\u202e" not in output
    assert "\n./::error::start.py:" in result.stdout and "\n./  ::notice::indented.py:" in result.stdout
    assert "# ##\\x5berror]in the change" in result.stdout  # a suggested line
    payload = repo.run("review", "--base", "main", "--format", "json")
    assert workflow_commands(payload.stdout) == [], payload.stdout
    comments = json.loads(payload.stdout)["comments"]
    assert {c["path"] for c in comments} >= set(names)  # the JSON names each file as it is
    assert any("##[error]in the change" in c["body"] for c in comments)


def test_comment_longer_than_githubs_limit_drops_the_suggestion_and_says_so(repo):
    """A fix on a line of 70,000 characters: its suggestion would make a comment GitHub refuses (the
    limit is 65,536 characters), so the comment names the fix in words instead."""
    long_line = "DataLoader(dataset, batch_size=64)  # " + "x" * 70_000
    (repo.project / "train.py").write_text(CHANGED_SCRIPT.replace("DataLoader(dataset, batch_size=64)", long_line))
    _git(repo.project, "commit", "-q", "-am", "long line")
    result = repo.run("review", "--base", "main", "--format", "json")
    assert result.returncode == 1, result.stderr
    comments = json.loads(result.stdout)["comments"]
    assert len(comments) == 2  # GL101 and GL102 fix the same line: one comment; GL201
    for comment in comments:
        assert len(comment["body"]) <= 65_536 and "<!-- gpulint:" in comment["body"]
    too_long = [c for c in comments if "too long to show as a suggestion" in c["body"]]
    assert len(too_long) == 1  # GL101 and GL102 have fixes; GL201 has none
    for comment in too_long:
        assert "```suggestion" not in comment["body"] and "apply them together with `gpulint --fix" in comment["body"]
        assert "<!-- gpulint:GL101:" in comment["body"] and "<!-- gpulint:GL102:" in comment["body"]
        assert "start_line" not in comment


# -- the server and the event file --------------------------------------------------------------------
def _drip(where: str, cut: list[float]):
    """A GitHub that answers the comment list one byte every half second (in the headers or in the
    body), for at most 50 s; `cut` gets how long it dripped before the client hung up."""

    def respond(handler):
        if handler.command != "GET":
            return comments_then()(handler)
        started = time.monotonic()
        try:
            if where == "headers":
                handler.wfile.write(b"HTTP/1.0 200 OK\r\nX-Drip: ")
            else:
                handler.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
            for _ in range(100):
                time.sleep(0.5)
                handler.wfile.write(b" ")
        except OSError:
            cut.append(time.monotonic() - started)
        return None

    return respond


@pytest.mark.parametrize("where", ["headers", "body"])
def test_dripping_server_is_cut_off_at_the_request_deadline(repo, servers, where):
    cut: list[float] = []
    api = servers(_drip(where, cut))
    result = post(repo, api.url, REQUEST_DEADLINE_S=2.0)
    assert result.returncode == 2
    assert result.error_lines == [
        "gpulint: error: GET /repos/octo/trainer/pulls/7/comments: no complete answer from the GitHub API "
        "within the request's deadline (2 s); gave up"
    ]
    deadline = time.monotonic() + 60
    while not cut and time.monotonic() < deadline:  # the server notices the hang-up at its next byte
        time.sleep(0.1)
    assert cut and cut[0] < 25, cut  # hung up, not read to the end of the 50 s drip
    assert [r["method"] for r in api.requests] == ["GET"]


def test_review_deadline_bounds_all_its_requests(repo, servers):
    """Every page of comments comes quickly and links to the next: the review as a whole stops."""
    pages: list = []
    page_s, review_s = 0.2, 4.0  # a page's answer takes at least page_s: at most review_s / page_s + 1 are asked

    def respond(handler):
        if handler.command != "GET":
            return comments_then()(handler)
        pages.append(handler.path)
        time.sleep(page_s)
        following = f"{api.url}/repos/octo/trainer/pulls/7/comments?per_page=100&page={len(pages) + 1}"
        return 200, {"Link": f'<{following}>; rel="next"'}, []

    api = servers(respond)
    result = post(repo, api.url, REVIEW_DEADLINE_S=review_s)
    assert result.returncode == 2
    line = result.one_line("gpulint: error:")
    assert "the review's deadline (4 s in all)" in line, line
    assert 2 <= len(pages) <= review_s / page_s + 1 and all(r["method"] == "GET" for r in api.requests)


@pytest.mark.parametrize("with_length", [True, False], ids=["content-length", "until-close"])
def test_oversized_answer_is_an_error_not_read_whole(repo, servers, with_length):
    big = b"[" + b"{}," * 2**20 + b"{}]"  # 3 MiB of comments

    def respond(handler):
        if handler.command != "GET":
            return comments_then()(handler)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if with_length:
            handler.send_header("Content-Length", str(len(big)))
        handler.end_headers()
        try:
            handler.wfile.write(big)
        except OSError:  # the client stopped reading
            pass
        return None

    api = servers(respond)
    result = post(repo, api.url, MAX_RESPONSE_BYTES=2**20)
    assert result.returncode == 2
    expected = " (3.0 MiB); not read" if with_length else "; not read to the end"
    assert result.error_lines == [
        "gpulint: error: GET /repos/octo/trainer/pulls/7/comments: the answer is larger than 1.0 MiB" + expected
    ]
    assert [r["method"] for r in api.requests] == ["GET"]


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_event_file_that_is_not_a_regular_file_is_an_error(repo, servers, kind):
    """GITHUB_EVENT_PATH naming a FIFO (no writer) or /dev/zero: one line, not a hang or a read
    without end."""
    if kind == "fifo":
        event, what = repo.root / "event.fifo", "a FIFO"
        os.mkfifo(event)
    else:
        event, what = "/dev/zero", "a character device"
    api = servers(comments_then())
    result = post(repo, api.url, event_path=str(event))
    assert result.returncode == 2
    assert result.error_lines == [
        f"gpulint: error: cannot read the event file GITHUB_EVENT_PATH={event}: {what}, not a regular file"
    ]
    assert api.requests == []
