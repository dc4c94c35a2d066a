"""gpulint: find and fix the code that starves your GPUs before you buy more of them."""

__version__ = "0.1.0"

# Where each rule's page lives; `{code}` is replaced by the rule id.  The pages are generated from
# the rule docstrings into docs/rules/ (scripts/gen_docs.py), so this is the one place to change if
# the project is published elsewhere.
DOCS_URL = "https://github.com/gpulint/gpulint/blob/main/docs/rules/{code}.md"
