"""The catalogue of realistic student mistakes (``tests/mutants/*.toml``).

    python -m grader.authoring.mutants a02_softmax              # each core mutant of a stage: score and feedback
    python -m grader.authoring.mutants a06_decoder --extended   # core and extended catalogues
    python -m grader.authoring.mutants a06_decoder greedy_calls_forward pre_ln_decoder_layer   # some of them
    python -m grader.authoring.mutants --seeds 5                # the reference, alternatives, core mutants on 5 seeds

A mutant is the reference submission with a few exact find/replace edits in
one stage module. ``make test`` grades every mutant of the core catalogue
(``tests/mutants/*.toml``) and asserts that its stage loses points and that the
feedback names the mistake, in English and in Korean (``named_in_korean``);
``tests/mutants/extended/`` holds more mistakes, graded by ``make catalogue``.
"""
from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.engine import paths, run, seeds, stages
from grader.engine.options import GradingOptions
from grader.i18n import Message, catalogue, localize, render

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (requirements.txt)
    import tomli as tomllib

FULL = GradingOptions()  # the hidden suites, every test: how a mistake is graded unless a caller says otherwise

@dataclass(frozen=True)
class Mutant:
    stage: str
    id: str
    description: str
    feedback_mentions: tuple
    edits: tuple  # ((find, replace), ...)
    needs_slow: bool = False  # only an end-to-end (slow) test can catch it

    @property
    def key(self) -> str:
        return f"{self.stage}:{self.id}"


def load(stage: str | None = None, extended: bool = False) -> list:
    """The core catalogue (and the extended one too if ``extended``)."""
    mutants = []
    chosen = [stages.get(stage)] if stage else stages.all_stages()
    files = [s.mutants() for s in chosen] + ([s.mutants(extended=True) for s in chosen] if extended else [])
    for path in files:
        if not path.exists():
            continue
        with open(path, "rb") as f:
            data = tomllib.load(f)
        for m in data.get("mutant", []):
            mutants.append(Mutant(path.stem, m["id"], m["description"], tuple(m.get("feedback_mentions", [])),
                                  tuple((e["find"], e["replace"]) for e in m["edits"]),
                                  bool(m.get("needs_slow", False))))
    return mutants


def apply(mutant: Mutant, source: str) -> str:
    for find, replace in mutant.edits:
        count = source.count(find)
        if count != 1:
            raise ValueError(f"{mutant.key}: edit target occurs {count} times (must be exactly once): {find!r}")
        source = source.replace(find, replace)
    return source


def build_submission(mutant: Mutant, dest: Path) -> Path:
    """The reference folder with ``mutant`` applied to its stage module."""
    dest.mkdir(parents=True, exist_ok=True)
    for p in paths.SOLUTIONS.glob("a[0-9][0-9]_*.py"):
        shutil.copy(p, dest / p.name)
    target = dest / stages.get(mutant.stage).module_file
    target.write_text(apply(mutant, target.read_text(encoding="utf-8")), encoding="utf-8")
    return dest


def build_cheat(stage: str, cheat_id: str, filling: str, dest: Path) -> Path:
    """The reference folder with cheat ``cheat_id`` of ``tests/cheats/<stage>.toml`` (a submission that tries to
    score without doing the work: edits in the catalogue's format) applied to its stage module, and the cheat's
    ``placeholder`` line replaced by ``filling``: what the student prepared at home (a table, weights)."""
    with open(paths.CHEATS / f"{stage}.toml", "rb") as f:
        cheat = next(c for c in tomllib.load(f)["cheat"] if c["id"] == cheat_id)
    edits = tuple((e["find"], e["replace"]) for e in cheat["edits"])
    sub = build_submission(Mutant(stage, cheat_id, cheat["description"], (), edits), dest)
    module = sub / stages.get(stage).module_file
    source = module.read_text(encoding="utf-8")
    if source.count(cheat["placeholder"]) != 1:
        raise ValueError(f"{stage}:{cheat_id}: the placeholder {cheat['placeholder']!r} must occur exactly once")
    module.write_text(source.replace(cheat["placeholder"], filling), encoding="utf-8")
    return sub


def alternatives(stage: str | None = None) -> list:
    """(stage, path) of every alternative correct implementation."""
    chosen = [stages.get(stage)] if stage else stages.all_stages()
    return [(s.id, p) for s in chosen for p in s.alternatives]


def build_alternative(stage: str, path: Path, dest: Path, mistake: Mutant | None = None) -> Path:
    """The reference folder with the stage module replaced by an alternative (or an upstream
    variant), with ``mistake``'s edits applied to it if given."""
    dest.mkdir(parents=True, exist_ok=True)
    for p in paths.SOLUTIONS.glob("a[0-9][0-9]_*.py"):
        shutil.copy(p, dest / p.name)
    source = path.read_text(encoding="utf-8")
    (dest / stages.get(stage).module_file).write_text(apply(mistake, source) if mistake else source,
                                                      encoding="utf-8")
    return dest


@dataclass(frozen=True)
class Upstream:
    """A correct earlier stage that uses the contract's freedoms (``tests/upstream/<stage>/<name>.py``):
    it must score full marks in its stage and in every stage built on it. ``mistakes`` are catalogued
    mistakes of its stage re-expressed on it (the catalogue's description and feedback words, the
    variant's own edits): each must cost points in its stage only."""
    stage: str
    path: Path
    mistakes: tuple = ()

    @property
    def key(self) -> str:
        return f"{self.stage}/{self.path.stem}"

    @property
    def graded_with(self) -> list:
        """Its stage and every stage built on it."""
        return [self.stage, *stages.get(self.stage).dependents]


def upstream(stage: str | None = None) -> list:
    """Every upstream variant, with its mistakes (read from the ``.toml`` beside it)."""
    chosen = [stages.get(stage)] if stage else stages.all_stages()
    catalogued = {m.id: m for m in load(extended=True)}
    found = []
    for s in chosen:
        for path in s.upstream_variants:
            mistakes = []
            sidecar = path.with_suffix(".toml")
            if sidecar.exists():
                with open(sidecar, "rb") as f:
                    for m in tomllib.load(f).get("mistake", []):
                        known = catalogued.get(m["mutant"])
                        if known is None or known.stage != s.id:
                            raise ValueError(f"{sidecar}: {m['mutant']!r} is not a catalogued mistake of {s.id}")
                        edits = tuple((e["find"], e["replace"]) for e in m["edits"])
                        mistakes.append(dataclasses.replace(known, edits=edits))
            found.append(Upstream(s.id, path, tuple(mistakes)))
    return found


def grade_upstream(variant: Upstream, dest: Path, mistake: Mutant | None = None,
                   options: GradingOptions = FULL) -> dict:
    """The report of the variant (with ``mistake`` applied) graded with every stage built on it, with ``options``."""
    sub = build_alternative(variant.stage, variant.path, dest, mistake)
    return run.grade(str(sub), dataclasses.replace(options, stage_ids=variant.graded_with))


def upstream_shortfalls(report: dict, mistake: Mutant | None = None) -> list:
    """What is wrong with an upstream variant's report: without a mistake, any stage below full marks;
    with one, its own stage not caught and named, or any later stage below full marks."""
    problems = []
    for s in report["stages"]:
        if mistake is not None and s["id"] == mistake.stage:
            if verdict(mistake, s) != "CAUGHT":
                problems.append(f"{s['id']}: {verdict(mistake, s)} {mistake.id}: {failed_feedback(s)[:400]}")
        elif s["score"] != s["max_score"]:
            problems.append(f"{s['id']} {s['score']:g}/{s['max_score']:g}: {failed_feedback(s)[:400]}")
    return problems


def naming_messages(mutant: Mutant, feedback) -> list:
    """The marked texts of ``feedback`` that name ``mutant`` in English: the innermost ones whose own text
    (their msgid and the plain values they show, e.g. an exception's type; not the texts nested in them)
    holds one of its ``feedback_mentions``."""
    words = [w.lower() for w in mutant.feedback_mentions]
    found = []

    def walk(message):
        if not isinstance(message, Message):
            return False
        inner = [walk(p) for p in (*message.params.values(), *message.parts)]
        plain = [str(v) for v in message.params.values() if not isinstance(v, Message)]
        own = " ".join([message.msgid or "", *plain]).lower()
        if not any(inner) and any(w in own for w in words):
            found.append(message)
            return True
        return any(inner)

    walk(feedback)
    return found


def named_in_korean(mutant: Mutant, stage_entry: dict) -> bool:
    """Whether the Korean feedback of a stage entry graded with ``language=None`` (its texts still
    Messages) names the mistake: a failed test's feedback holds a text that names it in English
    (``naming_messages``), the Korean catalogue translates that text, and the Korean feedback shows it."""
    for t in stage_entry["tests"]:
        if t["status"] == "passed":
            continue
        korean = render(t["feedback"], "ko")
        for m in naming_messages(mutant, t["feedback"]):
            if catalogue.gettext(m.msgid, "ko") != m.msgid and render(m, "ko") in korean:
                return True
    return False


def grade_both(mutant: Mutant, sub: Path, options: GradingOptions = FULL) -> tuple[dict, bool]:
    """The mutant's stage entry in English, and whether its Korean feedback names the mistake: one grading
    with ``options`` (the feedback is rendered in both languages from the same results)."""
    entry = run.grade(str(sub), dataclasses.replace(options, stage_ids=[mutant.stage], language=None))["stages"][0]
    return localize(entry, "en"), named_in_korean(mutant, entry)


def failed_feedback(stage_report: dict) -> str:
    return " | ".join(f"{t['name']}: {t['feedback']}" for t in stage_report["tests"] if t["status"] != "passed")


def verdict(mutant: Mutant, stage_report: dict) -> str:
    """CAUGHT (the stage loses points and the feedback names the mistake), NOT NAMED or MISSED."""
    lost = stage_report["max_score"] - stage_report["score"]
    text = failed_feedback(stage_report).lower()
    mentioned = any(w.lower() in text for w in mutant.feedback_mentions)
    return "CAUGHT" if lost > 0 and mentioned else ("NOT NAMED" if lost > 0 else "MISSED")


def seed_values(n: int) -> list:
    """The seeds ``--seeds n`` grades on: those of submission ids catalogue-1 .. catalogue-n
    under the course secret (what real students of this term get, not a hand-picked draw)."""
    return [seeds.submission_seed(f"catalogue-{i}") for i in range(1, n + 1)]


def sweep(n: int, stage: str | None = None, extended: bool = False) -> int:
    """For each of ``n`` seeds: the reference (full marks?), every alternative (full marks) and
    every catalogued mistake (caught, named), one line per seed, then the totals. The suites
    must not depend on a lucky draw of their random inputs. Exit 1 on any shortfall.
    The tests marked slow (end-to-end training, whose inputs are fixed) run only for the mutants
    that need them; ``make test`` grades everything on the default seed."""
    chosen = [stage] if stage else None
    totals = {"ref": 0, "alt": [0, 0], "up": [0, 0], "caught": 0, "named": 0, "mutants": 0}
    bad_lines, shown = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for k, seed in enumerate(seed_values(n), 1):
            fast = GradingOptions(fast_only=True, seed=seed)
            ref = run.grade(str(paths.SOLUTIONS), dataclasses.replace(fast, stage_ids=chosen))
            ref_full = all(s["score"] == s["max_score"] for s in ref["stages"])
            if not ref_full:
                bad_lines.append(f"seed {seed}: reference {failed_feedback_all(ref)[:600]}")
            fair = []
            for st, path in alternatives(stage):
                dest = Path(tmp) / f"s{k}" / "alt" / st / path.stem
                s = run.grade(str(build_alternative(st, path, dest)), dataclasses.replace(fast, stage_ids=[st]))
                s = s["stages"][0]
                fair.append(s["score"] == s["max_score"])
                if not fair[-1]:
                    bad_lines.append(f"seed {seed}: UNFAIR alternative {st}/{path.name}: {failed_feedback(s)[:600]}")
            up = []
            for v in upstream(stage):
                problems = upstream_shortfalls(grade_upstream(v, Path(tmp) / f"s{k}" / "up" / v.key, options=fast))
                up.append(not problems)
                bad_lines += [f"seed {seed}: UNFAIR upstream {v.key}: {p}" for p in problems]
            verdicts = []
            for m in load(stage, extended):
                sub = build_submission(m, Path(tmp) / f"s{k}" / m.stage / m.id)
                s = run.grade(str(sub), dataclasses.replace(fast, stage_ids=[m.stage], fast_only=not m.needs_slow))
                s = s["stages"][0]
                verdicts.append(verdict(m, s))
                if verdicts[-1] != "CAUGHT":
                    bad_lines.append(f"seed {seed}: {verdicts[-1]} {m.key}: {failed_feedback(s)[:600]}")
            caught, named = sum(v != "MISSED" for v in verdicts), verdicts.count("CAUGHT")
            print(f"seed {seed:>15}: reference full marks {'yes' if ref_full else 'NO'}, alternatives full marks "
                  f"{sum(fair)}/{len(fair)}, upstream variants full marks downstream {sum(up)}/{len(up)}, "
                  f"mutants caught {caught}/{len(verdicts)}, named {named}/{len(verdicts)}", flush=True)
            for line in bad_lines[shown:]:
                print(f"    {line}", flush=True)
            shown = len(bad_lines)
            totals["ref"] += ref_full
            totals["alt"][0] += sum(fair)
            totals["alt"][1] += len(fair)
            totals["up"][0] += sum(up)
            totals["up"][1] += len(up)
            totals["caught"] += caught
            totals["named"] += named
            totals["mutants"] += len(verdicts)
    print(f"over {n} seeds: reference full marks {totals['ref']}/{n}, alternatives full marks "
          f"{totals['alt'][0]}/{totals['alt'][1]}, upstream variants full marks downstream "
          f"{totals['up'][0]}/{totals['up'][1]}, mutants caught {totals['caught']}/{totals['mutants']}, "
          f"named {totals['named']}/{totals['mutants']}")
    return 0 if not bad_lines else 1


def failed_feedback_all(report: dict) -> str:
    return " | ".join(f"{s['id']}: {failed_feedback(s)}" for s in report["stages"] if s["score"] < s["max_score"])


def main(argv=None) -> int:
    """Grade each mutant (and each alternative) and print one line each, then the totals;
    exit 1 when a mutant is missed or not named, or an alternative loses points.
    ``--seeds N``: the same on N seeds of the hidden inputs (core catalogue unless --extended)."""
    argv = sys.argv[1:] if argv is None else argv
    extended = "--extended" in argv
    if "--seeds" in argv:
        i = argv.index("--seeds")
        n = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
        words = [a for a in argv if not a.startswith("--")]
        return sweep(n, words[0] if words else None, extended)
    words = [a for a in argv if not a.startswith("--")]
    stage, only = (words[0], set(words[1:])) if words else (None, set())
    verdicts, fair, korean = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for m in load(stage, extended):
            if only and m.id not in only:
                continue
            sub = build_submission(m, Path(tmp) / m.stage / m.id)
            s, named_ko = grade_both(m, sub, GradingOptions(fast_only=not m.needs_slow))
            verdicts.append(verdict(m, s))
            korean.append(verdicts[-1] == "CAUGHT" and named_ko)
            print(f"{verdicts[-1]:9} {m.key}: {m.description} — {s['score']:.2f}/{s['max_score']:.2f}"
                  + ("" if korean[-1] or verdicts[-1] != "CAUGHT" else " (not named in Korean)"), flush=True)
            if s["score"] < s["max_score"]:
                print(f"          {failed_feedback(s)[:600]}")
        for st, path in ([] if only else alternatives(stage)):
            rep = run.grade(str(build_alternative(st, path, Path(tmp) / "alt" / st / path.stem)),
                            GradingOptions(stage_ids=[st]))
            s = rep["stages"][0]
            fair.append(s["score"] == s["max_score"])
            print(f"{'FULL' if fair[-1] else 'UNFAIR':9} alternative {st}/{path.name} — "
                  f"{s['score']:.2f}/{s['max_score']:.2f}", flush=True)
            if not fair[-1]:
                print(f"          {failed_feedback(s)[:600]}")
        up = []
        for v in ([] if only else upstream(stage)):
            problems = upstream_shortfalls(grade_upstream(v, Path(tmp) / "up" / v.key))
            up.append(not problems)
            print(f"{'FULL' if up[-1] else 'UNFAIR':9} upstream {v.key} through {', '.join(v.graded_with)}", flush=True)
            for problem in problems:
                print(f"          {problem}")
    caught = sum(v != "MISSED" for v in verdicts)
    named = verdicts.count("CAUGHT")
    if up:
        print(f"upstream variants full marks in every stage built on them: {sum(up)}/{len(up)}")
    print(f"mutants caught: {caught}/{len(verdicts)}")
    print(f"alternatives full marks: {sum(fair)}/{len(fair)}")
    print(f"named in feedback: {named}/{len(verdicts)}")
    print(f"named in feedback (ko): {sum(korean)}/{len(verdicts)}")
    return 0 if named == len(verdicts) and sum(korean) == len(verdicts) and all(fair) and all(up) else 1


if __name__ == "__main__":
    sys.exit(main())
