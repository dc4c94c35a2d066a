"""`python -m gpulint.server`: the language server, as `gpulint server` starts it."""

import argparse
import sys

from gpulint.server import add_server, main

parser = argparse.ArgumentParser(prog="gpulint server")
add_server(parser)
sys.exit(main(parser.parse_args()))
