# The two set-up commands of the README.  Both work on a fresh machine with python3 (>= 3.10).
PYTHON ?= python3

.PHONY: demo test docs bench

# Install gpulint into a fresh virtual environment and run it on the bundled fixtures: the findings,
# then the diff its fixes would make.  The fixtures are made to have findings, so each gpulint run exits
# 1 and that is accepted; any other failure (exit 2: bad usage, an internal error) fails the target.
demo:
	@echo "==> Installing gpulint into .venv-demo (a fresh virtual environment)"
	@rm -rf .venv-demo && $(PYTHON) -m venv .venv-demo
	@.venv-demo/bin/pip install -q --disable-pip-version-check .
	@echo "==> gpulint fixtures/   (what gpulint finds in the bundled training scripts)"
	@.venv-demo/bin/gpulint fixtures/ || test $$? -eq 1
	@echo "==> gpulint fixtures/ --diff --unsafe-fixes   (what its fixes would change; nothing is written)"
	@.venv-demo/bin/gpulint fixtures/ --diff --unsafe-fixes || test $$? -eq 1
	@echo "==> Demo done. Lint your own code with: .venv-demo/bin/gpulint path/to/your/code/"

# Install the test environment (torch pinned to the CPU build; tensorflow-cpu; the HF and Lightning trainers),
# run the self-checks (ruff format, ruff lint, mypy: each fails the target) and then the tests, one
# worker process per core (at most four: each imports torch and TensorFlow), then alone the few whose
# real runs tests beside them would disturb (marked `timed`: throughput across runs, two ranks' times).
test:
	test -x .venv/bin/python || $(PYTHON) -m venv .venv
	.venv/bin/pip install -q torch==2.13.0
	.venv/bin/pip install -q -e '.[dev,tf,trainers]'
	.venv/bin/ruff format --check .
	.venv/bin/ruff check .
	.venv/bin/mypy
	.venv/bin/python -m pytest -n auto --maxprocesses=4 --dist worksteal -m "not timed"
	.venv/bin/python -m pytest -m timed

docs:
	.venv/bin/python scripts/gen_docs.py
