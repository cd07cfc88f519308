"""Never returns."""


def softmax(x, axis=-1):
    while True:
        pass


def log_softmax(x, axis=-1):
    while True:
        pass
