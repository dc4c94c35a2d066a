"""Runtime tests drive the bootstrap's hooks in this process; a test that does not finish its run
leaves the stack sampler's thread running, and a process with a second thread cannot fork safely
(the parse guard then runs its crash tests in-process)."""

import pytest


@pytest.fixture(autouse=True)
def _no_sampler_outlives_its_test():
    yield
    from gpulint.runtime_check import bootstrap

    bootstrap.stop_all_samplers()
