"""A new course secret, for a new term: ``make secret`` (``python -m grader.authoring.secret``).

The hidden suites draw their random inputs from it (``grader/engine/seeds.py``), so
a new secret gives every submission new inputs: last term's feedback gives away
nothing of this term's cases. The hidden data drawn with it is drawn again too:
stage 8's test split (``tests/hidden/data/a08_sentiment_test.jsonl``, 500 tweets
per class out of the public corpus's tweets that are in neither train nor dev,
by ``assignments/a08_sentiment/data/make_splits.py --hidden-seed``) and the
vectors the hidden suite labels those tweets from (``a08_sentiment_test_pooled.npy``:
the reference MiniLM, mean-pooled over real tokens; computed once here rather
than in every grading), beside those of the public tweets its end-to-end checks train on
(``a08_sentiment_train_pooled.npy``, the same every term: each submission's secret labels are
drawn from them). Commit the new ``tests/hidden/course_secret.txt`` and the
data with the hidden suites; regrades of last term's submissions need the old
ones (or each report's ``seed``, ``grade --seed N``, for the random inputs).
"""
from __future__ import annotations

import importlib.util
import json
import secrets
import sys

import numpy as np

from grader.engine import paths, seeds, stages, testing
from grader.lab import pretrained

A08_SPLIT = "a08_sentiment test split"  # the name stage 8's hidden split seed is derived under (seeds.data_seed)
A08_TEST = paths.HIDDEN_DATA / "a08_sentiment_test.jsonl"
A08_POOLED = paths.HIDDEN_DATA / "a08_sentiment_test_pooled.npy"
A08_TRAIN_POOLED = paths.HIDDEN_DATA / "a08_sentiment_train_pooled.npy"
A08_MAX_TOKENS = 32  # tokens per tweet, as the hidden suite's training tweets (ACC_MAX_TOKENS)


def rotate(path=None) -> str:
    path = seeds.SECRET_FILE if path is None else path
    value = secrets.token_hex(32)
    path.write_text(value + "\n", encoding="utf-8")
    return value


def _import_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_splits():
    """Stage 8's data script (assignments/a08_sentiment/data/make_splits.py), imported from its file."""
    return _import_file(stages.get("a08_sentiment").folder / "data" / "make_splits.py", "_a08_make_splits")


def a08_suite():
    """Stage 8's hidden suite, imported from its file (it chooses the tweets its end-to-end checks train on)."""
    return _import_file(paths.HIDDEN_TESTS / "test_a08_sentiment.py", "_a08_hidden_suite")


def draw_hidden_data(secret: str | None = None, out_dir=None) -> None:
    """Draw the hidden data that depends on the secret: stage 8's test split (and, in ``out_dir`` if
    given, else in place, its public train and dev files, which the secret does not change)."""
    args = ["--hidden-seed", str(seeds.data_seed(A08_SPLIT, secret))]
    if out_dir is not None:
        args += ["--out", str(out_dir), "--hidden-out", str(out_dir / "a08_sentiment_test.jsonl")]
    make_splits().main(args)


def pool_tweets(texts, batch_size: int = 64) -> np.ndarray:
    """(N, 384) float32: each text's mean over its real tokens of the reference BertModel's output with
    the all-MiniLM-L6-v2 weights (eval mode; A08_MAX_TOKENS tokens), what stage 8's hidden suite
    labels the hidden tweets from with the student's trained head. Batches of similar length."""
    import torch  # here: only `make secret` and the project tests pool tweets
    a07, a08 = testing.reference("a07_bert_mlm"), testing.reference("a08_sentiment")
    c = pretrained.minilm_config()
    encoder = a07.load_pretrained_bert(a07.BertModel(
        vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], num_layers=c["num_hidden_layers"],
        num_heads=c["num_attention_heads"], intermediate_size=c["intermediate_size"],
        max_position_embeddings=c["max_position_embeddings"], type_vocab_size=c["type_vocab_size"],
        layer_norm_eps=c["layer_norm_eps"], pad_id=c["pad_token_id"]), pretrained.minilm_dir()).eval()
    tok = pretrained.minilm_tokenizer()
    tok.enable_truncation(max_length=A08_MAX_TOKENS)
    tok.enable_padding(pad_id=c["pad_token_id"], pad_token="[PAD]")
    enc = tok.encode_batch(list(texts))
    ids, mask = torch.tensor([e.ids for e in enc]), torch.tensor([e.attention_mask for e in enc])
    pooled = torch.zeros(len(texts), c["hidden_size"])
    with torch.no_grad():
        for rows in torch.argsort(mask.sum(1), stable=True).split(batch_size):
            n = int(mask[rows].sum(1).max())
            pooled[rows] = a08.mean_pool(encoder(ids[rows, :n], attention_mask=mask[rows, :n]), mask[rows, :n])
    return pooled.numpy()


def pool_hidden_tweets() -> None:
    """Write A08_POOLED: the pooled vectors of the tweets of A08_TEST, in its order."""
    with open(A08_TEST, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    np.save(A08_POOLED, pool_tweets(texts))


def pool_training_tweets() -> None:
    """Write A08_TRAIN_POOLED: the pooled vectors of the public tweets stage 8's end-to-end checks train on, in the
    order of the suite's training_rows()."""
    np.save(A08_TRAIN_POOLED, pool_tweets([r["text"] for r in a08_suite().training_rows()]))


def main(argv=None) -> int:
    rotate()
    draw_hidden_data()
    pool_hidden_tweets()
    pool_training_tweets()
    print(f"new course secret written to {seeds.SECRET_FILE}, stage 8's hidden test split drawn with it and "
          f"pooled ({A08_POOLED.name}, {A08_TRAIN_POOLED.name}); commit them with the hidden suites")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
