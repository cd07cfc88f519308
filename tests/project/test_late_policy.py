"""The late policy of course.toml, rule by rule (grader/classroom/late.py, term.py).

Each rule gets a student whose times sit on either side of it; one student spends their
budget over several stages. Reports are small dicts here: the batch end to end is in
test_collect.py.
"""
from __future__ import annotations

import datetime as dt
import textwrap

import jsonschema
import pytest
from conftest import made_report

from grader.classroom import grading, late, term
from grader.classroom.discovery import Job
from grader.engine import report, stages

SEOUL = dt.timezone(dt.timedelta(hours=9))
STAGES = ["a01_similarity", "a02_softmax", "a03_attention", "a04_positional"]
DUE = {sid: dt.datetime(2027, 3, 12, 23, 59, tzinfo=SEOUL) + dt.timedelta(weeks=i) for i, sid in enumerate(STAGES)}


def policy(tmp_path, extra: str = "", **late_keys) -> term.LatePolicy:
    keys = {"timezone": '"Asia/Seoul"', "deadline": '"2027-06-18 23:59"', "grace_minutes": 15, "late_days": 4,
            "penalty_per_day": 0.10, "cutoff_days": 7, **late_keys}
    lines = ["[late]", *(f"{k} = {v}" for k, v in keys.items() if v is not None), "[late.deadlines]",
             *(f'{sid} = "{DUE[sid].strftime("%Y-%m-%d %H:%M")}"' for sid in STAGES)]
    path = tmp_path / "course.toml"
    path.write_text("\n".join(lines) + "\n" + textwrap.dedent(extra))
    return term.load(path).late


def rep(**scores) -> dict:
    """A report of the four stages with these scores (default: the stage's points)."""
    entries = []
    for s in stages.resolve(STAGES):
        given = scores.get(s.id, s.points)
        missing = given == "missing"
        entries.append({"id": s.id, "score": 0.0 if missing else float(given), "max_score": float(s.points),
                        "status": "missing" if missing else "graded", "tests": []})
    return made_report(entries)


def at(sid, **delta) -> late.Seen:
    return late.Seen(DUE[sid] + dt.timedelta(**delta), "collect")


def stage(result, sid):
    return next(s for s in result["stages"] if s["id"] == sid)


def test_within_grace_is_on_time_and_a_minute_after_is_a_whole_day(tmp_path):
    p = policy(tmp_path)
    r = late.assess(p, "ann", rep(), {"a01_similarity": at("a01_similarity", minutes=15),
                                      "a02_softmax": at("a02_softmax", minutes=16),
                                      "a03_attention": at("a03_attention", hours=-3),
                                      "a04_positional": at("a04_positional", days=1, minutes=1)})
    assert stage(r, "a01_similarity")["status"] == "on_time" and stage(r, "a01_similarity")["days_late"] == 0
    assert stage(r, "a02_softmax")["status"] == "late" and stage(r, "a02_softmax")["days_late"] == 1
    assert stage(r, "a03_attention")["days_late"] == 0
    assert stage(r, "a04_positional")["days_late"] == 2, "1 day and 1 minute is 2 days started"
    assert r["days_late"] == 3 and r["days_charged"] == 3 and r["late_days_left"] == 1
    assert r["penalty"] == 0 and r["score_after"] == r["score_before"] == rep()["score"]


def test_a_budget_spent_over_several_stages_then_the_penalty(tmp_path):
    """4 late days: 2 on stage 1, 1 on stage 2, 1 of stage 3's 3; stage 3's other 2 days cost 20 %,
    stage 4's 1 day costs 10 %: the budget is spent in deadline order, not where it would save most."""
    p = policy(tmp_path)
    r = late.assess(p, "bo", rep(), {"a01_similarity": at("a01_similarity", days=1, hours=2),
                                     "a02_softmax": at("a02_softmax", hours=20),
                                     "a03_attention": at("a03_attention", days=2, hours=5),
                                     "a04_positional": at("a04_positional", hours=1)})
    charged = [d["days_charged"] for d in r["deadlines"]]
    assert charged == [2, 1, 1, 0] and r["days_charged"] == 4 and r["late_days_left"] == 0
    a03, a04 = stage(r, "a03_attention"), stage(r, "a04_positional")
    assert (a03["days_late"], a03["days_penalised"]) == (3, 2)
    assert a03["score_after"] == pytest.approx(a03["score_before"] * 0.8)
    assert (a04["days_late"], a04["days_penalised"]) == (1, 1)
    assert a04["score_after"] == pytest.approx(a04["score_before"] * 0.9)
    assert r["penalty"] == pytest.approx(a03["score_before"] * 0.2 + a04["score_before"] * 0.1)
    assert r["score_after"] == pytest.approx(r["score_before"] - r["penalty"])


def test_the_penalty_never_takes_more_than_the_score(tmp_path):
    p = policy(tmp_path, late_days=0, penalty_per_day=0.25, cutoff_days=None)
    r = late.assess(p, "cy", rep(), {"a01_similarity": at("a01_similarity", days=9, minutes=1)})
    a01 = stage(r, "a01_similarity")
    assert a01["days_penalised"] == 10 and a01["score_after"] == 0.0
    assert r["penalty"] == a01["score_before"]


def test_after_the_cut_off_work_is_not_graded_and_spends_no_late_day(tmp_path):
    p = policy(tmp_path)
    r = late.assess(p, "di", rep(), {"a01_similarity": at("a01_similarity", days=7, minutes=1),
                                     "a02_softmax": at("a02_softmax", days=6, hours=23)})
    a01, a02 = stage(r, "a01_similarity"), stage(r, "a02_softmax")
    assert a01["status"] == "after_cutoff" and a01["score_after"] == 0.0 and r["deadlines"][0]["days_charged"] == 0
    assert a02["status"] == "late" and a02["days_late"] == 7
    assert r["deadlines"][1]["days_charged"] == 4 and a02["days_penalised"] == 3
    # collect left the work out of what was graded (the stage is missing): the report still says why
    r = late.assess(p, "di", rep(a01_similarity="missing"), {}, {"a01_similarity": at("a01_similarity", days=8)})
    assert stage(r, "a01_similarity")["status"] == "after_cutoff" and r["days_charged"] == 0


def test_late_work_that_scored_nothing_spends_no_late_day(tmp_path):
    p = policy(tmp_path, late_days=1)
    r = late.assess(p, "ed", rep(a01_similarity=0), {"a01_similarity": at("a01_similarity", days=1),
                                                     "a02_softmax": at("a02_softmax", hours=2)})
    assert r["deadlines"][0]["days_charged"] == 0 and r["deadlines"][1]["days_charged"] == 1
    assert r["penalty"] == 0


def test_stages_with_one_deadline_are_one_hand_in(tmp_path):
    """One deadline for all and one time from an LMS manifest: 2 days late costs 2 late days, not 2 per stage."""
    p = policy(tmp_path, extra="")
    p = term.LatePolicy(**{**p.__dict__, "deadlines": {sid: DUE["a01_similarity"] for sid in STAGES}})
    when = late.Seen(DUE["a01_similarity"] + dt.timedelta(days=1, hours=3), "manifest")
    r = late.assess(p, "fa", rep(), {sid: when for sid in STAGES})
    assert len(r["deadlines"]) == 1 and r["days_late"] == 2 and r["days_charged"] == 2 and r["late_days_left"] == 2
    assert all(s["days_penalised"] == 0 for s in r["stages"]) and r["penalty"] == 0


def test_extensions_move_a_students_deadlines(tmp_path):
    p = policy(tmp_path, extra="""
        [late.extensions]
        gus = 2
        hal = { a02_softmax = 3 }
        """)
    seen = {"a01_similarity": at("a01_similarity", days=1, hours=12), "a02_softmax": at("a02_softmax", days=2)}
    gus, hal, ivy = (late.assess(p, who, rep(), seen) for who in ("gus", "hal", "ivy"))
    assert [s["days_late"] for s in gus["stages"][:2]] == [0, 0]
    assert [s["days_late"] for s in hal["stages"][:2]] == [2, 0]
    assert [s["days_late"] for s in ivy["stages"][:2]] == [2, 2]
    assert gus["stages"][0]["deadline"].startswith("2027-03-14T23:59")


def test_no_time_is_on_time_and_a_missing_stage_is_not_submitted(tmp_path):
    r = late.assess(policy(tmp_path), "jo", rep(a04_positional="missing"), {})
    assert [s["status"] for s in r["stages"]] == ["no_time", "no_time", "no_time", "not_submitted"]
    assert r["days_late"] == 0 and r["penalty"] == 0


def test_late_changes_ignore_keeps_the_last_version_handed_in_on_time(tmp_path):
    """Collected versions of one stage: the starter (on time), work on time, a change after the deadline."""
    sid = "a01_similarity"
    obs = [{"blob": "starter", "first_seen": DUE[sid] - dt.timedelta(days=6), "seen_via": "reflog"},
           {"blob": "work", "first_seen": DUE[sid] - dt.timedelta(hours=1), "seen_via": "collect"},
           {"blob": "fix", "first_seen": DUE[sid] + dt.timedelta(days=3), "seen_via": "collect"}]
    count, ignore = policy(tmp_path), policy(tmp_path, late_changes='"ignore"')
    assert late.choose(obs, count, "kim", sid, "starter")[0]["blob"] == "fix"
    assert late.choose(obs, ignore, "kim", sid, "starter")[0]["blob"] == "work"
    # only the starter was there by the deadline: the late work counts even under "ignore"
    assert late.choose([obs[0], obs[2]], ignore, "kim", sid, "starter")[0]["blob"] == "fix"
    # a version first seen after the cut-off is left out: the one before it counts
    past = {"blob": "after", "first_seen": DUE[sid] + dt.timedelta(days=9), "seen_via": "collect"}
    pick, cut = late.choose([*obs, past], count, "kim", sid, "starter")
    assert pick["blob"] == "fix" and cut["blob"] == "after"
    pick, cut = late.choose([past], count, "kim", sid, "starter")
    assert pick is None and cut["blob"] == "after"
    # the file deleted at the latest collection: nothing counts (under "count")
    gone = {"blob": "", "first_seen": None, "seen_via": None}
    assert late.choose([*obs, gone], count, "kim", sid, "starter")[0] is None


def test_the_late_object_validates_and_a_tampered_one_does_not(tmp_path):
    job = Job("lee", "lee", str(tmp_path), "folder", sha256="0" * 64)
    full = grading.not_graded_report(job, stages.resolve(STAGES), "unused")
    for s in full["stages"]:
        s.update(status="graded", score=s["max_score"])
        for t in s["tests"]:
            t.update(status="passed", score=t["max_score"])
    full["score"] = full["max_score"]
    lt = late.assess(policy(tmp_path, late_days=0), "lee", full, {"a02_softmax": at("a02_softmax", days=2)})
    good = {**full, "late": lt}
    report.validate(good)
    assert lt["penalty"] == pytest.approx(0.2 * stage(lt, "a02_softmax")["score_before"])
    for key, value in (("score_after", lt["score_after"] + 1), ("penalty", 0.0), ("score_before", 1.0)):
        with pytest.raises(jsonschema.ValidationError):
            report.validate({**full, "late": {**lt, key: value}})
    raised = [dict(s) for s in lt["stages"]]
    raised[0]["score_after"] = raised[0]["score_before"] + 1
    with pytest.raises(jsonschema.ValidationError, match="gains points"):
        report.validate({**full, "late": {**lt, "stages": raised}})


@pytest.mark.parametrize("text, message", [
    ('[late]\ntimezone = "Mars/Olympus"\ndeadline = "2027-01-01 00:00"', "unknown timezone"),
    ('[late]\ntimezone = "UTC"\n[late.deadlines]\na01_similarity = "2027-01-01 00:00"', "no deadline for a02"),
    ('[late]\ndeadline = "2027-01-01 00:00"\n[late.deadlines]\na99_nothing = "2027-01-01"', "no such stage a99"),
    ('[late]\ndeadline = "next friday"', "is not a date and time"),
    ('[late]\ndeadline = "2027-01-01 00:00"\npenalty_per_day = 10', "between 0 and 1"),
    ('[late]\ndeadline = "2027-01-01 00:00"\nlate_days = 1.5', "whole number"),
    ('[late]\ndeadline = "2027-01-01 00:00"\nlate_changes = "sometimes"', "late_changes must be"),
    ('[late\n', "not valid TOML"),
])
def test_a_wrong_course_toml_says_what_is_wrong(tmp_path, text, message):
    path = tmp_path / "course.toml"
    path.write_text(text + "\n")
    with pytest.raises(term.TermError, match=message):
        term.load(path)


def test_the_repositorys_course_toml_is_a_complete_policy():
    t = term.load()
    assert t.late is not None and set(t.late.deadlines) == {s.id for s in stages.all_stages()}
    assert t.late.late_changes in term.LATE_CHANGES and t.repo_prefix


def test_a_manifest_gives_times_and_a_bad_row_names_its_line(tmp_path):
    good = tmp_path / "times.csv"
    good.write_text("student,submitted_at\nann,2027-03-12 23:50\nbo,2027-03-13T02:00:00+00:00\n")
    times = late.read_manifest(good, SEOUL)
    assert times["ann"].at == dt.datetime(2027, 3, 12, 23, 50, tzinfo=SEOUL) and times["ann"].via == "manifest"
    assert times["bo"].at == dt.datetime(2027, 3, 13, 11, 0, tzinfo=SEOUL)
    bad = tmp_path / "bad.csv"
    bad.write_text("student,submitted_at\nann,2027-03-12 23:50\nbo,yesterday\n")
    with pytest.raises(term.TermError, match="line 3"):
        late.read_manifest(bad, SEOUL)
    (tmp_path / "cols.csv").write_text("name,time\nann,2027-03-12\n")
    with pytest.raises(term.TermError, match="student,submitted_at"):
        late.read_manifest(tmp_path / "cols.csv", SEOUL)
