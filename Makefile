# One command to run the service, one to prove it. Both build .venv on first use:
# `make run` installs what serving needs, `make test` adds the dev tools. Every install takes
# the versions pinned in constraints.txt (`make lock` regenerates it), as the Dockerfile does.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
PIP_INSTALL := $(BIN)/pip install --constraint constraints.txt

.PHONY: run test install lint typecheck contracts pytest coverage bench clean lock \
	conformance-gridengine

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Serving dependencies only; pip shows its progress (the first install takes a while).
$(RUN_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP_INSTALL) --editable .
	touch $@

# The dev tools (pytest, ruff, mypy, ...) on top, for `make test`.
$(DEV_STAMP): $(RUN_STAMP)
	$(PIP_INSTALL) --editable '.[dev]'
	touch $@

install: $(DEV_STAMP)

# What `make run` prints before serving: where it listens (the console, the API docs), the
# admin token, the database. First it asks whether the port can be had: a taken one is one
# `error:` line and exit code 2, and no banner that says it is serving.
define RUN_BANNER
import sys
from pathlib import Path
from app.cli.listening import listen_url, main as can_listen
if can_listen(sys.argv[1:3]) != 0:
    sys.exit(2)
from sqlalchemy.engine import make_url
from app.settings import get_settings
settings = get_settings()
base = listen_url(sys.argv[1], int(sys.argv[2]))
url = make_url(settings.database_url)
token = settings.admin_token.get_secret_value() if settings.admin_token else None
print(f"jobmatch: serving on {base} (console: {base}/ui, API docs: {base}/docs)")
print(f"jobmatch: admin token: {token or '(none set: admin calls answer 401)'}")
if url.get_backend_name() == "sqlite":
    print(f"jobmatch: database file: {Path(url.database or '').resolve()}")
else:
    print(f"jobmatch: database: {url.render_as_string(hide_password=True)}")
print(f"jobmatch: for the command line and the README: export JOBMATCH_URL={base}")
endef
export RUN_BANNER

## Serve on http://$(HOST):$(PORT) with SQLite (./jobmatch.db), migrating it first.
run: $(RUN_STAMP)
	@export JOBMATCH_ADMIN_TOKEN="$${JOBMATCH_ADMIN_TOKEN:-dev-admin-token}" \
	    JOBMATCH_LOG_FORMAT="$${JOBMATCH_LOG_FORMAT:-text}" && \
	$(BIN)/python -c "$$RUN_BANNER" $(HOST) $(PORT) && \
	exec $(BIN)/jobmatch serve --host $(HOST) --port $(PORT)

## Lint, types, layer contracts and the whole suite (PostgreSQL too when
## JOBMATCH_TEST_POSTGRES_URL is set).
test: lint typecheck contracts pytest

lint: $(DEV_STAMP)
	$(BIN)/ruff check app tests bench migrations conformance
	$(BIN)/ruff format --check app tests bench migrations conformance

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

contracts: $(DEV_STAMP)
	$(BIN)/lint-imports

# The tests marked serial first, alone (PgBouncer's, which run a pytest of the concurrency
# cases of their own); then the rest in parallel (pytest-xdist), ending with the 15 slowest
# tests so that growth shows. One process per core and one more: a third of the suite's
# time is spent waiting on the servers, agents and command lines it starts.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
# PYTEST_ARGS reach both runs (e.g. --suite-profile=FILE, docs/testing.md). The serial run
# collects only the files that mark tests serial (collecting the whole suite takes seconds).
PYTEST_ARGS ?=
SERIAL_FILES = $(shell grep -rlE 'pytest\.mark\.serial' tests --include='test_*.py' | sort)
pytest: $(DEV_STAMP)
	$(if $(SERIAL_FILES),$(BIN)/pytest -p no:xdist -m serial --durations=5 $(PYTEST_ARGS) $(SERIAL_FILES))
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal -m "not serial" $(PYTEST_ARGS) --durations=15

## The suite with line and branch coverage of app/ (pyproject.toml's [tool.coverage]).
coverage: $(DEV_STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal --cov --cov-report=term

## The Grid Engine referee (docs/conformance.md), not part of `make test`: as root, installs
## and starts Son of Grid Engine 8.1.9 on this machine, runs conformance/gridengine/cases/
## on it and on jobmatch (agree/DIFFER per case), then stops the daemons it started.
## CONFORMANCE_ARGS="--record tests/vectors/sge/gridengine-8.1.9" records the vectors.
CONFORMANCE_ARGS ?=
conformance-gridengine: $(DEV_STAMP)
	sh conformance/gridengine/install.sh
	$(BIN)/python -m conformance.gridengine $(CONFORMANCE_ARGS); rc=$$?; \
	    $(BIN)/python -m conformance.gridengine --stop; exit $$rc

## Resolve every runtime and dev dependency afresh (in a scratch venv) and pin the result.
LOCK_VENV := $(VENV)-lock
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install '.[dev]'
	{ echo "# Pinned versions of every runtime and dev dependency, resolved by \`make lock\`."; \
	  echo "# make run, make test and the Dockerfile install with --constraint constraints.txt."; \
	  $(LOCK_VENV)/bin/pip freeze --exclude jobmatch; } > constraints.txt
	rm -rf $(LOCK_VENV) build

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .coverage .coverage.*
