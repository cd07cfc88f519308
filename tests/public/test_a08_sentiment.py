"""Public checks of stage 8 - sentiment classification on a pretrained BERT (slides 65-71).

Run them with `make check STAGE=a08` or `python -m grader check a08_sentiment`.
They check shapes and values you can work out by hand, on a small random
encoder. The hidden suite compares logits with a reference on the real
all-MiniLM-L6-v2 weights, checks the training loop's contract (per-epoch mean
loss, modes, seed) and fine-tunes on the tweets to measure accuracy on a
held-out split.
"""
import numpy as np
import torch

from grader.engine.testing import as_array, assert_close, assert_shape
from grader.i18n import tr

TINY = {"init": dict(vocab_size=30, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                     max_position_embeddings=16, dropout=0.0)}


def test_mean_pool_by_hand(student):
    """mean_pool averages the real tokens only; a row without real tokens gives zeros"""
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],
                           [[5.0, 5.0], [7.0, 7.0], [9.0, 9.0]]])
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]])
    out = assert_shape(student.mean_pool(hidden, mask), (2, 2), what="mean_pool(hidden (2, 3, 2), mask (2, 3))")
    assert_close(out, np.array([[2.0, 3.0], [0.0, 0.0]]), what="mean_pool(...)", atol=1e-6,
                 hint=tr("Row 0: the mean of [1, 2] and [3, 4] (the padded [100, 100] is left out); row 1 has no "
                         "real token: zeros, not NaN."))


def test_classifier_logits_shape(student):
    """SentimentClassifier gives logits (B, num_classes) with both poolings"""
    ids = torch.tensor([[2, 7, 8, 9, 3], [2, 11, 3, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    for pooling in ("cls", "mean"):
        reply = student.probe("logits", encoder=TINY, classifier=dict(num_classes=3, pooling=pooling),
                              head_state=None, calls=[{"args": [ids, mask]}])
        assert_shape(reply["results"][0], (2, 3),
                     what=tr("SentimentClassifier(encoder with hidden_size=16, num_classes=3, "
                             'pooling="{pooling}")(ids (2, 5), mask (2, 5))', pooling=pooling))


def test_train_and_predict_shapes(student):
    """train_classifier returns one loss per epoch and leaves eval mode; predict returns (N,) class ids"""
    ids = torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0], [2, 5, 5, 3], [2, 8, 3, 0], [2, 9, 6, 3]])
    mask = (ids != 0).long()
    labels = torch.tensor([1, 0, 1, 0, 1])
    reply = student.probe("train", encoder=TINY, classifier=dict(pooling="mean"), head_state=None,
                          input_ids=ids, attention_mask=mask, labels=labels,
                          train_kwargs=dict(epochs=3, lr=1e-3, batch_size=2, seed=0))
    losses = reply["losses"]
    if not isinstance(losses, list) or len(losses) != 3 or any(v is None for v in losses):
        raise AssertionError(tr("train_classifier(..., epochs=3) should return 3 numbers, got {losses}",
                                losses=losses))
    if reply["training_after"]:
        raise AssertionError(tr("train_classifier left the model in training mode: call model.eval() at the end"))
    pred = student.probe("predict", encoder=TINY, classifier=dict(pooling="mean"), head_state=None,
                         input_ids=ids, attention_mask=mask, batch_size=2)
    out = assert_shape(pred["pred"], (5,), what="predict(model, ids (5, 4), mask (5, 4), batch_size=2)")
    if as_array(out).dtype.kind not in "iu" or not set(as_array(out).tolist()) <= {0, 1}:
        raise AssertionError(tr("predict should return class ids (a LongTensor of 0/1), got {got}",
                                got=as_array(out).tolist()))
