# One command to run the service, one to prove it. Both build .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint typecheck contracts pytest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## Serve on http://127.0.0.1:8000 with SQLite (./jobmatch.db), migrating it first.
run: $(STAMP)
	JOBMATCH_ADMIN_TOKEN=$${JOBMATCH_ADMIN_TOKEN:-dev-admin-token} \
	JOBMATCH_LOG_FORMAT=$${JOBMATCH_LOG_FORMAT:-text} $(BIN)/jobmatch serve

## Lint, types, layer contracts and the whole suite (PostgreSQL too when
## JOBMATCH_TEST_POSTGRES_URL is set).
test: lint typecheck contracts pytest

lint: $(STAMP)
	$(BIN)/ruff check app tests bench migrations
	$(BIN)/ruff format --check app tests bench migrations

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

pytest: $(STAMP)
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
