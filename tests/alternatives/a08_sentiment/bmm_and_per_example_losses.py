"""Alternative stage 8: bmm pooling, per-example losses (reduction="none"), predict restores the mode."""
import torch
import torch.nn.functional as F
from torch import nn


def mean_pool(hidden, attention_mask):
    B, n, H = hidden.shape
    if tuple(attention_mask.shape) != (B, n):
        raise ValueError(f"attention_mask {tuple(attention_mask.shape)} does not match hidden {(B, n, H)}")
    w = attention_mask.to(hidden.dtype)
    summed = torch.bmm(w.unsqueeze(1), hidden).squeeze(1)  # (B, H)
    n_real = w.sum(-1, keepdim=True)
    return summed / torch.maximum(n_real, torch.ones_like(n_real))


class SentimentClassifier(nn.Module):
    def __init__(self, encoder, num_classes=2, pooling="cls", dropout=0.1):
        super().__init__()
        if pooling != "cls" and pooling != "mean":
            raise ValueError("pooling must be 'cls' or 'mean'")
        self.encoder, self.pooling = encoder, pooling
        self.classifier = nn.Linear(encoder.hidden_size, num_classes)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input_ids, attention_mask=None):
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        hidden = self.encoder(input_ids=input_ids, attention_mask=mask)
        pooled = mean_pool(hidden, mask) if self.pooling == "mean" else hidden[:, 0]
        pooled = self.dropout(pooled)
        return self.classifier(pooled)


def train_classifier(model, input_ids, attention_mask, labels, *, epochs=3, lr=5e-5, batch_size=32, seed=0):
    gen = torch.Generator()
    gen.manual_seed(seed)
    torch.manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    N = input_ids.shape[0]
    model.train()
    epoch_losses = []
    for _epoch in range(epochs):
        per_example = []
        perm = torch.randperm(N, generator=gen)
        for batch in perm.split(batch_size):
            losses = F.cross_entropy(model(input_ids[batch], attention_mask[batch]), labels[batch], reduction="none")
            optimizer.zero_grad(set_to_none=True)
            losses.mean().backward()
            optimizer.step()
            per_example.append(losses.detach())
        epoch_losses.append(torch.cat(per_example).mean().item())
    model.train(False)
    return epoch_losses


def predict(model, input_ids, attention_mask, batch_size=128):
    was_training = model.training
    model.eval()
    out = torch.empty(len(input_ids), dtype=torch.long)
    with torch.no_grad():
        for i in range(0, len(input_ids), batch_size):
            out[i:i + batch_size] = model(input_ids[i:i + batch_size], attention_mask[i:i + batch_size]).argmax(-1)
    model.train(was_training)
    return out
