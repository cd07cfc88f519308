"""Not an attack: reports what the worker can see, through the error message of softmax."""
import json
import os
import resource
import socket

REPO = os.environ.get("GRADER_PROBE_REPO", "/work/main")


def _can_read(path):
    try:
        if os.path.isdir(path):
            return bool(os.listdir(path))
        with open(path, "rb") as f:
            return bool(f.read(1))
    except OSError:
        return False


def _network():
    try:
        socket.create_connection(("127.0.0.1", 22), timeout=1).close()
        return "connected"
    except OSError as exc:
        return type(exc).__name__


def softmax(x, axis=-1):
    info = {
        "uid": os.getuid(),
        "cwd_files": sorted(os.listdir(".")),
        "env": sorted(os.environ),
        "limits": {name: resource.getrlimit(getattr(resource, name))[0]
                   for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_FSIZE")},
        "network": _network(),
    }
    raise ValueError("PROBE" + json.dumps(info) + "PROBE")


def log_softmax(x, axis=-1):
    raise ValueError("PROBE" + json.dumps({p: _can_read(p) for p in _secret_paths()}) + "PROBE")


def _secret_paths():
    return [os.path.join(REPO, "solutions"), os.path.join(REPO, "solutions", "a02_softmax.py"),
            os.path.join(REPO, "tests", "hidden"), os.path.join(REPO, "tests", "hidden", "test_a02_softmax.py"),
            os.path.join(REPO, ".git", "HEAD")]
