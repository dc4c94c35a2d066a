"""GL900 unused-suppression.

Not a tree rule: it has nothing to visit, so selecting it never makes a file be parsed.  The
suppression stage implements it (gpulint.linter.suppressions.unused_suppression_findings): after
the other rules ran and their findings were matched against the file's suppression comments, the
comments that silenced nothing are its findings.
"""

from __future__ import annotations

from gpulint.linter.rule import Rule
from gpulint.linter.suppressions import UNUSED_SUPPRESSION, UNUSED_SUPPRESSION_NAME


class UnusedSuppression(Rule):
    """
    ## What it finds
    A `# gpulint: ignore[GL...]` or `# noqa: GL...` comment whose gpulint codes suppress no finding
    on its line: the code was fixed, moved, or the comment names the wrong rule.  Only gpulint's
    own codes (GL...) are reported, and only those of rules enabled for the file: a `# noqa: E501`
    belongs to another tool, and a code left out by `--select` may still be needed by a full run.
    A bare `# gpulint: ignore` that suppresses nothing is reported too; a bare `# noqa` is not
    (other tools read it).

    ## Why it is slow
    It is not slow; it keeps the suppression list honest.  A stale suppression hides the next
    real problem written on that line, and a team adopting gpulint with `--add-suppressions`
    wants the list to shrink as the code is fixed.

    ## Example
    ```python
    loader = DataLoader(ds, batch_size=64, num_workers=8, pin_memory=True)  # gpulint: ignore[GL101]
    ```
    Use instead: delete the comment (or the codes that no longer apply).

    ## Fix (none)
    Remove the comment by hand; `gpulint --report-unused-suppressions` lists them.
    """

    code = UNUSED_SUPPRESSION
    name = UNUSED_SUPPRESSION_NAME
    message = "Suppression comment suppresses nothing"
    default = "hint"
    severity = "warning"
