"""The mutation score (``grader/authoring/mutation.py``): cosmic-ray's mutants of a target, the line a mutant
changes, the score with equivalent mutants left out, and equivalent.toml entries that no longer fit."""
from pathlib import Path

import pytest
from cosmic_ray.work_item import TestOutcome as Outcome
from cosmic_ray.work_item import WorkerOutcome, WorkResult

from grader.authoring import mutation

SOURCE = '''def f(x):
    if x > 0:
        return x + 1
    return 0


def g(y):
    return y * 2
'''


@pytest.fixture
def target(tmp_path, monkeypatch):
    monkeypatch.setattr(mutation, "SESSIONS", tmp_path / "sessions")
    source = tmp_path / "mod.py"
    source.write_text(SOURCE)
    suite = tmp_path / "test_mod.py"
    suite.write_text("def test_nothing():\n    pass\n")
    return mutation.Target("mod", source, ("f",), suite)


def test_every_target_has_its_source():
    targets = mutation.targets()
    assert {"a01_similarity", "a09_retrieval", "testing"} <= set(targets)
    assert all(t.source.is_file() for t in targets.values())
    assert "assert_close" in targets["testing"].functions


def test_a_session_holds_only_the_chosen_functions_and_is_made_again_when_the_source_changes(target):
    db = mutation.open_session(target)
    try:
        lines = {w.mutations[0].start_pos[0] for w in db.work_items}
        first = db.num_work_items
    finally:
        db.close()
    assert first > 5 and lines <= {1, 2, 3, 4}      # f only, not g
    db = mutation.open_session(target)               # unchanged: the same session, results kept
    try:
        assert db.num_work_items == first
        db.set_result(db.work_items[0].job_id, WorkResult(WorkerOutcome.NORMAL, test_outcome=Outcome.KILLED))
    finally:
        db.close()
    target.source.write_text(SOURCE.replace("x + 1", "x + 2"))
    db = mutation.open_session(target)
    try:
        assert not list(db.results)                  # a new source: graded again from the start
    finally:
        db.close()


def test_a_mutant_and_the_line_it_changes(target):
    db = mutation.open_session(target)
    try:
        items = db.work_items
    finally:
        db.close()
    changed = [mutation.changed_line(SOURCE, mutation.mutated_source(w, SOURCE)) for w in items]
    assert "if x >= 0:" in changed and "return x - 1" in changed


def test_the_score_leaves_out_equivalent_mutants_and_reports_stale_entries(target, tmp_path, monkeypatch):
    db = mutation.open_session(target)
    try:
        items = db.work_items
        by_line = {mutation.changed_line(SOURCE, mutation.mutated_source(w, SOURCE)): w for w in items}
        ge, minus = by_line["if x >= 0:"], by_line["return x - 1"]
        for w in items:
            survived = w in (ge, minus)
            db.set_result(w.job_id, WorkResult(
                WorkerOutcome.NORMAL, test_outcome=Outcome.SURVIVED if survived else Outcome.KILLED,
                diff=mutation.changed_line(SOURCE, mutation.mutated_source(w, SOURCE))))
        equivalent = tmp_path / "equivalent.toml"
        m = ge.mutations[0]
        equivalent.write_text(f'[[equivalent]]\ntarget = "mod"\noperator = "{m.operator_name}"\n'
                              f'occurrence = {m.occurrence}\nline = "if x >= 0:"\nreason = "f(0) is 0 either way"\n')
        monkeypatch.setattr(mutation, "EQUIVALENT", equivalent)
        s = mutation.score(target, db)
        assert s.equivalent == 1 and s.killed == s.mutants - 2 and len(s.survivors) == 1
        assert s.percent == pytest.approx(100.0 * (s.mutants - 2) / (s.mutants - 1))
        assert "SURVIVED mod" in mutation.report([s]) and "return x - 1" in mutation.report([s])
        equivalent.write_text(equivalent.read_text().replace('line = "if x >= 0:"', 'line = "if x > 1:"'))
        s = mutation.score(target, db)
        assert s.equivalent == 0 and len(s.stale) == 1 and "STALE" in mutation.report([s])
    finally:
        db.close()


def test_the_equivalents_file_names_real_mutants_with_reasons():
    entries = mutation.equivalents()
    assert entries, "tests/mutants/equivalent.toml is empty"
    targets = mutation.targets()
    for (name, operator, occurrence), (line, reason, kind) in entries.items():
        assert name in targets and operator.startswith("core/") and occurrence >= 0
        assert line.strip() and len(reason) > 15 and kind in ("equivalent", "unspecified"), (name, operator, occurrence)
    assert Path(mutation.EQUIVALENT).is_file()


def test_a_report_keeps_every_result_even_when_the_suites_changed_since(target):
    """``--report`` reads the database as it is: only a grading run drops survivors to grade them again."""
    db = mutation.open_session(target)
    try:
        job = db.work_items[0].job_id
        db.set_result(job, WorkResult(WorkerOutcome.NORMAL, test_outcome=Outcome.SURVIVED))
    finally:
        db.close()
    target.suite.write_text("def test_something_else():\n    pass\n")
    db = mutation.open_session(target, read_only=True)
    try:
        assert [j for j, r in db.results if r.test_outcome == Outcome.SURVIVED] == [job]
    finally:
        db.close()
    db = mutation.open_session(target)  # a grading run: the survivor is graded again
    try:
        assert not list(db.results)
    finally:
        db.close()


def test_a_stage_counts_only_the_mutants_of_what_students_write():
    """Stage 6's toy-data helpers and training loop come with the starter as they are: no mutant of them counts."""
    target = mutation.targets()["a06_decoder"]
    lines = mutation.students_lines(target.source)
    text = target.source.read_text(encoding="utf-8").splitlines()
    assert any("torch.tril" in text[n - 1] for n in lines)
    assert not any("def train_seq2seq" in text[n - 1] or "class Vocab" in text[n - 1] for n in lines)
    assert not any("SOLUTION" in text[n - 1] for n in lines)
