# Tessera — `make run` and `make test` install whatever is missing first.
SHELL := /bin/bash
PYTHON_VERSION := $(shell cat .python-version)
PY := .venv/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint typecheck bench bench-smoke lighthouse conformance install assets static clean docs docs-build docs-serve

# The interpreter: pyenv's 3.12 when present, else any python3.12 on PATH.
BASE_PYTHON := $(shell (command -v pyenv >/dev/null && pyenv root >/dev/null 2>&1 && ls -d $$(pyenv root)/versions/$(PYTHON_VERSION)*/bin/python 2>/dev/null | tail -1) || command -v python$(PYTHON_VERSION))

.venv/.installed: requirements.txt requirements-dev.txt
	@test -n "$(BASE_PYTHON)" || { echo "Python $(PYTHON_VERSION) not found (pyenv install $(PYTHON_VERSION))"; exit 1; }
	@test -x $(PY) || $(BASE_PYTHON) -m venv .venv
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements.txt -r requirements-dev.txt
	@touch $@

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

install: .venv/.installed node_modules/.package-lock.json

assets: node_modules/.package-lock.json

# Minified (npm run build), content-hashed and compressed (collectstatic) static files in
# staticfiles/; does nothing when they are up to date, and nothing with DEBUG=true, which serves
# the sources (chat/management/commands/buildstatic.py).
static: install
	$(PY) manage.py buildstatic

/usr/bin/chromium:
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	else echo "Install Chromium for the browser tests: sudo apt-get install chromium"; exit 1; fi

# The reverse-proxy example (deploy/nginx.conf) is tested with a real nginx.
/usr/sbin/nginx:
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq nginx-light >/dev/null; \
	else echo "Install nginx for the proxy example's test: sudo apt-get install nginx-light"; exit 1; fi

run: install static
	$(PY) manage.py migrate --noinput
	$(PY) manage.py setup_demo
	$(PY) manage.py seed_workspace --all
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

test: install /usr/bin/chromium /usr/sbin/nginx
	$(PY) -m ruff check .
	$(PY) -m mypy .
	$(PY) -m pytest

# Lighthouse (mobile) on the sign-in page, a new chat and a 200-message chat, served by the real
# stack; fails below the thresholds in bench/lighthouse.py. Not part of `make test` (CI runs it
# as a step of its own).
lighthouse: install static /usr/bin/chromium
	$(PY) -m bench.lighthouse $(LIGHTHOUSE_ARGS)

# The official MCP conformance suite (npm @modelcontextprotocol/conformance, run by Node 22 from
# npm node@22): its client scenarios against Tessera's MCP client (tests/conformance/run.py) and
# its server scenarios against Tessera's /mcp on the real stack (tests/conformance/test_server.py);
# the venv of the PyPI third-party servers (mcp-server-time and mcp-server-git, which make test
# also makes) under .cache/. Failures a scenario cannot avoid are in
# tests/conformance/expected-failures.yml, each with its reason. Not part of `make test`.
.cache/mcp-servers/.installed: tests/toolsets/mcp/third-party-servers.txt
	@test -x .cache/mcp-servers/bin/python || $(BASE_PYTHON) -m venv .cache/mcp-servers
	.cache/mcp-servers/bin/python -m pip install --quiet --disable-pip-version-check -r $<
	@cp $< $@

conformance: install static .cache/mcp-servers/.installed
	$(PY) -m tests.conformance.run
	$(PY) -m pytest tests/conformance/test_server.py -q

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: install
	$(PY) -m mypy .

# The message-path benchmark (bench/, issue 6): the real stack against a fake provider.
# `bench` runs every scenario and the full ramp (about 10 minutes); `bench-smoke` is the short
# run CI uses to keep the harness working: it fails only when the harness breaks, never on a
# missed target. Figures: bench/results/latest.json; extra options: python -m bench.run --help.
bench: install static
	$(PY) -m bench.run $(BENCH_ARGS)

bench-smoke: install static
	$(PY) -m bench.run --smoke $(BENCH_ARGS)

# The documentation site (docs/, mkdocs.yml). `docs` first takes the screenshots the pages use
# from the real stack (tests/e2e/test_docs_screenshots.py, into docs/images/), then builds the
# site into site/ with strict link checking; `docs-build` only builds; `docs-serve` serves it
# on http://127.0.0.1:8001/ while you write.
.venv/.docs-installed: requirements-docs.txt .venv/.installed
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements-docs.txt
	@touch $@

docs: install /usr/bin/chromium .venv/.docs-installed
	TESSERA_DOCS_IMAGES=$(CURDIR)/docs/images $(PY) -m pytest tests/e2e/test_docs_screenshots.py -q
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

docs-build: .venv/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

docs-serve: .venv/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve --strict -a 127.0.0.1:8001

clean:
	rm -rf .venv node_modules build staticfiles site .pytest_cache .mypy_cache .ruff_cache
