"""Pieces every torch stage's probes share: build a student's module with given
weights, and turn what it returns into data that may cross the boundary."""
import torch


def build(mod, kinds, kind, init, state_dict=None, seed=0):
    """(model, load report) for ``mod.<kind>(**init)`` with ``state_dict`` loaded non-strictly.

    The report lists missing *parameters* (buffers such as ``pe`` are the
    student's own) and unexpected names, or the load error, so that the
    trusted side can explain a naming mistake instead of crashing on it.
    Constructor errors propagate: they are the student's.
    """
    if kind not in kinds:
        raise LookupError(f"probe: unknown kind {kind!r}")
    torch.manual_seed(seed)
    model = getattr(mod, kind)(**(init or {}))
    report = {"missing": [], "unexpected": [], "load_error": ""}
    if state_dict is not None:
        params = {name for name, _ in model.named_parameters()}
        try:
            result = model.load_state_dict(state_dict, strict=False)
        except RuntimeError as exc:  # a parameter of the contract's name with another shape
            report["load_error"] = str(exc)[:1500]
            return model, report
        report["missing"] = [k for k in result.missing_keys if k in params]
        report["unexpected"] = list(result.unexpected_keys)
    return model, report


def failed(report) -> bool:
    return bool(report["load_error"] or report["missing"] or report["unexpected"])


def data(value):
    """A forward's result as data: tensors (detached) stay, tuples/lists recurse,
    None stays, anything else is described by its type, never sent raw."""
    if isinstance(value, torch.Tensor):
        return value.detach()
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return [data(v) for v in value]
    return {"not_a_tensor": type(value).__name__}


def state(model):
    """The model's state_dict (parameters and buffers) as data: what a training probe returns, so
    that the trusted side runs the trained weights itself (``testing.load_trained``)."""
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def trainable(model):
    """Which of the model's tensors cannot train: {"frozen": parameters that require no gradient, "buffers": buffer
    names}. Only to name the mistake when the trusted side sees a parameter that never changed."""
    return {"frozen": [name for name, p in model.named_parameters() if not p.requires_grad],
            "buffers": [name for name, _ in model.named_buffers()]}


def outcomes(mod, kinds, kind, init, state_dict=None, calls=(), seed=0):
    """Build ``mod.<kind>(**init)``, then run each call (``{"method": "forward", "args": [...], "kwargs": {...}}``)
    in eval mode under no_grad and record, per call, what it raised (type name, the names of its MRO, message) or
    "" under "raised" when it returned: the data of a stage's ``errors`` probe."""
    model, report = build(mod, kinds, kind, init, state_dict, seed)
    if failed(report):
        return report
    model.eval()
    report["outcomes"] = []
    for call in calls:
        method = call.get("method", "forward")
        fn = model if method == "forward" else getattr(model, method)
        try:
            with torch.no_grad():
                fn(*call.get("args", []), **call.get("kwargs", {}))
        except Exception as exc:  # noqa: BLE001 - reported as data
            report["outcomes"].append({"raised": type(exc).__name__,
                                       "mro": [c.__name__ for c in type(exc).__mro__],
                                       "message": str(exc)[:500]})
        else:
            report["outcomes"].append({"raised": ""})
    return report
