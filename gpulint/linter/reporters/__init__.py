"""Output formats.  Each reporter turns a RunResult into text for standard output.

A reporter is `render(result: RunResult, settings: ReportSettings) -> str`; add a module here and
an entry in FORMATS to make it available as `--output-format NAME`.  Whatever a reporter returns,
no line of it reads as a GitHub Actions workflow command (a finding line that starts with a file
named `::error::x.py` is printed `./::error::x.py:...`), except in `github`, whose lines are
the commands it means.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpulint.linter.config import Settings
from gpulint.linter.run.outcome import RunResult


@dataclass(frozen=True)
class ReportSettings:
    settings: Settings = field(default_factory=Settings)  # the run's: which fixes count as available
    color: bool = False
    statistics: bool = False
    fix_mode: bool = False  # --fix ran: say how many were fixed
    show_fixes: bool = False  # --show-fixes: list what the fixes changed, per file and rule

    @property
    def unsafe_fixes(self) -> bool:
        """Whether unsafe fixes count as available ([*]): as they were for the run."""
        return self.settings.unsafe_fixes


def _load(name: str) -> Callable[[RunResult, ReportSettings], str]:
    import importlib

    module_name, _, function = FORMATS[name].partition(":")
    return getattr(importlib.import_module(module_name), function)


# name -> "module:function"; imported lazily so the text formats never load the others.
FORMATS: dict[str, str] = {
    "full": "gpulint.linter.reporters.text:render_full",
    "concise": "gpulint.linter.reporters.text:render_concise",
    "json": "gpulint.linter.reporters.json_format:render",
    "sarif": "gpulint.linter.reporters.sarif:render",
    "github": "gpulint.linter.reporters.github:render",
    "rdjson": "gpulint.linter.reporters.rdjson:render",
    "gitlab": "gpulint.linter.reporters.gitlab:render",
}

# Formats whose output carries fix edits (computing edits costs a code generation per fix).
NEEDS_EDITS = {"json", "sarif", "rdjson"}

# Formats whose lines are workflow commands on purpose (each escapes the text it carries).
WORKFLOW_COMMANDS = {"github"}
JSON_FORMATS = {"json", "sarif", "rdjson", "gitlab"}


def render(name: str, result: RunResult, settings: ReportSettings) -> str:
    from gpulint.linter.printable import json_without_workflow_commands, no_workflow_commands

    text = _load(name)(result, settings)
    if name in WORKFLOW_COMMANDS:
        return text
    return json_without_workflow_commands(text) if name in JSON_FORMATS else no_workflow_commands(text)
