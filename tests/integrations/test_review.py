"""`gpulint review`: findings only on added lines, suggestion blocks, and `--post` against a local
server that plays the GitHub REST endpoints (what it receives, and idempotence)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpulint.review.diff import parse_diff
from tests.integrations.conftest import CHANGED_SCRIPT, git, run_cli

TOKEN = "ghs_secretTOKEN1234567890"


def _added_rows() -> set[int]:
    rows = {i for i, line in enumerate(CHANGED_SCRIPT.splitlines(), 1) if "val_loader" in line or "total =" in line}
    assert len(rows) == 2
    return rows


def test_comments_only_on_added_lines_with_suggestions(review_repo, capsys):
    code, out, err = run_cli(["review", "--base", "main", "--format", "json"], capsys)
    assert code == 1, err
    payload = json.loads(out)
    comments = payload["comments"]
    assert {c["line"] for c in comments} <= _added_rows()
    by_code = {c["body"].split("**gpulint ")[1].split("**")[0]: c for c in comments}
    # the new loader: GL101 (unsafe fix) and GL102 (safe fix); the new .item(): GL201.  The old
    # print(loss.item()) on an unchanged line gets no comment.
    assert set(by_code) == {"GL101", "GL102", "GL201"}
    gl102 = by_code["GL102"]["body"]
    assert "```suggestion\n    val_loader = DataLoader(dataset, batch_size=64, pin_memory=True)\n```" in gl102
    assert "docs/rules/GL102.md" in gl102 and "<!-- gpulint:GL102:" in gl102
    # the GL101 fix also adds `import os` at the top: the suggestion covers the loader line and
    # the import is named in words
    gl101 = by_code["GL101"]["body"]
    assert "```suggestion\n" in gl101 and "`import os`" in gl101 and "unsafe" in gl101
    assert "```suggestion" not in by_code["GL201"]["body"]
    for comment in comments:
        assert comment["side"] == "RIGHT" and comment["path"] == "train.py"


def test_text_summary_and_no_change(review_repo, capsys):
    code, out, _ = run_cli(["review", "--base", "main"], capsys)
    assert code == 1
    assert "train.py:" in out and "suggestion for line" in out
    git(review_repo, "checkout", "-q", "main")
    code, out, _ = run_cli(["review", "--base", "main"], capsys)
    assert code == 0 and "No findings on added lines." in out


def test_missing_upstream_and_bad_base_are_one_line_errors(review_repo, capsys):
    code, _, err = run_cli(["review"], capsys)
    assert code == 2 and "no upstream" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["review", "--base", "no-such-ref"], capsys)
    assert code == 2 and "cannot resolve base 'no-such-ref'" in err


def test_parse_diff_tracks_added_and_context_rows():
    diff = (
        "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n"
        "@@ -1,3 +1,4 @@\n a\n+b\n c\n-d\n+e\n"
        "@@ -10,0 +12,2 @@\n+f\n+g\n"
        "diff --git a/gone.py b/gone.py\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    )
    files = parse_diff(diff)
    assert set(files) == {"x.py"}
    assert files["x.py"].added == {2, 4, 12, 13}
    assert files["x.py"].commentable == {1, 2, 3, 4, 12, 13}


# -- a fake GitHub ----------------------------------------------------------------------------------
class FakeGitHub:
    """Plays GET .../pulls/N/comments (paginated) and POST .../pulls/N/reviews, recording requests;
    posted review comments become existing comments, as on GitHub."""

    def __init__(self, fail_with: int | None = None, rate_limited: bool = False) -> None:
        self.requests: list[dict] = []
        self.comments: list[dict] = []
        self.fail_with = fail_with
        self.rate_limited = rate_limited
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _reply(self, status: int, payload, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _record(self, body=None) -> None:
                fake.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body})

            def do_GET(self):
                self._record()
                if fake.rate_limited:
                    return self._reply(403, {"message": "API rate limit exceeded for installation"},
                                       {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1700000000"})
                if fake.fail_with:
                    return self._reply(fake.fail_with, {"message": "Bad credentials" if fake.fail_with == 401 else "nope"})
                if not self.path.startswith("/repos/octo/trainer/pulls/7/comments"):
                    return self._reply(404, {"message": "Not Found"})
                # two pages: the first holds one comment and links to the second
                page = 2 if "page=2" in self.path else 1
                items = fake.comments[:1] if page == 1 else fake.comments[1:]
                headers = {}
                if page == 1 and len(fake.comments) > 1:
                    base = f"http://127.0.0.1:{self.server.server_port}"
                    headers["Link"] = f'<{base}/repos/octo/trainer/pulls/7/comments?per_page=100&page=2>; rel="next"'
                return self._reply(200, items, headers)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                self._record(body)
                if fake.fail_with == 422:
                    return self._reply(422, {"message": "Unprocessable Entity", "errors": ["Line could not be resolved"]})
                if self.path != "/repos/octo/trainer/pulls/7/reviews":
                    return self._reply(404, {"message": "Not Found"})
                for comment in body.get("comments", []):
                    fake.comments.append({**comment, "id": len(fake.comments) + 1, "original_line": comment["line"]})
                return self._reply(200, {"id": 1, "html_url": "https://github.com/octo/trainer/pull/7#review-1"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def actions_env(review_repo, tmp_path, monkeypatch):
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "head": {"sha": "abc123" * 6 + "abcd"}}}))
    monkeypatch.setenv("GITHUB_REPOSITORY", "octo/trainer")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    return review_repo


def test_post_creates_one_review_then_nothing_new(actions_env, monkeypatch, capsys):
    with FakeGitHub() as fake:
        monkeypatch.setenv("GITHUB_API_URL", fake.url)
        code, out, err = run_cli(["review", "--base", "main", "--post", "--exit-zero"], capsys)
        assert code == 0, err
        assert TOKEN not in out + err
        gets = [r for r in fake.requests if r["method"] == "GET"]
        posts = [r for r in fake.requests if r["method"] == "POST"]
        assert len(gets) == 1 and len(posts) == 1
        post = posts[0]
        assert post["path"] == "/repos/octo/trainer/pulls/7/reviews"
        headers = {k.lower(): v for k, v in post["headers"].items()}
        assert headers["authorization"] == f"Bearer {TOKEN}"
        assert headers["accept"] == "application/vnd.github+json"
        assert headers["x-github-api-version"] == "2022-11-28"
        body = post["body"]
        assert body["event"] == "COMMENT" and body["commit_id"] == "abc123" * 6 + "abcd"
        assert len(body["comments"]) == 3
        for comment in body["comments"]:
            assert set(comment) <= {"path", "body", "line", "side", "start_line", "start_side"}
            assert comment["line"] in _added_rows() and "<!-- gpulint:" in comment["body"]
        assert "Posted a review with 3 comments" in err

        # Second run: the comments are there (over two pages), nothing new is posted.
        fake.requests.clear()
        code, out, err = run_cli(["review", "--base", "main", "--post", "--exit-zero"], capsys)
        assert code == 0, err
        assert [r["method"] for r in fake.requests] == ["GET", "GET"]  # both pages read, no POST
        assert "Nothing new to post" in err

        # A new finding on a new commit: only it is posted.
        script = (actions_env / "train.py").read_text()
        (actions_env / "train.py").write_text(script + "\n\ndef probe(dataset):\n    return DataLoader(dataset, num_workers=2)\n")
        git(actions_env, "commit", "-q", "-am", "probe")
        fake.requests.clear()
        code, _, err = run_cli(["review", "--base", "main", "--post"], capsys)
        assert code == 1, err  # findings on added lines, no --exit-zero
        posts = [r for r in fake.requests if r["method"] == "POST"]
        assert len(posts) == 1
        assert {c["body"].split("**gpulint ")[1].split("**")[0] for c in posts[0]["body"]["comments"]} == {"GL102"}


@pytest.mark.parametrize(
    "status, expected",
    [(401, "authentication failed"), (403, "forbidden"), (404, "not found"), (422, "rejected the review")],
)
def test_http_errors_are_one_line_exit_2_without_the_token(actions_env, monkeypatch, capsys, status, expected):
    with FakeGitHub(fail_with=status) as fake:
        monkeypatch.setenv("GITHUB_API_URL", fake.url)
        code, out, err = run_cli(["review", "--base", "main", "--post"], capsys)
    assert code == 2
    assert expected in err and len(err.strip().splitlines()) == 1
    assert TOKEN not in out + err


def test_rate_limit_message(actions_env, monkeypatch, capsys):
    with FakeGitHub(rate_limited=True) as fake:
        monkeypatch.setenv("GITHUB_API_URL", fake.url)
        code, out, err = run_cli(["review", "--base", "main", "--post"], capsys)
    assert code == 2 and "rate limit exceeded" in err and "resets at" in err
    assert TOKEN not in out + err


def test_post_needs_token_and_pull_request(review_repo, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_REPOSITORY", "octo/trainer")
    code, _, err = run_cli(["review", "--base", "main", "--post", "--pr", "7"], capsys)
    assert code == 2 and "GITHUB_TOKEN is not set" in err
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    code, _, err = run_cli(["review", "--base", "main", "--post"], capsys)
    assert code == 2 and "no pull request number" in err


def test_multi_line_suggestion_uses_start_line(review_repo, capsys):
    script = (review_repo / "train.py").read_text()
    script = script.replace(
        "        total = loss.item()\n",
        "        total = loss.item()\n        logger.info(\n            \"step %d\", step,\n        )\n",
    )
    (review_repo / "train.py").write_text("import logging\nlogger = logging.getLogger()\n" + script)
    git(review_repo, "commit", "-q", "-am", "log")
    code, out, _ = run_cli(["review", "--base", "main", "--format", "json"], capsys)
    comments = [c for c in json.loads(out)["comments"] if "**gpulint GL302**" in c["body"]]
    assert len(comments) == 1
    comment = comments[0]
    rows = (review_repo / "train.py").read_text().splitlines()
    start = rows.index("        logger.info(") + 1
    assert (comment["start_line"], comment["line"], comment["start_side"]) == (start, start + 2, "RIGHT")
    block = comment["body"].split("```suggestion\n", 1)[1].split("\n```", 1)[0]
    assert block.splitlines()[0].strip().startswith("if step %") and "logger.info(" in block
