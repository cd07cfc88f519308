"""Which students handed in the same code: ``python -m grader similarity OUT_DIR``.

Compares the students' stage modules stage by stage with copydetect (PyPI
``copydetect``, MIT): a MOSS-style detector that turns the code into pygments
tokens with every name a ``V``/``F``/``O`` and every string an ``S`` and
comments and whitespace dropped, hashes every k characters of that
(``K``, its *noise threshold*), keeps the smallest hash of each window of
``WINDOW`` hashes (winnowing: a match of ``K + WINDOW - 1`` characters or more,
its *guarantee threshold*, is always seen) and compares the sets. For a pair it
gives each side's share of tokens found in the other (``sim_a``, ``sim_b``) and
the copied character ranges of each file. This module writes no fingerprinting
of its own: it chooses what to compare, reads the numbers and shows them.

* The stage's starter file is copydetect's boilerplate: what the course hands
  out (signatures, docstrings, course-provided functions) never counts, and a
  module identical to the starter, or with nothing left once it is removed, is
  not compared.
* Every pair of students who both handed in a stage is compared, and each
  student with each *reference* entry (``--reference DIR``: last year's
  submissions, public solutions; each sub-folder, zip or notebook of DIR is
  one author). Reference entries are never compared with each other.
* A pair's score in a stage is ``max(sim_a, sim_b)``: a module contained in
  the other counts in full even when the other is longer. It is *flagged* at
  ``FLAG`` or more. Pairs are ranked over all stages by the number of flagged
  stages, then their highest score, then the mean over the stages both handed in.

Parameters, measured on ``tests/fixtures/similarity_class.py`` (per stage the
reference and the correct alternatives of ``tests/alternatives/`` as independent
authors; copies of them renamed, reordered, restyled, all three, or with one
function taken from another author; the classes of seeds 0-19: 1310 copied and
2854 independent stage pairs) over k 15-50, windows 1, 4, 8 and the score as
the max, mean or min of the two similarities:

* ``K = 25`` (copydetect's default, about one line of code once names are
  letters). With a window of 8, k from 15 to 40 separate the fixture alike
  (independent pairs at most 0.41-0.48, whole-file copies at least 0.87);
  at 50 the copies with one function rewritten fall to 0.28. What a larger k
  costs is edits: with a ``pass`` inserted after every second statement a
  copy still scores 0.81 or more at k = 25, 0.62 at 40, 0.55 at 50.
* ``WINDOW = 8`` (a match of 32 filtered characters is always found): the
  highest independent pair is lower than with every k-gram kept (0.46 against
  0.54 at a window of 1) and comparing is 3.5 times faster (fewer
  fingerprints): 200 students x 9 stages in 35 s instead of 100 s, 2 cores.
* ``FLAG = 0.6`` on ``max(sim_a, sim_b)``: the highest independent pair (0.42,
  the two stage-7 alternatives, whose constructors the contract dictates line
  by line) is 0.18 below it, for a class of 200 has more pairs than the fixture
  and so a longer tail; whole-file copies score 0.90-1.00. Precision 1.000 and
  recall 0.991 over all stage pairs (0.986 over student pairs); what it misses
  are copies with one of a stage's *two* functions rewritten (stages 2 and 9,
  half the module another author's: 0.47-0.62), which still rank above every
  independent pair of their stage. The max, the mean and the min of the two
  similarities separate the fixture alike (by 0.32 in the worst stage); the
  max also catches a module copied whole into a longer one, whose own
  additions lower only their side, which the mean or the min would halve.

What copydetect does that the numbers include: its boilerplate removal
(``np.intersect1d(..., assume_unique=True)`` on hashes that repeat) keeps only
the last occurrence of a fingerprint repeated in a file, so repeated code counts
once; its map from filtered back to raw code is wrong at a class name (its
offset table holds the name's length there), so a highlight boundary that falls
on one (50 of 6442 on the fixture's copies) starts or ends too early (the
similarities, computed on the filtered code, are not affected; ``ranges`` drops
what comes out reversed); and it hashes with Python's ``hash()``, salted per
process: every fingerprint of a run is made and compared in one child process
whose salt is fixed (``write_report``), so a class gives the same figures every time.
"""
from __future__ import annotations

import datetime as dt
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from copydetect import CodeFingerprint, compare_files
from markupsafe import Markup
from sqlalchemy.exc import ArgumentError, OperationalError

from grader import i18n
from grader.engine import paths, stages, submission
from grader.engine.atomic import write_bytes
from grader.i18n import languages, render, tr

from . import html_report, spreadsheet
from .discovery import Job, discover
from .gradebook import Gradebook, default_url, redact
from .outputs import readable_outputs
from .spreadsheet import safe_cell

K = 25          # noise threshold: characters of filtered code in a hashed k-gram
WINDOW = 8      # winnowing window: guarantee threshold = K + WINDOW - 1 = 32
FLAG = 0.6      # a stage pair's score (max of the two similarities) from which it is flagged
TOP = 10        # pairs shown side by side on the page and printed
ROWS = 100      # rows of the page's ranking (every pair is in similarity.csv)
STAGE_ROWS = 20  # rows of each stage's table on the page
HASH_SEED = "0"  # PYTHONHASHSEED of the child that fingerprints (write_report says why)


# ---------------------------------------------------------------- what is compared

@dataclass
class Author:
    """A student's submission or a reference entry: its stage modules' text."""
    id: str
    kind: str                                   # "student" | "reference"
    path: str
    modules: dict = field(default_factory=dict)  # stage id -> text


def read_modules(job, chosen, log, kind: str = "student", name: str | None = None) -> Author | None:
    """The text of each chosen stage module of ``job`` (intake into a private folder, as the batch
    does) as an Author named ``name`` (default: the job's id); None, with a line to ``log``, when the
    submission cannot be read. A module that is not UTF-8 is left out with a line; the others are kept."""
    name = name or job.id
    tmp = tempfile.mkdtemp(prefix="grader-similarity-")
    try:
        target = job.path
        if job.format is submission.Format.NOTEBOOKS:
            target = submission.notebook_alone(job.path, tmp)
        folder = Path(submission.intake(target, os.path.join(tmp, "intake"), job.id).folder)
        author = Author(name, kind, job.path)
        for s in chosen:
            p = folder / s.module_file
            if not p.is_file():
                continue
            try:
                author.modules[s.id] = p.read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                log(tr("skipped {student} {stage}: not UTF-8 text ({reason} at byte {byte})", student=name,
                       stage=s.id, reason=exc.reason, byte=exc.start))
        return author
    except submission.UnreadableSubmission as exc:
        log(tr("skipped {student}: {problem}", student=name, problem=i18n.of(exc)))
    except OSError as exc:
        log(tr("skipped {student}: cannot be read ({problem})", student=name, problem=str(exc)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return None


def read_all(jobs, chosen, log, kind="student", prefix="") -> list:
    """The Authors of ``jobs`` that can be read (``read_modules``), named ``prefix + id``."""
    authors = []
    for job in jobs:
        if getattr(job, "unreadable", ""):
            log(tr("skipped {student}: {problem}", student=prefix + job.id, problem=job.unreadable))
            continue
        author = read_modules(job, chosen, log, kind, prefix + job.id)
        if author is not None:
            authors.append(author)
    return authors


def read_references(folders, chosen, log) -> list:
    """Each sub-folder, zip or notebook of each reference folder is one reference author,
    named ``<folder>/<entry>``."""
    authors, used = [], set()
    for folder in folders:
        name = label = Path(folder).resolve().name
        n = 1
        while label in used:  # two folders of one name: the second is <name>-2/...
            n += 1
            label = f"{name}-{n}"
        used.add(label)
        jobs, _ = discover(Path(folder))
        authors += read_all(jobs, chosen, log, kind="reference", prefix=f"{label}/")
    return authors


# ---------------------------------------------------------------- comparing

@dataclass
class Match:
    """Two authors' modules of one stage."""
    stage: str
    a: str
    b: str
    sim_a: float        # share of a's tokens found in b
    sim_b: float
    slices_a: object    # copydetect's 2 x N array: character ranges of a's code found in b (see ``ranges``)
    slices_b: object

    @property
    def score(self) -> float:
        return max(self.sim_a, self.sim_b)

    @property
    def flagged(self) -> bool:
        return self.score >= FLAG


def _fingerprint(name: str, text: str, boilerplate, k: int, window: int) -> CodeFingerprint:
    return CodeFingerprint(name, k, window, boilerplate, filter=True, language="python", fp=io.StringIO(text))


def boilerplate(stage, k: int = K) -> np.ndarray:
    """Every k-gram hash of the stage's starter (copydetect's own way: a window of 1)."""
    text = stage.starter.read_text(encoding="utf-8") if stage.starter.is_file() else ""
    return np.array(sorted(_fingerprint(stage.module_file, text, None, k, 1).hashes), dtype=np.int64)


def fingerprints(stage, authors, k: int = K, window: int = WINDOW) -> dict:
    """{author id: CodeFingerprint} of the authors who handed in something of their own for ``stage``."""
    starter = stage.starter.read_text(encoding="utf-8") if stage.starter.is_file() else None
    bp = boilerplate(stage, k)
    found, seen = {}, {}
    for author in authors:
        text = author.modules.get(stage.id)
        if text is None or text == starter:
            continue
        if text not in seen:  # identical files (a copy handed in as is) are fingerprinted once
            seen[text] = _fingerprint(f"{author.id}/{stage.module_file}", text, bp, k, window)
        if seen[text].hashes:  # nothing left once the starter is removed: nothing to compare
            found[author.id] = seen[text]
    return found


def ranges(slices, n: int) -> list:
    """copydetect's 2 x N slices as sorted, merged (start, end) pairs within [0, n] (copydetect maps
    them back to the raw code through its filtering offsets, which are off after a class name: a
    range that comes out reversed is dropped)."""
    if len(slices) == 0 or len(slices[0]) == 0:
        return []
    merged = []
    for start, end in sorted(zip((int(x) for x in slices[0]), (int(x) for x in slices[1]))):
        start, end = max(0, min(start, n)), max(0, min(end, n))
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def compare_stage(stage_id: str, fps: dict, kinds: dict) -> list:
    """Every pair of ``fps`` (id -> fingerprint) but two references, as Matches."""
    ids = sorted(fps)
    matches = []
    for i, a in enumerate(ids):
        fa = fps[a]
        for b in ids[i + 1:]:
            if kinds[a] == kinds[b] == "reference":
                continue
            fb = fps[b]
            if fa.hashes.isdisjoint(fb.hashes):  # nothing in common: skip copydetect's work
                matches.append(Match(stage_id, a, b, 0.0, 0.0, (), ()))
                continue
            _, (sim_a, sim_b), (slices_a, slices_b) = compare_files(fa, fb)
            matches.append(Match(stage_id, a, b, float(sim_a), float(sim_b), slices_a, slices_b))
    return matches


@dataclass
class Pair:
    """Two authors over every stage they both handed in."""
    a: str
    b: str
    matches: list

    @property
    def flagged(self) -> list:
        return [m for m in self.matches if m.flagged]

    @property
    def best(self) -> float:
        return max(m.score for m in self.matches)

    @property
    def mean(self) -> float:
        return statistics.fmean(m.score for m in self.matches)

    def key(self):
        return (-len(self.flagged), -self.best, -self.mean, self.a, self.b)


def rank(matches) -> list:
    """Pairs of authors, most suspicious first (flagged stages, best score, mean score)."""
    by_pair = {}
    for m in matches:
        by_pair.setdefault((m.a, m.b), []).append(m)
    return sorted((Pair(a, b, ms) for (a, b), ms in by_pair.items()), key=Pair.key)


@dataclass
class Result:
    matches: list                                # every compared stage pair
    pairs: list                                  # ranked Pairs
    authors: list
    texts: dict = field(default_factory=dict)    # stage -> author -> the module compared
    skipped: list = field(default_factory=list)  # lines about what could not be read
    html: Path | None = None
    csv: Path | None = None


def analyse(authors, chosen, k: int = K, window: int = WINDOW) -> Result:
    """Fingerprint each module once, compare every stage pair, rank the pairs."""
    kinds = {a.id: a.kind for a in authors}
    matches, texts = [], {}
    for stage in chosen:
        fps = fingerprints(stage, authors, k, window)
        texts[stage.id] = {aid: fp.raw_code for aid, fp in fps.items()}
        matches += compare_stage(stage.id, fps, kinds)
    return Result(matches, rank(matches), authors, texts)


def report_here(out_dir, jobs, chosen, *, references=(), log=print, top: int = TOP, language: str = "en") -> Result:
    """``write_report``'s work, in this process: its figures move with this process's hash salt
    unless PYTHONHASHSEED is set (``write_report`` sets it). The page and the lines about what was
    skipped are in ``language``."""
    out_dir = Path(out_dir)
    skipped = []

    def note(line):
        line = render(line, language)
        skipped.append(line)
        log(line)

    authors = read_all(jobs, chosen, note) + read_references(references, chosen, note)
    result = analyse(authors, chosen)
    result.skipped = skipped
    result.csv, result.html = out_dir / "similarity.csv", out_dir / "html" / "similarity.html"
    write_csv(result.csv, result.matches)
    write_pairs_csv(out_dir / "similarity-pairs.csv", result.pairs)
    write_bytes(str(result.html), page(result, chosen, top=top, language=language).encode())
    readable_outputs(out_dir)
    return result


@dataclass
class Summary:
    """What ``write_report`` tells its caller: where the outputs are, the top pairs, what was skipped."""
    html: str
    csv: str
    pairs_csv: str
    n_authors: int
    top: list       # [{"a", "b", "flagged", "compared", "best", "best_stage", "mean"}], most similar first
    skipped: list


def _summary(result: Result, out_dir: Path, top: int) -> dict:
    rows = []
    for pair in result.pairs[:top]:
        best = max(pair.matches, key=lambda m: m.score)
        rows.append({"a": pair.a, "b": pair.b, "flagged": len(pair.flagged), "compared": len(pair.matches),
                     "best": best.score, "best_stage": best.stage, "mean": pair.mean})
    return {"html": str(result.html), "csv": str(result.csv), "pairs_csv": str(out_dir / "similarity-pairs.csv"),
            "n_authors": len(result.authors), "top": rows, "skipped": result.skipped}


def write_report(out_dir, jobs, chosen, *, references=(), log=print, top: int = TOP,
                 language: str = "en") -> Summary | None:
    """Compare the submissions ``jobs`` (``discovery.discover``'s) and the entries of the folders
    ``references`` on the stages ``chosen``; write ``OUT/similarity.csv`` (every stage pair),
    ``OUT/similarity-pairs.csv`` (the ranking) and ``OUT/html/similarity.html`` (in ``language``; the CSV
    files keep their English column names).

    The work runs in a child Python with ``PYTHONHASHSEED`` fixed: copydetect hashes k-grams with
    ``hash()``, salted per process, and which of them a window keeps depends on the hash values, so
    under a random salt a pair's score moved by up to 0.12 from one run to the next (measured on
    the fixture); with the seed fixed the same submissions give the same figures. A submission or
    module that cannot be read is skipped with a line to ``log``; None (and a line) if the child failed.
    """
    request = {"out_dir": str(Path(out_dir).resolve()), "stages": [s.id for s in chosen], "top": top,
               "language": language,
               "references": [str(Path(r).resolve()) for r in references],
               "jobs": [{"id": j.id, "slug": j.slug, "path": j.path, "format": j.format.value,
                         "unreadable": getattr(j, "unreadable", "")} for j in jobs]}
    env = {**os.environ, "PYTHONHASHSEED": HASH_SEED,
           "PYTHONPATH": os.pathsep.join(p for p in (str(paths.ROOT), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-m", "grader.classroom.similarity"], input=json.dumps(request),
                          stdout=subprocess.PIPE, text=True, env=env, check=False)
    if proc.returncode != 0:
        log(render(tr("the similarity report failed (exit code {code}); nothing was written",
                      code=proc.returncode), language))
        return None
    summary = Summary(**json.loads(proc.stdout))
    for line in summary.skipped:
        log(line)
    return summary


def _child() -> int:
    """``write_report``'s child: the request on stdin, the Summary as JSON on stdout."""
    request = json.load(sys.stdin)
    jobs = [Job(**j) for j in request["jobs"]]
    chosen = stages.resolve(request["stages"])
    result = report_here(request["out_dir"], jobs, chosen, references=request["references"],
                         log=lambda line: None, top=request["top"], language=request["language"])
    json.dump(_summary(result, Path(request["out_dir"]), request["top"]), sys.stdout)
    return 0


# ---------------------------------------------------------------- outputs

def write_pairs_csv(path: Path, pairs) -> None:
    """One row per pair of authors, in the page's order: flagged stages, stages compared, highest, mean."""
    table = [["rank", "student_a", "student_b", "flagged_stages", "stages_compared", "highest", "highest_stage",
              "mean"]]
    for n, pair in enumerate(pairs, start=1):
        best = max(pair.matches, key=lambda m: m.score)
        table.append([n, safe_cell(pair.a), safe_cell(pair.b), len(pair.flagged), len(pair.matches),
                      f"{best.score:.4f}", best.stage, f"{pair.mean:.4f}"])
    spreadsheet.write(path, table)


def write_csv(path: Path, matches) -> None:
    """One row per compared stage pair (pair, stage, sim_a, sim_b, flagged), highest score first."""
    table = [["student_a", "student_b", "stage", "sim_a", "sim_b", "score", "flagged"]]
    for m in sorted(matches, key=lambda m: (-m.score, m.stage, m.a, m.b)):
        table.append([safe_cell(m.a), safe_cell(m.b), m.stage, f"{m.sim_a:.4f}", f"{m.sim_b:.4f}", f"{m.score:.4f}",
                      int(m.flagged)])
    spreadsheet.write(path, table)


def segments(text: str, ranges: list) -> list:
    """``text`` cut into [(piece, copied)] along ``ranges``: the template escapes each piece."""
    out, pos = [], 0
    for start, end in ranges:
        if start > pos:
            out.append((text[pos:start], False))
        out.append((text[start:end], True))
        pos = end
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def _side_by_side(m: Match, texts: dict) -> dict:
    left, right = texts[m.stage][m.a], texts[m.stage][m.b]
    return {"match": m, "left": segments(left, ranges(m.slices_a, len(left))),
            "right": segments(right, ranges(m.slices_b, len(right)))}


def page(result: Result, chosen, *, top: int = TOP, language: str = "en") -> str:
    """The instructors' page: the ranking, the top pairs side by side, a table and histogram per stage; in
    ``language``."""
    kinds = {a.id: a.kind for a in result.authors}
    shown = []
    for n, pair in enumerate(result.pairs[:top], start=1):
        ms = sorted(pair.matches, key=lambda m: -m.score)
        views = [_side_by_side(m, result.texts) for m in (pair.flagged or ms[:1])]
        shown.append({"n": n, "pair": pair, "anchor": f"pair-{n}", "views": views})
    anchors = {(v["pair"].a, v["pair"].b): v["anchor"] for v in shown}
    n_flagged = sum(bool(p.flagged) for p in result.pairs)
    ranking = result.pairs[:min(max(n_flagged, top), ROWS)]
    per_stage = []
    for s in chosen:
        ms = sorted((m for m in result.matches if m.stage == s.id), key=lambda m: (-m.score, m.a, m.b))
        handed = len(result.texts.get(s.id, {}))
        plot = html_report.svg_histogram([m.score for m in ms], 0.0, 1.0, bins=20, title=s.id,
                                         xlabel=render(tr("score (the larger similarity of the pair)"), language))
        per_stage.append({"stage": s, "handed": handed, "n": len(ms), "flagged": sum(m.flagged for m in ms),
                          "rows": ms[:STAGE_ROWS],
                          "plot": Markup(plot)})  # our own autoescaped SVG template, as in class.html
    return html_report.render(
        "similarity.html", lang=language, now=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        n_students=sum(k == "student" for k in kinds.values()),
        n_references=sum(k == "reference" for k in kinds.values()), kinds=kinds,
        k=K, window=WINDOW, flag=FLAG, shown=shown, anchors=anchors, ranking=ranking, per_stage=per_stage,
        skipped=result.skipped, n_pairs=len(result.pairs), n_flagged=n_flagged)


# ---------------------------------------------------------------- the command

def _latest_run(out_dir: Path, url: str | None):
    """The latest batch run recorded in OUT_DIR's gradebook (or ``url``), None when there is none;
    raises ValueError with one line when the gradebook cannot be opened."""
    if url is None:
        url = default_url(str(out_dir))
        if not (out_dir / "gradebook.sqlite").is_file():
            return None
    try:
        book = Gradebook(url)
    except (ArgumentError, OperationalError, ImportError, RuntimeError) as exc:
        shown = redact(url) if "://" in url else url
        raise ValueError(f"cannot open the gradebook {shown}: {str(exc).splitlines()[0]}") from None
    try:
        runs = [r for r in book.runs() if r.get("submissions_dir")]
    finally:
        book.close()
    return runs[-1] if runs else None


def compare_folder(out_dir: Path, subs, chosen, references=(), language: str = "en") -> int:
    """Compare the submissions in ``subs`` (and the entries of the ``references`` folders) on the stages
    ``chosen``, write the outputs into ``out_dir`` and print the top pairs, in ``language``; the exit code (0,
    2: a folder is not one, 1: the comparison failed). ``grader similarity`` and ``batch --similarity`` end
    here."""
    def say(msg, **kw):
        print(render(msg, language), **kw)

    for folder in [subs, *references]:
        if not Path(folder).is_dir():
            say(tr("error: {problem}", problem=tr("{folder} is not a folder of submissions", folder=folder)),
                file=sys.stderr)
            return 2
    jobs, _ = discover(Path(subs), exclude=[out_dir])
    summary = write_report(out_dir, jobs, chosen, references=references, language=language,
                           log=lambda line: print(line, file=sys.stderr))
    if summary is None:
        return 1
    say(tr("{count} submissions and reference entries compared on {stages}; a stage pair is flagged at {share}",
           count=summary.n_authors, stages=", ".join(s.id for s in chosen), share=f"{FLAG:.0%}"))
    for n, row in enumerate(summary.top, start=1):
        say(tr("{rank}. {a} & {b}: {flagged} of {compared} stages flagged, highest {best} ({stage}), mean {mean}",
               rank=f"{n:3}", a=row["a"], b=row["b"], flagged=row["flagged"], compared=row["compared"],
               best=f"{row['best']:.0%}", stage=row["best_stage"], mean=f"{row['mean']:.0%}"))
    say(tr("page: {page}", page=summary.html))
    say(tr("tables: {tables}", tables=f"{summary.csv}, {summary.pairs_csv}"))
    return 0


def main(args) -> int:
    """Entry point of ``python -m grader similarity`` (``args`` from grader.cli)."""
    out_dir = Path(args.out_dir).resolve()
    if not out_dir.is_dir():
        print(f"error: {args.out_dir} is not a folder (the --out of a batch)", file=sys.stderr)
        return 2
    try:
        run = _latest_run(out_dir, args.gradebook)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    subs = args.submissions or (run["submissions_dir"] if run else None)
    if subs is None:
        print(f"error: no batch run recorded in {out_dir} (no gradebook); give --submissions DIR", file=sys.stderr)
        return 2
    stage_ids = [s for s in (args.stages or "").split(",") if s] or (
        run["stages"].split(",") if run and run.get("stages") else None)
    return compare_folder(out_dir, subs, stages.resolve(stage_ids), args.reference or (),
                          languages.for_command("similarity", args.lang))


if __name__ == "__main__":
    sys.exit(_child())
