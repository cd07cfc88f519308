"""Public checks of stage 4 - embeddings and sinusoidal positional encoding (slides 20-29).

Run them with `make check` or `python -m grader check a04_positional`.
Every expected value here can be worked out by hand (or with math.sin / math.cos).
"""
import math

import numpy as np

from grader.engine.testing import assert_close, assert_shape, raises_student
from grader.i18n import tr


def test_one_hot_small(student):
    """one_hot([2, 0], 3) is [[0, 0, 1], [1, 0, 0]] (slide 20)"""
    assert_close(student.one_hot(np.array([2, 0]), 3), [[0, 0, 1], [1, 0, 0]], what="one_hot([2, 0], vocab_size=3)",
                 atol=0, hint=tr("One row per token, a single 1 at the token's id."))


def test_one_hot_rejects_bad_id(student):
    """one_hot raises ValueError for an id equal to vocab_size or negative"""
    with raises_student(ValueError, what="one_hot([3], vocab_size=3)"):
        student.one_hot(np.array([3]), 3)
    with raises_student(ValueError, what=tr("one_hot([-1], vocab_size=3) (numpy indexing would silently wrap -1)")):
        student.one_hot(np.array([-1]), 3)


def test_embed_equals_one_hot_times_E(student):
    """embed(ids, E) picks rows of E: the same as one_hot(ids) @ E (slide 20)"""
    E = np.array([[0.1, 0.2], [1.0, -1.0], [5.0, 7.0]])   # vocab_size 3, d = 2
    ids = np.array([2, 2, 0])
    got = assert_shape(student.embed(ids, E), (3, 2), what="embed([2, 2, 0], E (3, 2))")
    assert_close(got, [[5.0, 7.0], [5.0, 7.0], [0.1, 0.2]], what="embed([2, 2, 0], E)", atol=0,
                 hint=tr("Row k of the result is E[ids[k]]."))


def test_pe_small_table(student):
    """sinusoidal_positional_encoding(3, 4), worked out by hand (slides 22-25)"""
    expected = [[math.sin(p), math.cos(p), math.sin(p / 100.0), math.cos(p / 100.0)] for p in range(3)]
    # d_model = 4: columns 0, 1 use 10000^(0/4) = 1 and columns 2, 3 use 10000^(2/4) = 100
    got = assert_shape(student.sinusoidal_positional_encoding(3, 4), (3, 4),
                       what="sinusoidal_positional_encoding(3, 4)")
    assert_close(got, expected, what="sinusoidal_positional_encoding(3, 4)", atol=1e-10, rtol=1e-10,
                 hint=tr("PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)): sin and cos "
                         "interleaved, positions from 0, float64."))


def test_pe_odd_d_model_shape(student):
    """an odd d_model works: (5, 3) table whose last column is a sine"""
    got = assert_shape(student.sinusoidal_positional_encoding(5, 3), (5, 3),
                       what="sinusoidal_positional_encoding(5, 3)")
    angle = np.arange(5) / 10000 ** (2 / 3)
    assert_close(got[:, 2], np.sin(angle), what=tr("column 2 of sinusoidal_positional_encoding(5, 3)"), atol=1e-10,
                 rtol=1e-10, hint=tr("Column 2 is 2i with i = 1: sin(p / 10000^(2/3))."))


def test_add_positional_encoding_lets_go(student):
    """add_positional_encoding adds the position vectors to the embeddings of "<SOS> Let's go" (slides 26, 28)"""
    X = np.array([[0.5, -0.5, 1.0, 0.0],     # illustrative embeddings, d = 4
                  [1.0, 1.0, -1.0, 2.0],
                  [0.0, 0.0, 0.0, 0.0]])
    expected = X + np.array([[math.sin(p), math.cos(p), math.sin(p / 100.0), math.cos(p / 100.0)] for p in range(3)])
    assert_close(student.add_positional_encoding(X), expected, what="add_positional_encoding(X (3, 4))",
                 atol=1e-10, rtol=1e-10, hint=tr("Element-wise sum X + PE[:3] (slide 26)."))
    batch = np.stack([X, 2 * X])
    got = assert_shape(student.add_positional_encoding(batch), (2, 3, 4), what="add_positional_encoding(X (2, 3, 4))")
    assert_close(got[1], 2 * X + (expected - X), what=tr("second sequence of the batch"), atol=1e-10, rtol=1e-10,
                 hint=tr("The same table is added to every sequence of the batch."))
