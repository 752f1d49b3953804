# Developer entry points. The test suite is also what CI runs (.ci/run).

# The project's virtualenv when there is one (scripts/test creates it), else python3.
PYTHON ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)

.PHONY: test test-fast chaos bench docs

# Lint, type-check and run every test against real PostgreSQL, MariaDB and SQLite.
test:
	./scripts/test $(ARGS)

# The unit tests and the bench harness's own: no servers, no install step, well under 30 s.
# Run them while editing; `make test` before a commit.
test-fast:
	$(PYTHON) -m pytest tests/unit bench -q $(ARGS)

# The soak: 10,000 jobs under random faults for about ten minutes, then the history
# checker. Options through CHAOS_ARGS, e.g. make chaos CHAOS_ARGS="--jobs 1000 --seconds 60".
chaos:
	$(PYTHON) -m chaos $(CHAOS_ARGS)

bench:
	$(PYTHON) -m bench $(BENCH_ARGS)

# The documentation site at http://127.0.0.1:8000/, rebuilt as pages change (after a change to
# the code, `python -m docs.generate` rewrites the references made from it). Needs the docs extra (pip install -e '.[docs]'; ./scripts/test installs it).
docs:
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs serve
