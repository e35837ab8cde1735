# One entry point for the dev loop; the README and .ci/run use these targets.
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3

.PHONY: demo test lint typecheck unit bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# esbuild (npm) gives TypeScript tools their fast path: a cached transpile run on plain node.
$(VENV)/node/node_modules/.bin/esbuild: | $(BIN)/python
	npm install --silent --no-audit --no-fund --prefix $(VENV)/node esbuild@0.28

$(VENV)/.app: pyproject.toml | $(BIN)/python $(VENV)/node/node_modules/.bin/esbuild
	$(BIN)/python -m pip install -q -e .
	touch $@

# The other runtimes a TypeScript tool's shebang may name, so the tests run them for real.
$(VENV)/js-runtimes/node_modules/.bin/deno: | $(BIN)/python
	npm install --silent --no-audit --no-fund --prefix $(VENV)/js-runtimes tsx@4 bun@1 deno@2

$(VENV)/.test: pyproject.toml | $(BIN)/python $(VENV)/node/node_modules/.bin/esbuild $(VENV)/js-runtimes/node_modules/.bin/deno
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@ $(VENV)/.app

## The main job: compile the shipped tools and make a real call.
demo: $(VENV)/.app
	$(BIN)/toolexec build
	$(BIN)/toolexec run demo_py '{"text": "hello from toolexec", "count": 2, "tags": ["demo"]}'
	@echo
	$(BIN)/toolexec run demo_ts '{"city": "Lisbon", "days": 2}'
	@echo

## Install what the tests need, lint, type-check and run the whole suite.
test: $(VENV)/.test lint typecheck unit

lint: $(VENV)/.test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.test
	$(BIN)/mypy

unit: $(VENV)/.test
	$(BIN)/python -m pytest

bench: $(VENV)/.test
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/stress.py

clean:
	rm -rf $(VENV) functions/functions.json functions/catalog.json functions/cache
