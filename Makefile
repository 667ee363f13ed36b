# The two commands of the README: `make run` and `make test`; `make lint` runs the
# code-quality gates (ruff, then mypy against mypy-baseline.txt), before the tests in CI.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint install install-dev bench local-models

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet -c constraints.txt -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

$(VENV)/.installed-bench: $(VENV)/.installed-dev
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,bench]'
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

run: install
	$(BIN)/python -m agentloom.launch

# The real llama-cpp-python server, llama.cpp's llama-server and the small models they serve,
# built once into ~/.cache/agentloom/local-models (docs/local-servers.md); `make test` runs the
# tests marked local_server against them, and skips them with the reason when they are not built.
local-models: install-dev
	$(BIN)/python scripts/local_models.py build

test: install-dev
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Both gates run, whichever fails, and either failing fails the target.
lint: install-dev
	@status=0; \
	echo "ruff check ."; $(BIN)/python -m ruff check . || status=1; \
	echo "scripts/typecheck.py"; $(BIN)/python scripts/typecheck.py || status=1; \
	exit $$status

bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks
