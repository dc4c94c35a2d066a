"""`gpulint review`: findings only on added lines, suggestion blocks, and `--post` against a local
server that plays the GitHub REST endpoints (what it receives, and idempotence)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.findings import Applicability, Edit, Finding, FixInfo, Location
from gpulint.linter.printable import quote_diff_path
from gpulint.review.comments import MAX_BODY_CHARS, comment_body
from gpulint.review.diff import parse_diff, unquote_git_path
from tests.integrations.conftest import CHANGED_SCRIPT, git, run_cli

TOKEN = "ghs_secretTOKEN1234567890"
SHOW_HINTS = "[tool.gpulint]\nshow-hints = true\n"


@pytest.fixture
def shows_hints(review_repo) -> Path:
    """The review repository with hints shown: most of the findings these tests follow (GL101,
    GL102, GL302 on the new lines) are held back as hints by default, and the tests are about how
    the review posts findings its owner wants."""
    (review_repo / "pyproject.toml").write_text(SHOW_HINTS)
    git(review_repo, "add", "pyproject.toml")
    git(review_repo, "commit", "-q", "-m", "show hints")
    return review_repo


def _added_rows() -> set[int]:
    rows = {i for i, line in enumerate(CHANGED_SCRIPT.splitlines(), 1) if "val_loader" in line or "total =" in line}
    assert len(rows) == 2
    return rows


@pytest.mark.usefixtures("shows_hints")
def test_comments_only_on_added_lines_with_suggestions(review_repo, capsys):
    code, out, err = run_cli(["review", "--base", "main", "--format", "json"], capsys)
    assert code == 1, err
    payload = json.loads(out)
    comments = payload["comments"]
    assert {c["line"] for c in comments} <= _added_rows()
    by_code = {code: c for c in comments for code in _codes(c["body"])}
    # the new loader: GL101 (unsafe fix) and GL102 (safe fix); the new .item(): GL201.  The old
    # print(loss.item()) on an unchanged line gets no comment.
    assert set(by_code) == {"GL101", "GL102", "GL201"}
    # both loader fixes replace the same line: one comment, one suggestion with both, naming both
    # rules with their docs, labelled unsafe (GL101's fix is), and the import GL101's fix adds
    assert len(comments) == 2 and by_code["GL101"] is by_code["GL102"]
    loader = by_code["GL102"]["body"]
    block = loader.split("```suggestion\n", 1)[1].split("\n```", 1)[0]
    assert "pin_memory=True" in block and "num_workers=min(8, os.cpu_count() or 1)" in block
    assert "docs/rules/GL101.md" in loader and "docs/rules/GL102.md" in loader and "unsafe" in loader
    assert "`import os`" in loader and "ignore[GL101, GL102]" in loader
    assert "```suggestion" not in by_code["GL201"]["body"]
    for comment in comments:
        assert comment["side"] == "RIGHT" and comment["path"] == "train.py"


def _codes(body: str) -> list[str]:
    """The rules a comment is about, by its hidden markers."""
    return re.findall(r"<!-- gpulint:(GL\d+):", body)


def _suggestions(body: str) -> list[str]:
    return [part.split("\n```", 1)[0] for part in body.split("```suggestion\n")[1:]]


def _review_of(repo: Path, new_lines: str, capsys) -> list[dict]:
    """The review comments for a commit that adds `new_lines` to the training loop (before the
    backward pass: away from the loop's other fixable lines)."""
    script = (repo / "train.py").read_text()
    (repo / "train.py").write_text(script.replace("        loss.backward()\n", new_lines + "        loss.backward()\n"))
    git(repo, "commit", "-q", "-am", "more")
    code, out, err = run_cli(["review", "--base", "main", "--format", "json"], capsys)
    assert code == 1, err
    return json.loads(out)["comments"]


def test_copies_in_one_line_are_one_suggestion(review_repo, capsys):
    """`x, y = x.to(device), y.to(device)`: one GL104 finding for the statement's two copies, with one
    fix for both (two suggestions would each undo the other); the one suggestion is the line as `--fix`
    writes it.
    (The step reads the loss back every step, so GL104's findings are hints: the review posts them
    only where the configuration shows hints.)"""
    held = _review_of(review_repo, "        x, y = x.to(device), y.to(device)\n", capsys)
    assert not [c for c in held if "GL104" in _codes(c["body"])]
    (review_repo / "pyproject.toml").write_text(SHOW_HINTS)
    git(review_repo, "add", "pyproject.toml")
    comments = _review_of(review_repo, "", capsys)
    on_line = [c for c in comments if "x.to(device" in "".join(_suggestions(c["body"]))]
    assert len(on_line) == 1
    (suggested,) = _suggestions(on_line[0]["body"])
    assert suggested == "        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)"
    assert _codes(on_line[0]["body"]) == ["GL104"]  # the finding marked: not posted again
    fixed, _ = _fixed_by_cli(review_repo, capsys)
    assert suggested in fixed.splitlines()


@pytest.mark.usefixtures("shows_hints")
def test_two_rules_with_the_same_fix_are_one_suggestion(review_repo, capsys):
    """GL302 and GL201 on `print(score.item())` both guard it: one comment naming both rules, one guard.
    (A read of `loss` would not do: the script reads the loss back on every step anyway, so guarding
    that read saves nothing and GL201 offers no fix there.)"""
    new_lines = "        score = model(x.cuda(non_blocking=True), y).mean()\n        print(score.item())\n"
    comments = _review_of(review_repo, new_lines, capsys)
    guarded = [c for c in comments if "GL302" in _codes(c["body"])]
    assert len(guarded) == 1 and set(_codes(guarded[0]["body"])) == {"GL201", "GL302"}
    body = guarded[0]["body"]
    (suggested,) = _suggestions(body)
    assert suggested.count("if step %") == 1 and "print(score.item())" in suggested
    assert "docs/rules/GL201.md" in body and "docs/rules/GL302.md" in body
    # what `--fix --unsafe-fixes` writes for these lines (GL201's fix is unsafe)
    _, fixed = _fixed_by_cli(review_repo, capsys)
    assert suggested in fixed
    rows = (review_repo / "train.py").read_text().splitlines()
    added = next(i for i, row in enumerate(rows, 1) if row == "        print(score.item())")
    assert guarded[0]["line"] == added


def _paragraphs(body: str) -> list[str]:
    return body.split("\n\n")


def test_a_comment_is_the_findings_own_message_and_a_link_not_the_docs_section(review_repo, capsys):
    """The comment says what the finding says; the rule's explanation (what it finds, its edge
    cases) stays on the docs page the comment links to."""
    from gpulint.rules import rules_by_code

    code, out, err = run_cli(["review", "--base", "main", "--format", "json"], capsys)
    assert code == 1, err
    comments = json.loads(out)["comments"]
    for comment in comments:
        for rule_code in _codes(comment["body"]):
            summary = rules_by_code()[rule_code].summary()
            assert summary not in comment["body"], comment["body"]
    (sync,) = [c for c in comments if _codes(c["body"]) == ["GL201"]]  # `total = loss.item() + ...`: no fix
    message = "`.item()` in the training loop makes the CPU wait for the GPU every step"
    assert _paragraphs(sync["body"]) == [
        f"**gpulint GL201** (`host-sync-in-loop`): {message}",
        "[GL201 documentation](https://github.com/gpulint/gpulint/blob/main/docs/rules/GL201.md)"
        " · silence with `# gpulint: ignore[GL201]`",
        _paragraphs(sync["body"])[-1],
    ]
    assert re.fullmatch(r"<!-- gpulint:GL201:[0-9a-f]+ -->", _paragraphs(sync["body"])[-1])


@pytest.mark.usefixtures("shows_hints")
def test_a_line_with_several_findings_gets_one_comment_naming_each(review_repo, capsys):
    """GL302 and GL201 on one added `print(loss.item())`, in a loop that reads the loss back anyway
    (so GL201 has no fix to suggest): one comment on the line, listing both."""
    comments = _review_of(review_repo, "        print(loss.item())\n", capsys)
    rows = (review_repo / "train.py").read_text().splitlines()
    added = next(i for i, row in enumerate(rows, 1) if row == "        print(loss.item())")
    on_line = [c for c in comments if c.get("start_line", c["line"]) <= added <= c["line"]]
    assert len(on_line) == 1, on_line
    body = on_line[0]["body"]
    assert sorted(_codes(body)) == ["GL201", "GL302"]
    assert "\n- **GL302** (`per-step-logging`): " in body and "\n- **GL201** (`host-sync-in-loop`): " in body
    assert "docs/rules/GL201.md" in body and "docs/rules/GL302.md" in body
    assert len({(c.get("start_line"), c["line"]) for c in comments}) == len(comments)  # one comment per line


# A change that adds lines next to unchanged lines that have fixes of their own: the loader below the
# old one, the print above the old copy.  `gpulint --fix` rewrites each pair of lines as one block.
NEIGHBOURS_BASE = """\
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

def train(dataset, model, optimizer, device):
    model.cuda()
    loader = DataLoader(dataset, batch_size=32)
    for step, (x, y) in enumerate(loader):
        loss = model(x.cuda(non_blocking=True), y)
        loss.backward()
        optimizer.step()
        y = y.to(device)
    return evaluate(model)


if __name__ == "__main__":
    train(ImageFolder("data"), *build())
"""
NEIGHBOURS_CHANGED = (
    NEIGHBOURS_BASE.replace(
        "    loader = DataLoader(dataset, batch_size=32)\n",
        "    loader = DataLoader(dataset, batch_size=32)\n    eval_loader = DataLoader(dataset, batch_size=64)\n",
    )
    .replace("        y = y.to(device)\n", "        print(loss.item())\n        y = y.to(device)\n")
    .replace("evaluate(model)", "evaluate(model, eval_loader)")
)


@pytest.mark.usefixtures("shows_hints")
def test_suggestions_replace_only_lines_the_change_adds(review_repo, capsys):
    """Accepting a suggestion never changes a line the pull request did not touch: the new
    loader's two fixes (which `--fix` writes as one block with the old loader's) get no suggestion,
    the new print's guard (both rules' one fix) a suggestion over the print alone."""
    (review_repo / "train.py").write_text(NEIGHBOURS_BASE)
    git(review_repo, "commit", "-q", "-am", "base of the neighbours")
    git(review_repo, "branch", "-f", "neighbours-base")
    (review_repo / "train.py").write_text(NEIGHBOURS_CHANGED)
    git(review_repo, "commit", "-q", "-am", "lines next to fixable ones")
    code, out, err = run_cli(["review", "--base", "neighbours-base", "--format", "json"], capsys)
    assert code == 1, err
    comments = json.loads(out)["comments"]
    rows = NEIGHBOURS_CHANGED.splitlines()
    loader = rows.index("    eval_loader = DataLoader(dataset, batch_size=64)") + 1
    printed = rows.index("        print(loss.item())") + 1
    assert sorted((c.get("start_line", c["line"]), c["line"]) for c in comments) == [
        (loader, loader),
        (printed, printed),
    ]
    by_line = {c["line"]: c["body"] for c in comments}
    assert sorted(_codes(by_line[loader])) == ["GL101", "GL102"] and not _suggestions(by_line[loader])
    assert "- GL101: " in by_line[loader] and "- GL102: " in by_line[loader]
    assert "apply them together with `gpulint --fix --unsafe-fixes`" in by_line[loader]
    (guard,) = _suggestions(by_line[printed])
    assert guard == "        if step % 100 == 0:\n            print(loss.item())"
    _, fixed = _fixed_by_cli(review_repo, capsys)
    assert guard in fixed  # what `--fix --unsafe-fixes` writes for the print


def test_lines_whose_suggestions_overlap_share_one_only_when_their_fixes_combine():
    """Two findings on two lines of one statement, each fix rewriting both lines: one comment with
    one suggestion when the whole file's fixes give those lines, else a comment per line and no
    suggestion (accepting one would leave the other's suggestion on lines that changed)."""
    from gpulint.review.comments import make_comments

    lines = ("total = f(", "    1)", "print(total)")

    def finding(row: int, code: str, replacement: str) -> Finding:
        edit = Edit(replacement, Location(1, 1), Location(3, 1))
        fix = FixInfo(Applicability.SAFE, f"fix {code}", (edit,))
        return Finding(code, "example", f"problem {code}", "x.py", Location(row, 1), Location(row, 2), fix=fix)

    pairs = [
        (finding(1, "GL104", "total = g(\n    1)\n"), "1" * 32),
        (finding(2, "GL105", "total = f(\n    2)\n"), "2" * 32),
    ]
    apart = make_comments("x.py", pairs, lines, {1, 2}, lambda unsafe: None)
    assert [(c.start_line, c.line, [f.code for f, _ in c.findings]) for c in apart] == [
        (None, 1, ["GL104"]),
        (None, 2, ["GL105"]),
    ]
    assert not any("```suggestion" in c.body for c in apart)
    both = [Edit("total = g(\n    2)\n", Location(1, 1), Location(3, 1))]
    (shared,) = make_comments("x.py", pairs, lines, {1, 2}, lambda unsafe: both)
    assert (shared.start_line, shared.line) == (1, 2) and "```suggestion\ntotal = g(\n    2)\n```" in shared.body
    # a row the change did not add is never replaced, even when every fix reaches it
    (alone,) = make_comments("x.py", pairs[:1], lines, {1}, lambda unsafe: both)
    assert "```suggestion" not in alone.body and "Fix: fix GL104 (apply with `gpulint --fix`)." in alone.body


def _fixed_by_cli(repo: Path, capsys) -> tuple[str, str]:
    """train.py as `gpulint --fix` and `--fix --unsafe-fixes` write it (the file is put back)."""
    original = (repo / "train.py").read_text()
    fixed = []
    for flags in (["--fix"], ["--fix", "--unsafe-fixes"]):
        run_cli(["train.py", *flags, "--exit-zero"], capsys)
        fixed.append((repo / "train.py").read_text())
        (repo / "train.py").write_text(original)
    return fixed[0], fixed[1]


def _loader_line_comments(fixed_edits) -> list:
    """make_comments for the findings on CHANGED_SCRIPT's new loader line (GL101 and GL102), with
    the given whole-file fixer."""
    from gpulint.review.comments import make_comments

    result = Linter(Settings(show_hints=True)).lint_source(CHANGED_SCRIPT.encode(), "train.py", with_edits=True)
    row = next(i for i, line in enumerate(CHANGED_SCRIPT.splitlines(), 1) if "val_loader" in line)
    findings = [f for f in result.findings if f.location.row == row]
    rows = set(range(1, CHANGED_SCRIPT.count("\n") + 1))
    pairs = [(f, f"{i:032x}") for i, f in enumerate(findings)]
    return make_comments("train.py", pairs, tuple(CHANGED_SCRIPT.splitlines()), rows, fixed_edits)


def test_a_shared_comment_is_posted_again_only_when_one_of_its_findings_is_new():
    from gpulint.review.comments import existing_keys, is_duplicate

    (shared,) = _loader_line_comments(lambda unsafe: None)
    (first, first_print), (second, second_print) = shared.findings
    assert {first.code, second.code} == {"GL101", "GL102"}
    both = existing_keys(
        [
            {
                "body": f"<!-- gpulint:{first.code}:{first_print} --><!-- gpulint:{second.code}:{second_print} -->",
                "path": "train.py",
                "line": 99,
            }
        ]
    )
    assert is_duplicate(shared, *both)
    one = existing_keys([{"body": f"<!-- gpulint:{first.code}:{first_print} -->", "path": "train.py", "line": 99}])
    assert not is_duplicate(shared, *one)


def test_when_the_file_cannot_be_fixed_a_shared_comment_names_the_fixes_without_a_suggestion():
    """Each finding's own suggestion alone would undo the other's: none is shown, the fixes are named."""
    (shared,) = _loader_line_comments(lambda unsafe: None)
    assert (
        "```suggestion" not in shared.body and "apply them together with `gpulint --fix --unsafe-fixes`" in shared.body
    )
    assert "- GL101: " in shared.body and "- GL102: " in shared.body
    assert shared.start_line is None and shared.line == shared.finding.location.row


@pytest.mark.usefixtures("shows_hints")
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


def test_parse_diff_counts_rows_at_newlines_only():
    """A line separator or a NEL inside an added line is not a row of its own (str.splitlines
    would make it one and shift every row after it)."""
    diff = "--- a/x.py\n+++ b/x.py\n@@ -1,0 +1,3 @@\n+s = 'a\u2028 b\x85+c'\n+t = 1\n+u = 2\n"
    assert parse_diff(diff)["x.py"].added == parse_diff(diff)["x.py"].commentable == {1, 2, 3}


@pytest.mark.parametrize(
    "name", ['ü"x.py', '日"x.py', "new\nline.py", "tab\tand\\.py", "bell\a.py", "plain.py", os.fsdecode(b"caf\xe9.py")]
)
def test_unquote_git_path_reads_what_git_writes(name):
    # quote_diff_path writes every non-ASCII byte in octal, as git does by default
    assert unquote_git_path(quote_diff_path(name)) == name
    assert unquote_git_path(f'"{name.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"') == name


def test_comment_body_is_cut_to_githubs_limit_keeping_the_marker():
    linter = Linter(Settings(select=["GL102"]))
    finding = linter.lint_source(CHANGED_SCRIPT.encode(), "train.py", with_edits=True).findings[0]
    body = comment_body(replace(finding, message="very long " * 10_000), "0" * 32, None)
    assert len(body) == MAX_BODY_CHARS
    assert "(Cut here: GitHub takes at most 65,536 characters in a comment.)" in body
    assert body.endswith("<!-- gpulint:GL102:" + "0" * 32 + " -->")


# -- a fake GitHub ----------------------------------------------------------------------------------
class FakeGitHub:
    """Plays GET .../pulls/N/comments (paginated) and POST .../pulls/N/reviews, recording requests;
    posted review comments become existing comments, as on GitHub."""

    def __init__(self, fail_with: int | None = None, rate_limited: bool = False, read_only: bool = False) -> None:
        self.requests: list[dict] = []
        self.comments: list[dict] = []
        self.fail_with = fail_with
        self.rate_limited = rate_limited
        # A pull request from a fork: the workflow's token reads the pull request but may not write.
        self.read_only = read_only
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
                fake.requests.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                )

            def do_GET(self):
                self._record()
                if fake.rate_limited:
                    return self._reply(
                        403,
                        {"message": "API rate limit exceeded for installation"},
                        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1700000000"},
                    )
                if fake.fail_with:
                    return self._reply(
                        fake.fail_with, {"message": "Bad credentials" if fake.fail_with == 401 else "nope"}
                    )
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
                if fake.read_only:
                    return self._reply(403, {"message": "Resource not accessible by integration"})
                if fake.fail_with == 422:
                    return self._reply(
                        422, {"message": "Unprocessable Entity", "errors": ["Line could not be resolved"]}
                    )
                if self.path != "/repos/octo/trainer/pulls/7/reviews":
                    return self._reply(404, {"message": "Not Found"})
                for comment in body.get("comments", []):
                    fake.comments.append({**comment, "id": len(fake.comments) + 1, "original_line": comment["line"]})
                return self._reply(200, {"id": 1, "html_url": "https://github.com/octo/trainer/pull/7#review-1"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        # (shutdown() waits for the serving loop's next look: every 0.5 s by default)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def actions_env(shows_hints, tmp_path, monkeypatch):
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "head": {"sha": "abc123" * 6 + "abcd"}}}))
    monkeypatch.setenv("GITHUB_REPOSITORY", "octo/trainer")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    return shows_hints


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
        assert len(body["comments"]) == 2  # GL101 and GL102 share the loader line's comment
        for comment in body["comments"]:
            assert set(comment) <= {"path", "body", "line", "side", "start_line", "start_side"}
            assert comment["line"] in _added_rows() and "<!-- gpulint:" in comment["body"]
        assert "Posted a review with 2 comments" in err

        # Second run: the comments are there (over two pages), nothing new is posted.
        fake.requests.clear()
        code, out, err = run_cli(["review", "--base", "main", "--post", "--exit-zero"], capsys)
        assert code == 0, err
        assert [r["method"] for r in fake.requests] == ["GET", "GET"]  # both pages read, no POST
        assert "Nothing new to post" in err

        # A new finding on a new commit: only it is posted.
        script = (actions_env / "train.py").read_text()
        (actions_env / "train.py").write_text(
            script + "\n\ndef probe(dataset):\n    return DataLoader(dataset, num_workers=2)\n"
        )
        git(actions_env, "commit", "-q", "-am", "probe")
        fake.requests.clear()
        code, _, err = run_cli(["review", "--base", "main", "--post"], capsys)
        assert code == 1, err  # findings on added lines, no --exit-zero
        posts = [r for r in fake.requests if r["method"] == "POST"]
        assert len(posts) == 1
        assert [code for c in posts[0]["body"]["comments"] for code in _codes(c["body"])] == ["GL102"]


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


# A finding's annotation: a warning, or a notice for a finding shown as a hint (reporters/github.py).
_ANNOTATION_STARTS = ("::warning file=train.py,line=", "::notice file=train.py,line=")


def _levels(annotations: list[str]) -> dict[str, str]:
    """Each annotated rule's level (warning, notice)."""
    return {a.split("title=")[1].split(" ")[0]: a[2:].split(" ")[0] for a in annotations}


def test_fork_pull_request_falls_back_to_annotations(actions_env, monkeypatch, capsys):
    """The token of a fork's pull request cannot create reviews (403): the comments become
    annotations, and the exit code follows the findings."""
    with FakeGitHub(read_only=True) as fake:
        monkeypatch.setenv("GITHUB_API_URL", fake.url)
        code, out, err = run_cli(["review", "--base", "main", "--post", "--fallback", "annotations"], capsys)
        assert [r["method"] for r in fake.requests] == ["GET", "POST"]  # it did try to post
    assert code == 1  # findings on added lines, no --exit-zero
    annotations = out.strip().splitlines()
    assert len(annotations) == 3 and all(a.startswith(_ANNOTATION_STARTS) for a in annotations)
    assert _levels(annotations) == {"GL101": "notice", "GL102": "notice", "GL201": "warning"}  # hints: notices
    assert {int(a.split("line=")[1].split(",")[0]) for a in annotations} <= _added_rows()
    assert {a.split("title=")[1].split("::")[0] for a in annotations} >= {
        "GL102 dataloader-unpinned",
        "GL201 host-sync-in-loop",
    }
    assert err.count("\n") == 1 and "warning: could not post the review: forbidden" in err and "3 findings" in err
    assert TOKEN not in out + err


def test_fork_pull_request_with_exit_zero_warns_and_exits_0(actions_env, monkeypatch, capsys):
    with FakeGitHub(read_only=True) as fake:
        monkeypatch.setenv("GITHUB_API_URL", fake.url)
        code, out, err = run_cli(["review", "--base", "main", "--post", "--exit-zero"], capsys)
        assert code == 0 and out == ""
        assert err.startswith("gpulint: warning: could not post the review: forbidden") and err.count("\n") == 1
        # without either, a refusal is an error
        code, _, err = run_cli(["review", "--base", "main", "--post"], capsys)
        assert code == 2 and err.startswith("gpulint: error: forbidden")
        code, _, err = run_cli(["review", "--base", "main", "--post", "--fallback", "sarif"], capsys)
        assert code == 2 and "invalid choice: 'sarif'" in err


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


@pytest.mark.usefixtures("shows_hints")
def test_multi_line_suggestion_uses_start_line(review_repo, capsys):
    script = (review_repo / "train.py").read_text()
    script = script.replace(
        "        total = loss.item() + blend(val_loader)\n",
        "        total = loss.item() + blend(val_loader)\n"
        '        logger.info(\n            "step %d grad norm %s", step, model.weight.grad.norm(),\n        )\n',
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


# -- the composite Action -----------------------------------------------------------------------------
ACTION = Path(__file__).resolve().parents[2] / "action.yml"


def _action_steps() -> dict[str, dict]:
    import yaml

    steps = yaml.safe_load(ACTION.read_text(encoding="utf-8"))["runs"]["steps"]
    return {step.get("id") or step["name"]: step for step in steps}


def test_action_brings_its_own_python_and_keeps_expressions_out_of_scripts():
    steps = _action_steps()
    python = steps["python"]
    assert python["uses"].startswith("actions/setup-python@")
    assert python["with"]["update-environment"] is False  # the job's own Python is left alone
    for step in steps.values():
        # inputs reach scripts through env: an expression pasted into a script is an injection hole
        assert "${{" not in step.get("run", ""), step["name"]


def _run_action_step(mode: str, tmp_path: Path, **inputs: str) -> subprocess.CompletedProcess:
    """The Action's `run` step, as the runner executes it, with gpulint installed where the install
    step puts it (`$RUNNER_TEMP/gpulint/bin`)."""
    runner_temp = tmp_path / "runner"
    (runner_temp / "gpulint" / "bin").mkdir(parents=True, exist_ok=True)
    launcher = runner_temp / "gpulint" / "bin" / "gpulint"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gpulint "$@"\n')
    launcher.chmod(0o755)
    env = {
        **os.environ,
        "RUNNER_TEMP": str(runner_temp),
        "INPUT_MODE": mode,
        "INPUT_FALLBACK": inputs.get("fallback", "annotations"),
        "INPUT_BASE": inputs.get("base", "main"),
        "INPUT_PATHS": inputs.get("paths", ""),
        "INPUT_ARGS": inputs.get("args", ""),
        "INPUT_FAIL": inputs.get("fail", "false"),
        "INPUT_SARIF_FILE": inputs.get("sarif_file", "gpulint.sarif"),
    }
    script = _action_steps()["run"]["run"]
    return subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True)


def test_action_on_a_fork_pull_request_annotates_and_passes(actions_env, monkeypatch, tmp_path):
    with FakeGitHub(read_only=True) as fake:
        monkeypatch.setenv("GITHUB_API_URL", fake.url)
        run = _run_action_step("review", tmp_path)
        assert run.returncode == 0, run.stderr
        assert len([line for line in run.stdout.splitlines() if line.startswith(_ANNOTATION_STARTS)]) == 3
        assert "could not post the review: forbidden" in run.stderr and TOKEN not in run.stdout + run.stderr
        # asked to fail on findings, the job fails (1: findings), still with the annotations
        run = _run_action_step("review", tmp_path, fail="true")
        assert run.returncode == 1 and sum(run.stdout.count(start) for start in _ANNOTATION_STARTS) == 3
        # with no fallback, a review that cannot be posted fails the step
        run = _run_action_step("review", tmp_path, fail="true", fallback="none")
        assert run.returncode == 2 and "forbidden" in run.stderr


def test_action_annotation_and_sarif_modes_need_no_review(actions_env, tmp_path):
    run = _run_action_step("annotations", tmp_path, args="--select GL1,GL2")
    assert run.returncode == 0, run.stderr
    codes = {line.split("title=")[1].split(" ")[0] for line in run.stdout.splitlines()}
    assert codes == {"GL101", "GL102", "GL201"}  # every finding of the tree, not only added lines

    run = _run_action_step("sarif", tmp_path, sarif_file=str(tmp_path / "out.sarif"))
    assert run.returncode == 0, run.stderr
    sarif = json.loads((tmp_path / "out.sarif").read_text())
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["results"]

    run = _run_action_step("comments", tmp_path)
    assert run.returncode == 2 and "unknown mode" in run.stdout
