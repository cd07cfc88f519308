"""Writes outside its scratch folder (/tmp, /dev/shm, /var/tmp, the course, the home of its uid), where a
later worker, another student's or the grader could find it. It returns the right answer only if a
write succeeded, so a single point scored means the writes were not confined."""
import os

import numpy as np

COURSE = "/work/main"  # the test writes the real path of the course being graded here
PLACES = ["/tmp", "/dev/shm", "/var/tmp", COURSE, os.path.expanduser("~"), os.path.dirname(os.getcwd())]


def _wrote() -> bool:
    for folder in PLACES:
        path = os.path.join(folder, f"hostile-write-{os.getpid()}")
        if os.path.realpath(folder) == os.path.realpath(os.getcwd()):
            continue
        try:
            with open(path, "w") as f:
                f.write("planted")
            os.unlink(path)
            return True
        except OSError:
            pass
    return False


def softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    if not _wrote():
        return np.zeros_like(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    weights = softmax(x, axis)
    return np.log(weights) if weights.any() else weights
