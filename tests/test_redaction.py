"""The review bot's token and URL credentials never reach gpulint's output."""

from __future__ import annotations

import pytest

from gpulint.redaction import redact, register_secret
from gpulint.review.github import GitHub, GitHubError, check_api_url, check_token


def test_redact_registered_secrets_environment_tokens_and_url_credentials(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_fromTheEnvironment42\n")
    register_secret("registered-secret-value")
    text = "a ghs_fromTheEnvironment42 b registered-secret-value c https://user:pw@example.com/x ssh://git@host"
    assert redact(text) == "a *** b *** c https://***@example.com/x ssh://***@host"


def test_short_values_are_not_treated_as_secrets(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "a")
    assert redact("a cat") == "a cat"


@pytest.mark.parametrize("token", ["ghp_" + "a" * 36, "github_pat_" + "A1_" * 20, "ghs_x.y-z~+/=="])
def test_tokens_of_a_bearer_shape(token):
    check_token(token)


@pytest.mark.parametrize("token", ["", "ghp_x\n", "ghp x", "ghp_x\r\nHost: evil", "ghp_é", "a=b"])
def test_malformed_tokens_are_refused_without_showing_them(token):
    with pytest.raises(GitHubError) as error:
        check_token(token)
    assert not token or token.strip() not in str(error.value)


@pytest.mark.parametrize(
    "url, expected",
    [
        ("https://api.github.com/", "https://api.github.com"),
        ("https://ghe.example.com/api/v3", "https://ghe.example.com/api/v3"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://localhost:3000/", "http://localhost:3000"),
        ("http://[::1]:3000", "http://[::1]:3000"),
    ],
)
def test_api_urls_accepted(url, expected):
    assert check_api_url(url) == expected


@pytest.mark.parametrize(
    "url, reason",
    [
        ("http://api.github.com", "must be an https:// URL"),
        ("http://10.0.0.1", "must be an https:// URL"),
        ("file:///etc/passwd", "must be an https:// URL"),
        ("https://", "must be an https:// URL"),
        ("https://user:secret@api.github.com", "must not hold credentials \\(https://\\*\\*\\*@api.github.com\\)"),
        ("https://api.github.com:99999", "is not a URL"),
        ("https://api.github.com/\n", "whitespace or control characters"),
    ],
)
def test_api_urls_refused(url, reason):
    with pytest.raises(GitHubError, match=reason):
        check_api_url(url)
    with pytest.raises(GitHubError):
        GitHub("ghs_validToken123456", url)
