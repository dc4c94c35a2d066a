"""GL900 unused-suppression.

Not a tree rule: it has nothing to visit, so selecting it never makes a file be parsed.  The
suppression stage implements it (gpulint.linter.suppressions.unused_suppression_findings): after
the other rules ran and their findings were matched against the file's suppression comments, the
comments that silenced nothing are its findings.
"""

from __future__ import annotations

from gpulint.linter.rule import Invalid, Rule, Valid
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
    reported_in_tests = True  # a stale comment is one in test code too

    VALID = [
        # an ignored file
        Valid(
            """
            # gpulint: ignore-file
            x = 1  # gpulint: ignore[GL101]
            """,
            select=("GL1",),
        ),
        # the comment silences a finding
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=4)  # gpulint: ignore[GL102]
            model = torch.nn.Linear(1, 1).cuda()
            """,
            select=("GL102",),
        ),
    ]
    INVALID = [
        # GL101 is used on row 5, GL102 is not; other tools' codes and a bare noqa are not gpulint's
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(ds, num_workers=4, pin_memory=True)  # gpulint: ignore[GL101]
            other = DataLoader(ds, pin_memory=True)  # noqa: GL101, GL102
            x = 1  # noqa: E501
            y = 2  # noqa
            z = 3  # gpulint: ignore
            w = 4  # gpulint: ignore[GL999]
            model = torch.nn.Linear(1, 1).cuda()
            """,
            "4:58",
            "5:42",
            "8:8",
            "9:8",
            messages=(
                "Unused suppression of GL101: nothing to suppress on this line",
                "Unused suppression of GL102: nothing to suppress on this line",
                "Unused `# gpulint: ignore`: nothing to suppress on this line",
                "Unused suppression of GL999: nothing to suppress on this line (GL999 is not a gpulint rule)",
            ),
            select=("GL1",),
        ),
        # codes of rules not enabled may be needed by a fuller run
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(ds, num_workers=4, pin_memory=True)  # gpulint: ignore[GL101]
            other = DataLoader(ds, pin_memory=True)  # noqa: GL101, GL102
            x = 1  # noqa: E501
            y = 2  # noqa
            z = 3  # gpulint: ignore
            w = 4  # gpulint: ignore[GL999]
            model = torch.nn.Linear(1, 1).cuda()
            """,
            "8:8",
            "9:8",
            select=("GL3",),
        ),
        # a file that is never parsed (no framework named)
        Invalid("x = 1  # gpulint: ignore[GL101]\n", "1:8", select=("GL1",)),
    ]
