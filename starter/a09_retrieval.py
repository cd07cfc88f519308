# Starter code, generated from the reference by `make starter`. Replace every
# `raise NotImplementedError(...)` with your implementation; keep the names and signatures.
"""Stage 9 (bonus) - sentence embeddings and semantic search (slides 68-70).

A sentence-embedding model maps a whole sentence to one vector so that
sentences with similar meaning land close together (slide 68). all-MiniLM-L6-v2
is a small BERT (stage 7) that sentence-transformers trained for exactly this;
its recipe is

    text -> WordPiece ids (truncated at 256 tokens, padded to the longest in the batch)
         -> BertModel -> hidden (B, n, H)
         -> mean over the real tokens -> (B, H)
         -> divide by the L2 norm -> unit vectors (B, H)

With unit vectors the cosine similarity is a plain dot product, so searching
documents for a question (slides 69-70, the "R" of RAG) is one matrix product
followed by sorting.

Shapes used below: N sentences, Q queries, D documents, H hidden size (384), k results.
"""

import torch
import torch.nn.functional as F

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2


def embed_sentences(model, tokenizer, sentences, batch_size=64):
    """Unit-length sentence embeddings, as sentence-transformers computes them (slide 68).

    model:      a stage-7 `BertModel` with the pretrained all-MiniLM-L6-v2 weights
    tokenizer:  a `tokenizers.Tokenizer` from the checkpoint's tokenizer.json.
                That file pads every text to 128 tokens and truncates at 128;
                here we need truncation at MAX_TOKENS=256 and padding to the
                longest text of each batch, so set both on the tokenizer.
    sentences:  list of N strings
    batch_size: how many sentences go through the model at once
    returns     FloatTensor (N, H), each row of L2 norm 1.

    Runs the model in eval mode under torch.no_grad() (and restores its mode).
    Padding is left out of the mean: mean over the real tokens only.
    """
    if isinstance(sentences, str):
        raise ValueError("sentences must be a list of strings, not one string")
    raise NotImplementedError('truncation 256 + padding to the longest; per batch: encode, ids/mask tensors, model, mean over real tokens, F.normalize')


def top_k(query_embeddings, doc_embeddings, k):
    """The k documents most similar to each query, by cosine similarity (slides 68-70).

    query_embeddings: (Q, H); doc_embeddings: (D, H), any length (they are normalised here)
    k:                how many documents per query, 1 <= k <= D
    returns (scores (Q, k), indices (Q, k)): for each query the cosine
            similarities, highest first, and the documents' row numbers; equal
            scores keep the lower document index first.
    Raises ValueError when k is larger than the number of documents (or k < 1).
    """
    raise NotImplementedError('ValueError unless queries (Q, H), documents (D, H) and 1 <= k <= D; cosine = normalised queries @ normalised documents.T; stable descending sort; first k')
