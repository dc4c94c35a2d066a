"""gpulint: find and fix the code that starves your GPUs before you buy more of them."""

import os

__version__ = "0.1.0"

# Where the documentation lives.  Every output that links a rule's page (JSON, SARIF, rdjson, review
# comments, `gpulint rule`, the language server) builds the link with `docs_url`, so a fork or an
# internal mirror sets one environment variable: GPULINT_DOCS_URL, either the docs folder's address
# (a rule's page is <it>/rules/<ID>.md, as in docs/) or a template with {code} (and {name}).
DEFAULT_DOCS_URL = "https://github.com/gpulint/gpulint/blob/main/docs"
DOCS_URL_VARIABLE = "GPULINT_DOCS_URL"


def docs_url(code: str, name: str = "") -> str:
    """The address of a rule's documentation page."""
    base = os.environ.get(DOCS_URL_VARIABLE, "").strip() or DEFAULT_DOCS_URL
    if "{code}" in base:
        return base.format(code=code, name=name)
    return f"{base.rstrip('/')}/rules/{code}.md"
