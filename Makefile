# Two commands do everything on a fresh machine (Python 3.11+ with venv):
#   make quickstart   build the env, run the quickstart notebook end to end on the CPU stand-in
#   make test         build the env, run the test suite (unit + real vLLM server + notebooks)
# Outputs land in out/ (ignored by git).

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.cookbook-stamp
# uv installs (falling back to pip when uv cannot be installed); INSTALLER=pip uses pip only
INSTALLER ?= auto

.PHONY: setup quickstart test workshop notebooks lint clean first-run

setup: $(STAMP)

# tools/setup_venv.py: venv, installer, where torch 2.13.0+cpu comes from (pip's own sources,
# else PyTorch's CPU index), requirements, the mismatched torch companions removed, this package
$(STAMP): requirements.txt requirements-cpu.txt requirements-schemas.txt pyproject.toml tools/setup_venv.py helpers/machine/sources.py lab/workshop/cpu_torch.py
	$(PY) tools/setup_venv.py --venv $(VENV) --installer $(INSTALLER)
	touch $(STAMP)

quickstart: setup
	$(BIN)/python -m tools.notebooks run notebooks/quickstart_cpu_standin.ipynb

notebooks: setup
	$(BIN)/python -m tools.notebooks build

# The suite (unit + real vLLM CPU server + notebooks), in three pytest-xdist workers on CI's two
# cores (most tests wait on a server process, so a third worker fills the waits): each shared
# server's tests in one worker, the rest spread over the three (tests/conftest.py groups them).
# The workshop notebook's bare-kernel run (several minutes of pip installs) is its own step:
# `make workshop`; CI runs both (.ci/run). The suite runs notebooks through papermill, so nbmake's
# pytest plugin (for `pytest --nbmake notebooks/`) is not loaded: 2 s of imports per pytest process.
test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m helpers.standin.build
	$(BIN)/python benchmarks/suite_time.py -n 3 --dist loadgroup --durations=20 -m "not workshop" -p no:nbmake

# The workshop notebook from a bare kernel (fresh venv + ipykernel; the notebook installs the rest)
workshop: setup
	$(BIN)/python -m pytest -q -s -m workshop tests/notebooks/test_workshop.py

clean:
	rm -rf out

# Times a fresh clone's `make quickstart` phase by phase (set-up, stand-in, server, first reply)
first-run:
	$(PY) tools/first_run.py --record

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m tools.notebooks lint
