# Tessera — `make run` and `make test` install whatever is missing first.
SHELL := /bin/bash
PYTHON_VERSION := $(shell cat .python-version)
PY := .venv/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint typecheck bench bench-smoke install assets clean

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

/usr/bin/chromium:
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	else echo "Install Chromium for the browser tests: sudo apt-get install chromium"; exit 1; fi

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py setup_demo
	$(PY) manage.py seed_workspace --all
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

test: install /usr/bin/chromium
	$(PY) -m ruff check .
	$(PY) -m mypy .
	$(PY) -m pytest

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: install
	$(PY) -m mypy .

# The message-path benchmark (bench/, issue 6): the real stack against a fake provider.
# `bench` runs every scenario and the full ramp (about 10 minutes); `bench-smoke` is the short
# run CI uses to keep the harness working: it fails only when the harness breaks, never on a
# missed target. Figures: bench/results/latest.json; extra options: python -m bench.run --help.
bench: install
	$(PY) -m bench.run $(BENCH_ARGS)

bench-smoke: install
	$(PY) -m bench.run --smoke $(BENCH_ARGS)

clean:
	rm -rf .venv node_modules staticfiles .pytest_cache .mypy_cache .ruff_cache
