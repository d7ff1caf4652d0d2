# Two commands do everything on a fresh machine (Python 3.10+ with venv):
#   make quickstart   build the env, run the quickstart notebook end to end on the CPU stand-in
#   make test         build the env, run the test suite (unit + real vLLM server + notebooks)
# Outputs land in out/ (ignored by git).

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.cookbook-stamp

.PHONY: setup quickstart test workshop notebooks lint clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-cpu.txt pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt -r requirements-cpu.txt
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec || true
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

quickstart: setup
	$(BIN)/python -m tools.notebooks run notebooks/quickstart_cpu_standin.ipynb

notebooks: setup
	$(BIN)/python -m tools.notebooks build

# The suite (unit + real vLLM CPU server + notebooks), in two pytest-xdist workers: the tests of
# the session's stand-in server in one, the rest spread over both (tests/conftest.py groups them).
# The workshop notebook's bare-kernel run (several minutes of pip installs) is its own step:
# `make workshop`; CI runs both (.ci/run).
test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m helpers.standin.build
	$(BIN)/python benchmarks/suite_time.py -n 2 --dist loadgroup --durations=20 -m "not workshop"

# The workshop notebook from a bare kernel (fresh venv + ipykernel; the notebook installs the rest)
workshop: setup
	$(BIN)/python -m pytest -q -s -m workshop tests/test_workshop.py

clean:
	rm -rf out

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m tools.notebooks lint
