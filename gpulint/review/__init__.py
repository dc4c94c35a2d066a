"""`gpulint review`: the code-review bot.

diff.py finds the lines a change adds (git diff against the merge base), comments.py turns the
findings on those lines into pull-request review comments (explanation, docs link, a ```suggestion
block for fixable ones, a hidden marker for idempotence), github.py posts them with the REST API,
cli.py is the command.
"""
