import os

# Never let a developer's terminal settings change what the CLI prints in tests.
os.environ.setdefault("NO_COLOR", "1")

# The training scripts that tests/test_fixed_scripts.py runs: one of them is a test file of its own.
collect_ignore = ["fixed_scripts"]
