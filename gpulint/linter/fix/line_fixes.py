"""The fixes of a file as whole-line edits, and the rows a set of them covers: what a review
suggestion or an editor action needs to offer every fix on some lines at once, exactly as
`gpulint --fix` writes those lines (fix_source, then `line_edits` from the file to the result).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpulint.linter.analysis.parse import SyntaxErrorInSource, UndecodableSource
from gpulint.linter.analysis.parse_guard import UnanalysableSource
from gpulint.linter.engine import Linter
from gpulint.linter.findings import Edit
from gpulint.linter.fix.fixer import line_edits
from gpulint.linter.fix.passes import fix_source


def fixed_file_edits(linter: Linter, source: bytes, path: str, unsafe: bool) -> list[Edit] | None:
    """The whole-line edits `gpulint --fix` (with `--unsafe-fixes` when `unsafe`) makes to
    `source`; None when its fixes fail (they break the syntax or never settle), or it cannot be
    fixed at all (it does not parse, is not UTF-8, or is too deeply nested: see process_source)."""
    try:
        outcome = fix_source(linter, source, path, unsafe)
        if outcome.errors:
            return None
        return line_edits(source.decode("utf-8"), outcome.source.decode("utf-8"))
    except (SyntaxErrorInSource, UndecodableSource, UnanalysableSource, RecursionError, UnicodeDecodeError):
        return None


def covered_rows(edit: Edit) -> tuple[int, int]:
    """The rows a whole-line edit touches (an insertion touches the row before it, or the first)."""
    start, end = edit.location.row, edit.end_location.row
    if end > start:
        return start, end - 1
    return (start - 1, start - 1) if start > 1 else (start, start)


def grow_over(
    edits: Sequence[Edit], start: int, end: int, adjoining: bool = False
) -> tuple[int, int, list[Edit], list[Edit]]:
    """Rows start..end grown over the whole-line edits that overlap them (or, with `adjoining`,
    touch them), until none left does: (start, end, the edits taken, the edits left)."""
    reach = 1 if adjoining else 0
    pending = sorted(edits, key=lambda e: e.location.row)
    taken: list[Edit] = []
    changed = True
    while changed:
        changed = False
        for edit in list(pending):
            low, high = covered_rows(edit)
            if low <= end + reach and high >= start - reach:
                start, end = min(start, low), max(end, high)
                taken.append(edit)
                pending.remove(edit)
                changed = True
    return start, end, taken, pending
