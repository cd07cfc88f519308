"""Alternative stage 9, as sentence-transformers batches: the texts sorted longest first (so each batch holds
texts of about one length and little padding), each batch padded to its own longest, the order restored at the
end; top_k by a stable argsort of the negated scores."""
import torch
import torch.nn.functional as F


def embed_sentences(model, tokenizer, sentences, batch_size=64):
    tokenizer.enable_truncation(max_length=256)
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")
    order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
    was_training = model.training
    model.eval()
    pieces = []
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = [sentences[i] for i in order[start:start + batch_size]]
            encodings = tokenizer.encode_batch(batch)
            ids = torch.tensor([e.ids for e in encodings])
            mask = torch.tensor([e.attention_mask for e in encodings]).float()
            hidden = model(ids, attention_mask=mask.long())
            pooled = torch.einsum("bnh,bn->bh", hidden, mask) / mask.sum(1, keepdim=True).clamp(min=1e-9)
            pieces.append(F.normalize(pooled, dim=1))
    model.train(was_training)
    if not pieces:
        return torch.zeros(0, model.hidden_size)
    sorted_out = torch.cat(pieces)
    out = torch.empty_like(sorted_out)
    out[torch.tensor(order)] = sorted_out  # back to the caller's order
    return out


def top_k(query_embeddings, doc_embeddings, k):
    if query_embeddings.dim() != 2 or doc_embeddings.dim() != 2 or \
            query_embeddings.shape[-1] != doc_embeddings.shape[-1]:
        raise ValueError(f"need (Q, H) and (D, H), got {tuple(query_embeddings.shape)}, {tuple(doc_embeddings.shape)}")
    if k < 1 or k > doc_embeddings.shape[0]:
        raise ValueError(f"k={k} is not in [1, {doc_embeddings.shape[0]}]")
    scores = F.normalize(query_embeddings, dim=1) @ F.normalize(doc_embeddings, dim=1).T
    idx = torch.argsort(-scores, dim=1, stable=True)[:, :k]
    return torch.gather(scores, 1, idx), idx
