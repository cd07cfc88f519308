"""Re-measure stage 8's trained floor: ``python -m benchmarks.floors [--secrets 5] [--seeds 5]``.

The hidden suite's end-to-end checks (tests/hidden/test_a08_sentiment.py) train a head with the student's
``train_classifier`` on 320 public tweets (2 epochs, lr 1e-2, MiniLM frozen and without dropout) and label
the hidden test tweets with it: accuracy must be >= 0.75, and a copy trained on flipped labels <= 0.25.
This runs the very probe the worker runs (``grader/sandbox/probes/a08_sentiment.py``, ``fine_tune``) in this
process on the reference and on every alternative, over training seeds 0..SEEDS-1, on the term's split and on
the splits of SECRETS random secrets, and prints each module's range and its margin to both bars.
"""
from __future__ import annotations

import argparse
import importlib.util
import secrets
import sys

import numpy as np

from grader.authoring import secret
from grader.engine import paths, seeds, testing

STAGE = "a08_sentiment"


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _splits(n_secrets):
    """[(name, pooled (N, 384), labels (N,))]: the term's hidden split, then one per random secret."""
    suite = _load(paths.HIDDEN_TESTS / f"test_{STAGE}.py", "_a08_suite")
    labels = np.array([r["label"] for r in suite._jsonl(secret.A08_TEST)])
    out = [("term", np.load(secret.A08_POOLED, allow_pickle=False), labels)]
    script = secret.make_splits()
    _, _, candidates = script.split(script.load(script.default_csv()))
    for i in range(n_secrets):
        test = script.hidden_split(candidates, seeds.data_seed(secret.A08_SPLIT, secrets.token_hex(16)))
        out.append((f"secret {i + 1}", secret.pool_tweets([r["text"] for r in test]),
                    np.array([r["label"] for r in test])))
    return suite, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--secrets", type=int, default=5, help="random secrets' splits beside the term's")
    ap.add_argument("--seeds", type=int, default=5, help="training seeds 0..N-1")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)  # as in the worker
    testing.reference("a07_bert_mlm")  # puts solutions/ on sys.path: the probe's `import a07_bert_mlm`
    probe = _load(paths.PACKAGE / "sandbox" / "probes" / f"{STAGE}.py", "_a08_probe")
    suite, splits = _splits(args.secrets)
    ids, mask, labels = suite.training_tweets()
    spec = {"init": suite.minilm_init(dropout=0.0), "path": str(suite.pretrained.minilm_dir())}
    modules = {"reference": paths.SOLUTIONS / f"{STAGE}.py",
               **{p.stem: p for p in sorted((paths.ALTERNATIVES / STAGE).glob("*.py"))}}
    worst = (1.0, 0.0)
    for name, path in modules.items():
        mod = _load(path, f"_a08_{name}")
        acc, flipped = [], []
        for seed in range(args.seeds):
            kwargs = dict(suite.ACC_TRAIN_KWARGS, seed=seed)
            for target, y in ((acc, labels), (flipped, 1 - labels)):
                head = probe.fine_tune(mod, spec, dict(pooling="mean", dropout=0.1),
                                       {"input_ids": ids, "attention_mask": mask, "labels": y}, kwargs)["head"]
                w, b = head["classifier.weight"].numpy(), head["classifier.bias"].numpy()
                target += [float(((pooled @ w.T + b).argmax(-1) == truth).mean()) for _, pooled, truth in splits]
        worst = (min(worst[0], min(acc)), max(worst[1], max(flipped)))
        print(f"{name:28s} accuracy {min(acc):.3f}-{max(acc):.3f} (bar {suite.ACCURACY_BAR}); "
              f"flipped {min(flipped):.3f}-{max(flipped):.3f} (at most {1 - suite.ACCURACY_BAR:.2f})")
    print(f"over {len(splits)} splits x {args.seeds} seeds x {len(modules)} modules: lowest accuracy {worst[0]:.3f} "
          f"(margin {worst[0] - suite.ACCURACY_BAR:+.3f}), highest flipped {worst[1]:.3f} "
          f"(margin {1 - suite.ACCURACY_BAR - worst[1]:+.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
