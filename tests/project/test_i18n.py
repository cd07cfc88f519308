"""Feedback in the students' language (issue 24): one catalogue, English and Korean, for every
student-facing text; the language is chosen per command and recorded in each report; scores do not
depend on it."""
from __future__ import annotations

import keyword
import os
import re
import string
import subprocess
import sys

import pytest
from conftest import ROOT, made_report

from grader import i18n
from grader.authoring import autograder, messages, mutants
from grader.classroom import html_report
from grader.classroom.discovery import Job
from grader.classroom.rows import Row, Status
from grader.engine import github_actions, gradescope, run, table
from grader.engine.options import GradingOptions
from grader.engine.report import Report
from grader.i18n import bypass, catalogue

HANGUL = re.compile("[\uac00-\ud7a3]")
# Where a text that reaches a student is written: the suites, the grader's engine and sandbox, the notebooks'
# helper (the classroom side's student page is a template: its texts are checked with the catalogue).
STUDENT_FACING = (sorted(ROOT.glob("tests/hidden/test_*.py")) + sorted(ROOT.glob("tests/public/test_*.py"))
                  + sorted(ROOT.glob("grader/engine/*.py")) + sorted(ROOT.glob("grader/sandbox/**/*.py"))
                  + [ROOT / "grader" / "lab" / "course.py"])


def naive_softmax(tmp_path):
    """The issue's example: a textbook softmax that gives NaN on a row of only -inf."""
    mistake = next(m for m in mutants.load("a02_softmax") if m.id == "softmax_nan_on_fully_masked_slice")
    return mutants.build_submission(mistake, tmp_path / "naive")


def _catalogue_entries():
    for domain in messages.CATALOGUES:
        for m in messages.read(domain, "ko"):
            if m.id:
                yield domain, m


def test_the_catalogue_and_its_compiled_form_are_current():
    """What `make messages` writes is committed: the .pot and .po list exactly the texts the code marks, and
    each .mo is its .po compiled (a fresh clone needs no compiling step)."""
    assert messages.behind() == []


def test_every_text_has_a_korean_translation():
    untranslated = [m.id for _, m in _catalogue_entries() if not m.string]
    assert not untranslated, f"{len(untranslated)} texts without Korean, e.g. {untranslated[:5]}"


def test_placeholders_are_the_same_in_both_languages_and_always_filled():
    formatter = string.Formatter()
    assert [p for domain in messages.CATALOGUES for p in messages.mismatched(messages.read(domain, "ko"))] == []
    for _domain, m in _catalogue_entries():
        names = i18n.message.placeholders(m.id)
        filled = m.string.format_map({name: f"<{name}>" for name in names})
        assert all(name is None for _, name, _, _ in formatter.parse(filled.replace("{", "{{").replace("}", "}}"))) \
            and not re.search(r"(?<!\{)\{[A-Za-z_][A-Za-z0-9_]*\}(?!\})", filled), (m.id, filled)


def test_make_messages_refuses_a_translation_that_loses_or_adds_a_placeholder(tmp_path, monkeypatch, capsys):
    """`make messages` (and its --check) fail, naming the entry, on a translation that leaves a placeholder out,
    misspells one or breaks a brace; a translation that moves them around is fine."""
    (tmp_path / "suite.py").write_text('tr("{what} took {seconds} s", what=w, seconds=s)\n'
                                       'tr("{count} of {total} passed", count=c, total=t)\n')
    monkeypatch.setattr(messages.paths, "ROOT", tmp_path)
    monkeypatch.setattr(messages, "CATALOGUES", {catalogue.DOMAIN: (tmp_path / "locale", (("python", "suite.py"),))})
    assert messages.main([]) == 0 and messages.main(["--check"]) == 0  # untranslated: nothing to compare yet

    def translate(took, passed):
        po = messages.read(catalogue.DOMAIN, "ko")
        po["{what} took {seconds} s"].string, po["{count} of {total} passed"].string = took, passed
        messages.po_path(catalogue.DOMAIN, "ko").write_bytes(messages._po_bytes(po))
        return messages.main([])

    assert translate("{what}: {seconds}초", "{total}개 중 {count}개 통과") == 0
    capsys.readouterr()
    assert translate("{what}: 몇 초", "{total}개 중 {count}개 통과") == 1
    assert "'{what} took {seconds} s': the translation lacks ['seconds'] and has []" in capsys.readouterr().err
    assert messages.main(["--check"]) == 1
    assert translate("{what}: {second}초", "{total}개 중 {count개 통과") == 1
    err = capsys.readouterr().err
    assert "lacks ['seconds'] and has ['second']" in err and "'{count} of {total} passed': the translation is not " \
        "a format string" in err


# A placeholder is *spelled out* when its name writes out the expression that computes its value instead of naming
# what it holds (an earlier tool made names so: {np_round_w_arr_0_1_4}, {self_budget_s}). By its name alone (what
# a translator sees in the catalogue), a name is spelled out when it
# - is longer than 20 characters (that tool cut names at 24),
# - has an empty segment between underscores (``type_out___name``: an attribute ``__name__``) or at either end,
# - has a segment that starts with a digit (``took_1e3``, ``missing_6``, ``w_arr_0_1_4``: a literal),
# - has a segment that is a Python keyword (``for``, ``in``, ``if``, ``else``, ``not``...) or a method of code
#   (CODE_WORDS), or begins with a call or an object a value is read from (CODE_PREFIXES: ``len_losses``,
#   ``reply_missing``, ``exc_message``; ``max_len`` is a name), when it has more than one segment.
CODE_WORDS = frozenset(w.lower() for w in keyword.kwlist) | {"get", "tolist", "round", "replace", "split",
                                                             "splitlines", "ravel", "isinstance", "items", "values"}
CODE_PREFIXES = {"len", "int", "str", "float", "tuple", "list", "set", "sorted", "type", "join", "np", "torch", "self",
                 "reply", "info", "attrs", "exc", "fmt", "as"}
MAX_SPELLED_OUT = 5  # the limit; each one left must say what it holds in an `# i18n:` comment


def spelled_out(name: str) -> bool:
    parts = name.split("_")
    return (len(name) > 20 or "" in parts or any(p[:1].isdigit() for p in parts)
            or (len(parts) > 1 and (bool(CODE_WORDS & set(parts)) or parts[0] in CODE_PREFIXES)))


def test_spelled_out_names_are_recognised():
    """The issue's examples are spelled out; names for what a placeholder holds are not."""
    assert all(map(spelled_out, ["round_x_3_for_x_in_losse", "np_round_w_arr_0_1_4", "vocab_21_vocab_2", "took_1e3",
                                 "self_budget_s", "reply_get_missing", "t_student_1e3", "kind_if_isinstance_kind",
                                 "type_out___name", "len_losses", "exc_message", "w_not_a_tensor", "missing_6"]))
    assert not any(map(spelled_out, ["seconds", "missing", "losses", "max_len", "max_score", "student_ms", "q_shape",
                                     "train_threshold", "expected_cosines", "d", "later_stage", "eval_count"]))


def test_placeholders_are_named_for_what_they_hold():
    """At most MAX_SPELLED_OUT placeholders of the catalogues are spelled out, each explained to the translator."""
    found = [(m.id, name, m.auto_comments) for domain in messages.CATALOGUES for m in messages.template(domain)
             if m.id for name in sorted(i18n.message.placeholders(m.id)) if spelled_out(name)]
    assert len(found) <= MAX_SPELLED_OUT, "spelled-out placeholders:\n" + "\n".join(f"{{{n}}} in {i!r}"
                                                                                   for i, n, _ in found)
    unexplained = [(i, n) for i, n, comments in found if not any(f"{{{n}}}" in c for c in comments)]
    assert not unexplained, f"spelled-out placeholders without an `# i18n:` comment: {unexplained}"


def test_a_text_without_a_value_for_a_placeholder_is_refused():
    with pytest.raises(KeyError, match="no value for"):
        i18n.tr("softmax rows sum to {sums}, not 1")


def test_no_student_facing_literal_bypasses_the_catalogue():
    found = bypass.bypasses(STUDENT_FACING, ROOT)
    assert not found, "student-facing text not marked with tr():\n" + "\n".join(map(str, found))


def test_the_bypass_scan_finds_an_unmarked_message(tmp_path):
    """The scan above would see a literal: an f-string assert message, a hint and a mistake's key."""
    suite = tmp_path / "test_x.py"
    suite.write_text('def test_x(student):\n    assert False, f"off by {1}"\n'
                     '    assert_close(1, 2, hint="Subtract the max.", mistakes={"Wrong axis.": 3})\n'
                     '    raise AssertionError(tr("fine"))\n')
    assert [b.line for b in bypass.bypasses([suite], tmp_path)] == [2, 3, 3]


def test_a_message_renders_in_each_language_with_the_same_figures():
    text = i18n.tr("softmax rows sum to {sums} instead of 1: divide exp(x - max) by its sum along "
                   "`axis` (keepdims=True so it broadcasts back onto the slice).", sums="[0.5 2. ]")
    ko = i18n.render(text, "ko")
    assert str(text).startswith("softmax rows sum to [0.5 2. ]") and "[0.5 2. ]" in ko and HANGUL.search(ko)
    assert i18n.render(text, "both") == f"{ko}\n{text}"
    assert i18n.message.from_json(text.to_json()) == text and i18n.render(
        i18n.message.from_json(text.to_json()), "ko") == ko


@pytest.mark.parametrize("environ,expected", [
    ({"LANG": "ko_KR.UTF-8"}, "ko"), ({"LANG": "C.UTF-8"}, "en"), ({}, "en"),
    ({"LANG": "en_US.UTF-8", "LC_ALL": "ko_KR.UTF-8"}, "ko"), ({"LANG": "ko_KR.UTF-8", "LC_ALL": "C"}, "en"),
    ({"LANGUAGE": "ko:en", "LANG": "C"}, "ko"),
])
def test_checks_language_follows_the_locale(environ, expected):
    assert i18n.from_environment(environ) == expected


def test_the_course_language_comes_from_course_toml(tmp_path):
    toml = tmp_path / "course.toml"
    toml.write_text('language = "ko"\n[late]\n')
    assert i18n.languages.from_course(toml) == "ko"
    toml.write_text("[late]\n")
    assert i18n.languages.from_course(toml) == "en"
    assert i18n.languages.from_course(tmp_path / "missing.toml") == "en"
    toml.write_text('language = "fr"\n')
    with pytest.raises(ValueError, match="unknown language"):
        i18n.languages.from_course(toml)


def _without_text(report: dict) -> dict:
    """What a report decides, not what it says: ids, statuses, points per test and in total."""
    return {"score": report["score"], "max_score": report["max_score"],
            "stages": [(s["id"], s["status"], s["score"], s["max_score"],
                        [(t["id"], t["status"], t["score"], t["max_score"], t["visibility"]) for t in s["tests"]])
                       for s in report["stages"]]}


def test_korean_and_english_reports_of_a_submission_have_identical_scores(tmp_path):
    sub = str(naive_softmax(tmp_path))
    en = run.grade(sub, GradingOptions(kind="public", stage_ids=["a02_softmax"], language="en"))
    ko = run.grade(sub, GradingOptions(kind="public", stage_ids=["a02_softmax"], language="ko"))
    assert (en["language"], ko["language"]) == ("en", "ko")
    assert _without_text(en) == _without_text(ko) and en["score"] < en["max_score"]
    failed_en = [t for t in en["stages"][0]["tests"] if t["status"] != "passed"]
    failed_ko = [t for t in ko["stages"][0]["tests"] if t["status"] != "passed"]
    assert failed_en and all(not HANGUL.search(t["name"] + t["feedback"]) for t in failed_en)
    assert all(HANGUL.search(t["name"]) and HANGUL.search(t["feedback"]) for t in failed_ko)


def test_check_prints_the_table_and_the_feedback_in_korean_under_a_korean_locale(tmp_path):
    """The issue's example: `make check STAGE=a02 LANG=ko_KR.UTF-8` on a naive softmax."""
    sub = naive_softmax(tmp_path)
    env = {**os.environ, "LANG": "ko_KR.UTF-8", "NO_COLOR": "1"}
    env.pop("LC_ALL", None)
    env.pop("LANGUAGE", None)
    ko = subprocess.run([sys.executable, "-m", "grader", "check", "a02", str(sub)], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=300)
    assert ko.returncode == 0, ko.stderr
    assert "│ 단계" in ko.stdout and "통과한 테스트" in ko.stdout and "실패 a02_softmax::test_softmax_masked_entries" \
        in ko.stdout, ko.stdout
    assert "-inf만 있는 행은 최댓값이 -inf라 x - max가 NaN이 됩니다" in ko.stdout, ko.stdout
    en = subprocess.run([sys.executable, "-m", "grader", "check", "a02", str(sub), "--lang", "en"], cwd=ROOT,
                        env=env, capture_output=True, text=True, timeout=300)
    assert "│ stage" in en.stdout and "For a row of only -inf the max is -inf" in en.stdout, en.stdout
    assert not HANGUL.search(en.stdout)


def _report(language: str) -> dict:
    name = i18n.tr("-inf entries get weight 0; a row of only -inf gives zeros, not NaN")
    feedback = i18n.tr("NaN in the output. For a row of only -inf the max is -inf and x - max is NaN; shift such "
                       "a row by 0 instead, so its weights come out as 0.")
    test = {"id": "a02_softmax::test_softmax_masked_entries", "name": name, "score": 0.0, "max_score": 1.25,
            "status": "failed", "visibility": "visible", "feedback": feedback, "duration_s": 0.0}
    rep = made_report([{"id": "a02_softmax", "title": "softmax", "score": 6.75, "tests": [test]}],
                      language=language, kind="public")
    return i18n.localize(rep, language)


def test_gradescope_results_carry_korean_test_names_and_feedback():
    results = gradescope.results_json(_report("ko"))
    test = results["tests"][0]
    assert HANGUL.search(test["name"]) and HANGUL.search(test["output"]) and HANGUL.search(results["output"])
    assert results["score"] == 6.75 and test["status"] == "failed"
    assert HANGUL.search(gradescope.not_graded("2", "ko")["output"])


def test_the_gradescope_zip_grades_in_the_language_it_was_built_with(tmp_path):
    import zipfile
    zip_path = autograder.build(str(tmp_path / "autograder.zip"), language="ko")
    with zipfile.ZipFile(zip_path) as zf:
        script = zf.read("run_autograder").decode()
        names = set(zf.namelist())
    assert 'LANGUAGE="ko"' in script and '--lang "$LANGUAGE"' in script and "@LANGUAGE@" not in script
    assert "grader/i18n/locale/ko/LC_MESSAGES/grader.mo" in names
    assert "tests/hidden/locale/ko/LC_MESSAGES/hidden.mo" in names


def test_github_notices_and_summary_speak_the_reports_language():
    rep = Report.from_json(_report("ko"))
    assert github_actions.notices(rep) == ["::notice title=a02_softmax::a02_softmax: 공개 점수 6.75 / 8"]
    summary = github_actions.summary(rep)
    assert "| 테스트 | 상태 | 점수 | 무엇이 틀렸나 |" in summary and "| 실패 |" in summary


@pytest.mark.parametrize("language,lang_attr", [("en", "en"), ("ko", "ko"), ("both", "ko")])
def test_the_students_html_page_declares_its_language(language, lang_attr):
    row = Row(Job("s", "s", "s", "folder", "0" * 64), Status.GRADED, _report(language))
    page = html_report.submission_page(row)
    assert f'<html lang="{lang_attr}">' in page
    assert bool(HANGUL.search(page)) == (language != "en")
    assert ("What to fix" in page) == (language != "ko")  # "both": Korean, the English beneath


def test_the_table_pads_korean_by_its_width_on_screen(capsys):
    table.print_report(_report("ko"))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("│", "┌", "├", "└"))]
    assert len({table.width(line) for line in lines}) == 1, lines


def test_both_languages_on_request():
    rep = _report("both")
    test = rep["stages"][0]["tests"][0]
    korean, english = test["feedback"].split("\n")
    assert HANGUL.search(korean) and english.startswith("NaN in the output.")


def test_the_student_bundle_carries_the_grader_catalogue_but_not_the_hidden_one():
    from grader.authoring import release
    assert "i18n" in release.STUDENT_GRADER
    assert catalogue.HIDDEN_LOCALE_DIR.is_relative_to(ROOT / "tests" / "hidden")
    grader_ids = {m.id for m in messages.read(catalogue.DOMAIN, "ko")}
    hidden_only = {m.id for m in messages.read(catalogue.HIDDEN_DOMAIN, "ko") if m.id} - grader_ids
    assert hidden_only and not hidden_only & grader_ids
