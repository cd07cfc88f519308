"""Stage 6 - the Transformer decoder and a tiny translator (slides 41-54).

The encoder of stage 5 turns the source sentence into one vector per input
token, the *memory*. The decoder writes the translation one token at a time
(slide 41). It differs from the encoder in two places (slide 42):

* masked self-attention (slide 44): position i of the output may look at
  positions 0..i only, never at the future tokens it is trained to predict;
* encoder-decoder (cross-) attention (slides 45-48): the Queries come from
  the decoder, the Keys and Values from the encoder's memory (slide 46).

Each sub-layer keeps its residual connection and LayerNorm (slide 50, post-LN
as in the original Transformer). A final linear layer, the *generator*, turns
every decoder state into one score per target word (slide 51).

Training uses teacher forcing (slide 52): the decoder reads the correct
previous tokens (`shift_right`) and all positions are computed in parallel
under the causal mask (slide 54). Inference is autoregressive
(`greedy_decode`): start from BOS, append the best token, feed it back, stop
at EOS (slides 17, 53).

Shapes: B batch, n source length, m target length, d d_model, V vocabulary.
Token ids are LongTensors; masks are BoolTensors, True where attention is
allowed. The lecture's example: "let's go" -> "vamos" (slides 10, 28, 51).

The toy translation set and its vocabulary helpers (`Vocab`,
`load_toy_translation`, `make_batch`, `train_seq2seq`, `translate`) are
course-provided and complete: you do not write them.
"""

import math
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from a05_encoder import Encoder, MultiHeadAttention, PositionwiseFeedForward, padding_mask


# ---------------------------------------------------------------------------
# Masks and teacher forcing
# ---------------------------------------------------------------------------

def causal_mask(n, device=None):
    """Causal (look-ahead) mask for decoder self-attention (slide 44).

    n: target length m
    returns BoolTensor (n, n), mask[i, j] = True iff j <= i: position i may
    attend to itself and to earlier positions, never to later ones.

    Example, n = 3:
        [[ True, False, False],
         [ True,  True, False],
         [ True,  True,  True]]
    """
    # BEGIN SOLUTION: True on and below the diagonal (torch.tril of a ones matrix), dtype torch.bool
    if n < 0:
        raise ValueError(f"causal_mask needs a length n >= 0, got {n}")
    return torch.tril(torch.ones(n, n, dtype=torch.bool, device=device))
    # END SOLUTION


def shift_right(tgt, bos_id):
    """Teacher-forcing input of the decoder (slide 52).

    tgt: LongTensor (B, m), the target sentences (..., EOS, PAD, ...)
    returns LongTensor (B, m): BOS followed by tgt without its last token,
        out[:, 0] = bos_id, out[:, 1:] = tgt[:, :-1]

    At position i the decoder reads the correct tokens 0..i-1 and is trained
    to predict tgt[:, i]. `tgt` itself is not modified.
    """
    # BEGIN SOLUTION: a new tensor filled with bos_id whose positions 1.. are tgt[..., :-1]
    if tgt.dim() < 1:
        raise ValueError(f"shift_right needs token ids of shape (B, m), got shape {tuple(tgt.shape)}")
    out = tgt.new_full(tgt.shape, bos_id)
    out[..., 1:] = tgt[..., :-1]
    return out
    # END SOLUTION


# ---------------------------------------------------------------------------
# The decoder
# ---------------------------------------------------------------------------

class DecoderLayer(nn.Module):
    """One decoder block, post-LN as in the original Transformer (slides 44-50).

        x = norm1(x + dropout(self_attn(x, x, x, tgt_mask)))             masked self-attention (slide 44)
        x = norm2(x + dropout(cross_attn(x, memory, memory, memory_mask)))  Q from the decoder, K, V from the encoder (slide 46)
        x = norm3(x + dropout(ffn(x)))                                    feed-forward (slide 50)

    Submodules: self_attn, cross_attn (stage-5 MultiHeadAttention), ffn
    (PositionwiseFeedForward, ReLU), norm1, norm2, norm3 (nn.LayerNorm), dropout.
    """

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, layer_norm_eps=1e-5):
        super().__init__()
        # BEGIN SOLUTION: two MultiHeadAttention (self_attn, cross_attn), one PositionwiseFeedForward (ffn), three LayerNorms, one Dropout
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        # END SOLUTION

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        """x: (B, m, d) decoder states; memory: (B, n, d) encoder output.

        tgt_mask: bool, broadcastable to (B, 1, m, m) - usually causal + target padding
        memory_mask: bool, broadcastable to (B, 1, m, n) - usually the source padding mask (B, 1, 1, n)
        returns (B, m, d)
        """
        # BEGIN SOLUTION: check shapes (ValueError), then self-attention, cross-attention (query x, key/value memory), FFN - each with residual + LayerNorm
        if x.dim() != 3 or memory.dim() != 3:
            raise ValueError(f"x must be (B, m, d_model) and memory (B, n, d_model), got shapes "
                             f"{tuple(x.shape)} and {tuple(memory.shape)}")
        if x.shape[0] != memory.shape[0] or x.shape[-1] != self.d_model or memory.shape[-1] != self.d_model:
            raise ValueError(f"x {tuple(x.shape)} and memory {tuple(memory.shape)} must share the batch size "
                             f"and have d_model = {self.d_model} features")
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, memory_mask)))
        x = self.norm3(x + self.dropout(self.ffn(x)))
        return x
        # END SOLUTION


class Decoder(nn.Module):
    """Target embedding + positional encoding + a stack of DecoderLayers (slides 43-50).

    Submodules and buffers, as in the stage-5 Encoder: embedding
    (nn.Embedding, padding_idx=pad_id), pe (buffer (max_len, d_model), float32,
    the sinusoidal table of stage 4), dropout, layers (nn.ModuleList of
    DecoderLayer). Attribute pad_id.

        x = dropout(embedding(tgt_ids) * sqrt(d_model) + pe[:m])       (slide 43)
        x = layer(x, memory, tgt_mask, memory_mask) for each layer
    """

    def __init__(self, vocab_size, d_model, n_heads, d_ff, n_layers, max_len=512, dropout=0.0, pad_id=0):
        super().__init__()
        # BEGIN SOLUTION: embedding with padding_idx, the sinusoidal table as buffer "pe" (float32), dropout, n_layers DecoderLayers in an nn.ModuleList
        self.d_model = d_model
        self.max_len = max_len
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        # the sinusoidal table of stage 4 (slide 22), computed in float64 and stored as float32
        position = torch.arange(max_len, dtype=torch.float64)[:, None]              # (max_len, 1)
        two_i = torch.arange(0, d_model, 2, dtype=torch.float64)                  # 2i = 0, 2, 4, ...
        angle = position / torch.pow(10000.0, two_i / d_model)                    # (max_len, ceil(d/2))
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
        self.register_buffer("pe", pe.float())
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        # END SOLUTION

    def forward(self, tgt_ids, memory, tgt_mask=None, memory_mask=None):
        """tgt_ids: LongTensor (B, m), decoder input (BOS, y_1, ..., y_{m-1});
        memory: (B, n, d) encoder output.

        tgt_mask=None means causal_mask(m) & padding_mask(tgt_ids, pad_id):
            (m, m) & (B, 1, 1, m) -> (B, 1, m, m); padding is masked on the keys only.
        memory_mask=None means the whole memory is visible.
        returns (B, m, d)
        """
        # BEGIN SOLUTION: check shapes (ValueError); embed * sqrt(d) + pe[:m], dropout; default tgt_mask = causal & target padding; run the layers
        if tgt_ids.dim() != 2:
            raise ValueError(f"tgt_ids must be (B, m) token ids, got shape {tuple(tgt_ids.shape)}")
        if memory.dim() != 3 or memory.shape[0] != tgt_ids.shape[0] or memory.shape[-1] != self.d_model:
            raise ValueError(f"memory must be (B, n, d_model) = ({tgt_ids.shape[0]}, n, {self.d_model}) "
                             f"to match tgt_ids {tuple(tgt_ids.shape)}, got {tuple(memory.shape)}")
        m = tgt_ids.shape[1]
        if m > self.max_len:
            raise ValueError(f"target length {m} is longer than max_len = {self.max_len}")
        if tgt_mask is None:
            tgt_mask = causal_mask(m, device=tgt_ids.device) & padding_mask(tgt_ids, self.pad_id)
        x = self.embedding(tgt_ids) * math.sqrt(self.d_model) + self.pe[:m]
        x = self.dropout(x)
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return x
        # END SOLUTION


class Seq2SeqTransformer(nn.Module):
    """The whole encoder-decoder Transformer (slides 41-54).

    Submodules: encoder (stage-5 Encoder), decoder (Decoder), generator
    (nn.Linear(d_model, tgt_vocab_size), slide 51). Attribute pad_id (shared
    by source and target vocabularies).

        memory = encode(src)                      (B, n, d)
        logits = decode(tgt_in, memory, src_mask) (B, m, V)
        forward(src, tgt_in) = decode(tgt_in, encode(src), padding_mask(src, pad_id))

    The masks are made inside: the encoder masks source padding, the decoder
    applies causal + target padding, and `forward` hides source padding from
    the cross-attention. The logits are raw scores (no softmax): the loss
    (F.cross_entropy) and argmax both take logits.
    """

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, d_ff=512, n_layers=2,
                 max_len=512, dropout=0.1, pad_id=0):
        super().__init__()
        # BEGIN SOLUTION: encoder (stage-5 Encoder), decoder (Decoder) with the same sizes, generator Linear(d_model -> tgt_vocab_size), pad_id
        self.pad_id = pad_id
        self.encoder = Encoder(src_vocab_size, d_model, n_heads, d_ff, n_layers, max_len, dropout, pad_id)
        self.decoder = Decoder(tgt_vocab_size, d_model, n_heads, d_ff, n_layers, max_len, dropout, pad_id)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        # END SOLUTION

    def encode(self, src):
        """src: LongTensor (B, n) -> memory (B, n, d); source padding masked (slides 30-40)."""
        # BEGIN SOLUTION: run the encoder with the source padding mask
        if src.dim() != 2:
            raise ValueError(f"src must be (B, n) token ids, got shape {tuple(src.shape)}")
        return self.encoder(src, padding_mask(src, self.pad_id))
        # END SOLUTION

    def decode(self, tgt_in, memory, src_mask=None):
        """tgt_in: LongTensor (B, m); memory: (B, n, d); src_mask: bool (B, 1, 1, n) or None.

        returns logits (B, m, V): the decoder (causal + target padding mask
        inside, src_mask as the memory mask) followed by the generator (slide 51).
        """
        # BEGIN SOLUTION: decoder with memory_mask=src_mask, then the generator (no softmax)
        return self.generator(self.decoder(tgt_in, memory, memory_mask=src_mask))
        # END SOLUTION

    def forward(self, src, tgt_in):
        """src: (B, n), tgt_in: (B, m) (= shift_right(tgt, BOS)) -> logits (B, m, V).

        Teacher forcing (slide 52): every target position is predicted at once.
        """
        # BEGIN SOLUTION: check batch sizes (ValueError); encode, then decode with padding_mask(src, pad_id) as src_mask
        if src.dim() != 2 or tgt_in.dim() != 2 or src.shape[0] != tgt_in.shape[0]:
            raise ValueError(f"src (B, n) and tgt_in (B, m) must be 2-D with the same batch size, got "
                             f"{tuple(src.shape)} and {tuple(tgt_in.shape)}")
        memory = self.encode(src)
        return self.decode(tgt_in, memory, padding_mask(src, self.pad_id))
        # END SOLUTION


# ---------------------------------------------------------------------------
# Inference
# ---------------------------------------------------------------------------

def greedy_decode(model, src, bos_id, eos_id, max_len):
    """Autoregressive greedy decoding (slides 17, 51-54).

    model: a Seq2SeqTransformer (only model.encode, model.decode and
        model.pad_id are used); src: LongTensor (B, n); max_len >= 1.
    returns LongTensor (B, L), L <= max_len: column 0 is BOS, then the
        argmax token of each step. Decoding stops as soon as every row has
        produced EOS, or when L == max_len. After a row's EOS its positions
        are model.pad_id.

    Runs in eval mode under torch.no_grad() and puts the model back in the
    mode it was in (train or eval). The source is encoded once; each step
    decodes the whole prefix and keeps the scores of its last position.
    """
    # BEGIN SOLUTION: eval + no_grad; encode once; loop: decode the prefix, argmax of the last position, pad finished rows, stop when all rows hit EOS or max_len; restore the mode
    if src.dim() != 2:
        raise ValueError(f"src must be (B, n) token ids, got shape {tuple(src.shape)}")
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1 (room for BOS), got {max_len}")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            memory = model.encode(src)
            src_mask = padding_mask(src, model.pad_id)
            ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
            finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
            while ys.shape[1] < max_len and not bool(finished.all()):
                logits = model.decode(ys, memory, src_mask)            # (B, L, V)
                next_token = logits[:, -1].argmax(dim=-1)              # (B,)
                next_token = next_token.masked_fill(finished, model.pad_id)
                ys = torch.cat([ys, next_token[:, None]], dim=1)
                finished = finished | (next_token == eos_id)
    finally:
        model.train(was_training)
    return ys
    # END SOLUTION


# ---------------------------------------------------------------------------
# Course-provided: the toy translation set (English -> Spanish) and a trainer
# ---------------------------------------------------------------------------

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIALS = ["<pad>", "<bos>", "<eos>"]
TOY_DATA = Path("assignments") / "a06_decoder" / "data" / "toy_translation.tsv"


def tokenize(sentence):
    """Word-level tokens: lower case, split on spaces ("let's go" -> ["let's", "go"])."""
    return sentence.lower().split()


class Vocab:
    """Word <-> id table. Ids 0, 1, 2 are <pad>, <bos>, <eos> (PAD_ID, BOS_ID, EOS_ID)."""

    def __init__(self, sentences):
        words = sorted({w for s in sentences for w in tokenize(s)})
        self.itos = SPECIALS + words
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def __len__(self):
        return len(self.itos)

    def encode(self, sentence):
        """'let's go' -> [id("let's"), id("go"), EOS_ID]; an unknown word raises KeyError."""
        try:
            return [self.stoi[w] for w in tokenize(sentence)] + [EOS_ID]
        except KeyError as exc:
            raise KeyError(f"word {exc.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids):
        """Ids -> sentence; skips <bos>/<pad>, stops at the first <eos>."""
        words = []
        for i in (ids.tolist() if torch.is_tensor(ids) else ids):
            if i == EOS_ID:
                break
            if i not in (PAD_ID, BOS_ID):
                words.append(self.itos[i])
        return " ".join(words)


def load_toy_translation(path=None):
    """Read the toy set: {"train": [(english, spanish), ...], "heldout": [...]}.

    path defaults to assignments/a06_decoder/data/toy_translation.tsv, looked
    up from the current folder and its parents.
    """
    if path is None:
        here = [Path(__file__).resolve().parent.parent] if "__file__" in globals() else []  # not in a notebook
        for base in [Path.cwd(), *Path.cwd().parents, *here]:
            if (base / TOY_DATA).exists():
                path = base / TOY_DATA
                break
        else:
            raise FileNotFoundError(f"cannot find {TOY_DATA}; pass path=")
    data = {"train": [], "heldout": []}
    with open(path, encoding="utf-8") as f:
        for line in f:
            split, en, es = line.rstrip("\n").split("\t")
            data[split].append((en, es))
    return data


def make_batch(sentences, vocab):
    """List of sentences -> LongTensor (N, L) of ids, each ending in EOS, padded with PAD_ID."""
    rows = [vocab.encode(s) for s in sentences]
    out = torch.full((len(rows), max(len(r) for r in rows)), PAD_ID, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


def train_seq2seq(model, src, tgt, *, steps=300, batch_size=64, lr=3e-3, seed=0):
    """Teacher-forcing training (slide 52) with Adam; returns the loss of every step.

    src: (N, n), tgt: (N, m) padded id tensors (tgt ends in EOS). Each step
    samples a batch, feeds shift_right(tgt, BOS_ID) to the decoder and takes
    the cross-entropy against tgt, ignoring padding. Leaves the model in eval mode.
    """
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    model.train()
    for _ in range(steps):
        idx = torch.randint(len(src), (batch_size,), generator=gen)
        logits = model(src[idx], shift_right(tgt[idx], BOS_ID))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt[idx].reshape(-1), ignore_index=model.pad_id)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses


def translate(model, sentences, src_vocab, tgt_vocab, max_len=16):
    """English sentences -> Spanish sentences with greedy_decode."""
    ids = greedy_decode(model, make_batch(sentences, src_vocab), BOS_ID, EOS_ID, max_len)
    return [tgt_vocab.decode(row) for row in ids]
