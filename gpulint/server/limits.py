"""The lint worker's default limits (worker.py), in a module of their own so that `gpulint server
--help` (the package's __init__) and the worker share them without importing each other."""

DEFAULT_MEMORY_LIMIT = 2 * 2**30  # bytes of address space
DEFAULT_TIME_LIMIT_S = 30.0  # per lint
