# Developer entry points. Everything runs from the project-local .venv and node_modules,
# so a fresh clone needs only python3 (3.11 preferred), node/npm and make.

# Prefer python3.11 when it actually runs (a pyenv shim can exist without the version behind it).
PYTHON ?= $(shell python3.11 -c '' >/dev/null 2>&1 && echo python3.11 || echo python3)
VENV   := .venv
PY     := $(VENV)/bin/python
PORT   ?= 8000
# The suite runs on parallel workers (pytest-xdist; -n auto: tests/conftest.py picks two per CPU,
# MCP_TEST_WORKERS overrides). `make test PYTEST_ARGS=` runs it in one process; any pytest
# arguments go here: `make test PYTEST_ARGS="-n 4 tests/integration/test_jobs.py"`.
PYTEST_ARGS ?= -n auto

# scripts/run.py reads PORT from the environment, so `make run PORT=9000` works too.
export PORT

.PHONY: install run test test-quick conformance conformance-topologies chaos bench clean browser haproxy otlp-receiver screenshots docs

install: $(VENV)/.installed

# Created once; the venv's python is the marker that it exists.
$(PY):
	$(PYTHON) -m venv $(VENV)

# pip runs again only when a requirements file or pyproject.toml is newer than the stamp.
$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml | $(PY)
	$(PY) -m pip install --disable-pip-version-check -r requirements-dev.txt
	touch $@

# npm ci wipes node_modules, so the stamp is written after it and survives until the lockfile changes.
node_modules/.stamp: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

run: install
	$(PY) scripts/run.py

# node_modules: the TypeScript SDK client tests run the pinned client under the pinned Node 22.
test: install browser haproxy otlp-receiver node_modules/.stamp
	$(PY) -m pytest $(PYTEST_ARGS)

# The tests that start no daphne or Celery process: the protocol core, the units, the toolsets
# and the operations' commands, about a minute on two cores. PYTEST_ARGS as for test.
QUICK_TESTS := tests/protocol tests/unit tests/toolsets tests/operations
test-quick: install
	$(PY) -m pytest $(PYTEST_ARGS) $(QUICK_TESTS)

# Debian's headless chromium and chromium-driver for the admin's browser test (Selenium drives
# them; nothing is downloaded by a test tool). Installed with apt-get when missing and possible;
# otherwise that one test is skipped and says why.
browser:
	@command -v chromedriver >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium chromium-driver; \
	  else echo "note: chromium-driver is not installed and cannot be here; the admin browser test will be skipped"; fi; }

# Debian's haproxy for the load-balancer test (tests/integration/test_haproxy.py runs the
# configuration of docs/deployment.md in front of four daphnes); installed the same way.
haproxy:
	@command -v haproxy >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends haproxy; \
	  else echo "note: haproxy is not installed and cannot be here; the haproxy test will be skipped"; fi; }

# Rotel, an OpenTelemetry collector (written in Rust) that PyPI ships as a wheel with its binary,
# for the OTLP test (tests/integration/test_tracing_otlp.py sends the spans of a daphne and a
# Celery worker to it). Its wheels are per platform, so it is not in requirements-dev.txt: where
# none installs, that one test is skipped and says why. Costs one import once it is there.
ROTEL := rotel==0.0.1a15
otlp-receiver: install
	@$(PY) -c 'import rotel' >/dev/null 2>&1 || $(PY) -m pip install --disable-pip-version-check -q '$(ROTEL)' || \
	  echo "note: $(ROTEL) does not install here; the OTLP collector test will be skipped"

# Refresh the admin screenshots in docs/ (the browser test takes them).
screenshots: install browser
	MCP_SCREENSHOT_DIR=docs $(PY) -m pytest tests/integration/test_admin_browser.py

# The documentation site (mkdocs.yml), strictly: a broken link or anchor, or a page missing from
# the navigation, fails the build. Output in site/ (not committed).
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

conformance: install node_modules/.stamp
	PYTHON=$(PY) bash scripts/conformance.sh

# The two protocol legs again, on a private Redis Sentinel set and on a private Redis Cluster
# (scripts/run.py starts them; the Cluster's broker is RabbitMQ at CELERY_BROKER_URL, default
# 127.0.0.1:5672). REDIS_URL is dropped, or run.py would use it instead of the topology.
TOPOLOGY_LEGS ?= 0.2.0-2025-11-25 0.2.0-2026-07-28
conformance-topologies: install node_modules/.stamp
	for topology in sentinel cluster; do \
	  env -u REDIS_URL REDIS_TOPOLOGY=$$topology CONFORMANCE_LEGS="$(TOPOLOGY_LEGS)" PYTHON=$(PY) \
	    bash scripts/conformance.sh || exit 1; \
	done

# Minutes of mixed load in both eras with random Redis, Sentinel, Cluster, daphne, worker and
# database faults, counted (bench/chaos.py; results in bench/RESULTS.md). The database cut needs
# PostgreSQL: CHAOS_DATABASE_URL=postgres://postgres@127.0.0.1:5432/chaos_db (a database of its own).
CHAOS_ARGS ?= --minutes 3
chaos: install
	$(PY) bench/chaos.py $(CHAOS_ARGS) $(if $(CHAOS_DATABASE_URL),--database-url $(CHAOS_DATABASE_URL))

bench: install
	$(PY) bench/run.py

# Leaves db.sqlite3 alone: it holds local data (admin users), not build output.
clean:
	rm -rf $(VENV) node_modules .pytest_cache .hypothesis conformance-results bench/out build dist *.egg-info site
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
