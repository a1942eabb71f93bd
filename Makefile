# Developer entry points. Everything runs from the project-local .venv and node_modules,
# so a fresh clone needs only python3 (3.11 preferred), node/npm and make.

# Prefer python3.11 when it actually runs (a pyenv shim can exist without the version behind it).
PYTHON ?= $(shell python3.11 -c '' >/dev/null 2>&1 && echo python3.11 || echo python3)
VENV   := .venv
PY     := $(VENV)/bin/python
PORT   ?= 8000
PYTEST_ARGS ?=

# scripts/run.py reads PORT from the environment, so `make run PORT=9000` works too.
export PORT

.PHONY: install run test conformance bench clean

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

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

conformance: install node_modules/.stamp
	PYTHON=$(PY) bash scripts/conformance.sh

bench: install
	$(PY) bench/run.py

# Leaves db.sqlite3 alone: it holds local data (admin users), not build output.
clean:
	rm -rf $(VENV) node_modules .pytest_cache .hypothesis conformance-results bench/out build dist *.egg-info
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
