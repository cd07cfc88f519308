"""Worker-side probes for stage 5 (a05_encoder).

Each probe builds one of the student's modules, loads weights the trusted
process sent (a state_dict of tensors), runs it and returns only data:
tensors, numbers, strings, and lists/dicts of those. No expected value lives
here; every comparison happens in the trusted process.

Common arguments
    kind        "MultiHeadAttention" | "PositionwiseFeedForward" | "EncoderLayer" | "Encoder"
    init        keyword arguments of the constructor
    state_dict  {name: tensor} loaded with strict=False; the buffer `pe` is never sent
    calls       [{"args": [...], "kwargs": {...}}, ...] forward calls on the same instance
"""
import torch

from ._common import build, data, outcomes

KINDS = ("MultiHeadAttention", "PositionwiseFeedForward", "EncoderLayer", "Encoder")


def _weights_of(model):
    """attn_weights after a forward: MultiHeadAttention itself, an EncoderLayer's self_attn,
    or every layer of an Encoder (list)."""
    def one(attn):
        w = getattr(attn, "attn_weights", None)
        if isinstance(w, torch.Tensor):
            return {"value": w, "requires_grad": bool(w.requires_grad)}
        return {"not_a_tensor": type(w).__name__}

    if hasattr(model, "w_q"):
        return one(model)
    if hasattr(model, "self_attn"):
        return one(model.self_attn)
    layers = getattr(model, "layers", None)
    if layers is not None:
        return [one(getattr(layer, "self_attn", None)) for layer in layers]
    return None


def run(mod, kind, init, state_dict=None, calls=(), train=False, seed=0, weights=True, grad=False):
    """Build, load, then run each call on the same instance (under no_grad unless grad=True).

    returns {"missing", "unexpected", "load_error", "results": [{"out", "attn_weights"}...]}
    """
    model, report = build(mod, KINDS, kind, init, state_dict, seed)
    report["results"] = []
    if report["load_error"] or report["missing"] or report["unexpected"]:
        return report
    model.train(bool(train))
    torch.manual_seed(seed)
    for call in calls:
        with torch.set_grad_enabled(bool(grad)):
            out = model(*call.get("args", []), **call.get("kwargs", {}))
        result = {"out": data(out)}
        if weights:
            result["attn_weights"] = _weights_of(model)
        report["results"].append(result)
    return report


def errors(mod, kind, init, state_dict=None, calls=(), seed=0):
    """Run each call; record what it raised (type name, its MRO names, message) or "" (_common.outcomes)."""
    return outcomes(mod, KINDS, kind, init, state_dict, calls, seed)


def gradients(mod, kind, init, state_dict, args, kwargs=None, grad_out=None, train=False, seed=0):
    """Backward of sum(out * grad_out); returns the grad of every parameter (None if it got none)
    and of every floating input."""
    model, report = build(mod, KINDS, kind, init, state_dict, seed)
    if report["load_error"] or report["missing"] or report["unexpected"]:
        return report
    model.train(bool(train))
    args = [a.clone().requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args]
    out = model(*args, **(kwargs or {}))
    if not isinstance(out, torch.Tensor):
        report["out"] = data(out)
        return report
    if not out.requires_grad:
        report["out_requires_grad"] = False
        report["params"], report["inputs"] = {n: None for n, _ in model.named_parameters()}, []
        return report
    (out * (grad_out if grad_out is not None else torch.ones_like(out))).sum().backward()
    report["out"] = out.detach()
    report["params"] = {name: (p.grad if p.grad is not None else None) for name, p in model.named_parameters()}
    report["inputs"] = [a.grad if isinstance(a, torch.Tensor) and a.requires_grad else None for a in args]
    return report


def structure(mod, kind, init):
    """Names, shapes and dtypes of the parameters and buffers, submodule types, a few attributes."""
    model, _ = build(mod, KINDS, kind, init)
    state = {name: {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
             for name, t in model.state_dict().items()}
    params = [name for name, _ in model.named_parameters()]
    buffers = {name: {"shape": list(b.shape), "dtype": str(b.dtype).replace("torch.", "")}
               for name, b in model.named_buffers()}
    modules = {name: type(m).__name__ for name, m in model.named_modules() if name}
    attrs = {}
    for attr in ("pad_id",):
        value = getattr(model, attr, None)
        if isinstance(value, (int, float, str)) or value is None:
            attrs[attr] = value
    emb = getattr(model, "embedding", None)
    if emb is not None:
        attrs["embedding_padding_idx"] = getattr(emb, "padding_idx", None)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        lin = getattr(model, name, None)
        if lin is not None:
            attrs[f"{name}_has_bias"] = getattr(lin, "bias", None) is not None
    out = {"state": state, "params": params, "buffers": buffers, "modules": modules, "attrs": attrs}
    pe = getattr(model, "pe", None)
    if isinstance(pe, torch.Tensor):
        out["pe"] = pe.detach().clone()
        out["pe_dtype"] = str(pe.dtype).replace("torch.", "")
    return out


def padding_invariance(mod, kind, init, state_dict, x, mask, real, seed=0):
    """EncoderLayer/MultiHeadAttention: outputs for x and for x with every padded position
    (real == False, (B, n)) replaced by noise; mask hides the padded keys."""
    model, report = build(mod, KINDS, kind, init, state_dict, seed)
    if report["load_error"] or report["missing"] or report["unexpected"]:
        return report
    model.eval()
    gen = torch.Generator().manual_seed(seed + 1)
    noise = 5 * torch.randn(x.shape, generator=gen)
    x2 = torch.where(real[..., None], x, noise)
    with torch.no_grad():
        if kind == "MultiHeadAttention":
            a, b = model(x, x, x, mask), model(x2, x2, x2, mask)
        else:
            a, b = model(x, mask), model(x2, mask)
    report["outs"] = [data(a), data(b)]
    return report


def forward_each(mod, kind, init, state_dict, inputs, seed=0):
    """The student's module built with the given weights, then an eval-mode, no_grad forward on each of
    ``inputs`` (``[[args...], ...]``, fresh ones each: a module may remember answers); returns their outputs.
    The trusted side reads the worker's CPU clock over the whole request (so nothing here can make the
    forwards look cheaper) and divides by their number. On one thread, as the reference is timed: idle
    threads of a pool spin, and CPU time would count their spinning."""
    model, report = build(mod, KINDS, kind, init, state_dict, seed)
    if report["load_error"] or report["missing"] or report["unexpected"]:
        return report
    model.eval()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            report["outs"] = [data(model(*args)) for args in inputs]
    finally:
        torch.set_num_threads(threads)
    return report
