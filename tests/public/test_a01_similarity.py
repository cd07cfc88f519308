"""Public checks of stage 1 - similarity (slides 11-13, 38, 68).

Run them with `make check` or `python -m grader check a01_similarity`.
Every expected value here can be worked out by hand; the hidden suite checks
much more (random and batched inputs, error handling, speed).
"""
import numpy as np

from grader.engine.testing import assert_close, assert_shape, raises_student
from grader.i18n import tr


def test_dot_product_small_vectors(student):
    """dot_product of small vectors: multiply matching components and add (slide 13)"""
    assert_close(student.dot_product(np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])), 32.0,
                 what="dot_product([1, 2, 3], [4, 5, 6])", atol=1e-12, hint="1*4 + 2*5 + 3*6 = 32.")
    assert_close(student.dot_product(np.array([1.0, 0.0]), np.array([0.0, 1.0])), 0.0,
                 what="dot_product([1, 0], [0, 1])", atol=1e-12, hint=tr("Perpendicular vectors have dot product "
                                                                         "0."))


def test_similarity_scores_lets_go(student):
    """similarity_scores: the decoder state against the encoder states of "Let's go" (slides 10-12)"""
    # illustrative 2-D encoder states for the words "Let's" and "go", and the decoder state
    # after the start token, as in the "Let's go" -> "vamos" example (numbers made up for hand-checking)
    encoder_states = np.array([[0.9, -0.4],    # "Let's"
                               [0.2, 0.8]])    # "go"
    decoder_state = np.array([0.5, 0.5])
    scores = student.similarity_scores(decoder_state, encoder_states)
    assert_shape(scores, (2,), what="similarity_scores(decoder_state (2,), encoder_states (2, 2))")
    assert_close(scores, [0.25, 0.5], what=tr('similarity_scores for "Let\'s go"'), atol=1e-12,
                 hint=tr("One dot product per encoder state: 0.9*0.5 - 0.4*0.5 = 0.25 and 0.2*0.5 + 0.8*0.5 = "
                         "0.5."))


def test_similarity_matrix_shape_and_values(student):
    """similarity_matrix gives Q K^T: one row per query, one column per key (slide 38)"""
    Q = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])    # m = 3 queries
    K = np.array([[1.0, 2.0], [3.0, -1.0]])              # n = 2 keys
    S = student.similarity_matrix(Q, K)
    assert_shape(S, (3, 2), what="similarity_matrix(Q (3, 2), K (2, 2))")
    assert_close(S, [[1.0, 3.0], [4.0, -2.0], [3.0, 2.0]], what="similarity_matrix(Q, K)", atol=1e-12,
                 hint=tr("S[i, j] = dot(Q[i], K[j]); for example S[1, 0] = 0*1 + 2*2 = 4."))


def test_similarity_matrix_batched_shape(student):
    """similarity_matrix keeps leading (batch, head) dimensions: (2, 3, 4, 5) x (2, 3, 6, 5) -> (2, 3, 4, 6)"""
    rng = np.random.default_rng(0)
    Q, K = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(2, 3, 6, 5))
    S = student.similarity_matrix(Q, K)
    assert_shape(S, (2, 3, 4, 6), what="similarity_matrix(Q (2, 3, 4, 5), K (2, 3, 6, 5))")
    assert_close(S[1, 2], Q[1, 2] @ K[1, 2].T, what="similarity_matrix(Q, K)[1, 2]", atol=1e-10,
                 hint=tr("Each (batch, head) pair is its own Q K^T; transpose only the last two axes of K."))


def test_cosine_similarity_simple_cases(student):
    """cosine_similarity: 1 for the same direction, -1 for opposite, 0.0 for a zero vector (slide 68)"""
    u = np.array([1.0, 2.0, 2.0])
    assert_close(student.cosine_similarity(u, 3.0 * u), 1.0, what="cosine_similarity(u, 3u)", atol=1e-12,
                 hint=tr("Scaling a vector does not change its direction."))
    assert_close(student.cosine_similarity(u, -u), -1.0, what="cosine_similarity(u, -u)", atol=1e-12)
    assert_close(student.cosine_similarity(np.array([3.0, 4.0]), np.array([4.0, 3.0])), 24.0 / 25.0,
                 what="cosine_similarity([3, 4], [4, 3])", atol=1e-12, hint="(3*4 + 4*3) / (5 * 5) = 24/25.")
    assert_close(student.cosine_similarity(np.zeros(3), u), 0.0, what="cosine_similarity(zeros, u)", atol=0,
                 hint=tr("A zero vector has no direction: return 0.0 rather than dividing by zero."))


def test_rejects_mismatched_shapes(student):
    """vectors of different lengths raise ValueError"""
    with raises_student(ValueError, what=tr("dot_product of shapes (3,) and (2,)")):
        student.dot_product(np.ones(3), np.ones(2))
    with raises_student(ValueError, what="similarity_matrix(Q (3, 4), K (5, 6))"):
        student.similarity_matrix(np.ones((3, 4)), np.ones((5, 6)))
