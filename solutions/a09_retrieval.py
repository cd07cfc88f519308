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
    # BEGIN SOLUTION: truncation 256 + padding to the longest; per batch: encode, ids/mask tensors, model, mean over real tokens, F.normalize
    pad_id = tokenizer.token_to_id("[PAD]")
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.enable_padding(pad_id=pad_id, pad_token="[PAD]")  # no length: pad to the longest in the batch
    was_training = model.training
    model.eval()
    chunks = []
    with torch.no_grad():
        for start in range(0, len(sentences), batch_size):
            encodings = tokenizer.encode_batch(list(sentences[start:start + batch_size]))
            ids = torch.tensor([e.ids for e in encodings])  # (b, n)
            mask = torch.tensor([e.attention_mask for e in encodings])  # (b, n), 1 at real tokens
            hidden = model(ids, attention_mask=mask)  # (b, n, H)
            weights = mask.unsqueeze(-1).to(hidden.dtype)  # (b, n, 1)
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)  # (b, H)
            chunks.append(F.normalize(pooled, p=2, dim=-1))
    model.train(was_training)
    return torch.cat(chunks) if chunks else torch.zeros(0, model.hidden_size)
    # END SOLUTION


def top_k(query_embeddings, doc_embeddings, k):
    """The k documents most similar to each query, by cosine similarity (slides 68-70).

    query_embeddings: (Q, H); doc_embeddings: (D, H), any length (they are normalised here)
    k:                how many documents per query, 1 <= k <= D
    returns (scores (Q, k), indices (Q, k)): for each query the cosine
            similarities, highest first, and the documents' row numbers; equal
            scores keep the lower document index first.
    Raises ValueError when k is larger than the number of documents (or k < 1).
    """
    # BEGIN SOLUTION: ValueError unless queries (Q, H), documents (D, H) and 1 <= k <= D; cosine = normalised queries @ normalised documents.T; stable descending sort; first k
    if query_embeddings.dim() != 2 or doc_embeddings.dim() != 2 or \
            query_embeddings.shape[1] != doc_embeddings.shape[1]:
        raise ValueError(f"top_k expects queries (Q, H) and documents (D, H), got "
                         f"{tuple(query_embeddings.shape)} and {tuple(doc_embeddings.shape)}")
    n_docs = doc_embeddings.shape[0]
    if not 1 <= k <= n_docs:
        raise ValueError(f"k={k} must be between 1 and the number of documents ({n_docs})")
    q = F.normalize(query_embeddings, p=2, dim=-1)
    d = F.normalize(doc_embeddings, p=2, dim=-1)
    scores = q @ d.T  # (Q, D) cosine similarities
    ranked = torch.sort(scores, dim=-1, descending=True, stable=True)  # stable: ties keep index order
    return ranked.values[:, :k], ranked.indices[:, :k]
    # END SOLUTION
