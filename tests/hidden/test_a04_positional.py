"""Hidden suite of stage 4 - embeddings and sinusoidal positional encoding (slides 20-29).

Expected values come from the reference solution, imported here in the trusted
process; the student's module runs in the worker behind `student`.

Tolerances:
- one_hot and embed: atol 1e-12, rtol 0. A row lookup copies numbers exactly, and
  one_hot(ids) @ E only adds exact zeros, so every correct method is exact.
- the sinusoidal table (and X + PE): atol = rtol = 1e-10, as the contract says.
  Any exact float64 construction (10000 ** (2i/d), exp(-2i ln(10000)/d),
  per-column loops) agrees to ~1e-12 even at position 2047, while a table
  computed in float32 is off by 1e-7 (small positions) to 1e-4 (position 2047).
"""
import numpy as np
import pytest
from hypothesis import strategies as st

from grader.engine import properties, testing
from grader.engine.errors import StudentError
from grader.engine.testing import (
    Axis,
    as_array,
    assert_close,
    assert_matches,
    assert_shape,
    check_function_sizes,
    matches,
    raises_student,
    reference,
    which_mistake,
)
from grader.i18n import join, tr

ref = reference("a04_positional")
EXACT = dict(atol=1e-12, rtol=0.0)
PE_TOL = dict(atol=1e-10, rtol=1e-10)


def rng(case):
    """The inputs of case ``case``: drawn from this submission's stage seed (course secret,
    submission id, stage), so no two students, and no two terms, see the same numbers."""
    return testing.rng(4000 + case)


# ---------------------------------------------------------------- known wrong tables

def _angles(max_len, d_model, exponent, start=0, base=10000.0):
    p = np.arange(start, start + max_len, dtype=np.float64)[:, None]
    return p / np.power(base, exponent / d_model)


def _interleave(max_len, d_model, exponent, start=0, base=10000.0, swap=False):
    a = _angles(max_len, d_model, exponent, start, base)
    even = np.arange(d_model) % 2 == 0
    if swap:
        even = ~even
    return np.where(even, np.sin(a), np.cos(a))


def _concatenated(max_len, d_model):
    two_i = np.arange(0, d_model, 2)
    a = np.arange(max_len, dtype=np.float64)[:, None] / np.power(10000.0, two_i / d_model)
    return np.concatenate([np.sin(a), np.cos(a)], axis=1)[:, :d_model]


def _float32_table(max_len, d_model):
    j = np.arange(d_model)
    p = np.arange(max_len, dtype=np.float32)[:, None]
    a = (p / np.power(np.float32(10000.0), ((j - j % 2) / d_model).astype(np.float32))).astype(np.float32)
    return np.where(j % 2 == 0, np.sin(a), np.cos(a))


def pe_diagnosis(got, max_len, d_model):
    """The known mistakes behind a wrong positional table, and the hint when none of them is it:
    keyword arguments for assert_matches (and which_mistake)."""
    j = np.arange(d_model)
    two_i = (j - j % 2).astype(np.float64)
    arr = None
    try:
        arr = np.asarray(got)
    except (TypeError, ValueError):
        pass
    if arr is not None and arr.dtype == np.float32:
        return dict(hint=tr("The table is float32: compute it in float64 (np.arange(..., dtype=np.float64)); "
                            "float32 rounding is ~1e-7 and grows with the position, far beyond the 1e-10 "
                            "tolerance."))
    mistakes = {
        tr("sin and cos look concatenated (all sines, then all cosines); they must be interleaved: sin in even "
           "columns 2i, cos in odd columns 2i+1 (slide 22)."): lambda: _concatenated(max_len, d_model),
        tr("The exponent looks like j / d_model with the column index j; columns 2i and 2i+1 share the exponent "
           "2i / d_model (use j - j % 2, not j)."): lambda: _interleave(max_len, d_model, j.astype(np.float64)),
        tr("The exponent looks like i / d_model; it is 2i / d_model (slide 22)."):
        lambda: _interleave(max_len, d_model, (j // 2).astype(np.float64)),
        tr("sin and cos look swapped: even columns are sin, odd columns cos."):
        lambda: _interleave(max_len, d_model, two_i, swap=True),
        tr("Positions seem to start at 1; they start at 0, so the first row is [0, 1, 0, 1, ...]."):
        lambda: _interleave(max_len, d_model, two_i, start=1),
        tr("The base looks like 1000; the paper uses 10000."):
            lambda: _interleave(max_len, d_model, two_i, base=1000.0),
    }
    default = "PE[p, 2i] = sin(p / 10000^(2i/d_model)), PE[p, 2i+1] = cos(p / 10000^(2i/d_model)) (slide 22)."
    if arr is not None and arr.shape == (max_len, d_model):
        if matches(arr, _float32_table(max_len, d_model), atol=1e-4):
            default = (tr("The values are right to ~1e-6 but not to 1e-10: the table seems computed in float32. "
                          "Use float64 throughout."))
    elif arr is not None and arr.shape == (d_model, max_len):
        return dict(hint=tr("The table looks transposed: rows are positions (max_len, d_model)."))
    return dict(mistakes=mistakes, hint=default)


# ---------------------------------------------------------------- one_hot and embed (slide 20)

@pytest.mark.parametrize("n,vocab", [(1, 1), (6, 10), (12, 5)])
def test_one_hot_values(student, n, vocab):
    """one_hot puts a single 1 at column ids[k] of row k"""
    ids = rng(n).integers(0, vocab, size=n)
    got = student.one_hot(ids, vocab)
    assert_matches(got, ref.one_hot(ids, vocab), what=f"one_hot(ids ({n},), vocab_size={vocab})", **EXACT,
                   mistakes={tr("The result looks transposed: one row per token, (n, vocab_size)."):
                             lambda: ref.one_hot(ids, vocab).T},
                   hint=tr("Row k is all zeros except a 1 at column ids[k] (slide 20)."))


@pytest.mark.parametrize("ids,vocab", [([0, 4], 4), ([-1, 2], 4), ([7], 3)])
def test_one_hot_rejects_out_of_range(student, ids, vocab):
    """one_hot raises ValueError for ids outside [0, vocab_size), including -1 (no wrap-around)"""
    with raises_student(ValueError, what=tr("one_hot(ids={ids}, vocab_size={vocab}) with an out-of-range id",
                                            ids=ids, vocab=vocab)):
        student.one_hot(np.array(ids), vocab)


def test_one_hot_and_embed_reject_wrong_ranks(student):
    """one_hot and embed raise ValueError for ids that are not 1-D and an E that is not 2-D"""
    for ids in (np.array([[0, 1], [2, 0]]), np.array(2)):
        with raises_student(ValueError, what=f"one_hot(ids of shape {ids.shape}, vocab_size=3)"):
            student.one_hot(ids, 3)
        with raises_student(ValueError, what=f"embed(ids of shape {ids.shape}, E (3, 4))"):
            student.embed(ids, np.ones((3, 4)))
    for E in (np.ones((3, 4, 2)), np.ones(3)):
        with raises_student(ValueError, what=f"embed(ids [0, 2], E {E.shape})"):
            student.embed(np.array([0, 2]), E)


def test_embed_is_row_lookup(student):
    """embed returns row ids[k] of E for every token, the same as one_hot(ids) @ E (slide 20)"""
    g = rng(20)
    E = g.normal(size=(11, 6))
    ids = np.array([3, 0, 10, 3, 7])
    got = student.embed(ids, E)
    shape = np.shape(as_array(got, what="embed(ids, E)"))
    if shape != (5, 6):
        raise AssertionError(join([
            tr("embed(ids (5,), E (11, 6)) has shape {shape}, expected (5, 6): one row of length d = 6 per "
               "token.", shape=shape),
            tr("A length of 11 = vocab_size suggests columns of E (or a one-hot row) instead of the row "
               "E[ids[k]].") if 11 in shape else tr("Token k's vector is the row E[ids[k]] (slide 20).")], sep=" "))
    assert_matches(got, ref.embed(ids, E), what="embed(ids [3, 0, 10, 3, 7], E (11, 6))", **EXACT,
                   mistakes={tr("The result looks like columns of E: token k's vector is the row E[ids[k]]."):
                             lambda: E[:, ids[ids < E.shape[1]]].T},
                   hint=tr("embed(ids, E)[k] = E[ids[k]]: selecting a row is multiplying its one-hot vector by E."))


@pytest.mark.parametrize("ids", [[1, 11], [-1, 0]])
def test_embed_rejects_out_of_range(student, ids):
    """embed raises ValueError for ids outside [0, vocab_size), like one_hot(ids) @ E would"""
    with raises_student(ValueError, what=tr("embed(ids={ids}, E (11, 4)) with an out-of-range id", ids=ids)):
        student.embed(np.array(ids), np.ones((11, 4)))


# ---------------------------------------------------------------- sinusoidal_positional_encoding (slides 22-25)

@pytest.mark.parametrize("max_len,d_model", [(1, 1), (4, 4), (10, 7), (50, 16), (128, 33)])
def test_pe_values(student, max_len, d_model):
    """the table matches sin/cos of p / 10000^(2i/d_model), interleaved, for even and odd d_model"""
    got = student.sinusoidal_positional_encoding(max_len, d_model)
    assert_matches(got, ref.sinusoidal_positional_encoding(max_len, d_model),
                   what=f"sinusoidal_positional_encoding({max_len}, {d_model})", **PE_TOL,
                   **pe_diagnosis(got, max_len, d_model))


def test_pe_first_rows(student):
    """position 0 is [0, 1, 0, 1, ...] and column 0 is sin(p) (slides 23-25)"""
    got = student.sinusoidal_positional_encoding(3, 6)
    pe = assert_shape(got, (3, 6), what="sinusoidal_positional_encoding(3, 6)")
    hint = which_mistake(got, **pe_diagnosis(got, 3, 6))
    assert_close(pe[0], [0, 1, 0, 1, 0, 1], what=tr("row 0 (position 0) of the table"), **PE_TOL, hint=hint)
    assert_close(pe[:, 0], np.sin([0.0, 1.0, 2.0]), what=tr("column 0 of the table"), **PE_TOL, hint=hint)
    assert_close(pe[:, 1], np.cos([0.0, 1.0, 2.0]), what=tr("column 1 of the table"), **PE_TOL, hint=hint)


def test_pe_float64_precision(student):
    """the table is exact to 1e-10 up to position 2047: computed in float64, not float32"""
    got = student.sinusoidal_positional_encoding(2048, 64)
    assert_matches(got, ref.sinusoidal_positional_encoding(2048, 64), what="sinusoidal_positional_encoding(2048, 64)",
                   **PE_TOL, **pe_diagnosis(got, 2048, 64))


# ---------------------------------------------------------------- add_positional_encoding (slides 26-29)

@pytest.mark.parametrize("shape", [(5, 8), (3, 10, 6), (2, 2, 4, 7)])
def test_add_pe_values(student, shape):
    """add_positional_encoding adds PE[:n] to every sequence, keeping leading (batch) dimensions"""
    X = rng(len(shape)).normal(size=shape)
    try:
        got = student.add_positional_encoding(X)
    except StudentError as exc:
        if len(shape) == 2 or exc.kind != "error":
            raise
        try:
            student.add_positional_encoding(X.reshape(-1, *shape[-2:])[0])
        except StudentError:
            raise exc from None
        raise AssertionError(
            tr("add_positional_encoding raised {exception}: {message} for X {shape}, but works on one "
               "(n, d) sequence: with leading (batch) dimensions, n and d are the last two axes (X.shape[-2:]) "
               "and the (n, d) table broadcasts over the rest.",
               exception=exc.type_name, message=exc.message, shape=shape)) from None
    n, d = shape[-2:]
    expected = ref.add_positional_encoding(X)
    hint = tr("X + PE[:n] with PE = sinusoidal_positional_encoding(n={n}, d={d}), broadcast over leading "
              "dimensions.", n=n, d=d)
    if np.shape(got) == shape:
        added = (np.asarray(got, dtype=np.float64) - X).reshape(-1, n, d)[0]
        # i18n: {diagnosis} is a sentence (its own message) naming the likely mistake.
        hint += tr(" The table you added: {diagnosis}",
                   diagnosis=which_mistake(added, **pe_diagnosis(added, n, d)))
    assert_matches(got, expected, what=f"add_positional_encoding(X {shape})", **PE_TOL, hint=hint, mistakes={
        tr("The table seems built from the wrong axes of X: n and d are the last two (X.shape[-2:]); leading "
           "dimensions such as the batch are kept."):
            lambda: X + ref.sinusoidal_positional_encoding(*shape[:2])[..., None],
        tr("Only the position table came back: add it to X (element-wise, slide 26)."):
        lambda: np.broadcast_to(ref.sinusoidal_positional_encoding(n, d), shape),
    })


def test_add_pe_distinguishes_word_order(student):
    """after adding positions, "Squatch eats pizza" and "Pizza eats Squatch" give different inputs (slide 27)"""
    E = rng(30).normal(size=(3, 4))          # toy embeddings: 0 = Squatch, 1 = eats, 2 = pizza
    a = as_array(student.add_positional_encoding(E[[0, 1, 2]]), what=tr("add_positional_encoding(Squatch eats "
                                                                        "pizza)"))
    b = as_array(student.add_positional_encoding(E[[2, 1, 0]]), what=tr("add_positional_encoding(Pizza eats "
                                                                        "Squatch)"))
    assert_close(a, ref.add_positional_encoding(E[[0, 1, 2]]), what=tr("add_positional_encoding(Squatch eats "
                                                                       "pizza)"),
                 **PE_TOL)
    assert not np.allclose(a[[2, 1, 0]], b), (
        tr("Reordering the words only reordered the rows: the position vectors were not added per position."))


def test_add_pe_rejects_1d(student):
    """add_positional_encoding raises ValueError for a 1-D input (it needs (..., n, d))"""
    with raises_student(ValueError, what="add_positional_encoding(X (5,))"):
        student.add_positional_encoding(np.ones(5))


# ---------------------------------------------------------------- every size, calls in a row

TOKENS = Axis("n", 3, 8, tr("one token"))
SIZES = {  # function -> (its sizes, its inputs for given sizes, tolerance)
    "one_hot": ([TOKENS, Axis("vocab", 4, 9, tr("a vocabulary of one word"))],
                lambda g, s: (g.integers(0, s["vocab"], size=s["n"]), s["vocab"]), EXACT),
    "embed": ([TOKENS, Axis("vocab", 4, 9, tr("a vocabulary of one word")), Axis("d", 3, 6, tr("one feature"))],
              lambda g, s: (g.integers(0, s["vocab"], size=s["n"]), g.normal(size=(s["vocab"], s["d"]))), EXACT),
    "sinusoidal_positional_encoding": ([Axis("max_len", 5, 40, tr("one position")),
                                        Axis("d_model", 6, 17, tr("one column"))],
                                       lambda g, s: (s["max_len"], s["d_model"]), PE_TOL),
    "add_positional_encoding": ([Axis("B", 2, 3, tr("a batch of one")), TOKENS, Axis("d", 6, 11, tr("one feature"))],
                                lambda g, s: (g.normal(size=(s["B"], s["n"], s["d"])),), PE_TOL),
}


@pytest.mark.parametrize("name", list(SIZES))
def test_sizes_of_one_and_calls_in_a_row(student, name):
    """every function works with one token, one feature, one position, a batch of one, and on calls in a row with other sizes"""  # noqa: E501 (the report's test name)
    axes, make, tol = SIZES[name]
    g = rng(50 + list(SIZES).index(name))
    check_function_sizes(getattr(student, name), getattr(ref, name), axes, lambda s: make(g, s), what=name, **tol)


# ---------------------------------------------------------------- properties over generated inputs (issue 35)
# Inputs drawn by Hypothesis from this submission's seed (grader/engine/properties.py): vocabularies and
# sequences from 1, repeated ids, int32 and int64 ids, ids just outside [0, vocab_size), tables of every
# length and width (odd ones too), leading dimensions. The oracle is the contract's formula in long double.

def _oracle_pe(max_len, d_model):
    """PE[p, 2i] = sin(p / 10000^(2i/d_model)), PE[p, 2i+1] = cos(...), in long double."""
    p = np.arange(max_len, dtype=np.longdouble)[:, None]
    j = np.arange(d_model)
    angle = p / np.power(np.longdouble(10000), (j - j % 2).astype(np.longdouble) / d_model)
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle)).astype(np.float64)


def test_one_hot_and_embed_properties_on_generated_ids(student):
    """one_hot and embed hold their contract on generated ids: any vocabulary and length from 1, repeats, int32 or int64, ids just out of range"""  # noqa: E501 (the report's test name)
    def prop(draw):
        vocab, n, d = draw(st.integers(1, 8), "vocab_size"), draw(st.integers(1, 7), "n"), draw(st.integers(1, 5), "d")
        dtype = draw(st.sampled_from([np.int64, np.int32]), "dtype of ids")
        ids = np.array(draw(st.lists(st.integers(0, vocab - 1), min_size=n, max_size=n), "ids"), dtype=dtype)
        E = np.random.default_rng(vocab * 10 + d).normal(size=(vocab, d))
        got = student.one_hot(ids, vocab)
        assert_close(got, np.eye(vocab)[ids], what=f"one_hot(ids {ids.tolist()}, vocab_size={vocab})", **EXACT,
                     hint=tr("Row k is all zeros except a 1 at column ids[k] (slide 20)."))
        assert_close(student.embed(ids, E), E[ids], what=f"embed(ids {ids.tolist()}, E ({vocab}, {d}))", **EXACT,
                     hint=tr("embed(ids, E)[k] = E[ids[k]]: selecting a row is multiplying its one-hot vector by "
                             "E."))
        bad = ids.copy()
        bad[draw(st.integers(0, n - 1), "position of an out-of-range id")] = draw(
            st.sampled_from([-1, vocab, vocab + 3]), "out-of-range id")
        with raises_student(ValueError, what=tr("one_hot(ids={ids}, vocab_size={vocab}) with an out-of-range id",
                                                ids=bad.tolist(), vocab=vocab)):
            student.one_hot(bad, vocab)
        with raises_student(ValueError, what=tr("embed(ids={ids}, E {shape}) with an out-of-range id",
                                                ids=bad.tolist(), shape=E.shape)):
            student.embed(bad, E)
    properties.check(prop, case=4040, examples=6, what="one_hot, embed")


def test_pe_properties_on_generated_sizes(student):
    """the sinusoidal table and add_positional_encoding hold their contract for generated lengths and widths (odd ones, 1) and leading dimensions"""  # noqa: E501 (the report's test name)
    def prop(draw):
        max_len, d_model = draw(st.integers(1, 80), "max_len"), draw(st.integers(1, 40), "d_model")
        got = student.sinusoidal_positional_encoding(max_len, d_model)
        assert_matches(got, _oracle_pe(max_len, d_model), what=f"sinusoidal_positional_encoding({max_len}, {d_model})",
                       **PE_TOL, **pe_diagnosis(got, max_len, d_model))
        lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2), "leading dimensions of X"))
        n, d = draw(st.integers(1, max_len), "n"), draw(st.integers(1, 12), "d")
        X = np.random.default_rng(n * 100 + d).normal(size=(*lead, n, d))
        draw.note("X.shape", X.shape)
        assert_close(student.add_positional_encoding(X), X + _oracle_pe(n, d), what=f"add_positional_encoding(X "
                     f"{X.shape})", **PE_TOL, hint=tr("X + PE[:n] with PE = sinusoidal_positional_encoding(n={n}, "
                                                      "d={d}), broadcast over leading dimensions.", n=n, d=d))
    properties.check(prop, case=4041, examples=6, what="sinusoidal_positional_encoding, add_positional_encoding")


def test_calls_in_a_row_in_orders_drawn_from_the_seed(student):
    """every function stays right on calls in a row, in orders drawn from your seed: a short table then a long one, a long one then a short one, another d_model"""  # noqa: E501 (the report's test name)
    def equal_to(oracle, tol):
        def check(got, args):
            assert_close(got, oracle(*args), what=tr("the result"), **tol)
        return check
    functions = [
        properties.Function("sinusoidal_positional_encoding", {"max_len": (1, 40), "d_model": (1, 17)},
                            lambda s, g: (s["max_len"], s["d_model"]), student.sinusoidal_positional_encoding,
                            equal_to(_oracle_pe, PE_TOL), features=("d_model",)),
        properties.Function("add_positional_encoding", {"B": (1, 3), "n": (1, 12), "d": (1, 11)},
                            lambda s, g: (g.normal(size=(s["B"], s["n"], s["d"])),), student.add_positional_encoding,
                            equal_to(lambda X: X + _oracle_pe(*X.shape[-2:]), PE_TOL), features=("d",)),
        properties.Function("one_hot", {"n": (1, 8), "vocab": (1, 9)},
                            lambda s, g: (g.integers(0, s["vocab"], size=s["n"]), s["vocab"]), student.one_hot,
                            equal_to(lambda ids, v: np.eye(v)[ids], EXACT), features=("vocab",)),
        properties.Function("embed", {"n": (1, 8), "vocab": (1, 9), "d": (1, 6)},
                            lambda s, g: (g.integers(0, s["vocab"], size=s["n"]), g.normal(size=(s["vocab"], s["d"]))),
                            student.embed, equal_to(lambda ids, E: E[ids], EXACT), features=("d",)),
    ]
    properties.calls_in_a_row(functions, case=4042, examples=2, steps=3, what=tr("calls in a row"))
