# Starter code, generated from the reference by `make starter`. Replace every
# `raise NotImplementedError(...)` with your implementation; keep the names and signatures.
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
    raise NotImplementedError('ValueError unless hidden is (B, n, H) and the mask (B, n); weight each token by its mask value (B, n, 1), sum over n, divide by the number of real tokens (at least 1)')


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
        raise NotImplementedError('ValueError for a pooling not in POOLINGS; keep the pooling, the encoder, an nn.Dropout(dropout) and an nn.Linear(encoder.hidden_size, num_classes)')

    def forward(self, input_ids, attention_mask=None):
        raise NotImplementedError('encode, pool ([CLS] = position 0, or mean_pool over real tokens), dropout, classifier')


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
    raise NotImplementedError('seed, AdamW, train mode; per epoch: shuffle, mini-batches, cross-entropy, step; sum loss * batch size; eval mode at the end')


def predict(model, input_ids, attention_mask, batch_size=128):
    """Class predictions, batch by batch, in eval mode and without gradients.

    input_ids, attention_mask: (N, n)
    returns LongTensor (N,): the argmax of the logits of each row.
    The model is left in eval mode (dropout off).
    """
    raise NotImplementedError('model.eval(); under torch.no_grad(), the argmax of the logits of each batch of batch_size rows, concatenated')
