# Everything the tests and the demo need is installed from here: a fresh machine needs only python3.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= 2

.PHONY: all install demo test test-pythons test-live bench lint schema clean

all: test

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --upgrade 'pip>=24' >/dev/null
	$(PY) -m pip install -e '.[test]'
	$(PY) -m tests.fixtures.real_wheels   # real wheels for the embeddings rebuild test, fetched at set-up
	@# headless Chromium for the HTML report's browser tests (Debian's package); never fails make
	-@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    { apt-get update -qq >/dev/null 2>&1 || true; } && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >/dev/null 2>&1; } || \
	  echo "note: chromium is not installed (apt-get install chromium); the browser tests will skip"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	bash scripts/demo.sh $(PY)

test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -q

# Python 3.10 (the oldest requires-python allows) and the newest on the machine: a venv .venv-<version>
# each (Kernodeck with pytest, no torch, uv or real wheels), the CLI smoke and these fast tests.
PYTHONS    ?= 3.10 3.13
FAST_TESTS ?= tests/test_envvars.py tests/test_formats.py tests/test_shared_options.py tests/test_manifest_load.py \
	tests/test_lockfile_read.py tests/test_lockfile_write.py tests/test_lockfile_header.py tests/test_lock_cli.py \
	tests/test_resolve.py tests/test_targets.py tests/test_index_evaluate.py tests/test_diff.py tests/test_report.py \
	tests/test_cli_exit.py tests/test_firsterror.py tests/test_fsio_writes.py tests/test_manifest_pipfile.py tests/test_manifest_poetrydeps.py \
	tests/test_manifest_condaenv.py tests/test_manifest_setuppy.py tests/test_verify_scenarios.py

test-pythons: $(STAMP)
	FAST_TESTS="$(FAST_TESTS)" JOBS=$(JOBS) UV=$(VENV)/bin/uv bash scripts/test_pythons.sh $(PYTHONS)

test-live: $(STAMP)
	$(PY) -m pytest -m live -q -p no:cacheprovider

bench: $(STAMP)
	$(PY) -m pip install -e '.[test,bench]' >/dev/null
	$(PY) benchmarks/lock.py --scaling --backtrack
	$(PY) benchmarks/verify.py | tee benchmarks/results/verify.md
	$(PY) benchmarks/fleet.py | tee benchmarks/results/fleet.md
	$(PY) benchmarks/require.py | tee benchmarks/results/require.md
	$(PY) benchmarks/startup.py | tee benchmarks/results/startup.md
	cat benchmarks/results/lock.md benchmarks/results/verify.md benchmarks/results/fleet.md \
	  benchmarks/results/require.md benchmarks/results/startup.md > benchmarks/results.md

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m mypy

schema: $(STAMP)
	$(PY) -m kernodeck schema > schema/repro.schema.json
	$(PY) -c 'from kernodeck.manifest.jsonschema import report_schema_text as t; print(t(), end="")' > schema/report.schema.json

clean:
	rm -rf $(VENV) .venv-3.* build dist src/*.egg-info
