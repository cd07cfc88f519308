"""Every catalogued mistake is caught, named, and charged to its own stage only;
every alternative correct implementation scores full marks (issue: sharp and fair suites).

All gradings run up front, two at a time, and the tests then read the results.
The session prints: mutants caught X/Y, alternatives full marks A/B.
"""
from concurrent.futures import ThreadPoolExecutor

import pytest

import conftest
from grader import mutants, run

MUTANTS = mutants.load()
ALTERNATIVES = mutants.alternatives()


@pytest.fixture(scope="session")
def catalogue_results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("catalogue")
    jobs = {}
    for m in MUTANTS:
        jobs[("mutant", m.key)] = (mutants.build_submission(m, tmp / "m" / m.stage / m.id), m.stage)
    for stage, path in ALTERNATIVES:
        jobs[("alt", f"{stage}/{path.stem}")] = (mutants.build_alternative(stage, path, tmp / "a" / stage / path.stem), stage)

    slow_ok = {("mutant", m.key): m.needs_slow for m in MUTANTS}

    def grade(item):
        key, (folder, stage) = item
        # a mistake caught by the fast tests is caught by the whole suite; alternatives face every test
        fast = key[0] == "mutant" and not slow_ok[key]
        return key, run.grade(str(folder), stage_ids=[stage], fast_only=fast)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(grade, jobs.items()))


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
def test_mutant_loses_points_with_feedback_that_names_it(mutant, catalogue_results):
    stage = catalogue_results[("mutant", mutant.key)]["stages"][0]
    lost = stage["max_score"] - stage["score"]
    feedback = mutants.failed_feedback(stage)
    named = any(word.lower() in feedback.lower() for word in mutant.feedback_mentions)
    conftest.CATALOGUE_STATS["mutants"].append(lost > 0 and named)
    assert lost > 0, f"not caught: {mutant.description}"
    assert named, f"caught but the feedback does not name it ({mutant.feedback_mentions}): {feedback[:500]}"


@pytest.mark.parametrize("alt", ALTERNATIVES, ids=lambda a: f"{a[0]}/{a[1].stem}")
def test_alternative_scores_full_marks(alt, catalogue_results):
    stage_id, path = alt
    stage = catalogue_results[("alt", f"{stage_id}/{path.stem}")]["stages"][0]
    full = stage["score"] == pytest.approx(stage["max_score"])
    conftest.CATALOGUE_STATS["alternatives"].append(full)
    assert full, mutants.failed_feedback(stage)[:800]
