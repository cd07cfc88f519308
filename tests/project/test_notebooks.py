"""The stage notebooks: generated from the sources, graded like the .py files, and they run.

* every ``assignments/aNN/aNN.ipynb`` is what ``python -m grader.authoring.notebook_build`` makes (no drift);
* joining a notebook's tagged cells gives back the module it was made from, byte for byte;
* a notebook submission is graded exactly as the same code handed in as .py files;
  a malformed notebook, one without tags and one with a shell command score zero, with a
  clear message, for their own stage only;
* every notebook runs top to bottom in a fresh kernel: with the reference solutions in its tagged
  cells (full marks in the check cell, a picture in every picture cell) and as shipped (the check
  cell reports the NotImplementedErrors, the pictures say what to write first).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time

import pytest
from conftest import grade_cached, stage_of

from grader.authoring import notebook_build, starter
from grader.engine import notebooks, paths, run, stages
from grader.engine.options import GradingOptions
from grader.lab import figures

STAGES = notebook_build.buildable()
WITH_SOLUTION = [s for s in STAGES if stages.get(s).solution.exists()]
NUMPY_STAGES = [s for s in WITH_SOLUTION if stages.get(s).library == "numpy"]
NOTEBOOK_LIMIT_S = 300          # wall clock for one notebook, kernel start to last cell
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _nb(stage_id, text=None):
    import nbformat
    return nbformat.reads(text if text is not None else notebook_build.notebook_path(stage_id).read_text(
        encoding="utf-8"), as_version=4)


# ---------------------------------------------------------------------------
# Generated from the sources
# ---------------------------------------------------------------------------

def test_every_stage_has_a_notebook():
    missing = [s.id for s in stages.all_stages() if not notebook_build.notebook_path(s.id).exists()]
    assert not missing, f"no notebook for {missing}: run `make notebooks`"


def test_notebooks_are_up_to_date():
    drift = [p.relative_to(paths.ROOT).as_posix() for p, text in notebook_build.expected().items()
             if not p.exists() or p.read_text(encoding="utf-8") != text]
    assert not drift, f"out of date with starter/ or the handouts (run `make notebooks`): {drift}"


@pytest.mark.parametrize("stage_id", STAGES)
def test_tagged_cells_give_back_the_starter_module(stage_id):
    path = notebook_build.notebook_path(stage_id)
    assert notebooks.notebook_to_source(path) == notebook_build.starter_text(stage_id)


@pytest.mark.parametrize("stage_id", WITH_SOLUTION)
def test_tagged_cells_give_back_the_reference_module(stage_id, tmp_path):
    path = tmp_path / f"{stage_id}.ipynb"
    path.write_text(notebook_build.solution_notebook(stage_id), encoding="utf-8")
    assert notebooks.notebook_to_source(path) == stages.get(stage_id).solution.read_text(encoding="utf-8")


@pytest.mark.parametrize("stage_id", STAGES)
def test_notebook_layout(stage_id):
    nb = _nb(stage_id)
    import nbformat
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    tags = [tuple(c.metadata.get("tags", [])) for c in code]
    # one solution cell per function/class the student writes, named in the cell
    written = notebook_build.solution_names(stage_id)
    solution_sources = [c.source for c, t in zip(code, tags) if t == ("solution",)]
    for name in written:
        holders = [s for s in solution_sources if re.search(rf"^(def|class) {name}\b", s, re.M)]
        assert len(holders) == 1, f"{name} should have its own cell tagged 'solution'"
    assert all(t in {(), ("solution",), ("course",)} for t in tags), tags
    # the setup cell: untagged, shell escapes only on Colab, finds the course folder
    setup = code[0]
    assert tags[0] == () and "find_course_root" in setup.source and "course.setup(STAGE, ROOT" in setup.source
    assert re.search(r'if ON_COLAB:\n    !pip install', setup.source)
    assert all(not line.lstrip().startswith(("!", "%")) for c, t in zip(code, tags) if t
               for line in c.source.splitlines())
    # a check cell and at least one picture, both untagged
    assert any("course.check(STAGE, language=LANGUAGE)" in c.source for c, t in zip(code, tags) if t == ())
    assert any("figures.show(" in c.source for c, t in zip(code, tags) if t == ()), "no picture cell"
    # the handout is there
    readme = stages.get(stage_id).folder / "README.md"
    if readme.exists():
        first = readme.read_text(encoding="utf-8").splitlines()[0]
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith(first)


def test_check_flag_reports_drift(tmp_path, monkeypatch, capsys):
    stage_id = STAGES[0]
    fake_root = tmp_path / "assignments" / stage_id
    fake_root.mkdir(parents=True)
    target = fake_root / f"{stage_id}.ipynb"
    target.write_text("{}", encoding="utf-8")
    monkeypatch.setattr(notebook_build, "notebook_path", lambda sid, root=None: (
        target if sid == stage_id else stages.get(sid).notebook))
    assert notebook_build.main(["--check"]) == 1
    assert stage_id in capsys.readouterr().out


# ---------------------------------------------------------------------------
# Reading notebooks for grading
# ---------------------------------------------------------------------------

def _notebook_json(cells, minor=5):
    return json.dumps({"nbformat": 4, "nbformat_minor": minor, "metadata": {}, "cells": [
        {"cell_type": "code", "id": f"c{i}", "metadata": {"tags": tags} if tags else {}, "source": src,
         "outputs": [], "execution_count": None} for i, (src, tags) in enumerate(cells)]})


def test_convert_keeps_tagged_cells_and_explains_bad_notebooks(tmp_path):
    good = tmp_path / "a02_softmax.ipynb"
    in_string = 'def f():\n    """100 %\n% not a magic inside a string"""\n    return 1'
    good.write_text(_notebook_json([("import numpy as np", ["course"]), ("x = 1  # scratch", []),
                                    ("!pip install numpy", []), (in_string, ["solution"])]))
    assert notebooks.convert([good], tmp_path) == []
    assert (tmp_path / "a02_softmax.py").read_text() == \
        'import numpy as np\n\n\ndef f():\n    """100 %\n% not a magic inside a string"""\n    return 1\n'

    cases = {
        "a03_attention.ipynb": ('{"cells": [', "not a readable Jupyter notebook"),
        "a04_positional.ipynb": ('{"cells": "nope", "nbformat": 4, "nbformat_minor": 5, "metadata": {}}',
                                 "not a valid Jupyter notebook"),
        "a05_encoder.ipynb": (_notebook_json([("import torch", []), ("def f():\n    return 1", [])]),
                              "tagged 'solution'"),
        "a06_decoder.ipynb": (_notebook_json([("import torch", ["course"]), ("!ls -la\nx = 1", ["solution"])]),
                              "shell command or magic"),
        "a07_bert_mlm.ipynb": (_notebook_json([("%%bash\necho hi", ["solution"])]), "shell command or magic"),
        "notes.ipynb": (_notebook_json([("x = 1", ["solution"])]), "named after its stage"),
    }
    for name, (text, _) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    errors = notebooks.convert([tmp_path / name for name in cases], out)
    assert len(errors) == len(cases) and not list(out.iterdir())
    for (name, (_, reason)), (file, error) in zip(cases.items(), errors):
        assert file == name and error.startswith(name) and reason in error, error


def test_colab_style_notebook_without_cell_ids_is_read(tmp_path):
    """Frontends write nbformat 4.4 (no cell ids) or omit fields nbformat can fill in."""
    text = json.loads(_notebook_json([("x = 1", ["solution"])], minor=4))
    for cell in text["cells"]:
        del cell["id"]
    path = tmp_path / "a01_similarity.ipynb"
    path.write_text(json.dumps(text))
    assert notebooks.notebook_to_source(path) == "x = 1\n"
    text["cells"][0]["outputs"] = [{"output_type": "stream", "text": "no 'name' field"}]  # an odd output
    path.write_text(json.dumps(text))
    assert notebooks.notebook_to_source(path) == "x = 1\n"


# ---------------------------------------------------------------------------
# Graded exactly as the .py files
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reference_notebooks(tmp_path_factory):
    """A submission folder holding the reference solutions as notebooks (generated here, never committed)."""
    folder = tmp_path_factory.mktemp("notebook-submission")
    for stage_id in WITH_SOLUTION:
        (folder / f"{stage_id}.ipynb").write_text(notebook_build.solution_notebook(stage_id), encoding="utf-8")
    return folder


def _comparable(report):
    """The report without what legitimately differs: timings, and where/how it was handed in."""
    report = json.loads(json.dumps(report))
    report.pop("duration_s", None)
    for key in ("path", "format", "id"):
        report["submission"].pop(key, None)
    for s in report["stages"]:
        for t in s["tests"]:
            t.pop("duration_s", None)
    return report


def test_notebook_submission_grades_the_same_modules(reference_notebooks, tmp_path):
    """Every stage: the intake turns the notebooks into exactly the reference .py files."""
    from grader.engine import submission
    got = submission.intake(str(reference_notebooks), str(tmp_path / "nb"))
    want = submission.intake(str(paths.SOLUTIONS), str(tmp_path / "py"))
    assert got.errors == [] and got.format == "folder", got.errors
    for stage_id in WITH_SOLUTION:
        assert (tmp_path / "nb" / "modules" / f"{stage_id}.py").read_bytes() == \
            stages.get(stage_id).solution.read_bytes(), stage_id
    assert got.sha256 == want.sha256


# The graded comparison runs the hidden suites twice; the numpy stages and one torch stage keep it near a
# minute (the other stages' graded modules are byte-identical, see the test above).
REPORT_STAGES = NUMPY_STAGES + [s for s in WITH_SOLUTION if s == "a05_encoder"]


@pytest.mark.parametrize("stage_id", REPORT_STAGES)
def test_notebook_submission_gets_the_same_hidden_report(reference_notebooks, stage_id):
    from_py = grade_cached(paths.SOLUTIONS, REPORT_STAGES)
    from_nb = grade_cached(reference_notebooks, REPORT_STAGES, submission_id="solutions")  # the same seed
    assert from_nb["submission"]["format"] == "folder" and not from_nb["errors"], from_nb["errors"]
    want = _comparable({**from_py, "stages": [stage_of(from_py, stage_id)]})
    got = _comparable({**from_nb, "stages": [stage_of(from_nb, stage_id)]})
    assert got == want
    assert stage_of(from_nb, stage_id)["score"] == stages.get(stage_id).points


def test_bad_notebooks_score_zero_for_their_stage_only(tmp_path):
    good, malformed, untagged, shell = WITH_SOLUTION[:4]
    (tmp_path / f"{good}.ipynb").write_text(notebook_build.solution_notebook(good))
    (tmp_path / f"{malformed}.ipynb").write_text(notebook_build.solution_notebook(malformed)[:500])
    nb = json.loads(notebook_build.solution_notebook(untagged))
    for cell in nb["cells"]:
        cell["metadata"].pop("tags", None)
    (tmp_path / f"{untagged}.ipynb").write_text(json.dumps(nb))
    nb = json.loads(notebook_build.solution_notebook(shell))
    solution = next(c for c in nb["cells"] if c["metadata"].get("tags") == ["solution"])
    solution["source"] = "!pip install numpy\n" + "".join(solution["source"])
    (tmp_path / f"{shell}.ipynb").write_text(json.dumps(nb))

    chosen = [good, malformed, untagged, shell]
    rep = run.grade(str(tmp_path), GradingOptions(kind="public", stage_ids=chosen))
    graded = stage_of(rep, good)
    assert graded["score"] == graded["max_score"] > 0, graded
    reasons = {malformed: "not a readable Jupyter notebook", untagged: "tagged 'solution'",
               shell: "shell command or magic"}
    for stage_id, reason in reasons.items():
        entry = stage_of(rep, stage_id)
        assert entry["score"] == 0 and entry["status"] == "missing", entry
        said = [e for e in rep["errors"] + [entry.get("message", "")] if e.startswith(stage_id) and reason in e]
        assert said, f"{stage_id}: no message saying {reason!r} in {rep['errors']}"


# ---------------------------------------------------------------------------
# Pictures never crash an unfinished notebook
# ---------------------------------------------------------------------------

def test_show_prints_what_to_write_instead_of_raising(monkeypatch, capsys):
    monkeypatch.delenv("COURSE_FIGURES_STRICT", raising=False)

    def softmax(x, axis=-1):
        raise NotImplementedError("subtract the max first")

    assert figures.show(figures.softmax_figure, softmax) is None
    out = capsys.readouterr().out
    assert "`softmax` still raises NotImplementedError" in out and "subtract the max first" in out

    def similarity_scores(query, keys):
        return None

    figures.show(figures.similarity_scores_figure, similarity_scores)
    assert "forget a `return`" in capsys.readouterr().out
    monkeypatch.setenv("COURSE_FIGURES_STRICT", "1")
    with pytest.raises(NotImplementedError):
        figures.show(figures.softmax_figure, softmax)


# ---------------------------------------------------------------------------
# Every notebook runs in a fresh kernel
# ---------------------------------------------------------------------------

def _execute(path, env: dict, run_check: bool = True):
    """Run the notebook at ``path`` in a fresh python3 kernel (this venv's python), from its folder.

    ``run_check=False`` leaves out the check cell (it only starts ``python -m grader check``, which
    test_course covers for every stage; see CHECKED). Returns (notebook with outputs, seconds).
    Fails if a cell raises or the notebook takes longer than NOTEBOOK_LIMIT_S.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    nb = nbformat.read(str(path), as_version=4)
    if not run_check:
        for cell in _cells(nb, "course.check(STAGE, language=LANGUAGE)"):
            cell.source = "print('check skipped by the course tests')"
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print('KERNEL', sys.executable)"))
    start = time.monotonic()
    client = NotebookClient(nb, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                            timeout=NOTEBOOK_LIMIT_S, startup_timeout=120,
                            timeout_func=lambda cell: max(1, int(NOTEBOOK_LIMIT_S - (time.monotonic() - start))))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client.execute()
    except CellTimeoutError:
        pytest.fail(f"{path.name} did not finish within {NOTEBOOK_LIMIT_S} s")
    except CellExecutionError as exc:
        pytest.fail(f"{path.name} raised in a cell:\n{ANSI.sub('', str(exc))[-3000:]}")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    elapsed = time.monotonic() - start
    kernel = _text(nb.cells[-1])
    assert os.path.realpath(sys.executable) in {os.path.realpath(w) for w in kernel.split() if w.startswith("/")}, \
        f"the notebook ran on another python: {kernel}"
    nb.cells.pop()
    return nb, elapsed


def _cells(nb, needle):
    return [c for c in nb.cells if c.cell_type == "code" and needle in c.source]


def _text(cell) -> str:
    return ANSI.sub("", "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream"))


TIMINGS: dict = {}


@pytest.fixture(scope="module")
def course_tree(tmp_path_factory):
    """assignments/aNN/aNN.ipynb twice: as shipped (starter) and with the reference in the tagged cells.

    Laid out like the bundle so that a later stage's notebook finds the earlier stage's notebook
    next to it; grader/, tests/public and the data come from the repository (COURSE_ROOT)."""
    base = tmp_path_factory.mktemp("notebook-runs")
    for kind in ("starter", "reference"):
        for stage_id in STAGES:
            path = notebook_build.notebook_path(stage_id, base / kind)
            path.parent.mkdir(parents=True)
            if kind == "starter":
                shutil.copy(notebook_build.notebook_path(stage_id), path)
            elif stage_id in WITH_SOLUTION:
                path.write_text(notebook_build.solution_notebook(stage_id), encoding="utf-8")
    yield base
    if TIMINGS:
        lines = [f"{k:28s} {v:6.1f} s" for k, v in sorted(TIMINGS.items())]
        print("\nnotebook execution times:\n" + "\n".join(lines) + f"\n{'total':28s} {sum(TIMINGS.values()):6.1f} s")


# The check cell runs `python -m grader check` (10-30 s on a busy machine). What it prints for every stage is
# what test_course checks by grading solutions/ and starter/; here it runs, in full, for a numpy stage and a
# stage that imports an earlier one (the notebook then assembles that stage too), on both sides.
CHECKED = {"reference": {"a01_similarity", "a06_decoder"}, "starter": {"a04_positional", "a07_bert_mlm"}}

# quick pictures, one torch thread (the machine is shared; more threads only fight each other)
ENV = {"COURSE_ROOT": str(paths.ROOT), "COURSE_NOTEBOOK_QUICK": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.mark.parametrize("stage_id", WITH_SOLUTION)
def test_notebook_runs_with_the_reference(course_tree, stage_id):
    path = notebook_build.notebook_path(stage_id, course_tree / "reference")
    checked = stage_id in CHECKED["reference"]
    nb, elapsed = _execute(path, {**ENV, "COURSE_FIGURES_STRICT": "1"}, run_check=checked)
    TIMINGS[f"reference {stage_id}"] = elapsed
    if checked:
        check = _text(_cells(nb, "course.check(STAGE, language=LANGUAGE)")[0])
        assert "Checking" in check and "NotImplementedError" not in check, check[-2000:]
    if checked and stages.get(stage_id).suite("public").exists():
        points = stages.get(stage_id).points
        assert f"{points:.2f} / {points:.0f}" in check, f"the check cell did not give full marks:\n{check[-3000:]}"
    for cell in _cells(nb, "figures.show("):
        images = [o for o in cell.outputs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
        assert len(images) == 1, f"picture cell {cell.id} drew {len(images)} pictures: {_text(cell)[-1000:]}"


@pytest.mark.parametrize("stage_id", STAGES)
def test_shipped_notebook_runs_and_reports_not_implemented(course_tree, stage_id):
    path = notebook_build.notebook_path(stage_id, course_tree / "starter")
    checked = stage_id in CHECKED["starter"]
    nb, elapsed = _execute(path, ENV, run_check=checked)
    TIMINGS[f"starter   {stage_id}"] = elapsed
    if checked and stages.get(stage_id).suite("public").exists():
        check = _text(_cells(nb, "course.check(STAGE, language=LANGUAGE)")[0])
        assert "raised NotImplementedError" in check and "Traceback" not in check, check[-2000:]
    for cell in _cells(nb, "figures.show("):
        assert "No picture yet" in _text(cell) and "still raises NotImplementedError" in _text(cell), \
            f"picture cell {cell.id}: {_text(cell)[-1000:]}"


@pytest.mark.parametrize("stage_id", WITH_SOLUTION)
def test_shipped_notebook_holds_no_solution_line(stage_id):
    """The release test reads files as text, so a notebook's JSON would hide code from it: check the code cells."""
    source = stages.get(stage_id).solution.read_text(encoding="utf-8")
    lines = source.splitlines()
    outside = {l.strip() for l in starter.strip_solutions(source).splitlines()}
    secret = {l.strip() for s, e, _, _ in starter.regions(source) for l in lines[s + 1:e]
              if len(l.strip()) >= 12 and not l.strip().startswith("#") and l.strip() not in outside}
    shipped = {l.strip() for c in _nb(stage_id).cells if c.cell_type == "code" for l in c.source.splitlines()}
    assert not shipped & secret, f"solution lines in the {stage_id} notebook: {sorted(shipped & secret)[:3]}"


def test_intake_notes_belong_to_the_stage_their_file_is_named_after(tmp_path):
    """A note about a03_attention_v2.py is not a note about a03_attention (matched by file, not by prefix)."""
    from grader.engine import submission
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "a03_attention.py").write_text("x = 1\n")
    (folder / "a03_attention_v2.py").write_bytes(b"\xff\xfe not utf-8")
    got = submission.intake(str(folder), str(tmp_path / "in"))
    assert got.notes_about("a03_attention") == []
    assert got.notes_about("a03_attention_v2") and "UTF-8" in got.notes_about("a03_attention_v2")[0]
    assert got.format is submission.Format.FOLDER and got.lines() == got.notes_about("a03_attention_v2")
