# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test install install-dev bench

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

test: install-dev
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks
