"""The program the parse-counting benchmarks run in a fresh process: `gpulint check ARGS...` in
that process, counting libcst's parses.  It prints gpulint's output as is, then on standard error a
last line `PROBE [parses, cpu seconds]` (user + system, its own and its children's: a lint pool's
work counts).  Run it as `python -c PROBE ARGS...` with the checkout to measure on PYTHONPATH.
"""

PROBE = """
import json, resource, sys
import libcst
from gpulint.cli import main

parses = 0
parse_module = libcst.parse_module

def counting(*args, **kwargs):
    global parses
    parses += 1
    return parse_module(*args, **kwargs)

libcst.parse_module = counting
try:
    main(["check", *sys.argv[1:]])
except SystemExit:
    pass
sys.stdout.flush()
usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
sys.stderr.write("\\nPROBE " + json.dumps([parses, sum(u.ru_utime + u.ru_stime for u in usage)]) + "\\n")
"""
