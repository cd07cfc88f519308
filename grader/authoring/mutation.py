"""The mutation score of the hidden suites: every small change cosmic-ray makes to a stage's reference, graded.

    python -m grader.authoring.mutation a01_similarity a02_softmax     # grade what is not graded yet, then the scores
    python -m grader.authoring.mutation --workers 2                    # every target (the nine stages, `testing`)
    python -m grader.authoring.mutation --report                       # the scores and survivors only, no grading
    make mutation STAGES="a01_similarity a02_softmax"                  # the same, under nice -n 19
    python -m grader.authoring.mutation a05_encoder --limit 40         # at most 40 more mutants this run (a sample)

A *target* is a stage (its reference ``solutions/<stage>.py``, graded with its hidden suite without the tests
marked slow, as the catalogue does, and a mutant that survives that again with the slow tests) or ``testing``
(the comparison of ``grader/engine/testing.py``: as_array, assert_shape, assert_close, matches, which_mistake,
assert_matches; run against ``tests/project/test_assert_close.py``).
cosmic-ray (pinned in requirements-dev.txt) lists the mutants: one operator applied at one place. A mutant is
*killed* when its grading loses points (or, for ``testing``, when the test file fails), *survived* otherwise.

Resumable: each target's mutants and results live in cosmic-ray's work database, ``.mutation/<target>.sqlite``
(not committed), beside the sha256 of the source it was made from; a run grades only the mutants without a
result, so Ctrl-C, ``kill -9`` or a reboot lose at most the gradings in flight, and a changed source starts its
target again. Stage mutants are graded in a pool of ``--workers`` processes (each keeps its fork servers from one
grading to the next; the batch's executors live in classroom/, which an authoring module may not import), all
with the seed of the submission id ``mutation``.

A survivor is either *equivalent* (no program the contract allows can tell it from the reference: listed with the
reason in ``tests/mutants/equivalent.toml``, matched by target, operator, occurrence and the mutated line, so that
an entry that no longer fits its mutant is reported as stale) or a gap in the suites, to be closed with a test.
An entry of kind "unspecified" is a mutant that differs only where the contract does not say what must happen (a
non-boolean mask, a negative max_len): it is not tested, and the report proposes contract text for it. The score
per target is killed / (mutants - equivalent - unspecified); README.md shows it. A stage's mutants are those of
what students write (inside the reference's solution blocks): the rest of its module reaches them as it is.
"""
from __future__ import annotations

import ast
import concurrent.futures as cf
import difflib
import functools
import hashlib
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grader.engine import paths, run, stages
from grader.engine.options import GradingOptions

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

SESSIONS = paths.ROOT / ".mutation"
EQUIVALENT = paths.ROOT / "tests" / "mutants" / "equivalent.toml"
SUBMISSION_ID = "mutation"
COMPARISON = ("as_array", "assert_shape", "_fmt", "assert_close", "_float_array", "matches", "which_mistake",
              "assert_matches")
TESTING_SUITE = paths.ROOT / "tests" / "project" / "test_assert_close.py"
OPERATORS: dict = {}  # cosmic-ray's operators, each with its default (empty) parameters


@dataclass(frozen=True)
class Target:
    name: str
    source: Path
    functions: tuple = ()  # only mutants inside these functions (all when empty)
    suite: Path | None = None  # the test file that grades it (a stage: its suites)
    students_part: bool = False  # only mutants of what students write (a stage: its solution blocks)

    @property
    def session(self) -> Path:
        return SESSIONS / f"{self.name}.sqlite"

    def counts(self, item) -> bool:
        """Whether a mutant is one of the target's: for a stage, one inside what students write."""
        return not self.students_part or item.mutations[0].start_pos[0] in students_lines(self.source)


@functools.cache
def students_lines(source: Path) -> frozenset:
    """The line numbers inside a reference's ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` blocks: what a student
    writes. The rest of a stage's module (imports, constants, helpers such as stage 6's Vocab, load_toy_translation
    and train_seq2seq) reaches students as it is in the starter, and no hidden test grades it as theirs."""
    lines, inside = set(), False
    for number, text in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
        if "# END SOLUTION" in text:
            inside = False
        if inside:
            lines.add(number)
        if "# BEGIN SOLUTION" in text:
            inside = True
    return frozenset(lines)


def targets() -> dict:
    found = {s.id: Target(s.id, paths.SOLUTIONS / s.module_file, students_part=True) for s in stages.all_stages()}
    found["testing"] = Target("testing", paths.ROOT / "grader" / "engine" / "testing.py", COMPARISON, TESTING_SUITE)
    return found


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _lines_of(source: str, functions) -> set:
    """The line numbers of the top-level functions named ``functions``."""
    lines = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name in functions:
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def suite_digest(target: Target) -> str:
    """What grades the target's mutants: its stage's suites (``stages.suite_hash``), or the comparison's test file."""
    if target.suite is not None:
        return _digest(target.suite)
    return stages.suite_hash([stages.get(target.name)])


def open_session(target: Target, read_only: bool = False):
    """The target's work database, (re)made from its source when it is new or the source changed; when only the
    suites changed, the mutants that survived are graded again (a killed one stays killed: the suites grow).
    ``read_only`` (``--report``) opens it as it is, whatever changed since: a report never drops a result."""
    from cosmic_ray.commands.init import _all_work_items  # init() itself keeps no filter
    from cosmic_ray.work_db import WorkDB
    if read_only:
        return WorkDB(str(target.session), WorkDB.Mode.open)
    SESSIONS.mkdir(exist_ok=True)
    stamp = target.session.with_suffix(".json")
    recorded = json.loads(stamp.read_text()) if stamp.exists() and target.session.exists() else {}
    now = {"source": _digest(target.source), "suite": suite_digest(target)}
    db = WorkDB(str(target.session), WorkDB.Mode.create)
    if recorded.get("source") != now["source"]:
        items = _all_work_items([target.source], OPERATORS)
        if target.functions:
            keep = _lines_of(target.source.read_text(encoding="utf-8"), target.functions)
            items = (w for w in items if w.mutations[0].start_pos[0] in keep)
        db.clear()
        db.add_work_items(items)
    elif recorded.get("suite") != now["suite"]:
        _forget_survivors(db)
    stamp.write_text(json.dumps(now))
    return db


def _forget_survivors(db) -> None:
    from cosmic_ray.work_db import WorkResultStorage
    from cosmic_ray.work_item import TestOutcome
    with db._session_maker.begin() as session:  # noqa: SLF001 - cosmic-ray has no public way to drop a result
        session.query(WorkResultStorage).filter(WorkResultStorage.test_outcome == TestOutcome.SURVIVED).delete()


def mutated_source(item, source: str) -> str | None:
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator
    m = item.mutations[0]
    return mutate_code(source, get_operator(m.operator_name)(**m.operator_args), m.occurrence)


def changed_line(source: str, mutated: str) -> str:
    """The first line the mutant changed, as it reads after the change (how equivalent.toml names it)."""
    for line in difflib.unified_diff(source.splitlines(), mutated.splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            return line[1:].strip()
    return ""


# ---------------------------------------------------------------- grading

def grade_one(path: str, stage_id: str) -> tuple:
    """(score, max_score) of a mutant: its stage's hidden suite without the slow tests, with the seed of the
    submission id ``mutation`` (run in a process of the pool); a mutant that keeps full marks there is graded
    again with them, since some code only the end-to-end checks reach (training loops, translation, the toy
    data's loading)."""
    for fast_only in (True, False):
        s = run.grade(path, GradingOptions(stage_ids=[stage_id], fast_only=fast_only, allow_readable_secrets=True),
                      submission_id=SUBMISSION_ID)["stages"][0]
        if s["score"] < s["max_score"]:
            break
    return s["score"], s["max_score"]


def _submission(folder: Path, stage_file: str, mutated: str) -> str:
    folder.mkdir(parents=True)
    for p in paths.SOLUTIONS.glob("a[0-9][0-9]_*.py"):
        shutil.copy(p, folder / p.name)
    (folder / stage_file).write_text(mutated, encoding="utf-8")
    return str(folder)


def _grade_stage(target: Target, db, pending: list, workers: int) -> None:
    """Each mutant graded in a pool of ``workers`` processes (spawned: each keeps its fork servers)."""
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult  # a dev dependency: make mutation only
    stage = stages.get(target.name)
    source = target.source.read_text(encoding="utf-8")
    tmp = Path(tempfile.mkdtemp(prefix="grader-mutation-"))
    os.chmod(tmp, 0o755)
    done = 0
    try:
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            futures = {}
            for item in pending:
                mutated = mutated_source(item, source)
                if mutated is None:
                    db.set_result(item.job_id, WorkResult(WorkerOutcome.NO_TEST))
                    continue
                path = _submission(tmp / item.job_id, stage.module_file, mutated)
                futures[pool.submit(grade_one, path, stage.id)] = (item.job_id, changed_line(source, mutated))
            for fut in cf.as_completed(futures):
                job_id, line = futures[fut]
                try:
                    score_, max_score = fut.result()
                except Exception as exc:  # noqa: BLE001 - the grader's trouble: left pending, graded again next run
                    print(f"  {target.name}: mutant {job_id} not graded: {exc!r:.300}", flush=True)
                    continue
                outcome = TestOutcome.KILLED if score_ < max_score else TestOutcome.SURVIVED
                db.set_result(job_id, WorkResult(WorkerOutcome.NORMAL, output=f"{score_:g}/{max_score:g}",
                                                 test_outcome=outcome, diff=line))
                done += 1
                print(f"  {target.name}: {done}/{len(futures)} graded", end="\r", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()


def _grade_testing(target: Target, db, pending: list) -> None:
    """Each mutant of the comparison against tests/project/test_assert_close.py, in a copy of grader/."""
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult
    source = target.source.read_text(encoding="utf-8")
    for k, item in enumerate(pending, 1):
        mutated = mutated_source(item, source)
        if mutated is None:
            db.set_result(item.job_id, WorkResult(WorkerOutcome.NO_TEST))
            continue
        with tempfile.TemporaryDirectory(prefix="grader-mutation-") as tmp:
            shutil.copytree(paths.ROOT / "grader", Path(tmp) / "grader",
                            ignore=shutil.ignore_patterns("__pycache__", "locale", "templates"))
            shutil.copytree(paths.ROOT / "grader" / "i18n" / "locale", Path(tmp) / "grader" / "i18n" / "locale")
            (Path(tmp) / "grader" / "engine" / "testing.py").write_text(mutated, encoding="utf-8")
            shutil.copy(TESTING_SUITE, Path(tmp) / TESTING_SUITE.name)
            try:
                done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                                       "-p", "no:hypothesispytest", TESTING_SUITE.name], cwd=tmp,
                                      capture_output=True, text=True, timeout=120)
                code, tail = done.returncode, done.stdout[-500:]
            except subprocess.TimeoutExpired:
                code, tail = 1, "timed out"
        outcome = TestOutcome.SURVIVED if code == 0 else TestOutcome.KILLED
        db.set_result(item.job_id, WorkResult(WorkerOutcome.NORMAL, output=tail, test_outcome=outcome,
                                              diff=changed_line(source, mutated)))
        print(f"  testing: {k}/{len(pending)} graded", end="\r", flush=True)
    print()


# ---------------------------------------------------------------- scores

def equivalents() -> dict:
    """(target, operator, occurrence) -> (the mutated line, the reason, the kind) from tests/mutants/equivalent.toml;
    the kind is "equivalent" (no program the contract allows tells it apart) or "unspecified" (it differs only
    where the contract does not say what must happen: not tested, see the proposed contract text)."""
    if not EQUIVALENT.exists():
        return {}
    with open(EQUIVALENT, "rb") as f:
        data = tomllib.load(f)
    return {(e["target"], e["operator"], int(e["occurrence"])): (e["line"], e["reason"], e.get("kind", "equivalent"))
            for e in data.get("equivalent", [])}


@dataclass
class Score:
    target: str
    mutants: int = 0
    killed: int = 0
    equivalent: int = 0
    unspecified: int = 0
    pending: int = 0
    survivors: list = None  # (operator, occurrence, line number, mutated line)
    stale: list = None      # equivalent.toml entries that no longer fit their mutant

    @property
    def percent(self) -> float | None:
        graded = self.mutants - self.pending - self.equivalent - self.unspecified
        return None if graded <= 0 else 100.0 * self.killed / graded


def score(target: Target, db) -> Score:
    known = equivalents()
    s = Score(target.name, survivors=[], stale=[])
    results = dict(db.results)
    for item in db.work_items:
        if not target.counts(item):
            continue
        m = item.mutations[0]
        result = results.get(item.job_id)
        if result is not None and result.worker_outcome == "no-test":
            continue
        s.mutants += 1
        if result is None:
            s.pending += 1
            continue
        line = (result.diff or "").strip()
        key = (target.name, m.operator_name, m.occurrence)
        if result.test_outcome == "killed":
            s.killed += 1
            if key in known:
                s.stale.append((key, "killed now"))
        elif key in known and known[key][0].strip() == line:
            if known[key][2] == "unspecified":
                s.unspecified += 1
            else:
                s.equivalent += 1
        else:
            if key in known:
                s.stale.append((key, f"the mutant now reads {line!r}"))
            s.survivors.append((m.operator_name, m.occurrence, m.start_pos[0], line))
    return s


def report(scores: list) -> str:
    rows = ["| target | mutants | killed | equivalent | unspecified | survived | pending | score |",
            "|---|---|---|---|---|---|---|---|"]
    for s in scores:
        pct = "-" if s.percent is None else f"{s.percent:.1f} %"
        rows.append(f"| {s.target} | {s.mutants} | {s.killed} | {s.equivalent} | {s.unspecified} | "
                    f"{len(s.survivors)} | {s.pending} | {pct} |")
    lines = ["\n".join(rows)]
    for s in scores:
        for op, occ, lineno, text in s.survivors:
            lines.append(f"SURVIVED {s.target} {op} #{occ} line {lineno}: {text}")
        for key, why in s.stale:
            lines.append(f"STALE equivalent.toml entry {key}: {why}")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    workers, only_report, limit, names = 2, False, None, []
    args = iter(argv)
    for a in args:
        if a == "--workers":
            workers = int(next(args))
        elif a == "--limit":
            limit = int(next(args))
        elif a == "--report":
            only_report = True
        else:
            names.append(a)
    known = targets()
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown target(s) {unknown}; targets: {', '.join(known)}", file=sys.stderr)
        return 2
    chosen = [known[n] for n in names] or list(known.values())
    scores = []
    for target in chosen:
        if only_report and not target.session.exists():
            continue
        db = open_session(target, read_only=only_report)
        try:
            pending = [w for w in db.pending_work_items if target.counts(w)]
            if limit is not None:  # a sample spread over the module, the same one every run (by job id's hash)
                pending = sorted(pending, key=lambda w: hashlib.sha256(w.job_id.encode()).hexdigest())[:limit]
            if pending and not only_report:
                start = time.monotonic()
                print(f"{target.name}: {len(pending)} of {db.num_work_items} mutants to grade", flush=True)
                if target.name == "testing":
                    _grade_testing(target, db, pending)
                else:
                    _grade_stage(target, db, pending, workers)
                print(f"{target.name}: {time.monotonic() - start:.0f} s", flush=True)
            scores.append(score(target, db))
        finally:
            db.close()
    print(report(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
