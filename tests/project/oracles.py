"""What the oracle tests share: our Transformer modules' weights copied into torch's own.

``test_oracle_a05.py`` and ``test_oracle_a06.py`` compare the reference (and the
stage-5 stand-in) with nn.MultiheadAttention, nn.TransformerEncoderLayer and
nn.TransformerDecoderLayer. Import ``no_fastpath`` into a test module to make
it apply there (an autouse fixture).
"""
import pytest
import torch


@pytest.fixture(autouse=True)
def no_fastpath():
    """Compare the plain math: torch's fused inference path of its attention and encoder layers
    drops padded positions."""
    previous = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(previous)


def copy_attention(ours, theirs):
    """Our w_q, w_k, w_v, w_o -> nn.MultiheadAttention's packed in_proj and its out_proj."""
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        theirs.out_proj.weight.copy_(ours.w_o.weight)
        theirs.out_proj.bias.copy_(ours.w_o.bias)


def copy_layer(ours, theirs):
    """Our EncoderLayer or DecoderLayer -> nn.TransformerEncoderLayer or nn.TransformerDecoderLayer:
    self-attention, cross-attention (torch's multihead_attn) if there is one, the feed-forward
    network and the two or three LayerNorms."""
    copy_attention(ours.self_attn, theirs.self_attn)
    if hasattr(ours, "cross_attn"):
        copy_attention(ours.cross_attn, theirs.multihead_attn)
    pairs = [(ours.ffn.linear1, theirs.linear1), (ours.ffn.linear2, theirs.linear2)]
    pairs += [(getattr(ours, name), getattr(theirs, name)) for name in ("norm1", "norm2", "norm3")
              if hasattr(ours, name)]
    with torch.no_grad():
        for a, b in pairs:
            b.weight.copy_(a.weight)
            b.bias.copy_(a.bias)
