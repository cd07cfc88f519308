"""Alternative stage 8: einsum pooling, a DataLoader, summed losses, inference_mode."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def mean_pool(hidden, attention_mask):
    if hidden.ndim != 3 or attention_mask.shape != hidden.shape[:2]:
        raise ValueError(f"bad shapes {tuple(hidden.shape)} / {tuple(attention_mask.shape)}")
    m = attention_mask.float()
    total = torch.einsum("bnh,bn->bh", hidden, m)
    count = m.sum(dim=1, keepdim=True)
    return torch.where(count > 0, total / count.clamp_min(1e-9), torch.zeros_like(total))


class SentimentClassifier(nn.Module):
    def __init__(self, encoder, num_classes=2, pooling="cls", dropout=0.1):
        super().__init__()
        pools = {"cls": lambda h, m: h[:, 0, :], "mean": mean_pool}
        if pooling not in pools:
            raise ValueError(f"unknown pooling {pooling}")
        self._pool = pools[pooling]
        self.encoder = encoder
        self.dropout = nn.Dropout(p=dropout)
        self.classifier = nn.Linear(encoder.hidden_size, num_classes)

    def forward(self, input_ids, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape, dtype=torch.long)
        h = self.encoder(input_ids, attention_mask)
        return self.classifier(self.dropout(self._pool(h, attention_mask)))


def train_classifier(model, input_ids, attention_mask, labels, *, epochs=3, lr=5e-5, batch_size=32, seed=0):
    torch.manual_seed(seed)
    loader = DataLoader(TensorDataset(input_ids, attention_mask, labels), batch_size=batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(seed + 1))
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    sum_loss = nn.CrossEntropyLoss(reduction="sum")
    out = []
    for _ in range(epochs):
        model.train()
        seen, running = 0, 0.0
        for ids, mask, y in loader:
            loss = sum_loss(model(ids, mask), y)
            opt.zero_grad()
            (loss / len(y)).backward()
            opt.step()
            running += float(loss)
            seen += len(y)
        out.append(running / seen)
    model.eval()
    return out


@torch.inference_mode()
def predict(model, input_ids, attention_mask, batch_size=128):
    model.eval()
    parts = [model(i, m).argmax(1) for i, m in zip(input_ids.split(batch_size), attention_mask.split(batch_size))]
    return torch.cat(parts).long()
