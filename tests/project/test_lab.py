"""grader.lab: what the notebooks call is real code, and it works with the reference solutions.

* every picture of ``grader.lab.figures`` (stages 1-6) and ``grader.lab.pictures`` (stages 5-9)
  draws a matplotlib Figure from the reference solutions, with short trainings;
* every picture cell of the notebooks is one ``figures.show`` call of such a picture, whose
  docstring names the slide it illustrates (a renamed picture fails here, not in a kernel);
* an unwritten or broken student function gives ``figures.show``'s friendly message, naming it;
* the setup cell is ``bootstrap.find_course_root`` verbatim plus a handful of lines, and finds
  the course folder.
"""
from __future__ import annotations

import ast
import inspect
import sys

import pytest
import torch
from conftest import load_module
from matplotlib.figure import Figure

from grader.authoring import notebook_build
from grader.lab import bootstrap, figures, pictures

A01 = load_module("solutions/a01_similarity.py", "_lab_a01")
A02 = load_module("solutions/a02_softmax.py", "_lab_a02")
A03 = load_module("solutions/a03_attention.py", "_lab_a03")
A04 = load_module("solutions/a04_positional.py", "_lab_a04")
A05 = load_module("solutions/a05_encoder.py", "_lab_a05")
A06 = load_module("solutions/a06_decoder.py", "_lab_a06", [("a05_encoder", A05)])
A07 = load_module("solutions/a07_bert_mlm.py", "_lab_a07", [("a05_encoder", A05)])
A08 = load_module("solutions/a08_sentiment.py", "_lab_a08")
A09 = load_module("solutions/a09_retrieval.py", "_lab_a09")
STARTER_A05 = load_module("starter/a05_encoder.py", "_lab_starter_a05")

PNG = b"\x89PNG\r\n\x1a\n"

# picture -> a call of it with the reference, trainings cut short (each takes at most a few seconds)
DRAWN = {
    "similarity_scores": lambda: figures.similarity_scores_figure(A01.similarity_scores),
    "similarity_matrix": lambda: figures.similarity_matrix_figure(A01.similarity_matrix, A01.cosine_similarity),
    "softmax": lambda: figures.softmax_figure(A02.softmax),
    "pizza_attention": lambda: figures.pizza_attention_figure(A03.self_attention),
    "positional_encoding": lambda: figures.positional_encoding_figure(A04.sinusoidal_positional_encoding),
    "encoder_heads": lambda: pictures.encoder_heads(A05.Encoder),
    "causal_mask": lambda: figures.causal_mask_figure(A06.causal_mask),
    "cross_attention": lambda: pictures.cross_attention(vars(A06), steps=2),
    "masked_words": lambda: pictures.masked_words(A07.BertForMaskedLM, A07.mask_tokens, steps=2),
    "two_greats": lambda: pictures.two_greats(A08.mean_pool, bert_stage=A07),
    "sentiment_confusion": lambda: pictures.sentiment_confusion(
        A08.SentimentClassifier, A08.train_classifier, A08.predict, n_train=8, n_dev=8, bert_stage=A07),
    "retrieval": lambda: pictures.retrieval(A09.embed_sentences, A09.top_k, bert_stage=A07),
}


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the machine is shared; these models are tiny
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("name", DRAWN)
def test_picture_draws_a_figure_from_the_reference(name):
    fig = DRAWN[name]()
    assert isinstance(fig, Figure) and fig.axes, name
    assert figures.to_png(fig).startswith(PNG)


def test_the_pictures_show_what_the_student_computed():
    heads = pictures.encoder_heads(A05.Encoder)
    assert len([ax for ax in heads.axes if ax.images]) == 4                  # one heatmap per head
    masked = pictures.masked_words(A07.BertForMaskedLM, A07.mask_tokens, steps=1)
    titles = [ax.get_title().replace("\n", " ") for ax in masked.axes]
    assert titles == pictures.MLM_QUESTIONS
    retrieval = pictures.retrieval(A09.embed_sentences, A09.top_k, k=3, bert_stage=A07)
    assert len(retrieval.axes[0].patches) == 3 * len(pictures.RETRIEVAL_QUERIES)  # a red box per hit


def _picture_cells():
    for stage_id, cells in notebook_build.PICTURES.items():
        for _, source in cells:
            yield stage_id, source


@pytest.mark.parametrize("stage_id,source", list(_picture_cells()))
def test_a_picture_cell_is_one_call_of_a_documented_picture(stage_id, source):
    calls = [node for node in ast.parse(source).body
             if isinstance(node, ast.Expr) and ast.unparse(node.value.func) == "figures.show"]
    assert len(calls) == 1 and len(source.splitlines()) <= 2, source
    drawn = calls[0].value.args[0]
    module = {"figures": figures, "pictures": pictures}[ast.unparse(drawn.value)]
    picture = getattr(module, drawn.attr)
    assert "Slide" in (picture.__doc__ or ""), f"{drawn.attr}: its docstring should name the slide it shows"
    for node in ast.walk(ast.parse(source)):  # every other figures./pictures. name exists too
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in (
                "figures", "pictures"):
            assert hasattr({"figures": figures, "pictures": pictures}[node.value.id], node.attr), node.attr


def test_a_stage_notebook_imports_pictures_only_when_it_draws_one():
    for stage_id in notebook_build.buildable():
        setup = notebook_build.build(stage_id, notebook_build.starter_text(stage_id)).cells[2].source
        uses = any("pictures." in source for sid, source in _picture_cells() if sid == stage_id)
        assert ("from grader.lab import course, figures, pictures" in setup) == uses, stage_id


# ---------------------------------------------------------------------------
# An unwritten or broken student function: a message, not a traceback
# ---------------------------------------------------------------------------

@pytest.fixture
def lenient(monkeypatch):
    monkeypatch.delenv("COURSE_FIGURES_STRICT", raising=False)


def test_an_unwritten_class_is_named(lenient, capsys):
    assert figures.show(pictures.encoder_heads, STARTER_A05.Encoder) is None
    out = capsys.readouterr().out
    assert out.startswith("No picture yet: `") and "still raises NotImplementedError" in out, out
    assert "Write it, run its cell, then run this cell again." in out


def test_a_broken_method_is_named_with_its_error(lenient, capsys):
    class Encoder(A05.Encoder):
        def forward(self, ids, src_mask=None):
            return torch.zeros(2, 3) @ torch.zeros(2, 3)  # a shape bug

    assert figures.show(pictures.encoder_heads, Encoder) is None
    out = capsys.readouterr().out
    assert out.startswith("No picture: RuntimeError in `Encoder.forward`:"), out
    assert "Run this stage's check cell for a diagnosis." in out


def test_a_function_returning_nothing_is_named(lenient, capsys):
    def self_attention(X, W_q, W_k, W_v, mask=None):
        return None, None

    figures.show(figures.pizza_attention_figure, self_attention)
    assert "forget a `return`" in capsys.readouterr().out


def test_stage_6_says_which_cells_to_run(lenient, capsys):
    stage = {k: v for k, v in vars(A06).items() if k != "greedy_decode"}
    figures.show(pictures.cross_attention, stage)
    out = capsys.readouterr().out
    assert "NameError" in out and "greedy_decode not defined: run the cells of your code above first" in out


def test_strict_mode_lets_the_error_through(monkeypatch):
    monkeypatch.setenv("COURSE_FIGURES_STRICT", "1")
    with pytest.raises(NotImplementedError):
        figures.show(pictures.encoder_heads, STARTER_A05.Encoder)


# ---------------------------------------------------------------------------
# The setup cell
# ---------------------------------------------------------------------------

def test_the_setup_cell_is_find_course_root_and_a_few_lines():
    function = inspect.getsource(bootstrap.find_course_root)
    for stage_id in notebook_build.buildable():
        setup = notebook_build.build(stage_id, notebook_build.starter_text(stage_id)).cells[2].source
        assert function.rstrip() in setup, stage_id
        rest = [line for line in setup.replace(function.rstrip(), "").splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
        assert len(rest) <= 9, rest


@pytest.fixture
def course_folder(tmp_path, monkeypatch):
    root = tmp_path / "course"
    (root / "grader" / "lab").mkdir(parents=True)
    (root / "grader" / "lab" / "course.py").write_text("")
    (root / "assignments" / "a01_similarity").mkdir(parents=True)
    monkeypatch.delenv("COURSE_ROOT", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return root.resolve()


def test_find_course_root_from_a_stage_folder(course_folder, monkeypatch):
    monkeypatch.chdir(course_folder / "assignments" / "a01_similarity")
    assert bootstrap.find_course_root() == course_folder
    assert sys.path[0] == str(course_folder)


def test_find_course_root_from_course_root(course_folder, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(FileNotFoundError, match="COURSE_ROOT"):
        bootstrap.find_course_root()
    monkeypatch.setenv("COURSE_ROOT", str(course_folder))
    assert bootstrap.find_course_root() == course_folder
