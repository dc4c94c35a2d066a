"""Secrets never reach gpulint's output.

The review bot holds a GitHub token.  Anything that can end up in a message -- an exception that
quotes a header, an API error that echoes the request, a URL with `user:password@` in it -- goes
through `redact` before it is printed: every registered secret, the value of each variable in
SECRET_ENVIRONMENT, and the credentials part of any URL are replaced by `***`.
"""

from __future__ import annotations

import os
import re

SECRET_ENVIRONMENT = ("GITHUB_TOKEN",)
MASK = "***"
# scheme://user:password@host -> scheme://***@host
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s/@]+@")
# Shorter values are not secrets and would mask ordinary words.
_MIN_SECRET_LENGTH = 8

_registered: set[str] = set()


def register_secret(value: str) -> None:
    """Mask `value` (and its whitespace-stripped form) in everything `redact` sees from now on."""
    for form in (value, value.strip()):
        if len(form) >= _MIN_SECRET_LENGTH:
            _registered.add(form)


def _secrets() -> list[str]:
    found = set(_registered)
    for name in SECRET_ENVIRONMENT:
        value = os.environ.get(name, "")
        for form in (value, value.strip()):
            if len(form) >= _MIN_SECRET_LENGTH:
                found.add(form)
    return sorted(found, key=len, reverse=True)  # a secret that contains another goes first


def redact(text: str) -> str:
    """`text` with secrets and URL credentials replaced by `***`."""
    for secret in _secrets():
        text = text.replace(secret, MASK)
    return _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{MASK}@", text)
