"""Run a script as `__main__` under a chosen multiprocessing start method.

    python launch.py spawn train.py [args...]

Sets the default start method before the script runs, as the platform would (spawn is the
default on macOS and Windows, forkserver on Linux from Python 3.14), so a script that starts
loader workers where they cannot start fails here as it would there.
"""

import multiprocessing
import runpy
import sys

if __name__ == "__main__":
    method, script, *arguments = sys.argv[1:]
    multiprocessing.set_start_method(method)
    sys.argv = [script, *arguments]
    runpy.run_path(script, run_name="__main__")
