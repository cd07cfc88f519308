"""Hidden inputs are drawn per submission (issue 16, item 3): from a seed derived from the
course secret, the submission id and the stage; the report records it and `--seed` reproduces it."""
import pytest
from conftest import grade_cached

from grader.authoring import autograder, secret
from grader.engine import paths, seeds, testing

WRONG_SOFTMAX = ("import numpy as np\n"
                 "def softmax(x, axis=-1):\n    e = np.exp(x)\n    return e / e.sum(axis=-1, keepdims=True)\n"
                 "def log_softmax(x, axis=-1):\n    return np.log(softmax(x, axis))\n")


def test_derivation_depends_on_secret_id_stage_and_case():
    s1, s2 = "a" * 64, "b" * 64
    alice = seeds.submission_seed("alice", s1)
    assert alice == seeds.submission_seed("alice", s1) and 0 <= alice < 2 ** seeds.BITS
    assert len({alice, seeds.submission_seed("bob", s1), seeds.submission_seed("alice", s2)}) == 3
    stage = seeds.stage_seed(alice, "a02_softmax")
    assert stage != seeds.stage_seed(alice, "a03_attention")
    assert len({seeds.case_seed(stage, c) for c in range(100)}) == 100
    # a hidden data file's seed: the secret's, not a submission's (every student of a term gets the same file)
    data = seeds.data_seed(secret.A08_SPLIT, s1)
    assert data == seeds.data_seed(secret.A08_SPLIT, s1) and 0 <= data < 2 ** seeds.BITS
    assert len({data, seeds.data_seed(secret.A08_SPLIT, s2), seeds.data_seed("another file", s1), alice}) == 4


def test_secret_is_kept_with_the_hidden_suites_and_rotates(tmp_path):
    assert seeds.SECRET_FILE.parent == paths.HIDDEN_TESTS and paths.TESTS in paths.SECRET_PATHS
    assert "tests/hidden" in autograder.SOURCE_PARTS  # Gradescope grades with it
    assert len(seeds.course_secret()) >= 32
    target = tmp_path / "course_secret.txt"
    first, second = secret.rotate(target), secret.rotate(target)
    assert first != second and seeds.course_secret(target) == second
    with pytest.raises(seeds.NoSecret):
        seeds.course_secret(tmp_path / "absent.txt")


def test_case_seed_needs_a_stage_seed():
    testing.use_stage_seed(None)
    with pytest.raises(RuntimeError, match="stage seed"):
        testing.rng(1)
    testing.use_stage_seed(7)
    try:
        assert (testing.rng(1).normal(size=3) == testing.rng(1).normal(size=3)).all()
        assert (testing.rng(1).normal(size=3) != testing.rng(2).normal(size=3)).all()
    finally:
        testing.use_stage_seed(None)


@pytest.fixture(scope="module")
def wrong(tmp_path_factory):
    sub = tmp_path_factory.mktemp("seeds") / "sub"
    sub.mkdir()
    (sub / "a02_softmax.py").write_text(WRONG_SOFTMAX)
    return sub


def feedback(report):
    return {t["id"]: (t["status"], t["feedback"]) for s in report["stages"] for t in s["tests"]}


def test_report_records_the_seed_and_seed_reproduces_it(wrong):
    alice = grade_cached(wrong, stages=["a02_softmax"], submission_id="alice")
    assert alice["seed"] == seeds.submission_seed("alice")
    again = grade_cached(wrong, stages=["a02_softmax"], submission_id="carol", seed=alice["seed"])
    assert again["seed"] == alice["seed"] and feedback(again) == feedback(alice)


def test_another_student_gets_other_inputs(wrong):
    """The wrong softmax's feedback quotes got/expected values of the random cases: they differ
    between students, while the score (the mistake is caught either way) does not."""
    alice = grade_cached(wrong, stages=["a02_softmax"], submission_id="alice")
    bob = grade_cached(wrong, stages=["a02_softmax"], submission_id="bob")
    assert bob["seed"] != alice["seed"]
    assert feedback(bob) != feedback(alice)
    assert 0 < bob["score"] == alice["score"] < bob["max_score"]
