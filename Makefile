# The two set-up commands of the README.  Both work on a fresh machine with python3 (>= 3.10).
PYTHON ?= python3

.PHONY: demo test chromium docs bench

# Install gpulint into a fresh virtual environment and run it on the bundled fixtures: the findings,
# then the diff its fixes would make.  The fixtures are made to have findings, so each gpulint run exits
# 1 and that is accepted; any other failure (exit 2: bad usage, an internal error) fails the target.
demo:
	@echo "==> Installing gpulint into .venv-demo (a fresh virtual environment)"
	@rm -rf .venv-demo && $(PYTHON) -m venv .venv-demo
	@.venv-demo/bin/pip install -q --disable-pip-version-check .
	@# --show-hints: the bundled scripts are written to show every rule's finding, the ones held
	@# back as hints by default included.
	@echo "==> gpulint fixtures/ --show-hints   (what gpulint finds in the bundled training scripts)"
	@.venv-demo/bin/gpulint fixtures/ --show-hints || test $$? -eq 1
	@echo "==> gpulint fixtures/ --show-hints --diff --unsafe-fixes   (what its fixes would change; nothing is written)"
	@.venv-demo/bin/gpulint fixtures/ --show-hints --diff --unsafe-fixes || test $$? -eq 1
	@echo "==> Demo done. Lint your own code with: .venv-demo/bin/gpulint path/to/your/code/"

# Install the test environment, then run the self-checks and the tests:
# - torch 2.13.0, the CPU build where pip finds one: a `2.13.0+cpu` wheel on pip's find-links or
#   extra indexes, or on TORCH_INDEX (`make test TORCH_INDEX=https://download.pytorch.org/whl/cpu`),
#   which pip takes over the plain 2.13.0.  PyPI alone has only the plain one, and on Linux x86_64
#   that is the CUDA build: NVIDIA's CUDA libraries come with it from PyPI, and the tests run on
#   the CPU with it all the same.
# - tensorflow-cpu, the HF and Lightning trainers, the dev tools (the `tf`, `trainers`, `dev` extras).
# - Chromium, for the tests that load the HTML report and the trace in a real browser (target
#   `chromium`).
# Then the self-checks (ruff format, ruff lint, mypy), the tests with one worker process per core (at
# most four: each imports torch and TensorFlow), and alone the few whose real runs tests beside them
# would disturb (marked `timed`: throughput across runs, two ranks' times).  Every step runs even
# when one before it failed; the target then fails, naming the steps that did.
test: chromium
	test -x .venv/bin/python || $(PYTHON) -m venv .venv
	.venv/bin/pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
	.venv/bin/pip install -q -e '.[dev,tf,trainers]'
	@failed=""; \
	step() { echo "==> $$*"; "$$@" || failed="$$failed, $$*"; }; \
	step .venv/bin/ruff format --check .; \
	step .venv/bin/ruff check .; \
	step .venv/bin/mypy; \
	step .venv/bin/python -m pytest -n auto --maxprocesses=4 --dist worksteal -m "not timed"; \
	step .venv/bin/python -m pytest -m timed; \
	if [ -n "$$failed" ]; then echo "make test: FAILED: $${failed#, }"; exit 1; fi

# Chromium from the system's packages where none is on PATH (the names tests/runtime/browser.py
# looks for, or $CHROMIUM) and apt-get can install it: as root, or through sudo without a password.
# Otherwise one line says so, and the browser tests skip, each saying why.
CHROMIUM_NAMES = chromium chromium-browser google-chrome google-chrome-stable
chromium:
	@for name in $$CHROMIUM $(CHROMIUM_NAMES); do command -v "$$name" >/dev/null 2>&1 && exit 0; done; \
	if [ "$$(id -u)" -eq 0 ]; then sudo=""; elif sudo -n true >/dev/null 2>&1; then sudo="sudo -n"; else sudo=no; fi; \
	if [ "$$sudo" = no ] || ! command -v apt-get >/dev/null 2>&1; then \
		echo "make test: no Chromium, and no apt-get as root to install it: the browser tests will skip"; exit 0; fi; \
	echo "==> Installing Chromium (apt-get install chromium) for the browser tests"; \
	{ $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
		>/dev/null 2>&1 || echo "make test: could not install chromium with apt-get: the browser tests will skip"

docs:
	.venv/bin/python scripts/gen_docs.py
