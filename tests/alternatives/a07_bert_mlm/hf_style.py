"""Alternative correct stage 7, written the way Hugging Face's BERT code reads.

Differences from the reference: a non-persistent `position_ids` buffer, a 3-D
(B, n, n) attention mask for the stage-5 layers, Bernoulli draws for the
80/10/10 rule (as DataCollatorForLanguageModeling), a decoder whose own bias
*is* the head's `bias` (HF ties both), and a loss that branches on "no label".
The course-provided `load_pretrained_bert` is not graded and is left out.
"""
import torch
import torch.nn.functional as F
from torch import nn

from a05_encoder import EncoderLayer


class BertEmbeddings(nn.Module):
    def __init__(self, vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2,
                 dropout=0.1, layer_norm_eps=1e-12, pad_id=0):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=pad_id)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("position_ids", torch.arange(max_position_embeddings).expand(1, -1), persistent=False)

    def forward(self, input_ids, token_type_ids=None):
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (B, n), got {tuple(input_ids.shape)}")
        seq_len = input_ids.size(1)
        if seq_len > self.position_ids.size(1):
            raise ValueError(f"sequence of {seq_len} tokens is longer than {self.position_ids.size(1)} positions")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(self.position_ids[:, :seq_len])
        return self.dropout(self.norm(embeddings))


class BertModel(nn.Module):
    def __init__(self, vocab_size, hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024,
                 max_position_embeddings=512, type_vocab_size=2, dropout=0.1, layer_norm_eps=1e-12, pad_id=0):
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_heads {num_heads}")
        self.hidden_size = hidden_size
        self.pad_id = pad_id
        self.embeddings = BertEmbeddings(vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
                                         dropout, layer_norm_eps, pad_id)
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(EncoderLayer(hidden_size, num_heads, intermediate_size, dropout=dropout,
                                            activation="gelu", layer_norm_eps=layer_norm_eps))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (B, n), got {tuple(input_ids.shape)}")
        batch, seq_len = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones(batch, seq_len, dtype=torch.bool, device=input_ids.device)
        if attention_mask.shape != input_ids.shape:
            raise ValueError(f"attention_mask {tuple(attention_mask.shape)} != input_ids {tuple(input_ids.shape)}")
        extended = (attention_mask != 0).unsqueeze(1).expand(batch, seq_len, seq_len)  # (B, m, n), every query
        hidden_states = self.embeddings(input_ids, token_type_ids=token_type_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask=extended)
        return hidden_states


def mask_tokens(input_ids, *, mask_id, vocab_size, special_ids, mlm_probability=0.15, generator=None):
    labels = input_ids.clone()
    inputs = input_ids.clone()
    probability_matrix = torch.full(labels.shape, mlm_probability)
    special_tokens_mask = torch.isin(labels, torch.as_tensor(list(special_ids), dtype=labels.dtype))
    probability_matrix.masked_fill_(special_tokens_mask, value=0.0)
    masked_indices = torch.bernoulli(probability_matrix, generator=generator).bool()
    labels[~masked_indices] = -100

    indices_replaced = torch.bernoulli(torch.full(labels.shape, 0.8), generator=generator).bool() & masked_indices
    inputs[indices_replaced] = mask_id

    indices_random = (torch.bernoulli(torch.full(labels.shape, 0.5), generator=generator).bool()
                      & masked_indices & ~indices_replaced)
    random_words = torch.randint(vocab_size, labels.shape, dtype=labels.dtype, generator=generator)
    inputs[indices_random] = random_words[indices_random]
    return inputs, labels


class BertLMPredictionHead(nn.Module):
    def __init__(self, hidden_size, vocab_size, layer_norm_eps=1e-12):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.transform_act_fn = nn.GELU()
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.decoder = nn.Linear(hidden_size, vocab_size)
        self.decoder.bias = self.bias

    def forward(self, hidden_states):
        hidden_states = self.norm(self.transform_act_fn(self.dense(hidden_states)))
        return self.decoder(hidden_states)


class BertForMaskedLM(nn.Module):
    def __init__(self, vocab_size, **kwargs):
        super().__init__()
        self.bert = BertModel(vocab_size, **kwargs)
        self.mlm_head = BertLMPredictionHead(self.bert.hidden_size, vocab_size,
                                             kwargs.get("layer_norm_eps", 1e-12))
        self.mlm_head.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        sequence_output = self.bert(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        prediction_scores = self.mlm_head(sequence_output)
        masked_lm_loss = mlm_loss(prediction_scores, labels) if labels is not None else None
        return masked_lm_loss, prediction_scores


def mlm_loss(logits, labels):
    if labels.shape != logits.shape[:-1]:
        raise ValueError(f"labels {tuple(labels.shape)} do not match logits {tuple(logits.shape)}")
    if not (labels != -100).any():
        return logits.sum() * 0.0
    return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)
