"""A correct stage 8 written from the contract, using the freedoms it leaves.

Upstream variant (tests/upstream/): graded on stage 8 and on stage 9, built on it,
where it must lose nothing. What the contract does not fix, and this module does
its own way:

* a parameter-free submodule of its own, ``SentimentClassifier.pool`` (``Pooler``),
  and extra attributes (``num_classes``, ``hidden_size``);
* helpers of its own (``real_token_weights``, ``batches``) and ``mean_pool`` written
  with a batched matrix product;
* ``train_classifier`` summing per-example losses, ``predict`` over ``batches``.
"""
import torch
import torch.nn.functional as F
from torch import nn


def real_token_weights(attention_mask, dtype):
    """(B, n) -> (B, 1, n): each real token's share of its row's mean (0 at padding; 0 for an empty row)."""
    real = attention_mask.to(dtype)
    count = real.sum(dim=1, keepdim=True)
    return (real / torch.where(count > 0, count, torch.ones_like(count))).unsqueeze(1)


def mean_pool(hidden, attention_mask):
    if hidden.ndim != 3 or attention_mask.shape != hidden.shape[:2]:
        raise ValueError(f"hidden must be (B, n, H) and attention_mask (B, n); got {tuple(hidden.shape)} "
                         f"and {tuple(attention_mask.shape)}")
    return torch.bmm(real_token_weights(attention_mask, hidden.dtype), hidden).squeeze(1)


class Pooler(nn.Module):
    def __init__(self, how):
        super().__init__()
        if how not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', not {how!r}")
        self.how = how

    def forward(self, hidden, attention_mask):
        return hidden[:, 0, :] if self.how == "cls" else mean_pool(hidden, attention_mask)


class SentimentClassifier(nn.Module):
    def __init__(self, encoder, num_classes=2, pooling="cls", dropout=0.1):
        super().__init__()
        self.pool = Pooler(pooling)
        self.encoder = encoder
        self.hidden_size = encoder.hidden_size
        self.num_classes = num_classes
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(self.hidden_size, num_classes)

    def forward(self, input_ids, attention_mask=None):
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (B, n), got {tuple(input_ids.shape)}")
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape, dtype=torch.long, device=input_ids.device)
        elif attention_mask.shape != input_ids.shape:
            raise ValueError(f"attention_mask {tuple(attention_mask.shape)} != input_ids {tuple(input_ids.shape)}")
        hidden = self.encoder(input_ids, attention_mask=attention_mask)
        return self.classifier(self.dropout(self.pool(hidden, attention_mask)))


def batches(n, size, generator=None):
    order = torch.arange(n) if generator is None else torch.randperm(n, generator=generator)
    return [order[i:i + size] for i in range(0, n, size)]


def train_classifier(model, input_ids, attention_mask, labels, *, epochs=3, lr=5e-5, batch_size=32, seed=0):
    if input_ids.ndim != 2 or attention_mask.shape != input_ids.shape or labels.shape != (input_ids.shape[0],):
        raise ValueError(f"input_ids {tuple(input_ids.shape)}, attention_mask {tuple(attention_mask.shape)} and "
                         f"labels {tuple(labels.shape)} do not fit together")
    torch.manual_seed(seed)
    shuffle = torch.Generator().manual_seed(seed)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=lr)
    model.train()
    history = []
    for _ in range(epochs):
        summed = torch.zeros(())
        for idx in batches(len(labels), batch_size, shuffle):
            per_example = F.cross_entropy(model(input_ids[idx], attention_mask[idx]), labels[idx], reduction="none")
            optimizer.zero_grad()
            per_example.mean().backward()
            optimizer.step()
            summed += per_example.detach().sum()
        history.append(float(summed) / len(labels))
    model.eval()
    return history


@torch.no_grad()
def predict(model, input_ids, attention_mask, batch_size=128):
    if input_ids.ndim != 2:
        raise ValueError(f"input_ids must be (N, n), got {tuple(input_ids.shape)}")
    model.eval()
    out = torch.empty(len(input_ids), dtype=torch.long)
    for idx in batches(len(input_ids), batch_size):
        out[idx] = model(input_ids[idx], attention_mask[idx]).argmax(dim=1)
    return out
