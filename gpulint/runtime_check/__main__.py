"""`python -m gpulint.runtime_check profile|verify ...`: the runtime commands, run as `gpulint
profile|verify` (the same entry point: only the named command's module is imported)."""

from gpulint.cli import main

if __name__ == "__main__":
    main()
