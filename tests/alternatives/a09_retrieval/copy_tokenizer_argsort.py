"""Alternative stage 9: a private copy of the tokenizer, manual padding, argsort for top_k."""
import torch
from tokenizers import Tokenizer


def embed_sentences(model, tokenizer, sentences, batch_size=64):
    tok = Tokenizer.from_str(tokenizer.to_str())  # leave the caller's tokenizer as it is
    tok.no_padding()
    tok.enable_truncation(256)
    model.eval()
    rows = []
    with torch.no_grad():
        for i in range(0, len(sentences), batch_size):
            encs = tok.encode_batch(sentences[i:i + batch_size])
            longest = max(len(e.ids) for e in encs)
            ids = torch.zeros(len(encs), longest, dtype=torch.long)
            mask = torch.zeros(len(encs), longest, dtype=torch.long)
            for r, e in enumerate(encs):
                ids[r, :len(e.ids)] = torch.tensor(e.ids)
                mask[r, :len(e.ids)] = 1
            h = model(ids, mask)
            m = mask.unsqueeze(-1).float()
            v = (h * m).sum(1) / m.sum(1)
            rows.append(v / v.norm(dim=1, keepdim=True).clamp_min(1e-12))
    return torch.cat(rows)


def top_k(query_embeddings, doc_embeddings, k):
    D = doc_embeddings.shape[0]
    if k > D:
        raise ValueError(f"k={k} > {D} documents")
    q = query_embeddings / query_embeddings.norm(dim=-1, keepdim=True)
    d = doc_embeddings / doc_embeddings.norm(dim=-1, keepdim=True)
    sims = q @ d.T
    idx = torch.argsort(-sims, dim=1, stable=True)[:, :k]
    return torch.gather(sims, 1, idx), idx
