"""Stand-in for stage 8 (a08_sentiment), used while stage 9 is graded.

A stage 9 may reuse the student's own stage-8 ``mean_pool``; a mistake there
(averaging over padding, say) is charged once, in stage 8: while stage 9 is
graded after a stage 8 that lost points, the contract names below replace the
student's (grader/engine/earlier.py). They follow
``shared/spec/course-api.md`` (mean over real tokens and zeros for a row with
none; the classifier's submodules ``encoder``, ``dropout``, ``classifier``;
AdamW and per-example mean losses; eval mode and no gradients in ``predict``)
and are written from the contract with torch's own pieces (``torch.einsum``,
``nn.Dropout``, ``nn.Linear``, ``F.cross_entropy``, ``torch.optim.AdamW``),
never from the reference solution.
"""
import torch
import torch.nn.functional as F
from torch import nn

CONTRACT_NAMES = ["mean_pool", "SentimentClassifier", "train_classifier", "predict"]
POOLINGS = ("cls", "mean")


def mean_pool(hidden, attention_mask):
    if hidden.ndim != 3 or tuple(attention_mask.shape) != tuple(hidden.shape[:2]):
        raise ValueError(f"mean_pool: hidden (B, n, H) and attention_mask (B, n), got "
                         f"{tuple(hidden.shape)} and {tuple(attention_mask.shape)}")
    real = attention_mask.to(hidden.dtype)                       # (B, n)
    total = torch.einsum("bnh,bn->bh", hidden, real)             # (B, H)
    count = real.sum(dim=1, keepdim=True)                        # (B, 1)
    return torch.where(count > 0, total / count.clamp(min=1.0), torch.zeros_like(total))


class SentimentClassifier(nn.Module):
    def __init__(self, encoder, num_classes=2, pooling="cls", dropout=0.1):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.pooling = pooling
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(encoder.hidden_size, num_classes)

    def forward(self, input_ids, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.encoder(input_ids, attention_mask=attention_mask)
        pooled = hidden[:, 0] if self.pooling == "cls" else mean_pool(hidden, attention_mask)
        return self.classifier(self.dropout(pooled))


def train_classifier(model, input_ids, attention_mask, labels, *, epochs=3, lr=5e-5, batch_size=32, seed=0):
    torch.manual_seed(seed)
    order = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    losses = []
    model.train()
    for _ in range(epochs):
        per_example = []
        for idx in torch.randperm(len(labels), generator=order).split(batch_size):
            loss = F.cross_entropy(model(input_ids[idx], attention_mask[idx]), labels[idx], reduction="none")
            optimizer.zero_grad()
            loss.mean().backward()
            optimizer.step()
            per_example.append(loss.detach())
        losses.append(torch.cat(per_example).mean().item())
    model.eval()
    return losses


def predict(model, input_ids, attention_mask, batch_size=128):
    model.eval()
    with torch.no_grad():
        return torch.cat([model(ids, mask).argmax(dim=-1)
                          for ids, mask in zip(input_ids.split(batch_size), attention_mask.split(batch_size))])
