"""Stage 8 - sentiment classification on top of a pretrained BERT encoder (slides 65-71).

BERT outputs one contextual vector per token (slide 65), not one per sentence.
To classify a whole tweet as positive or negative (slide 71) we

    ids (B, n) -> encoder (stage-7 BertModel)   -> hidden (B, n, H)       (slide 65)
               -> pooling: [CLS] vector or mean  -> pooled (B, H)          (slide 67)
               -> dropout -> nn.Linear(H, C)     -> logits (B, C)          (slide 71)

and fine-tune everything (the pretrained encoder and the new head) with
cross-entropy on human-labelled examples.

Shapes used below:
    B  batch size          n  tokens per row (padded)      H  hidden size (384 for MiniLM)
    C  number of classes   N  number of examples

`attention_mask` is (B, n), 1/True at real tokens and 0/False at padding, the
Hugging Face convention of stage 7. Token ids are int64, floats float32.
"""

import torch
import torch.nn.functional as F
from torch import nn

POOLINGS = ("cls", "mean")


def _check_batch(input_ids, attention_mask, labels=None):
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(f"input_ids must be a (N, n) tensor of token ids, got {shape}")
    if attention_mask is not None and tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(f"attention_mask {tuple(attention_mask.shape)} must have the shape of "
                         f"input_ids {tuple(input_ids.shape)}")
    if labels is not None and tuple(labels.shape) != (input_ids.shape[0],):
        raise ValueError(f"labels must be ({input_ids.shape[0]},), one class id per row of input_ids, "
                         f"got {tuple(labels.shape)}")


def mean_pool(hidden, attention_mask):
    """Average of the token vectors of each row, over real tokens only (slide 67).

    hidden:         (B, n, H) float, the encoder's output
    attention_mask: (B, n), 1/True at real tokens, 0/False at padding (bool, int or float)
    returns         (B, H): sum of the real tokens' vectors / number of real tokens.
                    A row with no real token gives a zero vector (not NaN).

    Padding vectors are not zero (the encoder computes something at every
    position), so they must be left out of both the sum and the count.
    """
    # BEGIN SOLUTION: ValueError unless hidden is (B, n, H) and the mask (B, n); weight each token by its mask value (B, n, 1), sum over n, divide by the number of real tokens (at least 1)
    if hidden.dim() != 3 or tuple(attention_mask.shape) != tuple(hidden.shape[:2]):
        raise ValueError(f"mean_pool expects hidden (B, n, H) and attention_mask (B, n), got "
                         f"{tuple(hidden.shape)} and {tuple(attention_mask.shape)}")
    weights = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, n, 1): 1 at real tokens, 0 at padding
    summed = (hidden * weights).sum(dim=1)  # (B, H)
    counts = weights.sum(dim=1).clamp(min=1.0)  # (B, 1); an all-padding row divides 0 by 1
    return summed / counts
    # END SOLUTION


class SentimentClassifier(nn.Module):
    """A pretrained encoder with a classification head on top (slides 67, 71).

    encoder:     a stage-7 `BertModel` (anything with `hidden_size` and
                 `forward(input_ids, attention_mask=...) -> (B, n, H)`)
    num_classes: C, 2 for negative (0) / positive (1)
    pooling:     "cls"  the vector of the first token, [CLS] (BERT's choice)
                 "mean" `mean_pool` over the real tokens (sentence-transformers' choice)
    dropout:     probability of the nn.Dropout applied to the pooled vector

    Submodules: `encoder`, `dropout` (nn.Dropout), `classifier` (nn.Linear(H, C)).

    forward(input_ids (B, n), attention_mask (B, n) or None) -> logits (B, C)
    `attention_mask=None` means every token is real.
    """

    def __init__(self, encoder, num_classes=2, pooling="cls", dropout=0.1):
        super().__init__()
        # BEGIN SOLUTION: ValueError for a pooling not in POOLINGS; keep the pooling, the encoder, an nn.Dropout(dropout) and an nn.Linear(encoder.hidden_size, num_classes)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.pooling = pooling
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(encoder.hidden_size, num_classes)
        # END SOLUTION

    def forward(self, input_ids, attention_mask=None):
        # BEGIN SOLUTION: encode, pool ([CLS] = position 0, or mean_pool over real tokens), dropout, classifier
        _check_batch(input_ids, attention_mask)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.encoder(input_ids, attention_mask=attention_mask)  # (B, n, H)
        if self.pooling == "cls":
            pooled = hidden[:, 0]  # (B, H): [CLS] is always the first token
        else:
            pooled = mean_pool(hidden, attention_mask)  # (B, H)
        return self.classifier(self.dropout(pooled))  # (B, C)
        # END SOLUTION


def train_classifier(model, input_ids, attention_mask, labels, *, epochs=3, lr=5e-5, batch_size=32, seed=0):
    """Fine-tune `model` with AdamW and cross-entropy (slide 71).

    input_ids, attention_mask: (N, n); labels: (N,) int64 class ids.
    Each epoch visits every example once, in a new random order drawn from a
    generator seeded with `seed`, in mini-batches of `batch_size` (the last one
    may be smaller). `torch.manual_seed(seed)` also fixes the dropout masks, so
    two calls with the same seed on the same starting weights give the same result.
    The optimiser is `torch.optim.AdamW` over the parameters that require a
    gradient (freeze a part by setting `requires_grad_(False)` before the call).

    returns a list of `epochs` floats: per epoch, the mean of the per-example
    training losses (each batch's mean loss weighted by its size), and leaves
    the model in eval mode.
    """
    # BEGIN SOLUTION: seed, AdamW, train mode; per epoch: shuffle, mini-batches, cross-entropy, step; sum loss * batch size; eval mode at the end
    _check_batch(input_ids, attention_mask, labels)
    torch.manual_seed(seed)
    order_gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    n_examples = len(labels)
    history = []
    model.train()
    for _ in range(epochs):
        order = torch.randperm(n_examples, generator=order_gen)
        total = 0.0
        for start in range(0, n_examples, batch_size):
            idx = order[start:start + batch_size]
            logits = model(input_ids[idx], attention_mask[idx])
            loss = F.cross_entropy(logits, labels[idx])  # mean over this batch
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)  # back to a sum over examples
        history.append(total / n_examples)
    model.eval()
    return history
    # END SOLUTION


def predict(model, input_ids, attention_mask, batch_size=128):
    """Class predictions, batch by batch, in eval mode and without gradients.

    input_ids, attention_mask: (N, n)
    returns LongTensor (N,): the argmax of the logits of each row.
    The model is left in eval mode (dropout off).
    """
    # BEGIN SOLUTION: model.eval(); under torch.no_grad(), the argmax of the logits of each batch of batch_size rows, concatenated
    _check_batch(input_ids, attention_mask)
    model.eval()
    predictions = [torch.zeros(0, dtype=torch.long)]  # an empty start, so that N = 0 works too
    with torch.no_grad():
        for start in range(0, len(input_ids), batch_size):
            mask = None if attention_mask is None else attention_mask[start:start + batch_size]
            logits = model(input_ids[start:start + batch_size], mask)  # (b, C)
            predictions.append(logits.argmax(dim=-1))
    return torch.cat(predictions)
    # END SOLUTION
