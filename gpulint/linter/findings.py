"""What a lint run produces: findings, their locations, and the fixes attached to them.

A finding a rule reports with a `hint` is one it found no evidence of a real cost for (a
DataLoader over a dataset built elsewhere, a run of ten batches): the engine holds it back --
not reported, not counted, not fixed -- unless hints are shown for its rule (`--show-hints`, the
`show-hints` setting, or the rule named by its full code in `select` / `extend-select`), and counts
what it held back for the summary.

A finding is born holding the libcst node it points at (positions are expensive, so they are
computed once per file and only for files that have findings); `locate()` turns it into the plain,
picklable record that reporters, the cache and worker processes exchange.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # findings are read by every run; libcst is imported only by runs that parse
    import libcst as cst


class Applicability(str, enum.Enum):
    """How sure a fix is to keep behaviour (ruff's terms)."""

    SAFE = "safe"  # keeps behaviour: applied by --fix
    UNSAFE = "unsafe"  # may change behaviour: only with --unsafe-fixes


@dataclass(frozen=True)
class Location:
    """1-based line, 1-based column, as editors and ruff show them."""

    row: int
    column: int


@dataclass(frozen=True)
class Edit:
    """Replace the text between `location` and `end_location` (end exclusive) with `content`."""

    content: str
    location: Location
    end_location: Location


@dataclass
class Fix:
    """A change to the tree that removes a finding.

    `replacements` maps original nodes (by identity) to their replacements.  `imports` are
    statements (`"import os"`) the new code needs; the fixer adds each one once, and only if the
    module does not already bind the name.  `unbinds` are names the new code may no longer use
    (`amp` after `amp.GradScaler()` became `torch.amp.GradScaler("cuda")`): the fixer drops their
    module-level imports when nothing else mentions them.  `min_torch` is the oldest PyTorch
    (major, minor) the new code runs on: a project that targets an older one is not offered it.
    """

    applicability: Applicability
    message: str
    replacements: Mapping[cst.CSTNode, cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel]
    imports: tuple[str, ...] = ()
    unbinds: tuple[str, ...] = ()
    min_torch: tuple[int, int] | None = None


# Every item augmented: image transforms applied per item by a DataLoader's dataset, or random
# augmentation drawn per element by a tf.data `map` (RawFinding.evidence).
AUGMENTS_EVERY_ITEM = "augments"

# The classes of evidence (RawFinding.evidence) that show a finding by default although its rule is
# held back (Rule.hint_by_default): those whose labelled findings on the whole-repository set were
# more than half wanted, and right on the training-script corpus (docs/precision.md, "Evidence that
# lifts the hold").  Files read or decoded per item, or items tokenized, were not: they stay held.
EVIDENCE_THAT_LIFTS_THE_HOLD = frozenset({AUGMENTS_EVERY_ITEM})


@dataclass
class RawFinding:
    """A finding as a rule reports it, still pointing into the parsed tree."""

    code: str
    name: str
    message: str
    node: cst.CSTNode
    fix: Fix | None = None
    severity: str = "warning"
    hint: str | None = None  # no evidence of a real cost: why (the finding is held back unless hints are shown)
    # The class of evidence of a real cost the rule found (`EVIDENCE_THAT_LIFTS_THE_HOLD`):
    # what decides whether a finding of a rule held back by default is shown all the same.
    evidence: str | None = None


@dataclass(frozen=True)
class FixInfo:
    """The picklable description of a fix, with the text edits it makes to the file."""

    applicability: Applicability
    message: str
    edits: tuple[Edit, ...] = ()


@dataclass(frozen=True)
class SourceLine:
    """The line a finding starts on, as the `full` text format shows it under the finding.

    A long line is kept as a window around the finding (a minified file must not put megabytes in
    every finding and cache entry): `text` then starts or ends with `…`, and `first_column` is the
    1-based column `text[0]` stands at, so the finding's column is at `text[column - first_column]`.
    """

    text: str
    first_column: int = 1

    WIDTH = 240  # characters kept of a longer line
    BEFORE = 80  # of them, before the finding's column

    @classmethod
    def of(cls, line: str, column: int) -> SourceLine:
        """The line (without its line break) or its window around 1-based `column`."""
        line = line.rstrip("\r\n")
        if len(line) <= cls.WIDTH:
            return cls(line)
        start = max(0, min(column - 1 - cls.BEFORE, len(line) - cls.WIDTH))
        end = start + cls.WIDTH
        text = ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")
        return cls(text, first_column=start if start else 1)


@dataclass(frozen=True)
class RelatedLocation:
    """A place elsewhere that explains a finding: for one in a helper that another module runs on
    every step, each call on the way from the training loop to it ("called from train.py:42 in the
    training loop at train.py:40", then "via utils.py:10 in `step()`").  `message` names its own
    location, so it reads the same in formats that show only the text."""

    path: str
    location: Location
    message: str


@dataclass(frozen=True)
class Finding:
    """A located finding: what reporters print and what the cache stores."""

    code: str
    name: str
    message: str
    path: str
    location: Location
    end_location: Location
    severity: str = "warning"
    fix: FixInfo | None = None
    # The first line of the statement that holds the finding: a suppression comment there counts
    # too, which is how a multi-line call is silenced without touching its inner lines.
    statement_row: int | None = None
    # For sources that are not plain modules (notebooks): how to show the location to a person,
    # e.g. "cell 3:2:5".  None for .py files.
    display_location: str | None = None
    extra: dict = field(default_factory=dict, compare=False)
    # The text of the line it starts on (a window of a long one), for the `full` text format.
    source_line: SourceLine | None = field(default=None, compare=False)
    # Why it runs every step when that comes from another module: the call chain from the loop,
    # outermost first (analysis/project.py `ProjectIndex.chain`).  Empty for a finding its own
    # module explains.
    related: tuple[RelatedLocation, ...] = ()
    # Why the finding is only a hint (RawFinding.hint): held back unless hints are shown for its
    # rule (config.py `Settings.shows_hints_of`); None for a finding with evidence of a real cost.
    hint: str | None = None

    @property
    def shown_message(self) -> str:
        """The message as the formats that carry one text show it: a shown hint says why it is one."""
        return self.message if self.hint is None else f"{self.message} (hint: {self.hint})"

    def sort_key(self) -> tuple:
        # Notebook findings are cell-relative: the cell orders them first.
        return (self.path, self.extra.get("cell") or 0, self.location.row, self.location.column, self.code)


SYNTAX_ERROR_CODE = "GL000"
# The default `max-findings-per-file`: a file with more is skipped with a message (what a reader or
# a review can use stops well before; generated code holds thousands).
DEFAULT_MAX_FINDINGS_PER_FILE = 1000
SYNTAX_ERROR_NAME = "syntax-error"
