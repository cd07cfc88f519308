"""Public checks of stage 7 - BERT and masked language modelling (slides 55-67).

Run them with `make check STAGE=a07` or `python -m grader check a07_bert_mlm`.
They check shapes, the contract's names and properties you can reason out by
hand; the hidden suite compares every number with a reference (also with the
real pretrained all-MiniLM-L6-v2 weights) and trains a small model.
"""
import math

import numpy as np
import torch

from grader.engine.testing import as_array, assert_close, assert_shape
from grader.i18n import tr

TINY = dict(vocab_size=30, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
            max_position_embeddings=12, dropout=0.0)


def _only(reply, kind):
    if reply.get("load_error") or reply.get("missing") or reply.get("unexpected"):
        raise AssertionError(f"{kind}: {reply}")
    return reply["results"]


def test_embeddings_shape_and_norm(student):
    """BertEmbeddings gives (B, n, H), LayerNorm-ed: each vector has mean 0 and variance 1"""
    ids = torch.tensor([[2, 7, 9, 3], [2, 5, 3, 0]])
    (out,) = _only(student.probe("run", kind="BertEmbeddings", init=dict(vocab_size=30, hidden_size=16, dropout=0.0),
                                 calls=[{"args": [ids]}]), "BertEmbeddings")
    out = assert_shape(out, (2, 4, 16), what="BertEmbeddings(vocab_size=30, hidden_size=16)(ids (2, 4))")
    assert_close(out.mean(-1), np.zeros((2, 4)), what=tr("the mean of each output vector"), atol=1e-5,
                 hint=tr("The sum of the three embeddings goes through nn.LayerNorm (weight 1, bias 0 at start)."))
    assert_close(out.var(-1), np.ones((2, 4)), what=tr("the variance of each output vector"), atol=1e-3)


def test_same_word_different_positions(student):
    """Learned positions: the same word at two positions gets two different vectors (slides 21, 65)"""
    ids = torch.tensor([[7, 7, 7]])
    (out,) = _only(student.probe("run", kind="BertEmbeddings", init=dict(vocab_size=30, hidden_size=16, dropout=0.0),
                                 calls=[{"args": [ids]}]), "BertEmbeddings")
    out = as_array(out, "BertEmbeddings(ids [[7, 7, 7]])")
    if np.allclose(out[0, 0], out[0, 1]):
        raise AssertionError(tr("the word 7 at positions 0 and 1 got the same vector: add position_embeddings of "
                                "positions 0..n-1 to the word embeddings"))


def test_model_shape_and_names(student):
    """BertModel gives (B, n, hidden_size) and has the contract's names"""
    s = student.probe("structure", kind="BertModel", init=TINY)
    for name in ("embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                 "embeddings.token_type_embeddings.weight", "embeddings.norm.weight",
                 "layers.0.self_attn.w_q.weight", "layers.1.ffn.linear2.weight", "layers.1.norm2.weight"):
        if name not in s["params"]:
            raise AssertionError(tr("BertModel has no parameter {name}; see the handout for the names", name=name))
    if s["attrs"].get("hidden_size") != 16:
        raise AssertionError(tr("BertModel needs the attribute hidden_size"))
    ids = torch.tensor([[2, 5, 6, 7, 3]])
    (out,) = _only(student.probe("run", kind="BertModel", init=TINY, calls=[{"args": [ids]}]), "BertModel")
    assert_shape(out, (1, 5, 16), what="BertModel(hidden_size=16)(ids (1, 5))")


def test_padding_does_not_change_real_tokens(student):
    """BertModel: with attention_mask, the ids at padded positions do not matter"""
    a = torch.tensor([[2, 5, 6, 3, 0, 0]])
    b = torch.tensor([[2, 5, 6, 3, 9, 11]])
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    out_a, out_b = _only(student.probe("run", kind="BertModel", init=TINY,
                                       calls=[{"args": [a], "kwargs": {"attention_mask": mask}},
                                              {"args": [b], "kwargs": {"attention_mask": mask}}]), "BertModel")
    assert_close(as_array(out_a)[:, :4], as_array(out_b)[:, :4], what=tr("the first 4 (real) tokens"), atol=1e-5,
                 hint=tr("attention_mask (B, n) is 1 at real tokens; turn it into the stage-5 mask (B, 1, 1, n)."))


def test_mlm_logits_shape_and_tied_decoder(student):
    """BertForMaskedLM returns (None, logits (B, n, V)) and ties the decoder to the word embeddings"""
    s = student.probe("structure", kind="BertForMaskedLM", init=TINY)
    if not s["attrs"].get("tied"):
        raise AssertionError(tr("mlm_head.decoder.weight must BE bert.embeddings.word_embeddings.weight (tied)"))
    ids = torch.tensor([[2, 5, 4, 3], [2, 4, 9, 3]])
    (out,) = _only(student.probe("run", kind="BertForMaskedLM", init=TINY, calls=[{"args": [ids]}]),
                   "BertForMaskedLM")
    if not (isinstance(out, list) and len(out) == 2 and out[0] is None):
        raise AssertionError(tr("BertForMaskedLM(ids) without labels should return (None, logits)"))
    assert_shape(out[1], (2, 4, 30), what=tr("the logits of BertForMaskedLM(vocab_size=30)(ids (2, 4))"))


def test_mlm_loss_tiny(student):
    """mlm_loss: uniform logits give log V over labelled positions; no label gives 0.0"""
    logits = torch.zeros(1, 4, 5)
    labels = torch.tensor([[-100, 3, -100, 1]])
    assert_close(student.mlm_loss(logits, labels), math.log(5), what="mlm_loss(zeros (1, 4, 5), 2 labels)",
                 atol=1e-5, hint=tr("Uniform scores over 5 words: cross-entropy log 5 at each labelled position."))
    got = as_array(student.mlm_loss(logits, torch.full((1, 4), -100)), tr("mlm_loss with no label"))
    if np.isnan(got).any():
        raise AssertionError(tr("mlm_loss with every label -100 gives NaN; it should be 0.0"))
    assert_close(got, 0.0, what=tr("mlm_loss with every label -100"), atol=1e-7)


def test_mask_tokens_basics(student):
    """mask_tokens: specials never picked, labels -100 elsewhere, input unchanged, about 15 % picked"""
    ids = torch.randint(5, 30, (200, 20), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = 2, 3
    r = student.probe("mask_draws", input_ids=ids, seeds=[0],
                      kwargs=dict(mask_id=4, vocab_size=30, special_ids=[0, 1, 2, 3, 4]))
    if "bad_return" in r:
        raise AssertionError(tr("mask_tokens should return (inputs, labels)"))
    if not torch.equal(r["given_after"][0], ids) or not torch.equal(r["given_poked"], r["given_after"]):
        raise AssertionError(tr("mask_tokens modified input_ids in place; work on input_ids.clone()"))
    inputs, labels = as_array(r["inputs"])[0], as_array(r["labels"])[0]
    picked = labels != -100
    if picked[:, [0, -1]].any():
        raise AssertionError(tr("mask_tokens picked [CLS] or [SEP]; special tokens are never picked"))
    if (labels[picked] != ids.numpy()[picked]).any():
        raise AssertionError(tr("labels must hold the original ids at picked positions"))
    rate = picked[:, 1:-1].mean()
    if not 0.12 < rate < 0.18:
        raise AssertionError(tr("{rate} of the ordinary tokens were picked, expected about 15 %",
                                rate=f"{rate:.1%}"))
    if not 0.7 < (inputs[picked] == 4).mean() < 0.9:
        raise AssertionError(tr("about 80 % of the picked tokens should become mask_id"))
