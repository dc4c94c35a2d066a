"""`python -m gpulint.server`: the language server, as `gpulint server` starts it."""

import sys

from gpulint.server import main

sys.exit(main())
