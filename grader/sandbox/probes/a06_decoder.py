"""Worker-side probes for stage 6 (a06_decoder).

Each probe builds the student's modules, loads weights the trusted process
sent (a state_dict of parameters only: the `pe` buffers are never sent, so the
student's own positional table is used), runs them and returns only data:
tensors, numbers, strings, and lists/dicts of those. No expected value lives
here; every comparison happens in the trusted process. While stage 6 is graded
`a05_encoder` is the student's own when stage 5 scored full marks, else a stand-in
(grader/engine/earlier.py): either way only the contract names of stage 5 are used.

Common arguments
    kind        "DecoderLayer" | "Decoder" | "Seq2SeqTransformer"
    init        keyword arguments of the constructor
    state_dict  {name: tensor}; every parameter of the contract, no buffers
    calls       [{"method": "forward" | "encode" | "decode", "args": [...], "kwargs": {...}}, ...]
"""
import torch
import torch.nn.functional as F

from ._common import build, data, failed, outcomes, state, trainable

KINDS = ("DecoderLayer", "Decoder", "Seq2SeqTransformer")


def structure(mod, kind, init):
    """Parameter names and shapes, buffers, submodule types and a few attributes."""
    model, _ = build(mod, KINDS, kind, init)
    params = {name: list(p.shape) for name, p in model.named_parameters()}
    buffers = {name: {"shape": list(b.shape), "dtype": str(b.dtype).replace("torch.", "")}
               for name, b in model.named_buffers()}
    modules = {name: type(m).__name__ for name, m in model.named_modules() if name}
    attrs = {}
    for owner_name, owner in [("", model), ("decoder.", getattr(model, "decoder", None)),
                              ("encoder.", getattr(model, "encoder", None))]:
        if owner is None:
            continue
        value = getattr(owner, "pad_id", None)
        if isinstance(value, (int, float, str)) or value is None:
            attrs[f"{owner_name}pad_id"] = value
        emb = getattr(owner, "embedding", None)
        if emb is not None:
            attrs[f"{owner_name}embedding_padding_idx"] = getattr(emb, "padding_idx", None)
    out = {"params": params, "buffers": buffers, "modules": modules, "attrs": attrs}
    pe = getattr(model, "pe", None)
    if isinstance(pe, torch.Tensor):
        out["pe"] = pe.detach().clone()
    return out


def run(mod, kind, init, state_dict=None, calls=(), train=False, seed=0):
    """Build, load, then run each call under no_grad on the same instance.

    returns {"missing", "unexpected", "load_error", "results": [tensor or {"not_a_tensor"}...]}
    """
    model, report = build(mod, KINDS, kind, init, state_dict, seed)
    report["results"] = []
    if failed(report):
        return report
    model.train(bool(train))
    for call in calls:
        method = call.get("method", "forward")
        fn = model if method == "forward" else getattr(model, method)
        with torch.no_grad():
            out = fn(*call.get("args", []), **call.get("kwargs", {}))
        report["results"].append(data(out))
    return report


def shift_right_in_place(mod, tgt, bos_id):
    """shift_right's output and its input tensor afterwards (to see an in-place change)."""
    out = mod.shift_right(tgt, bos_id)
    return {"out": data(out), "tgt_after": tgt}


def memory_sensitivity(mod, init, state_dict, x, memory, memory_mask, noise, seed=0):
    """DecoderLayer outputs for (x, memory), (x, memory + noise) and (x, memory + noise at
    masked positions only), all with memory_mask. noise: (B, n, d)."""
    model, report = build(mod, KINDS, "DecoderLayer", init, state_dict, seed)
    if failed(report):
        return report
    model.eval()
    hidden = ~memory_mask.reshape(memory.shape[0], memory.shape[1])  # (B, n) True where masked
    with torch.no_grad():
        outs = [model(x, memory, None, memory_mask),
                model(x, memory + noise, None, memory_mask),
                model(x, torch.where(hidden[..., None], memory + noise, memory), None, memory_mask)]
    report["outs"] = [data(o) for o in outs]
    return report


# ----------------------------------------------------------------------------- greedy decoding

class _NoForward(RuntimeError):
    pass


def _guard_forward(model, log):
    """model(...) and model.forward(...) raise; encode/decode calls are logged."""
    def forward(*args, **kwargs):
        log.append({"call": "forward"})
        raise _NoForward("greedy_decode called the model itself (model(...) / model.forward); "
                         "at inference use model.encode once and model.decode at every step")
    model.forward = forward
    encode, decode = model.encode, model.decode

    def logged_encode(src, *args, **kwargs):
        log.append({"call": "encode", "training": bool(model.training), "grad": torch.is_grad_enabled()})
        return encode(src, *args, **kwargs)

    def logged_decode(tgt_in, memory, *args, **kwargs):
        log.append({"call": "decode", "training": bool(model.training), "grad": torch.is_grad_enabled(),
                    "length": int(tgt_in.shape[1]) if isinstance(tgt_in, torch.Tensor) and tgt_in.dim() == 2 else -1})
        return decode(tgt_in, memory, *args, **kwargs)

    model.encode, model.decode = logged_encode, logged_decode


def _greedy_report(mod, model, log, src, bos_id, eos_id, max_len):
    out = mod.greedy_decode(model, src, bos_id, eos_id, max_len)
    return {"out": data(out), "dtype": str(out.dtype).replace("torch.", "") if isinstance(out, torch.Tensor) else "",
            "training_after": bool(model.training), "log": log}


def greedy(mod, init, state_dict, src, bos_id, eos_id, max_len, train=False, seed=0):
    """greedy_decode on the student's Seq2SeqTransformer with the given weights; the model's
    forward raises, encode/decode are logged (mode and grad state at each call)."""
    model, report = build(mod, KINDS, "Seq2SeqTransformer", init, state_dict, seed)
    if failed(report):
        return report
    model.train(bool(train))
    log = []
    _guard_forward(model, log)
    report.update(_greedy_report(mod, model, log, src, bos_id, eos_id, max_len))
    return report


class _ScriptedModel(torch.nn.Module):
    """A stand-in 'model' whose decode gives, at position p of every row b, logits whose
    argmax is script[b, p] (whatever tokens it is fed). It has one parameter so that
    gradient tracking is observable."""

    def __init__(self, script, vocab_size, pad_id):
        super().__init__()
        self.register_buffer("script", torch.as_tensor(script, dtype=torch.long))
        self.vocab_size = vocab_size
        self.pad_id = pad_id
        self.scale = torch.nn.Parameter(torch.ones(()))

    def encode(self, src):
        return self.scale * torch.ones(src.shape[0], src.shape[1], 4)

    def decode(self, tgt_in, memory, src_mask=None):
        B, L = tgt_in.shape
        steps = self.script.shape[1]
        idx = torch.arange(L).clamp(max=steps - 1)
        return self.scale * 10.0 * F.one_hot(self.script[:, idx], self.vocab_size).float()


def greedy_scripted(mod, script, vocab_size, pad_id, src, bos_id, eos_id, max_len, train=False):
    """greedy_decode on a scripted model (see _ScriptedModel); forward raises, calls logged."""
    model = _ScriptedModel(script, vocab_size, pad_id)
    model.train(bool(train))
    log = []
    _guard_forward(model, log)
    return _greedy_report(mod, model, log, src, bos_id, eos_id, max_len)


# ----------------------------------------------------------------------------- training

def train(mod, init, state_dict, src, tgt, bos_id, steps, batch_size, lr, seed=0):
    """Teacher-forcing training of the student's Seq2SeqTransformer from the given initial weights
    (Adam, cross-entropy ignoring padding, the student's shift_right). The held-out pairs never come
    here: the trusted side decodes them with the reference modules holding the trained state. The trusted
    side also runs this very function on the reference modules, to compare the two trainings step by step.
    returns {"losses": [the loss of every step], "state": the trained state_dict (with the student's pe
    buffers)} or {"bad_logits": ...}"""
    model, report = build(mod, KINDS, "Seq2SeqTransformer", init, state_dict, seed)
    if failed(report):
        return report
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    pad_id = init.get("pad_id", 0)
    losses = []
    model.train()
    for _ in range(int(steps)):
        idx = torch.randint(len(src), (int(batch_size),), generator=gen)
        tgt_in = mod.shift_right(tgt[idx], bos_id)
        logits = model(src[idx], tgt_in)
        if not isinstance(logits, torch.Tensor) or logits.shape != (*tgt[idx].shape, logits.shape[-1]):
            report["bad_logits"] = {"shape": list(getattr(logits, "shape", [])), "type": type(logits).__name__}
            return report
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt[idx].reshape(-1), ignore_index=pad_id)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    report.update(losses=losses, state=state(model), **trainable(model))
    return report


# ----------------------------------------------------------------------------- errors

def errors(mod, kind, init, state_dict=None, calls=(), seed=0):
    """Run each call; record what it raised (type name, its MRO names, message) or "" (_common.outcomes)."""
    return outcomes(mod, KINDS, kind, init, state_dict, calls, seed)
