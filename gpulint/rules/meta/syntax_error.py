"""GL000 syntax-error.

Not a tree rule: a file that does not parse has no tree.  The engine implements it
(gpulint.linter.engine: a source whose parse fails gets one finding where the parser stopped); this
class gives it what every rule has -- a catalog entry, so it can be ignored and selected, its docs
and its cases.
"""

from __future__ import annotations

from gpulint.linter.findings import SYNTAX_ERROR_CODE, SYNTAX_ERROR_NAME
from gpulint.linter.rule import Invalid, Rule, Valid


class SyntaxErrorRule(Rule):
    """
    ## What it finds
    A file gpulint was going to check that does not parse as Python: it could not be checked at
    all, so no other rule reports anything in it.  The finding is where the parser stopped, with
    its message.  A file is parsed only when a selected rule may apply to it (it names a framework
    and what the rule looks for), so a file that imports nothing gpulint knows is not parsed and
    not reported.  In a notebook the finding is per cell, and what IPython runs is not an error:
    magics and shell lines, a one-line cell calling an automagic without its `%` (`ls ./data`),
    and a cell indented as a whole (IPython dedents it; gpulint leaves it out).

    Unlike other rules, GL000 stays on when `select` names other rules (as ruff reports syntax
    errors whatever is selected): a narrower selection must not turn an unchecked file into "All
    checks passed!".  `--ignore GL000` (or `ignore`, `per-file-ignores`) leaves it out;
    `--select GL000` reports only the files that do not parse, among those a default run parses.

    ## Why it is slow
    It is not slow; it says that the file was not checked.  Often the file is meant for another
    Python version (a `match` statement under an older grammar), is a template, or is broken on
    purpose (a test fixture): ignore it for those paths with `per-file-ignores`.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=64
    for batch in loader:
        train_step(batch)
    ```
    Use instead: code that parses.

    ## Fix (none)
    Correct the syntax; a suppression comment cannot silence it (the comments of a file that does
    not parse are not read).
    """

    code = SYNTAX_ERROR_CODE
    name = SYNTAX_ERROR_NAME
    message = "SyntaxError: the file does not parse, so it was not checked"
    severity = "error"
    reported_in_tests = True  # a file that does not parse was not checked, test or not

    VALID = [
        # parses
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, num_workers=4)
            """
        ),
        # names no framework: never parsed, so never reported
        Valid("def broken(:\n    pass\n"),
    ]
    INVALID = [
        # where the parser stopped
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds,
            """,
            "3:20",
        ),
    ]
