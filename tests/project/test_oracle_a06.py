"""Stage 6 (a06_decoder) against torch's own Transformer decoder (the oracle).

* DecoderLayer and Decoder of the reference reproduce nn.TransformerDecoderLayer /
  nn.TransformerDecoder (batch_first, post-norm, no final norm) to 1e-5 with
  copied weights, under a causal target mask, target padding and source padding.
  torch's boolean masks are True = blocked, ours True = may attend: inverted on the way in.
* The causal property: changing future target tokens never changes earlier logits.
* greedy_decode agrees with step-by-step argmax of forward.
* A tiny Seq2SeqTransformer trained on the toy set (CPU, seconds) translates
  >= 95 % of the held-out pairs exactly; the figure and the wall time are printed
  (`pytest -s`) and are the ones quoted in the handout.
"""
import math
import time

import pytest
import torch
from oracles import copy_layer, no_fastpath  # noqa: F401 - no_fastpath is an autouse fixture
from torch import nn

from grader.engine.testing import randomise_norms_and_biases, reference

ATOL = 1e-5
TRAIN_CONFIG = dict(d_model=32, n_heads=2, d_ff=64, n_layers=2, max_len=32, dropout=0.0)
TRAIN_STEPS, TRAIN_BATCH, TRAIN_LR = 300, 64, 3e-3


def R():
    return reference("a06_decoder")


def _torch_layer(d, h, d_ff):
    return nn.TransformerDecoderLayer(d, h, d_ff, dropout=0.0, batch_first=True, norm_first=False).eval()


def test_causal_mask_and_shift_right():
    ref = R()
    mask = ref.causal_mask(4)
    assert mask.dtype == torch.bool and mask.shape == (4, 4)
    assert torch.equal(mask, ~nn.Transformer.generate_square_subsequent_mask(4).isinf())
    tgt = torch.tensor([[5, 6, 2, 0], [7, 2, 0, 0]])
    assert torch.equal(ref.shift_right(tgt, 1), torch.tensor([[1, 5, 6, 2], [1, 7, 2, 0]]))


@pytest.mark.parametrize("d,h,d_ff,B,m,n", [(16, 4, 32, 3, 5, 7), (12, 3, 20, 2, 6, 4)])
def test_decoder_layer_matches_torch(d, h, d_ff, B, m, n):
    ref = R()
    torch.manual_seed(0)
    ours = ref.DecoderLayer(d, h, d_ff).eval()
    randomise_norms_and_biases(ours, 1)
    theirs = _torch_layer(d, h, d_ff)
    copy_layer(ours, theirs)
    x, memory = torch.randn(B, m, d), torch.randn(B, n, d)
    src_pad = torch.ones(B, n, dtype=torch.bool)
    src_pad[0, n - 2:] = False                        # source padding in row 0
    tgt_pad = torch.ones(B, m, dtype=torch.bool)
    tgt_pad[-1, m - 2:] = False                       # target padding in the last row
    ours_tgt_mask = ref.causal_mask(m) & tgt_pad[:, None, None, :]
    with torch.no_grad():
        got = ours(x, memory, tgt_mask=ours_tgt_mask, memory_mask=src_pad[:, None, None, :])
        want = theirs(x, memory, tgt_mask=~ref.causal_mask(m), tgt_key_padding_mask=~tgt_pad,
                      memory_key_padding_mask=~src_pad)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=ATOL)


def test_decoder_stack_matches_torch():
    ref = R()
    d, h, d_ff, L, V, pad = 16, 2, 32, 3, 11, 0
    torch.manual_seed(0)
    ours = ref.Decoder(V, d, h, d_ff, L, max_len=20, pad_id=pad).eval()
    randomise_norms_and_biases(ours, 2)
    theirs = nn.TransformerDecoder(_torch_layer(d, h, d_ff), L, norm=None).eval()
    for a, b in zip(ours.layers, theirs.layers):
        copy_layer(a, b)
    tgt = torch.tensor([[1, 4, 5, 6, 2, 0], [1, 7, 3, 2, 0, 0], [1, 9, 9, 9, 9, 2]])
    memory = torch.randn(3, 5, d)
    src_pad = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], dtype=torch.bool)
    m = tgt.shape[1]
    # the oracle's input: scaled embedding + the stage-4 sinusoidal table, computed here from the formula
    pos = torch.arange(m, dtype=torch.float64)[:, None]
    i = torch.arange(d, dtype=torch.float64)[None, :]
    angle = pos / 10000.0 ** ((i - i % 2) / d)
    pe = torch.where(i % 2 == 0, torch.sin(angle), torch.cos(angle)).float()
    x = ours.embedding.weight[tgt].detach() * math.sqrt(d) + pe
    with torch.no_grad():
        got = ours(tgt, memory, memory_mask=src_pad[:, None, None, :])   # default tgt_mask: causal + padding
        want = theirs(x, memory, tgt_mask=~ref.causal_mask(m), tgt_key_padding_mask=tgt == pad,
                      memory_key_padding_mask=~src_pad)
    real = tgt != pad                                  # torch gives NaN-free garbage only at fully masked rows
    torch.testing.assert_close(got[real], want[real], atol=ATOL, rtol=ATOL)


def test_causal_property_and_padding():
    """Changing future target tokens never changes earlier logits; padding never changes real positions."""
    ref = R()
    torch.manual_seed(0)
    model = ref.Seq2SeqTransformer(13, 17, d_model=16, n_heads=2, d_ff=32, n_layers=2, dropout=0.0).eval()
    src = torch.tensor([[3, 4, 5, 6, 2], [7, 8, 2, 0, 0]])
    tgt = torch.tensor([[1, 5, 6, 7, 8, 9], [1, 10, 11, 12, 13, 14]])
    with torch.no_grad():
        base = model(src, tgt)
        for t in range(1, tgt.shape[1]):
            changed = tgt.clone()
            changed[:, t:] = torch.randint(3, 17, changed[:, t:].shape)
            out = model(src, changed)
            torch.testing.assert_close(out[:, :t], base[:, :t], atol=ATOL, rtol=ATOL)
            assert (out[:, t:] - base[:, t:]).abs().max() > 1e-3
        # extra source padding leaves the logits unchanged; extra target padding leaves real positions unchanged
        padded = model(torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], 1),
                       torch.cat([tgt, torch.zeros(2, 2, dtype=torch.long)], 1))
        torch.testing.assert_close(padded[:, : tgt.shape[1]], base, atol=ATOL, rtol=ATOL)


def test_greedy_decode_is_stepwise_argmax_of_forward():
    ref = R()
    torch.manual_seed(3)
    model = ref.Seq2SeqTransformer(13, 17, d_model=16, n_heads=2, d_ff=32, n_layers=2, dropout=0.1)
    model.train()
    src = torch.tensor([[3, 4, 5, 6, 2], [7, 8, 2, 0, 0], [9, 9, 9, 2, 0]])
    out = ref.greedy_decode(model, src, 1, 2, 8)
    assert model.training, "greedy_decode must restore train mode"
    model.eval()
    ys = torch.ones(3, 1, dtype=torch.long)
    with torch.no_grad():
        for _ in range(out.shape[1] - 1):
            ys = torch.cat([ys, model(src, ys)[:, -1].argmax(-1, keepdim=True)], 1)
    for b in range(3):
        row = ys[b].tolist()
        cut = row.index(2) + 1 if 2 in row else len(row)
        assert out[b, :cut].tolist() == row[:cut]
        assert (out[b, cut:] == model.pad_id).all()


def test_tiny_translator_learns_the_toy_set():
    """>= 95 % of held-out pairs decoded exactly after a few seconds of CPU training."""
    ref = R()
    data = ref.load_toy_translation()
    src_vocab = ref.Vocab([en for en, _ in data["train"]])
    tgt_vocab = ref.Vocab([es for _, es in data["train"]])
    src = ref.make_batch([en for en, _ in data["train"]], src_vocab)
    tgt = ref.make_batch([es for _, es in data["train"]], tgt_vocab)
    torch.manual_seed(0)
    model = ref.Seq2SeqTransformer(len(src_vocab), len(tgt_vocab), **TRAIN_CONFIG)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        start = time.perf_counter()
        losses = ref.train_seq2seq(model, src, tgt, steps=TRAIN_STEPS, batch_size=TRAIN_BATCH, lr=TRAIN_LR, seed=0)
        train_s = time.perf_counter() - start
        english = [en for en, _ in data["heldout"]]
        predicted = ref.translate(model, english, src_vocab, tgt_vocab)
    finally:
        torch.set_num_threads(threads)
    exact = sum(p == es for p, (_, es) in zip(predicted, data["heldout"])) / len(english)
    print(f"\n[a06 oracle] toy set: {len(data['train'])} train / {len(english)} held-out pairs; "
          f"final loss {losses[-1]:.4f}; held-out exact match {exact:.1%}; training {train_s:.1f} s (1 thread)")
    assert ref.translate(model, ["let's go"], src_vocab, tgt_vocab) == ["vamos"]
    assert exact >= 0.95, f"held-out exact match {exact:.1%} < 95 %"
