"""Pictures for the course notebooks, drawn from the student's own functions.

Every ``*_figure`` function returns a ``matplotlib.figure.Figure`` (no pyplot,
no global state, Agg rendering); ``show(draw, *args)`` calls one, catches what
an unfinished stage raises and displays the picture in the notebook:

    figures.show(figures.softmax_figure, softmax)      # softmax: the student's function

While a function still raises ``NotImplementedError`` the cell prints which
one to write instead of failing. Set ``COURSE_FIGURES_STRICT=1`` to let every
error through (the project's tests do, so a broken picture cannot hide).

Only numpy and matplotlib are used here: the pictures of the torch stages
(5-9) run the student's models in ``grader.lab.pictures`` and hand the
results (tensors or arrays) to the ``*_figure`` functions below.
"""
from __future__ import annotations

import io
import os

import numpy as np

CMAP_WEIGHTS = "Blues"
CMAP_SIGNED = "RdBu_r"


# ---------------------------------------------------------------------------
# Showing a picture without letting an unfinished stage crash the notebook
# ---------------------------------------------------------------------------

def _strict() -> bool:
    return os.environ.get("COURSE_FIGURES_STRICT", "") not in ("", "0")


def _where(exc: BaseException) -> str:
    """The innermost function outside this file that the exception went through, e.g. `Encoder.__init__`."""
    ours = os.path.dirname(os.path.abspath(__file__))
    tb, name = exc.__traceback__, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if not os.path.abspath(code.co_filename).startswith(ours):
            name = getattr(code, "co_qualname", code.co_name).split("<locals>.")[-1]
        tb = tb.tb_next
    return f"`{name}`" if name and name != "<module>" else "a function this picture uses"


def show(draw, *args, **kwargs):
    """Draw ``draw(*args, **kwargs)`` and display it; print a message instead of raising.

    Returns None, so that a cell ending in ``figures.show(...)`` does not show the picture twice.
    """
    try:
        fig = draw(*args, **kwargs)
    except NotImplementedError as exc:
        if _strict():
            raise
        print(f"No picture yet: {_where(exc)} still raises NotImplementedError ({exc}).\n"
              "Write it, run its cell, then run this cell again.")
        return None
    except ImportError as exc:
        if _strict():
            raise
        print(f"No picture: {exc}. The pictures need matplotlib (pip install matplotlib).")
        return None
    except Exception as exc:  # noqa: BLE001 - a bug in the student's code must not stop the notebook
        if _strict():
            raise
        print(f"No picture: {type(exc).__name__} in {_where(exc)}: {exc}\n"
              "Run this stage's check cell for a diagnosis.")
        return None
    _display(fig)
    return None


def to_png(fig, dpi: int = 100) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def _display(fig) -> None:
    png = to_png(fig)
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
        if get_ipython() is not None:
            display(Image(data=png))
            return
    except ImportError:
        pass
    import tempfile
    path = tempfile.NamedTemporaryFile(prefix="course-figure-", suffix=".png", delete=False).name
    with open(path, "wb") as f:
        f.write(png)
    print(f"picture saved to {path}")


def _figure(width: float, height: float, ncols: int = 1, **kwargs):
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols, **kwargs)
    return fig, axes


def _array(value, what: str) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    if value is None:
        raise ValueError(f"{what} returned None; did you forget a `return`?")
    return np.asarray(value, dtype=float)


def _bars(ax, labels, values, title, fmt="{:.2f}", color=None):
    values = np.asarray(values, dtype=float)
    colors = color or ["tab:blue" if v >= 0 else "tab:red" for v in values]
    ax.bar(range(len(values)), values, color=colors)
    ax.set_xticks(range(len(values)), labels)
    ax.axhline(0, color="black", linewidth=0.8)
    for i, v in enumerate(values):
        ax.annotate(fmt.format(v), (i, v), ha="center", va="bottom" if v >= 0 else "top",
                    xytext=(0, 3 if v >= 0 else -3), textcoords="offset points", fontsize=9)
    ax.set_title(title, fontsize=10)
    low, high = min(0.0, values.min()), max(0.0, values.max())
    pad = 0.15 * (high - low or 1.0)
    ax.set_ylim(low - (pad if low < 0 else 0), high + pad)


def heatmap(ax, weights, row_labels, col_labels, title="", cmap=CMAP_WEIGHTS, vmin=0.0, vmax=None,
            annotate=True, colorbar=True):
    """Draw a matrix with labelled rows and columns on ``ax`` (values written in the cells when small)."""
    weights = np.asarray(weights, dtype=float)
    im = ax.imshow(weights, cmap=cmap, vmin=vmin, vmax=vmax if vmax is not None else max(weights.max(), 1e-9),
                   aspect="auto")
    ax.set_xticks(range(len(col_labels)), col_labels, rotation=60, ha="right", fontsize=9)
    ax.set_yticks(range(len(row_labels)), row_labels, fontsize=9)
    if title:
        ax.set_title(title, fontsize=10)
    if annotate and weights.size <= 144:
        for (i, j), v in np.ndenumerate(weights):
            r, g, b, _ = im.cmap(im.norm(v))
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, shrink=0.8)
    return im


# ---------------------------------------------------------------------------
# Stage 1: similarity (slides 12-13)
# ---------------------------------------------------------------------------

LETS_GO_WORDS = ["Let's", "go", "<end>"]
LETS_GO_ENCODER = np.array([[0.9, -0.4],     # "Let's"  (made-up 2-D encoder states, slide 10)
                            [0.2, 0.8],      # "go"
                            [-0.5, -0.3]])   # "<end>"
LETS_GO_DECODER = np.array([0.5, 0.5])       # the decoder state after <start>


def similarity_scores_figure(similarity_scores):
    """Slide 12: the decoder state compared with every encoder state, one score per input word."""
    scores = _array(similarity_scores(LETS_GO_DECODER, LETS_GO_ENCODER), "similarity_scores")
    if scores.shape != (len(LETS_GO_WORDS),):
        raise ValueError(f"similarity_scores returned shape {scores.shape}, expected ({len(LETS_GO_WORDS)},)")
    fig, (left, right) = _figure(10, 4, 2)
    for word, state in zip(LETS_GO_WORDS, LETS_GO_ENCODER):
        left.annotate("", xy=state, xytext=(0, 0), arrowprops=dict(arrowstyle="->", color="tab:gray", lw=2))
        left.text(*(state * 1.12), word, ha="center", va="center", fontsize=11)
    left.annotate("", xy=LETS_GO_DECODER, xytext=(0, 0), arrowprops=dict(arrowstyle="->", color="tab:orange", lw=3))
    left.text(*(LETS_GO_DECODER * 1.2), "decoder\nstate", ha="center", va="bottom", color="tab:orange", fontsize=10)
    left.set_xlim(-1.1, 1.2)
    left.set_ylim(-1.0, 1.2)
    left.set_aspect("equal")
    left.axhline(0, color="black", lw=0.5)
    left.axvline(0, color="black", lw=0.5)
    left.set_title("encoder states (grey) and the decoder state (orange)", fontsize=10)
    _bars(right, LETS_GO_WORDS, scores, "similarity_scores(decoder_state, encoder_states)\n"
          "one dot product per input word: the bigger, the more related")
    fig.suptitle("Slide 12: which input word is the decoder looking for?", fontsize=12)
    return fig


def similarity_matrix_figure(similarity_matrix, cosine_similarity):
    """Slides 38 and 68: all Query-Key dot products at once, and cosine = dot product of directions."""
    rng = np.random.default_rng(1)
    Q, K = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    S = _array(similarity_matrix(Q, K), "similarity_matrix")
    if S.shape != (4, 5):
        raise ValueError(f"similarity_matrix(Q (4, 3), K (5, 3)) returned shape {S.shape}, expected (4, 5)")
    u = np.array([1.0, 1.0])
    angles = np.linspace(0, np.pi, 9)
    cos = [float(cosine_similarity(u, np.array([np.cos(a + np.pi / 4), np.sin(a + np.pi / 4)]) * 3.0))
           for a in angles]
    fig, (left, right) = _figure(10, 3.8, 2)
    top = np.abs(S).max()
    heatmap(left, S, [f"query {i}" for i in range(4)], [f"key {j}" for j in range(5)],
            "similarity_matrix(Q, K) = Q Kᵀ  (slide 38)", cmap=CMAP_SIGNED, vmin=-top, vmax=top)
    right.plot(np.degrees(angles), cos, "o-")
    right.set_xlabel("angle between the two vectors (degrees)")
    right.set_ylabel("cosine_similarity")
    right.set_title("cosine similarity depends on the angle only (slide 68)", fontsize=10)
    right.axhline(0, color="black", lw=0.5)
    return fig


# ---------------------------------------------------------------------------
# Stage 2: softmax (slide 14)
# ---------------------------------------------------------------------------

def softmax_figure(softmax):
    """Slide 14: scores become positive weights that sum to 1; bigger gaps give sharper weights."""
    words = ["Let's", "go", "to", "the", "beach"]
    scores = np.array([1.0, 2.0, 0.2, -0.5, 1.2])
    weights = _array(softmax(scores), "softmax")
    sharper = _array(softmax(4.0 * scores), "softmax")
    blocked = scores.copy()
    blocked[1] = -np.inf
    without = _array(softmax(blocked), "softmax")
    fig, axes = _figure(14, 3.8, 4, sharey=False)
    _bars(axes[0], words, scores, "scores (any real numbers)")
    _bars(axes[1], words, weights, f"softmax(scores)\npositive, sum = {weights.sum():.2f}", color="tab:green")
    _bars(axes[2], words, sharper, "softmax(4 × scores)\nbigger gaps: the top score takes most", color="tab:green")
    _bars(axes[3], words, without, "softmax with 'go' blocked (−inf)\nits weight is exactly 0",
          color="tab:green")
    for ax in axes[1:]:
        ax.set_ylim(0, 1.1)
    fig.suptitle("Slide 14: softmax turns relevance scores into weights", fontsize=12)
    return fig


# ---------------------------------------------------------------------------
# Stage 3: self-attention on the pizza sentence (slide 31)
# ---------------------------------------------------------------------------

PIZZA_TOKENS = ["The", "pizza", "came", "out", "of", "the", "oven", "and", "it", "tasted", "good"]
# Hand-made features, one row per token: [food noun, place noun, pronoun, verb, function word, adjective]
_KIND = {"pizza": 0, "oven": 1, "it": 2, "came": 3, "tasted": 3, "good": 5}
# What each kind of token looks for (Query) and offers (Key), over 4 query/key dimensions:
# [a noun, something edible, an action, a function word]. A trained model learns such matrices;
# here they are written by hand so the picture can be read.
_W_Q = np.array([[0.0, 0.0, 1.5, 0.0],    # a food noun looks for its verb
                 [0.0, 0.0, 1.0, 0.5],    # a place noun looks for a verb
                 [2.0, 3.0, 0.0, 0.0],    # a pronoun looks for an edible noun it could stand for
                 [1.5, 1.5, 0.0, 0.0],    # a verb looks for what it is about
                 [0.0, 0.0, 0.0, 0.8],    # function words look at each other
                 [1.0, 2.0, 0.0, 0.0]])   # an adjective looks for what it describes
_W_K = np.array([[1.0, 2.0, 0.0, 0.0],
                 [1.0, 0.0, 0.0, 0.0],
                 [0.5, 0.0, 0.0, 0.0],
                 [0.0, 0.0, 1.0, 0.0],
                 [0.0, 0.0, 0.0, 1.0],
                 [0.0, 0.0, 0.5, 0.0]])


def pizza_inputs():
    """(X (11, 6), W_q (6, 4), W_k (6, 4), W_v (6, 6)) for "The pizza came out of the oven and it tasted good"."""
    X = np.zeros((len(PIZZA_TOKENS), 6))
    for i, token in enumerate(PIZZA_TOKENS):
        X[i, _KIND.get(token, 4)] = 1.0
    return X, _W_Q.copy(), _W_K.copy(), np.eye(6)


def pizza_attention_figure(self_attention):
    """Slide 31: whom does "it" attend to? Self-attention weights of the whole sentence."""
    X, W_q, W_k, W_v = pizza_inputs()
    out, weights = self_attention(X, W_q, W_k, W_v)
    weights = _array(weights, "self_attention (weights)")
    n = len(PIZZA_TOKENS)
    if weights.shape != (n, n):
        raise ValueError(f"self_attention returned weights of shape {weights.shape}, expected ({n}, {n})")
    fig, (left, right) = _figure(14, 5.2, 2, width_ratios=[1.5, 1])
    heatmap(left, weights, PIZZA_TOKENS, PIZZA_TOKENS, "attention weights: row = query token, column = key token",
            annotate=False)
    it = PIZZA_TOKENS.index("it")
    left.add_patch(_row_box(it, n))
    _bars(right, PIZZA_TOKENS, weights[it], "the row of \"it\": pizza, not oven", color="tab:purple")
    right.tick_params(axis="x", rotation=60)
    fig.suptitle("Slide 31: \"The pizza came out of the oven and it tasted good\"", fontsize=12)
    return fig


def _row_box(row, width):
    from matplotlib.patches import Rectangle
    return Rectangle((-0.5, row - 0.5), width, 1, fill=False, edgecolor="tab:orange", linewidth=2.5)


# ---------------------------------------------------------------------------
# Stage 4: sinusoidal positional encoding (slide 22)
# ---------------------------------------------------------------------------

def positional_encoding_figure(sinusoidal_positional_encoding, max_len=50, d_model=64):
    """Slide 22: the sine/cosine table, a few of its columns, and how alike two positions are."""
    pe = _array(sinusoidal_positional_encoding(max_len, d_model), "sinusoidal_positional_encoding")
    if pe.shape != (max_len, d_model):
        raise ValueError(f"sinusoidal_positional_encoding({max_len}, {d_model}) returned shape {pe.shape}")
    fig, axes = _figure(15, 4.2, 3)
    im = axes[0].imshow(pe, cmap=CMAP_SIGNED, vmin=-1, vmax=1, aspect="auto")
    axes[0].set_xlabel("dimension (even: sin, odd: cos)")
    axes[0].set_ylabel("position")
    axes[0].set_title(f"PE table ({max_len} positions × {d_model} dims)", fontsize=10)
    fig.colorbar(im, ax=axes[0], shrink=0.8)
    for dim in (4, 5, 16, 40):
        if dim < d_model:
            axes[1].plot(pe[:, dim], label=f"dim {dim} ({'sin' if dim % 2 == 0 else 'cos'})")
    axes[1].set_xlabel("position")
    axes[1].set_title("low dimensions wave fast, high ones slowly", fontsize=10)
    axes[1].legend(fontsize=8, loc="lower left")
    sim = pe @ pe.T
    im = axes[2].imshow(sim, cmap="viridis", aspect="auto")
    axes[2].set_xlabel("position")
    axes[2].set_ylabel("position")
    axes[2].set_title("PE[p] · PE[q]: nearby positions look alike", fontsize=10)
    fig.colorbar(im, ax=axes[2], shrink=0.8)
    fig.suptitle("Slide 22: every position gets its own pattern of sines and cosines", fontsize=12)
    return fig


# ---------------------------------------------------------------------------
# Stages 5-6: multi-head, causal and cross-attention (slides 38, 44, 47)
# ---------------------------------------------------------------------------

def heads_figure(weights, row_labels, col_labels, title, head_titles=None):
    """One heatmap per head: ``weights (h, m, n)``."""
    weights = _array(weights, "attention weights")
    if weights.ndim != 3:
        raise ValueError(f"expected weights of shape (heads, m, n), got {weights.shape}")
    h = weights.shape[0]
    fig, axes = _figure(3.6 * h + 1, 3.8, h)
    axes = np.atleast_1d(axes)
    for k, ax in enumerate(axes):
        heatmap(ax, weights[k], row_labels if k == 0 else [""] * len(row_labels), col_labels,
                head_titles[k] if head_titles else f"head {k}", vmax=1.0, annotate=False, colorbar=k == h - 1)
    fig.suptitle(title, fontsize=12)
    return fig


def causal_mask_figure(causal_mask, tokens=("<bos>", "vamos", "a", "la", "playa")):
    """Slide 44: position i may look at positions 0..i only; the future gets weight 0."""
    n = len(tokens)
    mask = causal_mask(n)
    mask = np.asarray(mask.detach().cpu().numpy() if hasattr(mask, "detach") else mask)
    if mask.shape != (n, n):
        raise ValueError(f"causal_mask({n}) returned shape {mask.shape}, expected ({n}, {n})")
    if mask.dtype != bool:
        raise ValueError(f"causal_mask({n}) returned {mask.dtype}; it must be boolean (True = may attend)")
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(n, n))
    blocked = np.where(mask, scores, -np.inf)
    weights = np.exp(blocked - blocked.max(axis=1, keepdims=True))
    weights = weights / weights.sum(axis=1, keepdims=True)
    fig, (left, right) = _figure(10, 4.2, 2)
    left.imshow(mask, cmap="Greens", vmin=0, vmax=1.4, aspect="auto")
    for (i, j), allowed in np.ndenumerate(mask):
        left.text(j, i, "✓" if allowed else "×", ha="center", va="center", fontsize=12,
                  color="black" if allowed else "tab:red")
    left.set_xticks(range(n), tokens, rotation=45, ha="right")
    left.set_yticks(range(n), tokens)
    left.set_xlabel("key (may be looked at)")
    left.set_ylabel("query (is predicting the next word)")
    left.set_title(f"causal_mask({n}): True on and below the diagonal", fontsize=10)
    heatmap(right, weights, tokens, list(tokens), "weights after masking random scores:\nthe future gets exactly 0",
            vmax=1.0)
    fig.suptitle("Slide 44: the decoder must not peek at the words it is learning to predict", fontsize=12)
    return fig


def cross_attention_figure(weights, source_tokens, output_tokens, translation=""):
    """Slide 47: for every word the decoder writes, the weights over the source words."""
    weights = _array(weights, "cross-attention weights")
    fig, ax = _figure(1.0 + 0.75 * len(source_tokens) + 2, 0.55 * len(output_tokens) + 2.2)
    heatmap(ax, weights, output_tokens, source_tokens, "row: word being written; column: source word", vmax=1.0)
    ax.set_xlabel("source (encoder memory)")
    ax.set_ylabel("output (decoder queries)")
    title = "Slide 47: cross-attention weights"
    if translation:
        title += f"\n{translation}"
    fig.suptitle(title, fontsize=11)
    return fig


# ---------------------------------------------------------------------------
# Stage 7: masked language modelling (slide 58)
# ---------------------------------------------------------------------------

def mlm_figure(predictions):
    """Slide 58: BERT fills in [MASK] from both sides.

    predictions: list of (sentence with [MASK], [(word, probability), ...] best first).
    """
    k = len(predictions)
    fig, axes = _figure(4.2 * k, 3.8, k)
    axes = np.atleast_1d(axes)
    for ax, (sentence, top) in zip(axes, predictions):
        words = [w for w, _ in top][::-1]
        probs = [float(p) for _, p in top][::-1]
        ax.barh(range(len(words)), probs, color=["tab:gray"] * (len(words) - 1) + ["tab:green"])
        ax.set_yticks(range(len(words)), words)
        ax.set_xlim(0, 1)
        for i, p in enumerate(probs):
            ax.text(p + 0.02, i, f"{p:.2f}", va="center", fontsize=9)
        ax.set_title(_wrap(sentence, 34), fontsize=10)
        ax.set_xlabel("probability")
    fig.suptitle("Slide 58: masked language model predictions", fontsize=12)
    return fig


def _wrap(text: str, width: int) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(text, width))


# ---------------------------------------------------------------------------
# Stage 8: contextual vectors and sentiment (slides 66, 71)
# ---------------------------------------------------------------------------

def cosine(u, v) -> float:
    u, v = np.asarray(u, dtype=float).ravel(), np.asarray(v, dtype=float).ravel()
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    return float(u @ v / (nu * nv)) if nu and nv else 0.0


def two_greats_figure(vectors, labels, static_vector=None, pairs=None, dims=48):
    """Slide 66: the same word "great" gets a different vector in each sentence.

    vectors: list of 1-D arrays (e.g. BERT's output for the word in each sentence), labels: one per vector;
    pairs: which (i, j) to compare by cosine similarity (default: every pair);
    static_vector: the word's context-free input embedding, the same in every sentence (cosine 1).
    """
    vectors = [_array(v, "the contextual vector") for v in vectors]
    pairs = pairs or [(i, j) for i in range(len(vectors)) for j in range(i + 1, len(vectors))]
    fig, (left, right) = _figure(14, 0.8 * len(vectors) + 2.2, 2, width_ratios=[1.6, 1])
    strip = np.stack([v[:dims] for v in vectors])
    top = np.abs(strip).max()
    left.imshow(strip, cmap=CMAP_SIGNED, vmin=-top, vmax=top, aspect="auto")
    left.set_yticks(range(len(labels)), [_wrap(f"{k + 1}: {label}", 34) for k, label in enumerate(labels)],
                    fontsize=9)
    left.set_xlabel(f"first {dims} of {vectors[0].shape[-1]} dimensions")
    left.set_title("the vectors, side by side", fontsize=10)
    names = [f"{i + 1} vs {j + 1}" for i, j in pairs]
    values = [cosine(vectors[i], vectors[j]) for i, j in pairs]
    if static_vector is not None:
        names.append("word\nembedding")
        values.append(1.0)
    _bars(right, names, values, "cosine similarity", color="tab:purple")
    right.set_ylim(min(0.0, min(values)) - 0.05, 1.15)
    fig.suptitle("Slide 66: same word, different meaning, different vector", fontsize=12)
    return fig


def confusion_figure(labels, predictions, class_names=("negative", "positive"), title=""):
    """Slide 71: how often each true class (rows) is predicted as each class (columns)."""
    labels = np.asarray(_array(labels, "labels"), dtype=int)
    predictions = np.asarray(_array(predictions, "predict"), dtype=int)
    if labels.shape != predictions.shape:
        raise ValueError(f"predict returned shape {predictions.shape}, expected {labels.shape}")
    k = len(class_names)
    counts = np.zeros((k, k), dtype=int)
    np.add.at(counts, (labels, predictions), 1)
    accuracy = float((labels == predictions).mean()) if labels.size else 0.0
    fig, ax = _figure(5, 4.2)
    ax.imshow(counts, cmap=CMAP_WEIGHTS, vmin=0, aspect="auto")
    for (i, j), c in np.ndenumerate(counts):
        ax.text(j, i, str(c), ha="center", va="center", fontsize=14,
                color="white" if c > 0.6 * max(counts.max(), 1) else "black")
    ax.set_xticks(range(k), [f"predicted\n{c}" for c in class_names])
    ax.set_yticks(range(k), [f"true\n{c}" for c in class_names])
    ax.set_title(f"{title}accuracy {accuracy:.0%} on {labels.size} examples", fontsize=10)
    fig.suptitle("Slide 71: sentiment confusion matrix", fontsize=12)
    return fig


# ---------------------------------------------------------------------------
# Stage 9: retrieval (slides 68-70)
# ---------------------------------------------------------------------------

def retrieval_figure(scores, queries, documents, top_indices=None):
    """Slides 69-70: cosine similarity of each query with each document; the top-k are boxed."""
    scores = _array(scores, "the similarity scores")
    fig, ax = _figure(2.0 + 0.9 * len(documents) + 3, 1.0 + 0.7 * len(queries) + 2.5)
    heatmap(ax, scores, [_wrap(q, 40) for q in queries], [_wrap(d, 28) for d in documents],
            "cosine similarity (query × document)", cmap="viridis", vmin=min(0.0, scores.min()))
    if top_indices is not None:
        from matplotlib.patches import Rectangle
        for i, row in enumerate(np.asarray(_array(top_indices, "top_k (indices)"), dtype=int)):
            for j in row:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="tab:red", linewidth=2.5))
    fig.suptitle("Slides 69-70: retrieval finds the documents closest to each question (red: top_k)", fontsize=11)
    return fig
