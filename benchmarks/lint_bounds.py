"""`gpulint check` with part of its work taken away, to bound what faster rules could reach.

    python benchmarks/lint_bounds.py findings-only FILES_WITH_FINDINGS -- CHECK_ARGS...
    python benchmarks/lint_bounds.py no-lint -- CHECK_ARGS...

`findings-only` lints only the files listed (one path a line: those where a plain run reports
something) and hands every other file back unlinted, as if libcst and the rules were paid only
where a finding is: what rules that decide on the CPython tree, parsing with libcst only the files
they report in, could reach at best.  `no-lint` lints nothing, loads no rule and never imports
libcst: start-up, discovery, the project index and the worker pool's own cost, the floor under any
change to the rules.  (A notebook in the run still brings libcst in: the notebook reader
imports the fixer.  `ratios.py` times Python files alone.)

Both patch the engine in this process before the CLI runs (and leave the way the command does,
cli.console); forked lint workers inherit the patch.
They are measuring instruments for benchmarks/ratios.py --bounds, not ways to lint: their
findings are incomplete by design.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    listing_given = len(argv) > 2 and argv[1] != "--"
    if "--" not in argv or argv[0] not in ("findings-only", "no-lint") or (argv[0] == "findings-only") != listing_given:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    mode, rest = argv[0], argv[argv.index("--") + 1 :]
    from gpulint.linter import config, engine
    from gpulint.linter.run import runner

    if mode == "findings-only":
        with open(argv[1], encoding="utf-8") as listing:
            keep = {os.path.realpath(line.strip()) for line in listing if line.strip()}
        analyze = engine.Linter.analyze

        def analyze_listed(self, source, path, project=None):
            return analyze(self, source, path, project) if os.path.realpath(path) in keep else None

        engine.Linter.analyze = analyze_listed  # type: ignore[method-assign]
    else:
        engine.Linter.analyze = lambda self, source, path, project=None: None  # type: ignore[method-assign]
        runner._ProjectViews.warm_up = lambda self: None  # type: ignore[method-assign]
        config.Settings.rule_classes = lambda self, codes: ()  # type: ignore[method-assign]
    from gpulint.cli import console

    sys.argv = ["gpulint", "check", *rest]
    console()  # (leaves as the command does: main, then no interpreter teardown)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
