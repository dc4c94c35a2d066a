import os

# Never let a developer's terminal settings change what the CLI prints in tests.
os.environ.setdefault("NO_COLOR", "1")
