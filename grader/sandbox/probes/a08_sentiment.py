"""Worker-side probes for stage 8 (a08_sentiment).

Each probe builds the student's SentimentClassifier around an encoder, runs
the student's code and returns only data: tensors, numbers, strings, lists and
dicts of those. No expected value lives here; every comparison happens in the
trusted process.

While stage 8 is graded, ``a07_bert_mlm`` is the student's own stage 7 when it
scored full marks, else the stage-7 stand-in with the starter's
``load_pretrained_bert`` (grader/engine/earlier.py): a correct encoder either way.

Common arguments
    encoder     {"init": BertModel kwargs, "path": checkpoint folder}  (pretrained all-MiniLM-L6-v2)
                {"init": BertModel kwargs, "state_dict": {name: tensor}}  (a small encoder)
    classifier  keyword arguments of SentimentClassifier (num_classes, pooling, dropout)
    head_state  {name: tensor} for the classification head, e.g. {"classifier.weight", "classifier.bias"}
    seed        torch.manual_seed before building the classifier
"""
import json

import torch

from ._common import state

HEAD = ("classifier.weight", "classifier.bias")  # the contract's names of the classification head
# Rows a frozen, dropout-free encoder has already encoded, per encoder spec: {spec key: {row key: (n, H)}}.
# Kept for the worker's life, so the second epoch and the flipped-label copy encode nothing again.
_ENCODED = {}


def _encoder(spec):
    import a07_bert_mlm  # the student's correct stage 7, or its stand-in

    enc = a07_bert_mlm.BertModel(**spec["init"])
    if spec.get("path"):
        a07_bert_mlm.load_pretrained_bert(enc, spec["path"])
    elif spec.get("state_dict") is not None:
        enc.load_state_dict(spec["state_dict"], strict=False)  # a correct stage 7 of the student's keeps its buffers
    return enc


def _classifier(mod, encoder, classifier=None, head_state=None, seed=0):
    """(model, report): the student's SentimentClassifier around a fresh encoder, head weights loaded."""
    torch.manual_seed(seed)
    model = mod.SentimentClassifier(_encoder(encoder), **(classifier or {}))
    report = {"unexpected": [], "load_error": ""}
    if head_state:
        own = model.state_dict()
        report["unexpected"] = sorted(k for k in head_state if k not in own)
        bad = [f"{k}: yours {tuple(own[k].shape)}, sent {tuple(v.shape)}"
               for k, v in head_state.items() if k in own and tuple(own[k].shape) != tuple(v.shape)]
        if bad:
            report["load_error"] = "; ".join(bad)
        if not report["unexpected"] and not bad:
            model.load_state_dict(head_state, strict=False)
    return model, report


def _memoize_rows(encoder, spec):
    """Let a frozen encoder without dropout encode each distinct row (ids, mask) once.

    Such an encoder is a fixed function of each row on its own (attention stays inside a row), so the row's
    output can be reused whatever batch it comes in again. Only the contract's call
    ``encoder(input_ids, attention_mask)`` (mask positional, by keyword or absent) is served from the memo;
    any other call, or a call whose result is not (B, n, H), runs the student's forward as it is.
    """
    forward = encoder.forward
    rows = _ENCODED.setdefault(json.dumps({k: v for k, v in spec.items() if k != "state_dict"}, sort_keys=True), {})

    def memoized(input_ids, *args, **kwargs):
        if len(args) + len(kwargs) > 1 or set(kwargs) - {"attention_mask"}:
            return forward(input_ids, *args, **kwargs)
        mask = args[0] if args else kwargs.get("attention_mask")
        if not (isinstance(input_ids, torch.Tensor) and input_ids.dim() == 2
                and (mask is None or isinstance(mask, torch.Tensor) and mask.shape == input_ids.shape)):
            return forward(input_ids, *args, **kwargs)

        def run(rows_at):  # the student's forward on some of the rows, called the way it was called
            part = None if mask is None else mask[rows_at]
            return forward(input_ids[rows_at], *([part] if args else []),
                           **({"attention_mask": part} if kwargs else {}))

        keys = [(tuple(ids.tolist()), None if mask is None else tuple(m.tolist()))
                for ids, m in zip(input_ids, input_ids if mask is None else mask)]
        missing = [i for i, key in enumerate(keys) if key not in rows]
        if missing:
            out = run(missing)
            if not (isinstance(out, torch.Tensor) and out.dim() == 3 and out.shape[:2] == (len(missing),
                                                                                          input_ids.shape[1])):
                return forward(input_ids, *args, **kwargs)
            rows.update(zip([keys[i] for i in missing], out.detach()))
        return torch.stack([rows[key] for key in keys])

    encoder.forward = memoized


def _failed(report):
    return bool(report["unexpected"] or report["load_error"])


def _data(value):
    if isinstance(value, torch.Tensor):
        return value.detach()
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return [_data(v) for v in value]
    if isinstance(value, (bool, int, float, str)):
        return value
    return {"not_a_tensor": type(value).__name__}


def _floats(value):
    """The list train_classifier returned, as floats (None where an entry is not a number)."""
    if not isinstance(value, (list, tuple)):
        return {"not_a_list": type(value).__name__}
    out = []
    for v in value:
        if isinstance(v, torch.Tensor) and v.numel() == 1:
            out.append(float(v.detach()))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(float(v))
        else:
            out.append(None)
    return out


class _Recorder:
    """Forward hook on the head: the model's mode, grad mode and batch size at every call."""

    def __init__(self, model):
        self.model, self.calls = model, []
        target = getattr(model, "classifier", None)
        target = target if isinstance(target, torch.nn.Module) else model
        self.handle = target.register_forward_hook(self)

    def __call__(self, module, inputs, output):
        x = inputs[0] if inputs else None
        self.calls.append({"training": bool(self.model.training), "grad": bool(torch.is_grad_enabled()),
                           "batch": int(x.shape[0]) if isinstance(x, torch.Tensor) and x.dim() else -1})

    def remove(self):
        self.handle.remove()
        return self.calls


def structure(mod, encoder, classifier):
    """Submodules and attributes of SentimentClassifier(encoder, **classifier)."""
    enc = _encoder(encoder)
    model = mod.SentimentClassifier(enc, **classifier)
    children = {name: type(m).__name__ for name, m in model.named_children()}
    head = getattr(model, "classifier", None)
    drop = getattr(model, "dropout", None)
    return {
        "children": children,
        "encoder_is_given": getattr(model, "encoder", None) is enc,
        "is_module": isinstance(model, torch.nn.Module),
        "classifier": ({"type": type(head).__name__, "in": int(head.in_features), "out": int(head.out_features),
                        "bias": head.bias is not None} if isinstance(head, torch.nn.Linear) else None),
        "dropout": ({"type": type(drop).__name__, "p": float(drop.p)} if isinstance(drop, torch.nn.Dropout)
                    else None),
        "encoder_params_in_model": sum(1 for _ in enc.parameters()) > 0 and all(
            any(p is q for q in model.parameters()) for p in enc.parameters()),
    }


def logits(mod, encoder, classifier, head_state, calls, train=False, seed=0):
    """Build, load the head, run each forward call (under no_grad) on the same instance.

    calls: [{"args": [...], "kwargs": {...}}, ...]; returns {"unexpected", "load_error", "results": [...]}.
    """
    model, report = _classifier(mod, encoder, classifier, head_state, seed)
    report["results"] = []
    if _failed(report):
        return report
    model.train(bool(train))
    torch.manual_seed(seed)
    for call in calls:
        with torch.no_grad():
            report["results"].append(_data(model(*call.get("args", []), **call.get("kwargs", {}))))
    return report


def train(mod, encoder, classifier, head_state, input_ids, attention_mask, labels, train_kwargs,
          start_mode="eval", global_seed=None, eval_inputs=None, freeze=(), with_state=False, seed=0):
    """train_classifier on a fresh model; what it returned and what it did.

    freeze: name prefixes of the parameters the caller freezes (requires_grad=False) before the call.
    returns {"losses": [float or None, ...] or {"not_a_list"}, "training_after": bool,
             "modules_training_after": [names], "forward_modes": [bool per forward], "changed": bool,
             "eval_logits": (N', C) logits of eval_inputs in eval mode after training, or None,
             "without_grad": [names of the parameters that hold no gradient afterwards]}
    and, with ``with_state``, "state": the trained model's state_dict (encoder included), which the
    trusted side compares with its own training from the same start.
    """
    model, report = _classifier(mod, encoder, classifier, head_state, seed)
    if _failed(report):
        return report
    for name, p in model.named_parameters():
        if name.startswith(tuple(freeze)):
            p.requires_grad_(False)
    model.train(start_mode == "train")
    before = [p.detach().clone() for p in model.parameters()]
    if global_seed is not None:
        torch.manual_seed(int(global_seed))  # a different global state per run: only the student's seeding counts
    recorder = _Recorder(model)
    result = mod.train_classifier(model, input_ids, attention_mask, labels, **train_kwargs)
    calls = recorder.remove()
    report.update(
        losses=_floats(result),
        training_after=bool(model.training),
        modules_training_after=sorted(name or "(the model)" for name, m in model.named_modules() if m.training),
        forward_modes=[c["training"] for c in calls],
        forward_grads=[c["grad"] for c in calls],
        changed=any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters())),
        eval_logits=None,
        without_grad=[name for name, p in model.named_parameters() if p.grad is None],
    )
    if with_state:
        report["state"] = state(model)
    if eval_inputs is not None:
        model.eval()
        with torch.no_grad():
            report["eval_logits"] = _data(model(eval_inputs["input_ids"], eval_inputs["attention_mask"]))
    return report


def predict(mod, encoder, classifier, head_state, input_ids, attention_mask, batch_size=None,
            start_mode="train", seed=0):
    """predict(...) on a model that starts in `start_mode`; predictions and how the forwards ran.

    returns {"pred": what predict returned, "calls": [{"training", "grad", "batch"}, ...]}
    """
    model, report = _classifier(mod, encoder, classifier, head_state, seed)
    if _failed(report):
        return report
    model.train(start_mode == "train")
    recorder = _Recorder(model)
    kwargs = {} if batch_size is None else {"batch_size": batch_size}
    out = mod.predict(model, input_ids, attention_mask, **kwargs)
    report["calls"] = recorder.remove()
    report["pred"] = _data(out)
    return report


def fine_tune(mod, encoder, classifier, train_data, train_kwargs, freeze_encoder=True, head_seed=0):
    """Fine-tune a fresh SentimentClassifier with the student's train_classifier; return the trained head.

    train_data: {"input_ids", "attention_mask", "labels"}. With freeze_encoder the encoder's parameters
    get requires_grad=False, so only the head learns (it keeps the run within the time limit); an encoder
    built without dropout is then a fixed function of each row, and encodes each distinct row once per worker
    (``_memoize_rows``: the second epoch and a second run on the same tweets reuse it).
    The head is read from model.state_dict() under the contract's names (``classifier.weight`` (C, H),
    ``classifier.bias`` (C,)): the trusted process predicts the hidden test tweets with it, through its
    own encoder and pooling, so no hidden tweet ever comes to the worker.
    returns {"losses": [...], "head": {name: tensor}, "missing": [contract names not in the state_dict]}
    """
    model, report = _classifier(mod, encoder, classifier, None, head_seed)
    if freeze_encoder:
        for p in model.encoder.parameters():
            p.requires_grad_(False)
        if encoder["init"].get("dropout") == 0.0:
            _memoize_rows(model.encoder, encoder)
    losses = mod.train_classifier(model, train_data["input_ids"], train_data["attention_mask"],
                                  train_data["labels"], **train_kwargs)
    state = model.state_dict()
    report["losses"] = _floats(losses)
    report["head"] = {k: _data(state[k]) for k in HEAD if k in state}
    report["missing"] = [k for k in HEAD if k not in state]
    return report
