"""Worker-side probes for stage 7 (a07_bert_mlm).

Each probe builds one of the student's modules, loads weights the trusted
process sent (a state_dict of tensors), runs it and returns only data:
tensors, numbers, strings, and lists/dicts of those. No expected value lives
here; every comparison happens in the trusted process.

Common arguments
    kind        "BertEmbeddings" | "BertModel" | "BertForMaskedLM"
    init        keyword arguments of the constructor
    state_dict  {name: tensor} loaded with strict=False
    calls       [{"args": [...], "kwargs": {...}}, ...] forward calls on the same instance
"""
import torch
from torch import nn

from ._common import build, data, failed, state, trainable

KINDS = ("BertEmbeddings", "BertModel", "BertForMaskedLM")


def structure(mod, kind, init):
    """Parameter names and shapes, submodule types, LayerNorm eps, padding_idx, tying, attributes."""
    model, _ = build(mod, KINDS, kind, init)
    params = {name: list(p.shape) for name, p in model.named_parameters()}
    modules = {name: type(m).__name__ for name, m in model.named_modules() if name}
    eps = {name: float(m.eps) for name, m in model.named_modules() if isinstance(m, nn.LayerNorm)}
    attrs = {}
    for attr in ("hidden_size", "pad_id"):
        value = getattr(model, attr, None)
        if isinstance(value, (int, float, str)) or value is None:
            attrs[attr] = value
    bert = getattr(model, "bert", model)
    emb = getattr(bert, "embeddings", bert)
    words = getattr(emb, "word_embeddings", None)
    if isinstance(words, nn.Embedding):
        attrs["padding_idx"] = words.padding_idx
    layers = getattr(bert, "layers", None)
    if isinstance(layers, nn.ModuleList):
        attrs["layers_type"] = "ModuleList"
        attrs["n_layers"] = len(layers)
    head = getattr(model, "mlm_head", None)
    if head is not None and isinstance(words, nn.Embedding):
        decoder = getattr(head, "decoder", None)
        attrs["tied"] = getattr(decoder, "weight", None) is words.weight
        attrs["decoder_has_bias"] = getattr(decoder, "bias", None) is not None
        bias = getattr(head, "bias", None)
        attrs["head_bias_shape"] = list(bias.shape) if isinstance(bias, torch.Tensor) else None
    return {"params": params, "modules": modules, "eps": eps, "attrs": attrs}


def run(mod, kind, init, state_dict=None, calls=(), train=False, seed=0):
    """Build, load, then run each call under no_grad on the same instance.

    returns {"missing", "unexpected", "load_error", "results": [out, ...]}
    (BertForMaskedLM's out is [loss or None, logits]).
    """
    model, report = build(mod, KINDS, kind, init, state_dict, seed)
    report["results"] = []
    if failed(report):
        return report
    model.train(bool(train))
    torch.manual_seed(seed)
    for call in calls:
        with torch.no_grad():
            out = model(*call.get("args", []), **call.get("kwargs", {}))
        report["results"].append(data(out))
    return report


def mlm_gradients(mod, init, state_dict, input_ids, attention_mask=None, labels=None):
    """BertForMaskedLM: loss from forward(labels=...), backward; grads of every parameter by name."""
    model, report = build(mod, KINDS, "BertForMaskedLM", init, state_dict)
    if failed(report):
        return report
    model.eval()
    loss, _ = model(input_ids, attention_mask=attention_mask, labels=labels)
    if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
        report["loss"] = data(loss)
        report["grads"] = {}
        return report
    loss.backward()
    report["loss"] = loss.detach()
    report["grads"] = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    return report


def loss_and_grad(mod, logits, labels):
    """mlm_loss(logits, labels) and d loss / d logits (None if the loss is not differentiable)."""
    logits = logits.clone().requires_grad_(True)
    loss = mod.mlm_loss(logits, labels)
    if not isinstance(loss, torch.Tensor):
        return {"loss": data(loss), "grad": None}
    grad = None
    if loss.requires_grad and loss.dim() == 0:
        (grad,) = torch.autograd.grad(loss, logits, allow_unused=True)
    return {"loss": loss.detach(), "grad": grad}


def mask_draws(mod, input_ids, seeds, kwargs, global_seed=None):
    """mask_tokens once per seed, each on a fresh copy of input_ids and with its own
    torch.Generator().manual_seed(seed) (so an in-place mistake does not spoil the statistics).

    With `global_seed` given, one extra call with generator=None after torch.manual_seed(global_seed).
    returns {"inputs": (S, B, n), "labels": (S, B, n), "given_after": (S, B, n) each copy as the call left it,
             "given_poked": (S, B, n) each copy after its outputs were overwritten with -7 (an output that
             shares the copy's memory changes it), "global": [inputs, labels] or None}. The trusted side
             compares them with input_ids: nothing here judges them.
    """
    inputs, labels, after, poked = [], [], [], []
    for seed in seeds:
        given = input_ids.clone()
        out = mod.mask_tokens(given, generator=torch.Generator().manual_seed(int(seed)), **kwargs)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            return {"bad_return": type(out).__name__}
        a, b = out
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return {"bad_return": f"({type(a).__name__}, {type(b).__name__})"}
        inputs.append(a.detach().clone())
        labels.append(b.detach().clone())
        after.append(given.clone())
        with torch.no_grad():
            a.fill_(-7)
            b.fill_(-7)
        poked.append(given.clone())
    report = {"inputs": torch.stack(inputs), "labels": torch.stack(labels), "given_after": torch.stack(after),
              "given_poked": torch.stack(poked), "global": None}
    if global_seed is not None:
        torch.manual_seed(int(global_seed))
        a, b = mod.mask_tokens(input_ids.clone(), generator=None, **kwargs)
        report["global"] = [data(a), data(b)]
    return report


def pretrained(mod, init, state_dict, input_ids, attention_mask, token_type_ids):
    """BertModel with the given (pretrained) weights, eval mode: last hidden state (B, n, H)."""
    model, report = build(mod, KINDS, "BertModel", init, state_dict)
    if failed(report):
        return report
    model.eval()
    with torch.no_grad():
        report["hidden"] = data(model(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids))
    return report


def train_mlm(mod, init, state_dict, batches, lr=1e-3, seed=0):
    """Train BertForMaskedLM with AdamW on the given masked batches (one step each, in order).

    batches: [{"input_ids", "attention_mask", "labels"}, ...]. The held-out batch never comes here:
    the trusted side predicts it with the reference model and the trained state.
    returns {"losses": [float per step], "state": the trained state_dict}
    """
    model, report = build(mod, KINDS, "BertForMaskedLM", init, state_dict, seed)
    if failed(report):
        return report
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for batch in batches:
        loss, _ = model(batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    report.update(losses=losses, state=state(model), **trainable(model))
    return report
