"""Worker-side probes for stage 9 (a09_retrieval, bonus).

The encoder is ``a07_bert_mlm.BertModel`` (the student's own when stage 7 scored
full marks, else the stand-in) loaded with the pretrained all-MiniLM-L6-v2 files by
``load_pretrained_bert``; the tokenizer is ``tokenizers.Tokenizer.from_file``
of the checkpoint's tokenizer.json (a fresh one for every call, so one call's
settings cannot leak into the next). Probes return only data; no expected
value lives here.

Common arguments
    encoder         {"init": BertModel kwargs, "path": checkpoint folder}
    tokenizer_path  path of tokenizer.json
"""
import functools

import torch

from ._common import data

_MODELS = {}
RETRIEVAL_BATCH = 8


def _model(encoder):
    """The pretrained encoder, built once per worker (the probes never train it), in eval mode."""
    key = (encoder["path"], tuple(sorted(encoder["init"].items())))
    if key not in _MODELS:
        import a07_bert_mlm  # the student's correct stage 7, or its stand-in

        _MODELS[key] = a07_bert_mlm.load_pretrained_bert(a07_bert_mlm.BertModel(**encoder["init"]),
                                                         encoder["path"])
    model = _MODELS[key]
    model.eval()
    return model


def _tokenizer(path):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(path)


@functools.cache
def _pad_id(path):
    """The [PAD] id of the checkpoint's tokenizer.json, read once per worker (reading the file takes ~40 ms)."""
    return _tokenizer(path).token_to_id("[PAD]")


def embed(mod, encoder, tokenizer_path, sentences, batch_size=None):
    """embed_sentences(model, tokenizer, sentences[, batch_size]).

    returns {"embeddings": what it returned,
             "calls": [{"shape": [b, n], "lengths": the real (non-[PAD]) tokens of each row} of input_ids at
                       every model call]}
    """
    model = _model(encoder)
    pad_id = _pad_id(tokenizer_path)
    calls = []

    def record(module, args, kwargs):
        ids = args[0] if args else kwargs.get("input_ids")
        if isinstance(ids, torch.Tensor) and ids.dim() == 2:
            calls.append({"shape": list(ids.shape), "lengths": (ids != pad_id).sum(dim=1).tolist()})
        else:
            calls.append(None)

    handle = model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        kwargs = {} if batch_size is None else {"batch_size": batch_size}
        out = mod.embed_sentences(model, _tokenizer(tokenizer_path), sentences, **kwargs)  # the list as sent:
        # the worker checks it comes back unchanged
    finally:
        handle.remove()
    return {"embeddings": data(out), "calls": calls}


def retrieve(mod, encoder, tokenizer_path, documents, queries, k):
    """Embed documents and queries with embed_sentences, rank with top_k.

    returns {"scores": (Q, k), "indices": (Q, k)} or {"bad_return": ...}
    """
    model = _model(encoder)
    # 8 texts a batch, not the default 64: a correct embedding does not depend on the batching (the tests of
    # embed_sentences check both), and 25 lecture notes at 64 a batch cost this worker ~100 MB more at its peak
    docs = mod.embed_sentences(model, _tokenizer(tokenizer_path), documents, batch_size=RETRIEVAL_BATCH)
    qs = mod.embed_sentences(model, _tokenizer(tokenizer_path), queries, batch_size=RETRIEVAL_BATCH)
    out = mod.top_k(qs, docs, k)
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        return {"bad_return": type(out).__name__}
    return {"scores": data(out[0]), "indices": data(out[1])}
