"""Running the linter over files: discovery, the result cache, worker processes, notebooks."""
