"""`gpulint review`: the code-review bot.

diff.py finds the lines a change adds (git diff against the merge base), comments.py turns the
findings on those lines into pull-request review comments (one a line: the findings' messages, docs
links, a ```suggestion block for fixable ones, a hidden marker for idempotence), github.py posts them with the REST API,
cli.py is the command.
"""
