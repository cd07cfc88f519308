"""The pictures of stages 5-9: they run the student's own torch code, then draw it with ``figures``.

Each function takes the student's classes and functions it uses (a notebook
cell passes them by name) and returns a ``matplotlib.figure.Figure``. A
notebook cell shows one through ``figures.show``, which turns an unfinished or
broken stage into a message naming the function to fix:

    figures.show(pictures.encoder_heads, Encoder)        # Encoder: the student's class

Sizes, step counts and seeds are fixed, so a picture takes at most about half
a minute on a laptop and is the same each time; ``COURSE_NOTEBOOK_QUICK=1``
cuts the training short (the course's own tests run the notebooks that way).
Stages 8 and 9 run the pretrained all-MiniLM-L6-v2 in the student's stage-7
``BertModel`` (``pretrained_minilm``).
"""
from __future__ import annotations

import importlib
import json
import os

import torch

from grader.engine import stages

from . import figures, pretrained


def quick(normal, fast):
    """``normal``, or ``fast`` when ``COURSE_NOTEBOOK_QUICK=1`` (the course's own tests run the notebooks that way)."""
    return fast if os.environ.get("COURSE_NOTEBOOK_QUICK", "") not in ("", "0") else normal


def _encode(tokenizer, texts):
    """(ids, attention_mask) of ``texts``, both (len(texts), n) int64, padded with [PAD] (id 0) to the longest."""
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    enc = tokenizer.encode_batch(list(texts))
    return torch.tensor([e.ids for e in enc]), torch.tensor([e.attention_mask for e in enc])


# ---------------------------------------------------------------------------
# Stage 5: the heads of an encoder (slides 38-40)
# ---------------------------------------------------------------------------

def encoder_heads(Encoder):
    """Slides 38-40: the 4 heads of a small, untrained ``Encoder`` reading two sentences as one padded batch.

    Shows the second, shorter sentence ("it tasted good" + padding). Each head has its own pattern
    (random for now: nothing is learned), and the padding columns get weight 0 because of the
    student's ``padding_mask``. The weights are the ``attn_weights`` their ``MultiHeadAttention``
    keeps after each forward.
    """
    torch.manual_seed(0)
    words = ["<pad>", "the", "pizza", "came", "out", "of", "oven", "it", "tasted", "good"]
    sentences = [["the", "pizza", "came", "out", "of", "the", "oven"], ["it", "tasted", "good"]]
    n = max(len(s) for s in sentences)
    ids = torch.tensor([[words.index(w) for w in s] + [0] * (n - len(s)) for s in sentences])  # (2, 7), pad id 0
    encoder = Encoder(len(words), d_model=32, n_heads=4, d_ff=64, n_layers=1, pad_id=0).eval()
    with torch.no_grad():                                 # only looking: no gradients
        encoder(ids)                                      # src_mask=None: padding_mask(ids, 0)
    weights = encoder.layers[0].self_attn.attn_weights    # (B, h, n, n) = (2, 4, 7, 7)
    tokens = sentences[1] + ["<pad>"] * (n - len(sentences[1]))
    return figures.heads_figure(weights[1], tokens, tokens,
                                'the 4 heads of an untrained encoder on "it tasted good" + padding')


# ---------------------------------------------------------------------------
# Stage 6: cross-attention of a tiny translator (slides 45-48)
# ---------------------------------------------------------------------------

STAGE6_NAMES = ("Seq2SeqTransformer", "greedy_decode", "train_seq2seq", "load_toy_translation", "Vocab",
                "make_batch", "BOS_ID", "EOS_ID")


def cross_attention(stage, sentence="you buy the white apple", steps=None):
    """Slides 45-48: what a tiny English→Spanish translator looks at while it writes.

    Trains a small ``Seq2SeqTransformer`` (the student's) on the toy set with the course-provided
    ``train_seq2seq`` (about 10 s for the default 100 steps; more steps, a better translator),
    translates ``sentence`` with the student's ``greedy_decode``, and draws the cross-attention weights
    of the last decoder layer (mean over heads): one row per word written, one column per source word.
    "white apple" becomes "manzana blanca": the adjective moves.

    stage: the names of the stage-6 code, ``globals()`` in the notebook or ``vars(module)`` (the
    course-provided helpers come along because they call the student's ``shift_right``).
    """
    missing = [name for name in STAGE6_NAMES if name not in stage]
    if missing:
        raise NameError(f"{', '.join(missing)} not defined: run the cells of your code above first")
    Seq2SeqTransformer, greedy_decode, train_seq2seq, load_toy_translation, Vocab, make_batch, BOS_ID, EOS_ID = (
        stage[name] for name in STAGE6_NAMES)
    steps = quick(100, 10) if steps is None else steps
    data = load_toy_translation(stages.get("a06_decoder").folder / "data" / "toy_translation.tsv")
    english, spanish = [en for en, _ in data["train"]], [es for _, es in data["train"]]
    src_vocab, tgt_vocab = Vocab(english), Vocab(spanish)
    src, tgt = make_batch(english, src_vocab), make_batch(spanish, tgt_vocab)
    torch.manual_seed(0)
    model = Seq2SeqTransformer(len(src_vocab), len(tgt_vocab), d_model=64, n_heads=4, d_ff=128, n_layers=1,
                               dropout=0.0)
    losses = train_seq2seq(model, src, tgt, steps=steps, batch_size=32)
    source = make_batch([sentence], src_vocab)                            # (1, n), ends in <eos>
    output = greedy_decode(model, source, BOS_ID, EOS_ID, max_len=12)     # (1, L), starts with <bos>
    written = [i for i in output[0, 1:].tolist() if i != model.pad_id]    # the words after <bos>
    with torch.no_grad():                                                 # teacher-forced pass over the output
        model(source, output[:, : len(written)])
    weights = model.decoder.layers[-1].cross_attn.attn_weights[0].mean(0)  # (m, n), mean over heads
    return figures.cross_attention_figure(
        weights, [src_vocab.itos[i] for i in source[0].tolist()], [tgt_vocab.itos[i] for i in written],
        f'"{sentence}" -> "{tgt_vocab.decode(output[0])}" (loss {losses[-1]:.2f} after {steps} steps)')


# ---------------------------------------------------------------------------
# Stage 7: BERT fills in the blanks (slide 58)
# ---------------------------------------------------------------------------

MLM_QUESTIONS = ["pizza is [MASK] , john loves it", "pizza is [MASK] , john hates it",
                 "pizza is great , sarah [MASK] it"]


def masked_words(BertForMaskedLM, mask_tokens, steps=None):
    """Slide 58: the five likeliest words for the [MASK] of each of ``MLM_QUESTIONS``.

    Trains a small ``BertForMaskedLM`` (the student's) on the toy corpus with the student's
    ``mask_tokens``, the settings of the handout (450 steps, about 30 s on a laptop). In the first two
    questions only the words *after* the blank differ (loves / hates): BERT reads both sides at once.
    In the third the clue comes before the blank.
    """
    from tokenizers import Tokenizer
    steps = quick(450, 10) if steps is None else steps
    data = stages.get("a07_bert_mlm").folder / "data"
    tok = Tokenizer.from_file(str(data / "tokenizer.json"))
    ids, mask = _encode(tok, (data / "mlm_train.txt").read_text(encoding="utf-8").splitlines())
    vocab_size, mask_id, specials = tok.get_vocab_size(), tok.token_to_id("[MASK]"), [0, 1, 2, 3, 4]

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = BertForMaskedLM(vocab_size, hidden_size=96, num_layers=2, num_heads=4, intermediate_size=192,
                            max_position_embeddings=32, dropout=0.0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    model.train()                                         # training mode
    for _ in range(steps):
        rows = torch.randint(len(ids), (64,), generator=gen)
        inputs, labels = mask_tokens(ids[rows], mask_id=mask_id, vocab_size=vocab_size,
                                     special_ids=specials, generator=gen)
        loss, _ = model(inputs, mask[rows], labels=labels)
        optimizer.zero_grad()                             # forget the previous step's gradients
        loss.backward()                                   # gradients of the masked-word loss
        optimizer.step()                                  # one AdamW step
    model.eval()                                          # inference mode from here on

    predictions = []
    for question in MLM_QUESTIONS:
        words = question.split()
        x = torch.tensor([tok.encode(" ".join("the" if w == "[MASK]" else w for w in words)).ids])
        where = 1 + words.index("[MASK]")                 # +1 for [CLS]
        x[0, where] = mask_id
        with torch.no_grad():                             # only looking: no gradients
            _, logits = model(x)
        top = logits[0, where].softmax(-1).topk(5)
        predictions.append((question, [(tok.id_to_token(i), p) for p, i in zip(top.values.tolist(),
                                                                                top.indices.tolist())]))
    return figures.mlm_figure(predictions)


# ---------------------------------------------------------------------------
# Stages 8-9: the pretrained MiniLM in the student's stage-7 BertModel
# ---------------------------------------------------------------------------

def pretrained_minilm(bert_stage=None):
    """all-MiniLM-L6-v2 (a 6-layer BERT) loaded into the student's stage-7 ``BertModel``, and its tokenizer.

    bert_stage: the stage-7 module (its ``BertModel`` and ``load_pretrained_bert``); by default
    ``import a07_bert_mlm``, which the setup cell of the stage 8 and 9 notebooks makes importable.
    Returns (the model in eval mode, a ``tokenizers.Tokenizer``).
    """
    a07 = bert_stage or importlib.import_module("a07_bert_mlm")
    cfg = pretrained.minilm_config()
    bert = a07.BertModel(cfg["vocab_size"], hidden_size=cfg["hidden_size"], num_layers=cfg["num_hidden_layers"],
                         num_heads=cfg["num_attention_heads"], intermediate_size=cfg["intermediate_size"],
                         max_position_embeddings=cfg["max_position_embeddings"], dropout=0.0)
    a07.load_pretrained_bert(bert, pretrained.minilm_dir())
    return bert.eval(), pretrained.minilm_tokenizer()


def two_greats(mean_pool, bert_stage=None):
    """Slide 66: the same word "great" gets different vectors in "Pizza is great!" and "My cellphone's broken, great."

    The contextual vectors of "great" in the two sentences differ (which lets a classifier on top tell
    praise from sarcasm), while its input word embedding is the same in both; also compared: what the
    student's ``mean_pool`` makes of each sentence. bert_stage: see ``pretrained_minilm``.
    """
    bert, tok = pretrained_minilm(bert_stage)
    sentences = ["Pizza is great!", "My cellphone's broken, great."]
    ids, mask = _encode(tok, sentences)
    with torch.no_grad():                                 # only looking: no gradients
        hidden = bert(ids, mask)                          # (2, n, 384)
    pooled = mean_pool(hidden, mask)                      # (2, 384): the student's sentence vectors
    great = tok.token_to_id("great")
    vectors = [hidden[i][ids[i] == great][0] for i in range(2)] + list(pooled)
    labels = [f'"great" in "{s}"' for s in sentences] + [f'mean_pool of "{s}"' for s in sentences]
    return figures.two_greats_figure(vectors, labels, bert.embeddings.word_embeddings.weight[great],
                                     pairs=[(0, 1), (2, 3)])


def sentiment_confusion(SentimentClassifier, train_classifier, predict, n_train=None, n_dev=None, fine_tune=False,
                        bert_stage=None):
    """Slide 71: the confusion matrix of a sentiment classifier on the stage-8 dev tweets.

    The student's ``SentimentClassifier`` (mean pooling) on top of the pretrained encoder, trained with
    their ``train_classifier`` on the first ``n_train`` training tweets (480) and evaluated with their
    ``predict`` on the first ``n_dev`` dev tweets (200), counted by true class. The encoder is frozen
    (only the new linear layer learns: about half a minute on a laptop); ``fine_tune=True`` trains
    everything, slower and better. bert_stage: see ``pretrained_minilm``.
    """
    n_train = quick(480, 16) if n_train is None else n_train
    n_dev = quick(200, 16) if n_dev is None else n_dev
    bert, tok = pretrained_minilm(bert_stage)
    tok.enable_truncation(max_length=64)
    folder = stages.get("a08_sentiment").folder / "data"

    def load(name, n):
        rows = [json.loads(line) for line in (folder / name).read_text(encoding="utf-8").splitlines()][:n]
        return (*_encode(tok, [r["text"] for r in rows]), torch.tensor([r["label"] for r in rows]))

    train_ids, train_mask, train_labels = load("train.jsonl", n_train)
    dev_ids, dev_mask, dev_labels = load("dev.jsonl", n_dev)
    torch.manual_seed(0)
    model = SentimentClassifier(bert, num_classes=2, pooling="mean", dropout=0.1)
    model.encoder.requires_grad_(fine_tune)              # frozen: only model.classifier is trained
    epochs, lr = (1, 5e-5) if fine_tune else (3, 3e-3)
    losses = train_classifier(model, train_ids, train_mask, train_labels, epochs=epochs, lr=lr, batch_size=32)
    predictions = predict(model, dev_ids, dev_mask)
    how = "fine-tuned" if fine_tune else "frozen encoder"
    return figures.confusion_figure(dev_labels, predictions, ("negative", "positive"),
                                    f"{n_train} training tweets, {how}, loss {losses[-1]:.2f}; ")


RETRIEVAL_DOCUMENTS = [
    "Preheat the oven and bake the pizza for ten minutes.",
    "The phone screen cracked after it fell on the floor.",
    "Attention weights are a softmax of query-key dot products.",
    "Paris is the capital and largest city of France.",
    "Our flight was delayed for three hours at the airport.",
    "Fresh basil and tomatoes make a simple pasta sauce.",
    "BERT reads a sentence in both directions at once.",
    "The battery of my cellphone no longer holds a charge.",
]
RETRIEVAL_QUERIES = ["How do I cook a pizza?", "My mobile is broken", "What does a Transformer compute?",
                     "travel problems"]


def retrieval(embed_sentences, top_k, k=2, bert_stage=None):
    """Slides 68-70: semantic search of ``RETRIEVAL_QUERIES`` among ``RETRIEVAL_DOCUMENTS``.

    The student's ``embed_sentences`` (MiniLM in their stage-7 ``BertModel``) turns questions and
    documents into unit vectors, their ``top_k`` finds the ``k`` closest documents of each question.
    The heatmap is every cosine similarity; the red boxes are the top k. bert_stage: see
    ``pretrained_minilm``.
    """
    bert, tok = pretrained_minilm(bert_stage)
    q = embed_sentences(bert, tok, RETRIEVAL_QUERIES)     # (4, 384), unit length
    d = embed_sentences(bert, tok, RETRIEVAL_DOCUMENTS)   # (8, 384)
    _, indices = top_k(q, d, k)                           # (4, k) scores, (4, k) indices
    return figures.retrieval_figure(q @ d.T, RETRIEVAL_QUERIES, RETRIEVAL_DOCUMENTS, indices)
