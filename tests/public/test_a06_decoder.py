"""Public tests of stage 6 (a06_decoder): run them with `python -m grader check a06_decoder`.

They check shapes, small cases you can verify by hand and the lecture's
"let's go" -> "vamos" example (slides 10, 28, 51). The hidden suite compares
every class with a reference implementation on random weights, checks the
causal and padding properties, greedy decoding in detail, and trains a tiny
translator on the toy set (see the handout, "How you are graded").
"""
import numpy as np
import torch

from grader.engine.testing import as_array, assert_close, assert_shape
from grader.i18n import tr

BOS, EOS = 1, 2


def _run(student, kind, init, calls, state_dict=None):
    reply = student.probe("run", kind=kind, init=init, state_dict=state_dict, calls=calls)
    if reply.get("load_error") or reply.get("missing") or reply.get("unexpected"):
        raise AssertionError(tr("the test's weights do not fit your {kind}: {error} missing "
                                "{missing}, unexpected {unexpected}",
                                kind=kind, error=reply.get('load_error') or '',
                                missing=reply.get('missing'),
                                unexpected=reply.get('unexpected')))
    return reply["results"]


def _out(value, what):
    if isinstance(value, dict):
        raise AssertionError(tr("{what} returned a {type}, not one tensor",
                                what=what, type=value.get('not_a_tensor')))
    return as_array(value, what)


def test_causal_mask_example(student):
    """causal_mask(3): True on and below the diagonal (slide 44)"""
    got = as_array(student.causal_mask(3), "causal_mask(3)")
    assert_shape(got, (3, 3), "causal_mask(3)")
    if got.dtype != np.bool_:
        raise AssertionError(tr("causal_mask returned {dtype} values; return a boolean tensor (True = may "
                                "attend)", dtype=got.dtype))
    want = np.array([[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert_close(got.astype(np.int64), want, what="causal_mask(3)", atol=0, rtol=0,
                 hint=tr("Row i is the query: it may look at positions j <= i (itself and the past), never the "
                         "future."))


def test_shift_right_example(student):
    """shift_right: [vamos, a, EOS, PAD] -> [BOS, vamos, a, EOS] (teacher forcing, slide 52)"""
    tgt = torch.tensor([[5, 6, 2, 0], [7, 2, 0, 0]])
    got = as_array(student.shift_right(tgt, BOS), "shift_right(tgt, bos_id=1)")
    assert_close(got, np.array([[1, 5, 6, 2], [1, 7, 2, 0]]), what="shift_right(tgt, bos_id=1)", atol=0, rtol=0,
                 hint=tr("BOS first, then tgt without its last token: out[:, 1:] = tgt[:, :-1]."))
    assert torch.equal(tgt, torch.tensor([[5, 6, 2, 0], [7, 2, 0, 0]])), tr("shift_right must not modify its input")


def test_decoder_layer_shapes(student):
    """DecoderLayer: (B, m, d) out for memory (B, n, d), n != m; post-LN rows have mean 0 and variance 1"""
    gen = torch.Generator().manual_seed(0)
    x, memory = torch.randn(2, 5, 16, generator=gen), torch.randn(2, 7, 16, generator=gen)
    mask = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    out = _out(_run(student, "DecoderLayer", {"d_model": 16, "n_heads": 4, "d_ff": 32},
                    [{"args": [x, memory, mask, None]}])[0], "DecoderLayer(16, 4, 32)")
    assert_shape(out, (2, 5, 16), tr("DecoderLayer output for x (2, 5, 16) and memory (2, 7, 16)"))
    assert_close(out.mean(-1), np.zeros((2, 5)), what=tr("the mean of each output row"), atol=1e-5,
                 hint=tr("Post-LN: the last operation is norm3(x + ffn(x)), whose rows have mean 0 (fresh "
                         "LayerNorm)."))
    assert_close(out.var(-1), np.ones((2, 5)), what=tr("the variance of each output row"), atol=1e-3,
                 hint=tr("Post-LN: the last operation is norm3(x + ffn(x)), whose rows have variance 1."))


def test_decoder_shapes_and_causality(student):
    """Decoder: (B, m, d_model); changing the last target token leaves earlier positions unchanged"""
    init = {"vocab_size": 12, "d_model": 16, "n_heads": 4, "d_ff": 32, "n_layers": 2, "max_len": 10}
    tgt = torch.tensor([[1, 5, 6, 7], [1, 8, 2, 0]])
    changed = tgt.clone()
    changed[:, -1] = torch.tensor([9, 10])
    memory = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(1))
    a, b = _run(student, "Decoder", init, [{"args": [tgt, memory]}, {"args": [changed, memory]}])
    a, b = _out(a, "Decoder"), _out(b, "Decoder")
    assert_shape(a, (2, 4, 16), tr("Decoder output for tgt_ids (2, 4)"))
    assert_close(b[:, :3], a[:, :3], what=tr("Decoder outputs at positions 0..2 after changing the token at "
                                             "position 3"),
                 atol=1e-5, rtol=1e-5,
                 hint=tr("tgt_mask=None must mean the causal mask (& target padding): no position sees the "
                         "future (slide 44)."))


LETS_GO = {"<pad>": 0, "<bos>": 1, "<eos>": 2, "let's": 3, "go": 4}
VAMOS = {"<pad>": 0, "<bos>": 1, "<eos>": 2, "vamos": 3}


def test_lets_go_pipeline_shapes(student):
    """the lecture's "let's go" -> "vamos": memory (1, 3, d), logits (1, 2, V) for tgt_in [BOS, vamos]"""
    init = {"src_vocab_size": len(LETS_GO), "tgt_vocab_size": len(VAMOS), "d_model": 8, "n_heads": 2, "d_ff": 16,
            "n_layers": 1, "max_len": 16, "dropout": 0.0}
    src = torch.tensor([[LETS_GO["let's"], LETS_GO["go"], EOS]])        # (1, 3): let's go <eos>
    tgt = torch.tensor([[VAMOS["vamos"], EOS]])                          # (1, 2): vamos <eos>
    tgt_in = as_array(student.shift_right(tgt, BOS), "shift_right")     # [<bos>, vamos]
    memory, logits = _run(student, "Seq2SeqTransformer", init,
                          [{"method": "encode", "args": [src]}, {"args": [src, torch.as_tensor(tgt_in)]}])
    assert_shape(_out(memory, "encode"), (1, 3, 8), tr("encode(let's go <eos>), the memory (B, n, d_model)"))
    logits = _out(logits, "forward")
    assert_shape(logits, (1, 2, len(VAMOS)), tr("forward(src, [<bos>, vamos]), the logits (B, m, tgt_vocab_size)"))
    if np.allclose(logits.sum(-1), 1.0, atol=1e-4) and (logits >= 0).all():
        raise AssertionError(tr("the logits sum to 1 over the vocabulary: return the generator's raw scores, not "
                                "probabilities (the loss applies the softmax itself, slide 51)"))
    reply = student.probe("greedy", init=init, state_dict=None, src=src, bos_id=BOS, eos_id=EOS, max_len=5)
    out = _out(reply["out"], "greedy_decode(model, src, 1, 2, max_len=5)")
    if out.ndim != 2 or out.shape[0] != 1 or not 1 <= out.shape[1] <= 5:
        raise AssertionError(tr("greedy_decode(model, src (1, 3), max_len=5) returned shape {shape}; "
                                "expected (1, L) with 1 <= L <= 5 (BOS included)", shape=out.shape))
    assert out[0, 0] == BOS, tr("greedy_decode must start every row with bos_id=1, got {first}",
                                first=out[0, 0])


def test_greedy_decode_output(student):
    """greedy_decode on a scripted model: stops when every row has EOS, pads with model.pad_id after it"""
    # row 0 predicts 3, 4, EOS, 6...; row 1 predicts EOS, 7...; pad_id is 5 here
    script = torch.tensor([[3, 4, 2, 6, 6, 6], [2, 7, 7, 7, 7, 7]])
    reply = student.probe("greedy_scripted", script=script, vocab_size=8, pad_id=5, src=torch.tensor([[3, 2], [4, 2]]),
                          bos_id=BOS, eos_id=EOS, max_len=6)
    got = _out(reply["out"], tr("greedy_decode on the scripted model"))
    want = np.array([[1, 3, 4, 2], [1, 2, 5, 5]])
    assert_shape(got, want.shape, tr("greedy_decode on the scripted model (both rows done after 3 steps)"))
    assert_close(got, want, what=tr("greedy_decode on the scripted model"), atol=0, rtol=0,
                 hint=tr("BOS first; each step appends the argmax of the last position; a row that produced EOS "
                         "gets model.pad_id afterwards; stop when every row has produced EOS (slide 53)."))
    assert reply["training_after"] is False, tr("greedy_decode must leave an eval-mode model in eval mode")


def test_submodule_names(student):
    """Seq2SeqTransformer has encoder, decoder (embedding, pe, layers) and generator; layers have the contract's names"""  # noqa: E501 (the report's test name)
    init = {"src_vocab_size": 9, "tgt_vocab_size": 11, "d_model": 8, "n_heads": 2, "d_ff": 16, "n_layers": 2,
            "max_len": 12, "pad_id": 0}
    got = student.probe("structure", kind="Seq2SeqTransformer", init=init)
    modules = got["modules"]
    for name in ["encoder", "decoder", "generator", "decoder.embedding", "decoder.layers",
                 "decoder.layers.1.self_attn", "decoder.layers.1.cross_attn", "decoder.layers.1.ffn",
                 "decoder.layers.1.norm1", "decoder.layers.1.norm2", "decoder.layers.1.norm3"]:
        assert name in modules, tr("Seq2SeqTransformer has no submodule {name} (see the contract in the handout)",
                                   name=f"{name!r}")
    assert "decoder.pe" in got["buffers"], tr("the Decoder should register its sinusoidal table as the buffer pe")
    assert got["params"].get("generator.weight") == [11, 8], (
        tr("generator should be nn.Linear(d_model=8, tgt_vocab_size=11); its weight is {shape}",
           shape=got['params'].get('generator.weight')))
