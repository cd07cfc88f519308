"""A mistake in an earlier stage is charged once, in that stage, and a correct earlier stage costs nothing.

While stage N is graded, each earlier torch stage it imports is the student's own module as written
when that stage scored full marks in the same grading; otherwise its contract names are replaced by
stand-ins built from torch's own modules (grader/sandbox/standins/) and its course-provided code by the
starter's (grader/engine/earlier.py): a broken stage 5 or 7 leaves the stages built on it untouched, a
correct one that uses the contract's freedoms (tests/upstream/) is used as it is, and the student's
own helpers stay theirs either way.
"""
import pytest
from conftest import grade_cached, stage_of

from grader.authoring import mutants
from grader.engine import stages
from grader.engine.options import GradingOptions

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

    for stage in stages.all_stages():
        tree = ast.parse(stage.solution.read_text(encoding="utf-8"))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        earlier = {name for name in imported if name in {s.id for s in stages.all_stages()}}
        assert earlier <= set(stage.standins), f"{stage.id} imports {earlier - set(stage.standins)} without a stand-in"
        assert stage.library == "torch" or not earlier


HELPER = '''

def sinusoid_table(n_positions, d_model):
    """The student's own helper (not a contract name): the sinusoid table as a tensor."""
    pos = torch.arange(n_positions, dtype=torch.float32).unsqueeze(1)
    angle = pos / torch.pow(10000.0, torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    table = torch.zeros(n_positions, d_model)
    table[:, 0::2], table[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return table
'''
CONTRACT_IMPORT = "from a05_encoder import Encoder, MultiHeadAttention, PositionwiseFeedForward, padding_mask\n"


def _with_own_helper(tmp_path, stage5: str):
    """The reference, with a stage 6 that imports a helper of the student's own from stage 5.

    ``stage5``: ``correct`` (the reference plus the helper), ``wrong_contract`` (a
    catalogued stage-5 mistake plus the helper) or ``does_not_import``."""
    sub = mutants.build_submission(first_mutant("a05_encoder"), tmp_path / "sub")
    reference_a05 = stages.get("a05_encoder").solution.read_text(encoding="utf-8")
    a05 = sub / "a05_encoder.py"
    if stage5 == "correct":
        a05.write_text(reference_a05 + HELPER, encoding="utf-8")
    elif stage5 == "wrong_contract":
        a05.write_text(a05.read_text(encoding="utf-8") + HELPER, encoding="utf-8")
    else:
        a05.write_text("this is not python\n", encoding="utf-8")
    a06 = sub / "a06_decoder.py"
    text = a06.read_text(encoding="utf-8")
    assert CONTRACT_IMPORT in text
    a06.write_text(text.replace(CONTRACT_IMPORT, CONTRACT_IMPORT.replace("padding_mask", "padding_mask, sinusoid_table")
                                + "\n_FIRST_ROWS = sinusoid_table(2, 4)  # the student's helper, used at import\n"),
                   encoding="utf-8")
    return sub


@pytest.mark.parametrize("stage5", ["correct", "wrong_contract", "does_not_import"])
def test_a_later_stage_keeps_the_students_own_helpers_of_an_earlier_one(stage5, tmp_path):
    rep = grade_cached(_with_own_helper(tmp_path, stage5), stages=["a05_encoder", "a06_decoder"])
    up, down = stage_of(rep, "a05_encoder"), stage_of(rep, "a06_decoder")
    if stage5 == "correct":
        assert up["score"] == up["max_score"], mutants.failed_feedback(up)[:600]
    else:
        assert up["score"] < up["max_score"]
    if stage5 == "does_not_import":
        # no helper to be had: the stage cannot import, and the message says which module, which name, why
        assert down["score"] == 0
        message = down["message"]
        for words in ("sinusoid_table", "a05_encoder.py could not be used", "NameError", "stand-in",
                      "padding_mask, MultiHeadAttention"):
            assert words in message, message
    else:
        assert down["score"] == down["max_score"], mutants.failed_feedback(down)[:600]


POOLING = """            weights = mask.unsqueeze(-1).to(hidden.dtype)  # (b, n, 1)
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)  # (b, H)
"""


def _a09_reusing_mean_pool(sub) -> None:
    """Make the stage 9 of ``sub`` pool with its own stage-8 ``mean_pool``."""
    a09 = sub / "a09_retrieval.py"
    text = a09.read_text(encoding="utf-8")
    assert POOLING in text
    own = "            pooled = mean_pool(hidden, mask)  # (b, H): the student's stage-8 helper\n"
    text = text.replace(POOLING, own)
    a09.write_text(text.replace("import torch.nn.functional as F\n",
                                "import torch.nn.functional as F\nfrom a08_sentiment import mean_pool\n", 1),
                   encoding="utf-8")


def test_a_stage_9_that_reuses_its_own_stage_8_mean_pool_is_not_charged_for_its_mistake(tmp_path):
    """A mean_pool that averages over padding loses points in stage 8 (the catalogue proves it),
    and only there: stage 9 pools with the stand-in's mean_pool."""
    (mutant,) = [m for m in mutants.load("a08_sentiment") if m.id == "mean_pool_over_padding"]
    sub = mutants.build_submission(mutant, tmp_path / "sub")
    _a09_reusing_mean_pool(sub)
    down = stage_of(grade_cached(sub, stages=["a09_retrieval"]), "a09_retrieval")
    assert down["score"] == down["max_score"], mutants.failed_feedback(down)[:600]


# Every pair of stages where the later one imports the earlier (the reference's imports, and a
# stage 9 that reuses its stage-8 mean_pool): each core catalogued mistake of the earlier one.
PAIRS = [("a05_encoder", "a06_decoder"), ("a05_encoder", "a07_bert_mlm"), ("a07_bert_mlm", "a08_sentiment"),
         ("a07_bert_mlm", "a09_retrieval"), ("a08_sentiment", "a09_retrieval")]


@pytest.mark.slow
@pytest.mark.parametrize("upstream, downstream, mutant",
                         [(up, down, m) for up, down in PAIRS for m in mutants.load(up)],
                         ids=lambda v: v.id if isinstance(v, mutants.Mutant) else v)
def test_every_catalogued_mistake_costs_points_only_in_its_own_stage(upstream, downstream, mutant, tmp_path):
    """The catalogue test shows each mistake loses points in its own stage; here, no stage built on it loses any."""
    sub = mutants.build_submission(mutant, tmp_path / "sub")
    if upstream == "a08_sentiment":
        _a09_reusing_mean_pool(sub)
    down = stage_of(grade_cached(sub, stages=[downstream], fast_only=True), downstream)
    assert down["score"] == down["max_score"], f"{mutant.key} costs {downstream} points: " + \
        mutants.failed_feedback(down)[:600]


# ------------------------------------------------------------ correct earlier stages that use the contract's freedoms

def _variant(key):
    (variant,) = [v for v in mutants.upstream() if v.key == key]
    return variant


def test_a_correct_stage_7_whose_own_loader_reads_its_own_attribute_loses_nothing_later(tmp_path):
    """The issue's case: a stage 7 whose own load_pretrained_bert reads BertModel.config (an attribute the
    contract does not name) scores full marks in stages 7, 8 and 9. Mixed with the stand-in's BertModel
    (the module nobody wrote) it lost 4.5 points in stage 8 and 6.5 in stage 9."""
    variant = _variant("a07_bert_mlm/config_attribute_loader")
    assert "bert.config" in variant.path.read_text(encoding="utf-8")
    rep = mutants.grade_upstream(variant, tmp_path / "sub")
    assert [s["id"] for s in rep["stages"]] == ["a07_bert_mlm", "a08_sentiment", "a09_retrieval"]
    assert not mutants.upstream_shortfalls(rep), mutants.upstream_shortfalls(rep)
    for later in rep["stages"][1:]:
        used = {e["stage"]: e for e in later["earlier"]}
        assert used["a07_bert_mlm"]["used"] == "own" and used["a07_bert_mlm"]["verdict_from"] == "this_report"
        assert "full marks" in used["a07_bert_mlm"]["why"]


def test_the_same_stage_7_with_a_catalogued_mistake_loses_points_in_stage_7_only(tmp_path):
    variant = _variant("a07_bert_mlm/config_attribute_loader")
    (mistake,) = [m for m in variant.mistakes if m.id == "layers_default_eps"]
    rep = mutants.grade_upstream(variant, tmp_path / "sub", mistake, GradingOptions(fast_only=True))
    assert not mutants.upstream_shortfalls(rep, mistake), mutants.upstream_shortfalls(rep, mistake)
    for later in rep["stages"][1:]:
        (a07,) = [e for e in later["earlier"] if e["stage"] == "a07_bert_mlm"]
        assert (a07["used"], a07["verdict"]) == ("stand-in", "lost_points"), a07


def test_a_lone_later_stage_grades_its_earlier_stages_first_for_the_verdict(tmp_path):
    """``--stages a08_sentiment``: stages 5 and 7 run first, unscored, only to decide how stage 8 imports them;
    graded again by the same process (the same files, suites and inputs), their recorded verdicts are used."""
    from grader.engine import run

    variant = _variant("a07_bert_mlm/config_attribute_loader")
    sub = mutants.build_alternative(variant.stage, variant.path, tmp_path / "lone-stage-8")
    options = GradingOptions(stage_ids=["a08_sentiment"], fast_only=True)
    first, again = (run.grade(str(sub), options)["stages"][0] for _ in range(2))
    assert first["score"] == first["max_score"], mutants.failed_feedback(first)[:600]
    assert [(e["stage"], e["used"], e["verdict_from"]) for e in first["earlier"]] == [
        ("a05_encoder", "own", "verdict_only"), ("a07_bert_mlm", "own", "verdict_only")]
    assert [(e["stage"], e["used"], e["verdict_from"]) for e in again["earlier"]] == [
        ("a05_encoder", "own", "recorded"), ("a07_bert_mlm", "own", "recorded")]
    assert again["score"] == first["score"] and "same files with the same inputs" in again["earlier"][1]["why"]


UPSTREAM_MISTAKES = [(v, m) for v in mutants.upstream() for m in v.mistakes]


@pytest.mark.slow
@pytest.mark.parametrize("variant, mistake", UPSTREAM_MISTAKES, ids=[f"{v.key}:{m.id}" for v, m in UPSTREAM_MISTAKES])
def test_every_upstream_variant_with_a_catalogued_mistake_is_charged_in_its_own_stage_only(variant, mistake,
                                                                                           tmp_path):
    """Each correct upstream variant with each catalogued mistake re-expressed on it: caught and named in
    its own stage, full marks in every stage built on it (graded in the same report)."""
    rep = mutants.grade_upstream(variant, tmp_path / "sub", mistake,
                                  GradingOptions(fast_only=not mistake.needs_slow))
    assert not mutants.upstream_shortfalls(rep, mistake), mutants.upstream_shortfalls(rep, mistake)
