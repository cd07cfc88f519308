"""Kills its own process with status 0 in the middle of a test."""
import os


def softmax(x, axis=-1):
    os._exit(0)


def log_softmax(x, axis=-1):
    os._exit(0)
