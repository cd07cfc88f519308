"""Weights fitted at home gain nothing in the learning checks of stages 6 and 7 (issue 33; stage 8's head fitted
at home: test_sentiment_and_retrieval.py).

Each cheat of tests/cheats/<stage>.toml is a module that never trains (the loss is detached from its weights) and
whose state_dict() hands back weights fitted at home on the public data. The learning checks train the student's
model on data renumbered for each submission (stage 6's word ids, stage 7's token ids: a permutation drawn from the
course secret), take back its state_dict and judge it themselves, and the training-path checks compare the trained
weights with the reference's training from the same start. So with the home weights the stage scores no more than
the same module without them (which never trains), and both training checks fail. Here the home weights are what a
student would get at home: the stage's own training on the public numbering, which translates (predicts) the public
held-out data well there.
"""
import base64

import numpy as np
from conftest import load_module, stage_of

from grader.authoring import mutants
from grader.engine import run, testing
from grader.engine.options import GradingOptions
from grader.sandbox.probes import a06_decoder as probes6
from grader.sandbox.probes import a07_bert_mlm as probes7

SUITE6 = load_module("tests/hidden/test_a06_decoder.py", "_fitted_elsewhere_a06")
SUITE7 = load_module("tests/hidden/test_a07_bert_mlm.py", "_fitted_elsewhere_a07")


def _home(state) -> str:
    """The placeholder's filling: HOME = {name: [shape, base64 of float32 values]}."""
    return "HOME = " + repr({name: [list(t.shape), base64.b64encode(t.numpy().astype(np.float32).tobytes()).decode()]
                             for name, t in state.items() if t.is_floating_point()})


def _gains_nothing(stage, home, tests, tmp_path):
    """Grade the cheat with the home weights and without them; the scores and the training tests' statuses."""
    graded = {}
    for name, filling in (("home weights", home), ("no weights", "HOME = None")):
        sub = mutants.build_cheat(stage, "weights_fitted_at_home", filling, tmp_path / name.replace(" ", "_"))
        entry = stage_of(run.grade(str(sub), GradingOptions(stage_ids=[stage])), stage)
        statuses = {t["id"].split("::")[1]: t["status"] for t in entry["tests"]}
        graded[name] = (entry["score"], [statuses[t] for t in tests])
    print(f"\n{stage}: " + ", ".join(f"{name} {score} of 15 {statuses}" for name, (score, statuses) in graded.items()))
    assert graded["home weights"][0] <= graded["no weights"][0], graded
    assert graded["home weights"][1] == ["failed"] * len(tests), graded


def test_stage_6_weights_fitted_at_home_gain_nothing(tmp_path):
    testing.reference("a06_decoder")  # solutions/ on sys.path: the reference imports a05_encoder
    task = SUITE6.toy_task(renumber=False)
    state = probes6.train(testing.reference("a06_decoder"), task["init"], task["state"], task["src"], task["tgt"],
                          bos_id=1, steps=2 * SUITE6.TRAIN_STEPS, batch_size=SUITE6.TRAIN_BATCH, lr=SUITE6.TRAIN_LR,
                          seed=0)["state"]
    exact = np.mean([p == es for p, (_, es) in zip(SUITE6.translations(task, state), task["data"]["heldout"])])
    assert exact >= 0.95, f"the home weights translate {exact:.0%} of the public held-out pairs: not a real cheat"
    _gains_nothing("a06_decoder", _home(state),
                   ["test_training_steps_match_the_reference", "test_learns_toy_translation"], tmp_path)


def test_stage_7_weights_fitted_at_home_gain_nothing(tmp_path):
    testing.reference("a07_bert_mlm")
    task = SUITE7.corpus_task(renumber=False)
    state = probes7.train_mlm(testing.reference("a07_bert_mlm"), task["init"], task["state"], task["batches"],
                              lr=SUITE7.TRAIN_LR)["state"]
    accuracy, _ = SUITE7.held_out_accuracy(task, state)
    assert accuracy >= 0.4, f"the home weights predict {accuracy:.0%} of the public masked words: not a real cheat"
    _gains_nothing("a07_bert_mlm", _home(state),
                   ["test_training_steps_match_the_reference", "test_mlm_learns_the_corpus"], tmp_path)

