"""Re-measure the learning checks of stages 6-8: ``python -m benchmarks.floors [--stages a06,a07,a08] [--secrets 5]
[--seeds 5] [--rules 20000] [--paths 40]``.

Each end-to-end check trains the student's code on data whose answers are drawn for the submission from the course
secret (issue 33): stage 6's toy pairs and stage 7's corpus with their ids renumbered, stage 8's tweets labelled by a
secret hyperplane. This runs the very probes the worker runs (``grader/sandbox/probes/``) in this process, with the
hidden suites' own tasks and verdict functions, on the reference and on every alternative:

* floors: over the public numbering and SECRETS random submissions' ones (stage 8: SECRETS random submissions'
  rules), and SEEDS initial weights or training seeds, each module's range and the margin to the bar; beside it,
  what weights fitted at home on the public data score (stages 6-7: trained on the public numbering; stage 8: a
  head fitted on the public dev tweets, whatever sign it picks, against RULES random rules);
* paths (``--paths N``): the training-path tests (test_training_steps_match_the_reference,
  test_train_takes_adamw_steps_from_the_same_start) over N submission seeds: the largest gap of the correct
  modules (and of the stage-5/7 stand-ins) to the reference's training, and the smallest gap of each catalogued
  wrong path (tests/mutants: the mistakes those tests name), against the test's tolerance.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import secrets
import sys
import types

import numpy as np

from grader.authoring import mutants, secret
from grader.engine import paths, testing

PATH_MISTAKES = {"a06_decoder": ["encode_under_no_grad"],
                 "a07_bert_mlm": ["mlm_bias_not_a_parameter", "position_embeddings_frozen"],
                 "a08_sentiment": ["no_zero_grad", "optimizer_made_every_epoch", "train_encoder_under_no_grad",
                                   "optimizer_over_the_head_only"]}


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _modules(stage):
    """{name: module}: the reference and every alternative of ``stage``."""
    return {"reference": _load(paths.SOLUTIONS / f"{stage}.py", f"_floor_{stage}"),
            **{p.stem: _load(p, f"_floor_{p.stem}") for p in sorted((paths.ALTERNATIVES / stage).glob("*.py"))}}


def _submissions(n):
    """Stage seeds of ``n`` random submissions (of random terms)."""
    return [secrets.randbits(62) for _ in range(n)]


def _report(name, values, bar, above=True):
    margin = (min(values) - bar) if above else (bar - max(values))
    print(f"  {name:28s} {min(values):.3f}-{max(values):.3f} (bar {bar}; margin {margin:+.3f})")
    return margin


class _Student:
    """The ``student`` fixture's probe, run in this process on a module."""

    def __init__(self, stage, module):
        self.probes, self.module = importlib.import_module(f"grader.sandbox.probes.{stage}"), module

    def probe(self, name, **kwargs):
        return getattr(self.probes, name)(self.module, **kwargs)


def floor_a06(suite, args):
    print("a06_decoder: held-out exact match after training (public numbering and random ones)")
    numberings = [None, *_submissions(args.secrets)]
    worst = []
    for name, module in _modules("a06_decoder").items():
        student, exact = _Student("a06_decoder", module), []
        for stage_seed in numberings:
            testing.use_stage_seed(stage_seed)
            for seed in range(args.seeds):
                task = suite.toy_task(renumber=stage_seed is not None, init_seed=seed)
                state = student.probe("train", init=task["init"], state_dict=task["state"], src=task["src"],
                                      tgt=task["tgt"], bos_id=1, steps=suite.TRAIN_STEPS,
                                      batch_size=suite.TRAIN_BATCH, lr=suite.TRAIN_LR, seed=seed)["state"]
                exact.append(np.mean([p == es for p, (_, es) in zip(suite.translations(task, state),
                                                                    task["data"]["heldout"])]))
                if name == "reference" and stage_seed is None and seed == 0:
                    home = state  # fitted at home, on the public numbering
        worst.append(_report(name, exact, suite.TRAIN_THRESHOLD))
    fixed = []
    for stage_seed in numberings[1:]:
        testing.use_stage_seed(stage_seed)
        task = suite.toy_task()
        fixed.append(np.mean([p == es for p, (_, es) in zip(suite.translations(task, home), task["data"]["heldout"])]))
    print(f"  weights fitted on the public numbering, on the renumbered pairs: {min(fixed):.3f}-{max(fixed):.3f}; "
          f"lowest margin of the correct modules {min(worst):+.3f}")


def floor_a07(suite, args):
    print("a07_bert_mlm: held-out masked-word accuracy after training (public numbering and random ones)")
    numberings = [None, *_submissions(args.secrets)]
    worst = []
    for name, module in _modules("a07_bert_mlm").items():
        student, accuracy = _Student("a07_bert_mlm", module), []
        for stage_seed in numberings:
            testing.use_stage_seed(stage_seed)
            for seed in range(args.seeds):
                task = suite.corpus_task(renumber=stage_seed is not None, init_seed=26 + seed)
                state = student.probe("train_mlm", init=task["init"], state_dict=task["state"],
                                      batches=task["batches"], lr=suite.TRAIN_LR)["state"]
                accuracy.append(suite.held_out_accuracy(task, state)[0])
                if name == "reference" and stage_seed is None and seed == 0:
                    home = state
        worst.append(_report(name, accuracy, suite.MIN_ACCURACY))
    fixed = []
    for stage_seed in numberings[1:]:
        testing.use_stage_seed(stage_seed)
        fixed.append(suite.held_out_accuracy(suite.corpus_task(), home)[0])
    print(f"  weights fitted on the public numbering, on the renumbered corpus: {min(fixed):.3f}-{max(fixed):.3f}; "
          f"lowest margin of the correct modules {min(worst):+.3f}")


def _home_head(suite):
    """(weight, bias) of a logistic regression fitted on the public dev tweets' pooled vectors (the cheat)."""
    import torch
    dev = suite._jsonl(paths.ASSIGNMENTS / "a08_sentiment" / "data" / "dev.jsonl")
    x = torch.from_numpy(secret.pool_tweets([r["text"] for r in dev]))
    y = torch.tensor([r["label"] for r in dev])
    head = torch.nn.Linear(x.shape[1], 2)
    optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)
    for _ in range(300):
        loss = torch.nn.functional.cross_entropy(head(x), y) + 1e-3 * head.weight.square().sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return head.weight.detach().numpy(), head.bias.detach().numpy()


def floor_a08(suite, args):
    print("a08_sentiment: the training tweets given their secret labels by the trained head (and its flipped copy)")
    train_pooled = np.load(secret.A08_TRAIN_POOLED, allow_pickle=False)
    ids, mask, _ = suite.training_tweets()
    spec = {"init": suite.minilm_init(dropout=0.0), "path": str(suite.pretrained.minilm_dir())}
    rules = _submissions(args.secrets)
    worst = (1.0, 0.0)
    for name, module in _modules("a08_sentiment").items():
        student, acc, flipped = _Student("a08_sentiment", module), [], []
        for stage_seed in rules:
            testing.use_stage_seed(stage_seed)
            labels = suite.secret_labels(train_pooled)
            for seed in range(args.seeds):
                for target, y in ((acc, labels), (flipped, 1 - labels)):
                    head = student.probe("fine_tune", encoder=spec, classifier=dict(pooling="mean", dropout=0.1),
                                         train_data={"input_ids": ids, "attention_mask": mask, "labels": y},
                                         train_kwargs=dict(suite.ACC_TRAIN_KWARGS, seed=seed))["head"]
                    w, b = head["classifier.weight"].numpy(), head["classifier.bias"].numpy()
                    target.append(float((suite.head_predictions(train_pooled, w, b) == labels.numpy()).mean()))
        _report(name, acc, suite.ACCURACY_BAR)
        _report(f"{name} (flipped)", flipped, round(1 - suite.ACCURACY_BAR, 2), above=False)
        worst = (min(worst[0], min(acc)), max(worst[1], max(flipped)))
    home = suite.head_predictions(train_pooled, *_home_head(suite))
    basis, agree = suite.rule_basis(train_pooled), []
    for stage_seed in _submissions(args.rules):
        testing.use_stage_seed(stage_seed)
        a = float((home == suite.secret_labels(train_pooled, basis=basis).numpy()).mean())
        agree.append(max(a, 1 - a))
    agree = np.array(agree)
    print(f"  a head fitted on the public dev tweets, its sign chosen afterwards, over {args.rules} rules: mean "
          f"{agree.mean():.3f}, sd {agree.std():.3f}, highest {agree.max():.3f}, share >= {suite.ACCURACY_BAR}: "
          f"{(agree >= suite.ACCURACY_BAR).mean():.5f}")
    print(f"  lowest fit of the correct modules {worst[0]:.3f} (margin {worst[0] - suite.ACCURACY_BAR:+.3f}), "
          f"highest flipped {worst[1]:.3f} (margin {1 - suite.ACCURACY_BAR - worst[1]:+.3f})")


PATH_TESTS = {"a06_decoder": ("test_training_steps_match_the_reference", "STEPS_TOLERANCE", "a05_encoder"),
              "a07_bert_mlm": ("test_training_steps_match_the_reference", "STEPS_TOLERANCE", "a05_encoder"),
              "a08_sentiment": ("test_train_takes_adamw_steps_from_the_same_start", "PATH_TOLERANCE", "a07_bert_mlm")}


def paths_of(stage, suite, args):
    """The training-path test of ``stage`` over ``args.paths`` submission seeds: the gaps to the reference's
    training (losses, outputs of the trained weights) that testing.assert_trains_like sees."""
    test, tolerance, earlier = PATH_TESTS[stage]
    print(f"{stage}: {test} over {args.paths} submissions (largest gap: losses / outputs; tolerance "
          f"{getattr(suite, tolerance)})")
    gaps, judge = {}, testing.assert_trains_like

    def spy(trained, reference, **kwargs):
        import torch
        with torch.no_grad():
            got, want = kwargs["outputs"](trained), kwargs["outputs"](reference)
        gaps["losses"] = float(np.abs(np.subtract(kwargs["losses"], kwargs["expected_losses"])).max())
        gaps["outputs"] = float((got - want).abs().max())
        return judge(trained, reference, **kwargs)

    catalogued = {m.id: m for m in mutants.load(stage)}
    reference = (paths.SOLUTIONS / f"{stage}.py").read_text(encoding="utf-8")
    modules = dict(_modules(stage))
    for mistake in PATH_MISTAKES[stage]:
        modules[mistake] = types.ModuleType(mistake)
        exec(compile(mutants.apply(catalogued[mistake], reference), mistake, "exec"), modules[mistake].__dict__)
    testing.assert_trains_like = spy
    try:
        for name, module in [*modules.items(), ("reference, stand-in " + earlier, None)]:
            if module is None:  # the earlier stage's stand-in, as the worker gives it when that stage lost points
                saved = sys.modules[earlier]
                sys.modules[earlier] = importlib.import_module(f"grader.sandbox.standins.{earlier}")
                module = _load(paths.SOLUTIONS / f"{stage}.py", f"_floor_{stage}_standin")
            seen, failed = {"losses": [], "outputs": []}, 0
            for stage_seed in _submissions(args.paths):
                testing.use_stage_seed(stage_seed)
                gaps.clear()
                try:
                    getattr(suite, test)(_Student(stage, module))
                except AssertionError:
                    failed += 1
                for key in gaps:
                    seen[key].append(gaps[key])
            line = " / ".join(f"{min(v):.1e}-{max(v):.1e}" if v else "-" for v in seen.values())
            print(f"  {name:34s} failed {failed}/{args.paths}; gaps {line}")
            if name.startswith("reference, stand-in"):
                sys.modules[earlier] = saved
    finally:
        testing.assert_trains_like = judge


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", default="a06,a07,a08", help="some of a06, a07, a08")
    ap.add_argument("--secrets", type=int, default=5, help="random submissions' numberings and rules")
    ap.add_argument("--seeds", type=int, default=5, help="initial weights or training seeds 0..N-1")
    ap.add_argument("--rules", type=int, default=20000, help="stage 8: random rules the home-fitted head is tried on")
    ap.add_argument("--paths", type=int, default=0, help="submission seeds of the training-path tests (0: skip)")
    args = ap.parse_args(argv)
    if args.secrets < 1:
        ap.error("--secrets: at least 1 (the weights fitted at home are tried on the random numberings)")
    import torch
    torch.set_num_threads(1)  # as in the worker
    for stage in ("a05_encoder", "a06_decoder", "a07_bert_mlm", "a08_sentiment"):
        testing.reference(stage)  # puts solutions/ on sys.path: the probes' imports of earlier stages
    floors = {"a06": ("a06_decoder", floor_a06), "a07": ("a07_bert_mlm", floor_a07),
              "a08": ("a08_sentiment", floor_a08)}
    for key in args.stages.split(","):
        stage, floor = floors[key.strip()[:3]]
        suite = _load(paths.HIDDEN_TESTS / f"test_{stage}.py", f"_floor_suite_{stage}")
        floor(suite, args)
        if args.paths:
            paths_of(stage, suite, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
