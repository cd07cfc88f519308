"""Alternative stage 9: pad with pad_sequence, cosine by division, ties resolved with a lexicographic key."""
import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence


def embed_sentences(model, tokenizer, sentences, batch_size=64):
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    training = model.training
    model.eval()
    out = []
    for start in range(0, len(sentences), batch_size):
        seqs = [torch.tensor(tokenizer.encode(s).ids) for s in sentences[start:start + batch_size]]
        ids = pad_sequence(seqs, batch_first=True, padding_value=0)
        mask = pad_sequence([torch.ones_like(s) for s in seqs], batch_first=True, padding_value=0)
        with torch.no_grad():
            hidden = model(ids, attention_mask=mask)
        mean = torch.stack([hidden[i, :len(s)].mean(0) for i, s in enumerate(seqs)])
        out.append(F.normalize(mean, dim=1))
    model.train(training)
    return torch.cat(out, dim=0)


def top_k(query_embeddings, doc_embeddings, k):
    n = doc_embeddings.size(0)
    if not 0 < k <= n:
        raise ValueError(f"k must be in 1..{n}, got {k}")
    dots = query_embeddings @ doc_embeddings.T
    cos = dots / (query_embeddings.norm(dim=1)[:, None] * doc_embeddings.norm(dim=1)[None, :])
    scores, indices = [], []
    for row in cos.tolist():
        order = sorted(range(n), key=lambda j: (-row[j], j))[:k]
        indices.append(order)
        scores.append([row[j] for j in order])
    return torch.tensor(scores), torch.tensor(indices)
