"""The class similarity report (grader/classroom/similarity.py, copydetect) on a generated class.

The class is ``tests/fixtures/similarity_class.py`` (seed 0): per stage the
reference and each alternative of ``tests/alternatives/`` as independent
authors, two students who handed in the starter, copiers of the independent
students (renamed, reordered, restyled, all three, one function taken from
another author; one stage left out each), a corrupt zip and a folder whose
stage-1 module is not UTF-8.

Measured with the report's parameters (k 25, window 8, a stage pair flagged at
a score of 0.6, PYTHONHASHSEED fixed as ``write_report`` fixes it) on the
classes of seeds 0-19 (1310 copied and 2854 independent stage pairs, 212
copying and 391 independent student pairs), precision / recall at the flag:

    a01_similarity 1.000 / 1.000   whole copies 0.95-1.00, one function rewritten 0.74-0.91, independent <= 0.33
    a02_softmax    1.000 / 0.955   0.91-1.00, 0.58-0.86, <= 0.09
    a03_attention  1.000 / 1.000   0.97-1.00, 0.75-0.86, <= 0.34
    a04_positional 1.000 / 1.000   0.96-1.00, 0.76-0.97, <= 0.33
    a05_encoder    1.000 / 1.000   0.97-1.00, 0.85-1.00, <= 0.36
    a06_decoder    1.000 / 1.000   0.91-1.00, 0.88-1.00, <= 0.31
    a07_bert_mlm   1.000 / 1.000   0.90-1.00, 0.82-0.99, <= 0.42
    a08_sentiment  1.000 / 1.000   0.94-1.00, 0.66-0.89, <= 0.18
    a09_retrieval  1.000 / 0.973   0.98-1.00, 0.47-0.80, <= 0.16
    all stage pairs   1.000 / 0.991 (1298 of 1310 copies flagged, 0 of 2854 independent pairs)
    student pairs     1.000 / 0.986 (209 of 212, 0 of 391)

What the flag misses are copies with one of a stage's two functions rewritten
(stages 2 and 9: half the module is another author's); in every one of the 20
classes every copied pair still ranked above every independent pair, stage by
stage and overall, which is what these tests assert on seed 0.
"""
from __future__ import annotations

import ast
import csv
import html
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import quiet_console
from test_html_reports import chromium, dump_dom  # noqa: F401 - the fixture, and the one browser check

from grader import cli
from grader.classroom import batch
from grader.classroom import similarity as sm
from grader.classroom.discovery import discover
from grader.classroom.gradebook import Gradebook, default_url
from grader.engine import stages
from tests.fixtures import similarity_class as fx

pytestmark = pytest.mark.xdist_group("similarity")  # one class and one report for the whole file
CHOSEN = list(stages.all_stages())


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    folder = tmp_path_factory.mktemp("similarity") / "class"
    return folder, fx.build(folder, seed=0, unreadable=True)


def _report(folder: Path, out: Path, references=()):
    jobs, _ = discover(folder)
    lines = []
    summary = sm.write_report(out, jobs, CHOSEN, references=references, log=lines.append)
    assert summary is not None
    with open(out / "similarity.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(out / "similarity-pairs.csv", newline="") as f:
        ranking = list(csv.DictReader(f))
    return {"summary": summary, "lines": lines, "rows": rows, "ranking": ranking, "out": out,
            "html": (out / "html" / "similarity.html").read_text(encoding="utf-8")}


@pytest.fixture(scope="module")
def report(klass, tmp_path_factory):
    folder, _ = klass
    return _report(folder, tmp_path_factory.mktemp("similarity-out"))


def _truth(made, stage_id):
    copies, partial = fx.planted(made, stage_id)
    return copies, partial


def test_every_copied_stage_pair_outranks_every_independent_one(klass, report):
    _, made = klass
    for s in CHOSEN:
        copies, partial = _truth(made, s.id)
        scores = {(r["student_a"], r["student_b"]): float(r["score"]) for r in report["rows"] if r["stage"] == s.id}
        assert copies and copies <= set(scores), f"{s.id}: a copied pair was not compared"
        independent = {p: x for p, x in scores.items() if p not in copies | partial}
        assert independent, f"{s.id}: no independent pair"
        lowest = min(scores[p] for p in copies)
        highest = max(independent.values())
        assert lowest > highest, (f"{s.id}: a copy scores {lowest:.2f}, an independent pair {highest:.2f} "
                                  f"({max(independent, key=independent.get)})")
        top = sorted((p for p in scores if p not in partial), key=lambda p: -scores[p])[:len(copies)]
        assert set(top) == copies


def test_the_ranking_puts_the_copying_pairs_first(klass, report):
    _, made = klass
    copying, partial = set(), set()
    for s in CHOSEN:
        copies, part = _truth(made, s.id)
        copying |= copies
        partial |= part
    partial -= copying  # pairs that share only a borrowed function: neither copying nor independent
    order = [(r["student_a"], r["student_b"]) for r in report["ranking"]]
    ranks = {p: i for i, p in enumerate(order)}
    assert copying <= set(ranks)
    last_copying = max(ranks[p] for p in copying)
    first_independent = min(i for p, i in ranks.items() if p not in copying | partial)
    assert last_copying < first_independent
    printed = [(t["a"], t["b"]) for t in report["summary"].top]
    # the printed top pairs are the ranking's first, and none is independent (a pair sharing a function borrowed
    # in several stages may rank among copies: it shares code, and the docstring's measurement is about the two)
    assert printed == order[:len(printed)] and set(printed) <= copying | partial


def test_independent_authors_are_not_flagged_and_whole_copies_are(klass, report):
    _, made = klass
    roles = {m.id: m.role for m in made}
    authors = {m.id for m in made if m.role.startswith("author")}
    n_author_pairs = 0
    for s in CHOSEN:
        copies, partial = _truth(made, s.id)
        for r in (r for r in report["rows"] if r["stage"] == s.id):
            pair = (r["student_a"], r["student_b"])
            if pair not in copies | partial:
                assert r["flagged"] == "0", f"{s.id}: independent {pair} flagged at {r['score']}"
            elif pair in copies and "swapped" not in roles[pair[0]] + roles[pair[1]]:
                assert r["flagged"] == "1", f"{s.id}: the copy {pair} is not flagged ({r['score']})"
            n_author_pairs += set(pair) <= authors
    assert n_author_pairs == 3 * len(CHOSEN)  # reference vs each alternative, alternative vs alternative


def test_the_starter_is_boilerplate(klass, report):
    _, made = klass
    starters = {m.id for m in made if m.role == "starter"}
    assert len(starters) == 2
    assert not [r for r in report["rows"] if {r["student_a"], r["student_b"]} & starters]
    stage = stages.get("a07_bert_mlm")  # its starter ships load_pretrained_bert complete
    starter = stage.starter.read_text(encoding="utf-8")
    untouched = sm.Author("kept", "student", "", {stage.id: starter + "\n# done, I think\n"})
    assert sm.fingerprints(stage, [untouched]) == {}
    # Two independent authors who both kept the starter's docstrings and course-provided code.
    alternative = stage.alternatives[0].read_text(encoding="utf-8")
    a = sm.Author("a", "student", "", {stage.id: fx.authors(stage)["reference"]})
    b = sm.Author("b", "student", "", {stage.id: starter + "\n\n" + alternative})
    kinds = {"a": "student", "b": "student"}
    (m,) = sm.compare_stage(stage.id, sm.fingerprints(stage, [a, b]), kinds)
    assert not m.flagged, f"kept docstrings made two authors similar: {m.score:.2f}"
    bare = {x.id: sm._fingerprint(x.id, x.modules[stage.id], None, sm.K, sm.WINDOW) for x in (a, b)}
    (without,) = sm.compare_stage(stage.id, bare, kinds)
    assert without.score > m.score + 0.2  # the starter is what made them alike


def test_the_page_escapes_code_and_shows_both_sides(klass, report):
    page = report["html"]
    assert "&lt;script&gt;alert(" in page, "the restyled copies' <script> comment is not on the page"
    assert "<script>alert(" not in page
    assert len(re.findall(r"<script\b", page)) == 1  # sortable.js, nothing from the students
    first = page.split('<section class="pair-detail" id="pair-1">', 1)[1].split("</section>", 1)[0]
    top = report["summary"].top[0]
    assert html.escape(top["a"]) in first and html.escape(top["b"]) in first
    sides = re.findall(r'<pre class="code">(.*?)</pre>', first, re.S)
    assert len(sides) >= 2 and all("<mark>" in side for side in sides[:2])
    folder, _ = klass
    jobs = {j.id: j for j in discover(folder)[0]}
    for who, side in zip((top["a"], top["b"]), sides[:2]):
        module = sm.read_modules(jobs[who], [stages.get(top["best_stage"])], print).modules[top["best_stage"]]
        assert html.unescape(re.sub(r"</?mark>", "", side)) == module  # all of it, exactly, as text


def test_the_page_in_a_browser_runs_only_its_own_script(report, chromium, tmp_path):  # noqa: F811
    dom = dump_dom(chromium, report["out"] / "html" / "similarity.html", tmp_path)  # no console error, script ran
    assert len(dom.find_all("script")) == 1
    assert len(dom.find_all("pre")) >= 2


def test_unreadable_submissions_are_skipped_the_rest_compared(report):
    lines = report["lines"]
    assert any(ln.startswith("skipped broken_zip:") and "zip" in ln for ln in lines), lines
    assert any(ln.startswith("skipped latin1 a01_similarity: not UTF-8") for ln in lines), lines
    latin1 = [r for r in report["rows"] if "latin1" in (r["student_a"], r["student_b"])]
    assert latin1 and {r["stage"] for r in latin1} == {"a02_softmax"}
    assert "broken_zip" in report["html"] and "not UTF-8" in report["html"]


def test_the_same_class_gives_the_same_figures(klass, report, tmp_path):
    folder, _ = klass
    again = _report(folder, tmp_path)
    assert (tmp_path / "similarity.csv").read_bytes() == (report["out"] / "similarity.csv").read_bytes()
    assert again["ranking"] == report["ranking"]


def test_reference_entries_meet_students_but_not_each_other(klass, tmp_path, capsys):
    folder, made = klass
    refs = tmp_path / "last-year"
    refs.mkdir()
    for m in made:
        if m.role.startswith("author"):  # last year's copies of this year's independent students
            src = folder / (m.id + ".zip" if m.format == "zip" else m.id)
            (shutil.copytree if src.is_dir() else shutil.copy)(src, refs / src.name)
    out = tmp_path / "out"
    out.mkdir()
    code = cli.main(["similarity", str(out), "--submissions", str(folder), "--reference", str(refs),
                     "--stages", "a02,a05"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "page: " in printed and str(out / "html" / "similarity.html") in printed
    with open(out / "similarity.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["stage"] for r in rows} == {"a02_softmax", "a05_encoder"}
    is_ref = [(r["student_a"].startswith("last-year/"), r["student_b"].startswith("last-year/")) for r in rows]
    assert not any(a and b for a, b in is_ref)
    assert any(a != b for a, b in is_ref)
    for m in made:  # each reference entry is the same as the student it was copied from
        if m.role.startswith("author"):
            pair = sorted([f"last-year/{m.id}", m.id])
            assert [r["score"] for r in rows if [r["student_a"], r["student_b"]] == pair] == ["1.0000"] * 2


def test_command_line_reads_the_latest_batch_run(klass, tmp_path, capsys):
    folder, _ = klass
    out = tmp_path / "out"
    out.mkdir()
    assert cli.main(["similarity", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no batch run" in err[0] and "--submissions" in err[0]
    assert cli.main(["similarity", str(tmp_path / "nowhere")]) == 2
    assert cli.main(["similarity", str(out), "--submissions", str(tmp_path / "nowhere")]) == 2
    capsys.readouterr()
    book = Gradebook(default_url(str(out)))
    book.start_run(suite_hash="0" * 64, stages="a01_similarity,a02_softmax", submissions_dir=str(folder),
                   out_dir=str(out))
    book.close()
    assert cli.main(["similarity", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "compared on a01_similarity, a02_softmax;" in printed
    with open(out / "similarity.csv", newline="") as f:
        assert {r["stage"] for r in csv.DictReader(f)} == {"a01_similarity", "a02_softmax"}


# ---------------------------------------------------------------- the fixture's copies are real copies

@pytest.mark.parametrize("kind", ["renamed", "reordered", "restyled", "all"])
def test_planted_copies_keep_the_contract(kind):
    rng = random.Random(1)
    for s in CHOSEN:
        keep = fx.contract_names(s)
        for author, text in fx.authors(s).items():
            copy, _ = fx.transform(kind, text, rng, keep=keep)
            assert copy != text, f"{s.id} {author}: {kind} changed nothing"
            assert fx._module_names(ast.parse(copy)) >= fx._module_names(ast.parse(text)) & keep


def test_a_copy_with_everything_changed_still_computes_the_same():
    stage = stages.get("a02_softmax")
    rng = random.Random(2)
    x = np.random.default_rng(0).normal(size=(3, 5)) * 50
    x[0, :] = -np.inf
    x[1, 2] = -np.inf
    for author, text in fx.authors(stage).items():
        copy, _ = fx.transform("all", text, rng, keep=fx.contract_names(stage))
        a, b = {}, {}
        exec(compile(text, f"{author}.py", "exec"), a)
        exec(compile(copy, f"{author}-copy.py", "exec"), b)
        for name in ("softmax", "log_softmax"):
            np.testing.assert_array_equal(a[name](x, axis=-1), b[name](x, axis=-1))


def test_a_swapped_function_comes_from_the_other_author():
    stage = stages.get("a05_encoder")
    texts = fx.authors(stage)
    names = list(texts)
    copy, name = fx.swap_function(texts[names[0]], texts[names[1]], random.Random(3))
    donor = fx._functions(ast.parse(texts[names[1]]))[name]
    assert ast.dump(fx._functions(ast.parse(copy))[name]) == ast.dump(donor)


def test_batch_with_similarity_compares_the_class_after_a_finished_run(tmp_path, fake_grader, capsys):
    """``batch --similarity`` ends with the comparison (``grader similarity``'s), on the stages graded."""
    subs = tmp_path / "class"
    for name in ("ann", "bob"):
        (subs / name).mkdir(parents=True)
        shutil.copy(stages.get("a01_similarity").solution, subs / name)
    out = tmp_path / "out"
    assert batch.run_batch(subs, out=out, stage_ids=["a01_similarity"], target=fake_grader, console=quiet_console(),
                           similarity=True) == 0
    assert "2 submissions and reference entries compared on a01_similarity" in capsys.readouterr().out
    with open(out / "similarity.csv", newline="") as f:
        (row,) = csv.DictReader(f)
    assert (row["student_a"], row["student_b"], row["flagged"]) == ("ann", "bob", "1")
    assert batch.run_batch(subs, out=out, stage_ids=["a01_similarity"], target=fake_grader, console=quiet_console(),
                           similarity=True, references=(str(tmp_path / "nowhere"),)) == 2
