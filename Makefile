# One entry point for the dev loop; the README and .ci/run use these targets.
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3

.PHONY: demo test lint typecheck unit bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The main job needs only toolexec with its Node extra (Node.js 24 from PyPI): no npm, no system Node.
$(VENV)/.app: pyproject.toml setup.py | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[node]'
	touch $@

# esbuild (npm): the optional accelerator of the TypeScript transpile, exercised by the tests.
$(VENV)/node/node_modules/.bin/esbuild: | $(BIN)/python
	npm install --silent --no-audit --no-fund --prefix $(VENV)/node esbuild@0.28

# The other runtimes a TypeScript tool's shebang may name, so the tests run them for real.
$(VENV)/js-runtimes/node_modules/.bin/deno: | $(BIN)/python
	npm install --silent --no-audit --no-fund --prefix $(VENV)/js-runtimes tsx@4 bun@1 deno@2

# The MCP Inspector: a second, independent MCP client the tests drive in its command-line mode.
$(VENV)/inspector/node_modules/.bin/mcp-inspector: | $(BIN)/python
	npm install --silent --no-audit --no-fund --prefix $(VENV)/inspector @modelcontextprotocol/inspector@2

# OpenTelemetry's Node SDK, for the test of a JavaScript tool continuing toolexec's trace (TRACEPARENT).
$(VENV)/otel-node/node_modules/@opentelemetry/sdk-trace-base: | $(BIN)/python
	npm install --silent --no-audit --no-fund --prefix $(VENV)/otel-node @opentelemetry/api@1 @opentelemetry/sdk-trace-base@2 @opentelemetry/core@2

# Wheels for the install tests, which build toolexec's wheel and install it offline into fresh
# venvs beside PyPI's unrelated `executor` package.
$(VENV)/wheelhouse/.done: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip download -q -d $(VENV)/wheelhouse executor '.[node]'
	touch $@

# nginx (Debian's package) for the scale-out test, which puts it in front of two `toolexec mcp --http`;
# installed when missing, as .ci/run does for the packages the build needs.
$(VENV)/.nginx: | $(BIN)/python
	command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx; }
	touch $@

# redis-server (Debian's package) for the Redis task store's tests and the Celery workers' broker, started on
# loopback by the tests and stopped by them.
$(VENV)/.redis: | $(BIN)/python
	command -v redis-server >/dev/null || [ -x /usr/bin/redis-server ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; }
	touch $@

$(VENV)/.test: pyproject.toml setup.py | $(BIN)/python $(VENV)/node/node_modules/.bin/esbuild $(VENV)/js-runtimes/node_modules/.bin/deno $(VENV)/inspector/node_modules/.bin/mcp-inspector $(VENV)/otel-node/node_modules/@opentelemetry/sdk-trace-base $(VENV)/wheelhouse/.done $(VENV)/.nginx $(VENV)/.redis
	$(BIN)/python -m pip install -q -e '.[node,test]'
	touch $@ $(VENV)/.app

## The main job: compile the shipped tools and make real tool calls.
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

# mypy checks the import package as users see it: a tree of links named toolexec/.
typecheck: $(VENV)/.test
	rm -rf $(VENV)/typecheck && mkdir -p $(VENV)/typecheck/toolexec
	ln -s $(CURDIR)/executor/* $(VENV)/typecheck/toolexec/
	ln -s $(CURDIR)/compilers $(CURDIR)/runtimes $(VENV)/typecheck/toolexec/
	cd $(VENV)/typecheck && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p toolexec

unit: $(VENV)/.test
	$(BIN)/python -m pytest

# Figures, not tests: writes benchmarks/RESULTS.md (see benchmarks/run.py); never collected by pytest.
bench: $(VENV)/.test
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/stress.py

clean:
	rm -rf $(VENV) build functions/functions.json functions/catalog.json functions/cache
