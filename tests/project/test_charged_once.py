"""A mistake in an earlier stage is charged once, in that stage, not again in later ones.

While stage N is graded the earlier torch stages it imports are stand-ins built
from torch's own modules (grader/sandbox/standins/), so a broken stage 5 or 7
must leave the stages built on it untouched.
"""
import pytest
from conftest import grade_cached, stage_of

from grader.authoring import mutants
from grader.engine import stages

DEPENDENTS = {s.id: [d.id for d in stages.all_stages() if s.id in d.standins] for s in stages.all_stages()}


def first_mutant(stage_id):
    return next(m for m in mutants.load(stage_id))


@pytest.mark.parametrize("upstream, downstream", [("a05_encoder", "a06_decoder"), ("a07_bert_mlm", "a09_retrieval")])
def test_a_wrong_upstream_stage_costs_nothing_downstream(upstream, downstream, tmp_path):
    assert downstream in DEPENDENTS[upstream], f"{downstream} should stand in {upstream}"
    mutant = first_mutant(upstream)
    sub = mutants.build_submission(mutant, tmp_path / "sub")
    rep = grade_cached(sub, stages=[upstream, downstream])
    up, down = stage_of(rep, upstream), stage_of(rep, downstream)
    assert up["score"] < up["max_score"], f"the mutant {mutant.id} should lose points in {upstream}"
    assert down["score"] == down["max_score"], mutants.failed_feedback(down)[:600]


def test_an_upstream_module_that_does_not_even_import_costs_nothing_downstream(tmp_path):
    sub = mutants.build_submission(first_mutant("a05_encoder"), tmp_path / "sub")
    (sub / "a05_encoder.py").write_text("this is not python\n")
    rep = grade_cached(sub, stages=["a05_encoder", "a06_decoder"])
    assert stage_of(rep, "a05_encoder")["score"] == 0
    down = stage_of(rep, "a06_decoder")
    assert down["score"] == down["max_score"], mutants.failed_feedback(down)[:600]


def test_every_stage_that_imports_an_earlier_stage_stands_it_in():
    """Why a catalogued mistake can cost only its own stage: the numpy stages import
    nothing, and every torch stage that imports an earlier one grades with a stand-in
    for it. (The catalogue test grades each mutant's own stage; this proves the rest.)"""
    import ast

    from grader.engine import paths
    for stage in stages.all_stages():
        tree = ast.parse((paths.SOLUTIONS / f"{stage.id}.py").read_text(encoding="utf-8"))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        earlier = {name for name in imported if name in {s.id for s in stages.all_stages()}}
        assert earlier <= set(stage.standins), f"{stage.id} imports {earlier - set(stage.standins)} without a stand-in"
        assert stage.library == "torch" or not earlier
