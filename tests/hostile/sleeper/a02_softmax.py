"""Sleeps instead of computing: no CPU time used, so a limit on CPU time alone would never stop it."""
import time


def softmax(x, axis=-1):
    time.sleep(3600)


def log_softmax(x, axis=-1):
    time.sleep(3600)
