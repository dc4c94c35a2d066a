"""Property tests: no input crashes the linter, and `--fix` output always parses.

Generated modules (hypothesmith) get a header that passes the prefilter (it names torch and
tensorflow and the tokens rules look for), so every rule's visitor and the shared analyses really run
on them; mutated fixtures exercise realistic code broken in realistic ways.
"""

from __future__ import annotations

import hypothesmith
import libcst as cst
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from gpulint.linter.analysis.parse import SyntaxErrorInSource, UndecodableSource
from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.fix.passes import fix_source
from tests.helpers import FIXTURES

HEADER = (
    "import torch\nimport tensorflow as tf\nfrom torch.utils.data import DataLoader\n"
    "device = 'cuda'  # DataLoader .item( .cpu( .map( print log eval jit_compile\n"
)
LINTER = Linter(Settings(select=["ALL"]))
FIXTURE_LINES = [line for path in sorted(FIXTURES.glob("*.py")) for line in path.read_text().splitlines()]
SLOW = hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def check(source: bytes) -> None:
    """Lint and fix; the only acceptable failure is the input itself not parsing."""
    try:
        LINTER.lint_source(source, "generated.py", with_edits=True)
        outcome = fix_source(LINTER, source, "generated.py", unsafe=True)
    except (SyntaxErrorInSource, UndecodableSource):
        return
    cst.parse_module(outcome.source)


@SLOW
@given(hypothesmith.from_grammar())
def test_generated_modules_never_crash(code):
    check((HEADER + code).encode())


@SLOW
@given(hypothesmith.from_node())
def test_generated_syntax_trees_never_crash(code):
    check((HEADER + code).encode())


@SLOW
@given(
    st.lists(st.sampled_from(FIXTURE_LINES), min_size=1, max_size=60),
    st.lists(st.sampled_from(["    ", "", "\t", "        "]), min_size=60, max_size=60),
)
def test_shuffled_fixture_lines_never_crash(lines, indents):
    text = "\n".join(indent + line.strip() for indent, line in zip(indents, lines, strict=False)) + "\n"
    check((HEADER + text).encode())


@SLOW
@given(st.data())
def test_mutated_fixtures_never_crash(data):
    path = data.draw(st.sampled_from(sorted(FIXTURES.glob("*.py"))))
    lines = path.read_text().splitlines(keepends=True)
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(lines) - 1))
        action = data.draw(st.sampled_from(["drop", "duplicate", "indent", "dedent", "truncate"]))
        if action == "drop":
            del lines[index]
        elif action == "duplicate":
            lines.insert(index, lines[index])
        elif action == "indent":
            lines[index] = "    " + lines[index]
        elif action == "dedent":
            lines[index] = lines[index].lstrip()
        else:
            lines[index] = lines[index][: len(lines[index]) // 2] + "\n"
        if not lines:
            lines = ["\n"]
    check("".join(lines).encode())
