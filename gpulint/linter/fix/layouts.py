"""The ways a fixed line too long is wrapped (fix/wrap.py lays each out; project.py `layout_from`
picks the project's), by name.  A module of their own, without libcst: reading a project's
settings names them on every run, and must not pay for libcst's import to do it.
"""

BLACK = "black"  # black's and ruff format's layout
YAPF = "yapf"  # yapf's pep8 and google styles: a split argument list with a keyword argument in it one a line
YAPF_FILLED = "yapf-filled"  # the same with yapf's `split_before_named_assigns = false`: every list filled
