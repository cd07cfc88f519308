"""Every catalogued mistake is caught, named (in English and in Korean), and charged to its own stage only;
every alternative correct implementation scores full marks (issue: sharp and fair suites).

Each test grades one submission, so pytest-xdist spreads them over the cores.
The session ends with: catalogue: mutants caught X/Y, alternatives full marks A/B.
"""
import pytest

from grader.authoring import mutants
from grader.engine import run
from grader.engine.options import GradingOptions

MUTANTS = mutants.load()
ALTERNATIVES = mutants.alternatives()
UPSTREAM = mutants.upstream()


def test_catalogue_is_large_enough():
    per_stage = {}
    for m in MUTANTS:
        per_stage[m.stage] = per_stage.get(m.stage, 0) + 1
    assert len(MUTANTS) >= 45, f"only {len(MUTANTS)} mutants"
    thin = {s: n for s, n in per_stage.items() if n < 5}
    assert not thin and len(per_stage) >= 8, f"stages with fewer than 5 mutants: {thin}, stages: {sorted(per_stage)}"
    alts = {}
    for stage, _ in ALTERNATIVES:
        alts[stage] = alts.get(stage, 0) + 1
    assert len(alts) >= 8 and all(n >= 2 for n in alts.values()), alts


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.key)
def test_mutant_loses_points_with_feedback_that_names_it(mutant, tmp_path):
    sub = mutants.build_submission(mutant, tmp_path / "sub")
    # a mistake caught by the fast tests is caught by the whole suite (scores are per test)
    stage, named_in_korean = mutants.grade_both(mutant, sub, GradingOptions(fast_only=not mutant.needs_slow))
    feedback = mutants.failed_feedback(stage)
    assert stage["score"] < stage["max_score"], f"not caught: {mutant.description}"
    assert any(word.lower() in feedback.lower() for word in mutant.feedback_mentions), \
        f"caught but the feedback does not name it ({mutant.feedback_mentions}): {feedback[:500]}"
    assert named_in_korean, f"named in English but not in Korean (untranslated text?): {feedback[:500]}"


@pytest.mark.parametrize("variant", UPSTREAM, ids=lambda v: v.key)
def test_alternative_upstream_variant_loses_nothing_in_the_stages_built_on_it(variant, tmp_path):
    """A correct earlier stage that uses the contract's freedoms (tests/upstream/): full marks in its own
    stage and in every stage that imports it (the fast tests; `make catalogue` runs them all)."""
    assert variant.graded_with[1:], f"{variant.key}: no stage is built on {variant.stage}"
    rep = mutants.grade_upstream(variant, tmp_path / "sub", options=GradingOptions(fast_only=True))
    assert not mutants.upstream_shortfalls(rep), mutants.upstream_shortfalls(rep)


@pytest.mark.parametrize("alt", ALTERNATIVES, ids=lambda a: f"{a[0]}/{a[1].stem}")
def test_alternative_scores_full_marks(alt, tmp_path):
    stage_id, path = alt
    sub = mutants.build_alternative(stage_id, path, tmp_path / "sub")
    stage = run.grade(str(sub), GradingOptions(stage_ids=[stage_id]))["stages"][0]
    assert stage["score"] == pytest.approx(stage["max_score"]), mutants.failed_feedback(stage)[:800]
