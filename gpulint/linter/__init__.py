"""The static half of gpulint: what one file goes through, and the run around it.

    run/          files -> cache -> workers -> process one file (a .py, or a notebook's cells);
                  safe_files.py (bounded reads, atomic writes inside the run's paths), datajson.py
                  (cache entries as checked JSON)
      engine.py   one source: prefilter -> parse -> analyse -> rules -> suppress -> locate
        catalog.py  what the prefilter, selection and listings know about the rules without
                  importing them (generated from the rule classes), and RuleOption
        analysis/ parse.py (behind parse_guard.py, which keeps sources too deep for the parser
                  out, with isolation.py), walk.py (one walk), imports.py, values.py, loops.py
                  (the training-loop model), pytorch.py / tensorflow.py / logging_calls.py /
                  trainers.py (what the frameworks' code does), context.py (FileContext: every
                  per-file analysis, cached), facts.py (what a rule can require of a file),
                  nodes.py (what one node spells), positions.py (ranges of the nodes asked for),
                  test_files.py (which files are test code)
        rule.py   the rule API (Rule, RuleOption, Valid / Invalid cases); the rules themselves
                  are in gpulint/rules/, which the engine never imports
        suppressions.py  comments that silence findings, and GL900 for those that silence nothing
      fix/        builders.py (what rules call to describe a fix), fixer.py (apply fixes, text
                  edits), passes.py (lint -> fix -> re-lint until settled)
    reporters/    text (full, concise), json, sarif, github, rdjson, gitlab
    config.py     Settings: [tool.gpulint] and the command line; selects rules from the catalog
      local_rules.py  a project's own rule modules (`local-rules`): loaded, checked, catalogued
    case_runner.py  runs rules' VALID / INVALID cases (the tests, `gpulint test-rules`)
    findings.py   what the stages hand on: Finding, Fix, Applicability, Location, Edit
    printable.py, option_expression.py  output made safe to print; the `num-workers` grammar
    selection.py  "did you mean": the closest rule ids or names to one that matches nothing

Imports go one way, down this list (tests/test_layout.py keeps it so).
"""
