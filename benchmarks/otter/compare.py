"""Per-submission grading time: our grader against Otter-Grader's ``otter run``.

    python -m benchmarks.otter.compare [--quick] [--repeat N]

Two equivalent questions, softmax and scaled dot-product attention (numpy):

* Otter: OK-format tests ``benchmarks/otter/tests/q_softmax.py`` (12 cases, one
  per hidden test function of a02_softmax) and ``q_attention.py`` (17 cases,
  one per hidden test function of a03_attention), with the same inputs, the
  same tolerances and the same vectorisation check; built into an autograder
  zip with ``otter generate``; the submission is one ``.py`` file (the reference
  a02_softmax.py and a03_attention.py one after the other), graded with
  ``otter run -a autograder.zip`` (Otter's non-container local runner: it
  executes the submission in a Jupyter kernel and runs the tests there).
* Ours: ``python -m grader grade SUB --stages a02_softmax,a03_attention`` on a
  folder holding the same two modules (hidden suites; strict isolation as root).

Both are timed as whole commands (wall clock, interleaved, best of N) and
must give full marks; a submission with two catalogued mistakes (one per
question) must lose points on both, so neither side's tests are vacuous.

Otter is installed by this script with pip into its own virtual environment,
``benchmarks/work/otter-venv`` (git-ignored), with the project's numpy version.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .. import common
from ..common import PY, WORK, Result, check_target, fmt_s, interleaved, paired_ratio, run_timed, summary

HERE = Path(__file__).resolve().parent
VENV = WORK / "otter-venv"
OTTER_VERSION = "7.0.0"
STAGES = ["a02_softmax", "a03_attention"]
MISTAKES = {"a02_softmax": "softmax_no_max_subtraction", "a03_attention": "divide_by_dk_not_sqrt"}


class OtterUnavailable(RuntimeError):
    pass


def _base_python() -> str:
    """A Python with venv (the one the project's venv was made from)."""
    for cand in (os.path.join(sys.base_prefix, "bin", "python3"), shutil.which("python3")):
        if cand and os.path.exists(cand):
            return cand
    raise OtterUnavailable("no python3 to create Otter's virtual environment with")


def ensure_otter(log=print) -> Path:
    """Otter in benchmarks/work/otter-venv, installed with pip if missing. Returns the ``otter`` script."""
    otter = VENV / "bin" / "otter"
    stamp = VENV / ".installed"
    if otter.exists() and stamp.exists():
        return otter
    import numpy
    log(f"  installing otter-grader=={OTTER_VERSION} into {VENV} (pip; takes a few minutes once) ...")
    if not (VENV / "bin" / "python").exists():
        r = subprocess.run([_base_python(), "-m", "venv", str(VENV)], capture_output=True, text=True)
        if r.returncode:
            raise OtterUnavailable(f"python -m venv failed: {r.stderr.strip()[-500:]}")
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "-q", f"otter-grader=={OTTER_VERSION}",
           "ipykernel", f"numpy=={numpy.__version__}"]
    r = subprocess.run(pip, capture_output=True, text=True, timeout=3600)
    if r.returncode:
        err = "\n".join(line for line in r.stderr.splitlines() if not line.startswith("WARNING: Location"))
        raise OtterUnavailable(f"pip install otter-grader failed (exit {r.returncode}): {err.strip()[-800:]}")
    ks = subprocess.run([str(VENV / "bin" / "jupyter"), "kernelspec", "list"], capture_output=True, text=True)
    if "python3" not in ks.stdout:
        raise OtterUnavailable(f"Otter is installed but no Jupyter python3 kernel is available: {ks.stdout}{ks.stderr}")
    stamp.write_text(f"otter-grader=={OTTER_VERSION}\n")
    return otter


def _mutated(stage: str) -> str:
    from grader.authoring import mutants
    catalogue = mutants.load(stage)
    if not catalogue:
        raise OtterUnavailable(f"no catalogued mistake for {stage} to check that the tests can fail")
    # the named mistake, or (if the catalogue has changed) its first one
    m = next((m for m in catalogue if m.id == MISTAKES[stage]), catalogue[0])
    MISTAKES[stage] = m.id
    return mutants.apply(m, (common.GRADER_ROOT / "solutions" / f"{stage}.py").read_text(encoding="utf-8"))


def prepare(work: Path, otter: Path, env: dict) -> dict:
    """Autograder zip, the two Otter submissions (.py) and our two submission folders."""
    shutil.rmtree(work, ignore_errors=True)
    (work / "otter-build").mkdir(parents=True)
    build = work / "otter-build"
    shutil.copytree(HERE / "tests", build / "tests")
    (build / "requirements.txt").write_text("numpy\n")
    r = subprocess.run([str(otter), "generate", "-t", "tests", "-o", str(work / "autograder.zip"),
                        "--no-environment"], cwd=build, capture_output=True, text=True, env=env, timeout=600)
    if r.returncode or not (work / "autograder.zip").exists():
        raise OtterUnavailable(f"otter generate failed (exit {r.returncode}): {(r.stdout + r.stderr)[-1500:]}")
    sources = {s: (common.GRADER_ROOT / "solutions" / f"{s}.py").read_text(encoding="utf-8") for s in STAGES}
    broken = {s: _mutated(s) for s in STAGES}
    paths = {}
    for label, src in (("ref", sources), ("broken", broken)):
        d = work / f"otter-{label}"
        d.mkdir()
        (d / "submission.py").write_text("\n\n".join(src[s] for s in STAGES), encoding="utf-8")
        ours = work / f"ours-{label}"
        ours.mkdir()
        for s in STAGES:
            (ours / f"{s}.py").write_text(src[s], encoding="utf-8")
        paths[label] = {"otter": d / "submission.py", "ours": ours}
    (work / "out").mkdir()
    return paths


def otter_argv(otter: Path, work: Path, sub: Path):
    return [str(otter), "run", "-a", str(work / "autograder.zip"), "-o", str(work / "out"), "--no-logo", str(sub)]


def otter_score(work: Path) -> tuple:
    data = json.loads((work / "out" / "results.json").read_text())
    tests = [t for t in data["tests"] if t.get("max_score")]
    return sum(t["score"] for t in tests), sum(t["max_score"] for t in tests)


def run(ctx, log=print) -> Result:
    quick = getattr(ctx, "quick", False)
    repeat = getattr(ctx, "repeat", None) or (2 if quick else 4)
    env = common.user_env(getattr(ctx, "keep_env", False))
    work = WORK / "otter"
    title = "per-submission grading time, 2 numpy questions: ours vs Otter-Grader `otter run`"
    try:
        otter = ensure_otter(log)
        paths = prepare(work, otter, env)
    except (OtterUnavailable, subprocess.TimeoutExpired, OSError) as exc:
        return Result("otter", title, "grader grade", float("nan"), "otter run", float("nan"), "s", None, "<= 0.5",
                      None, [f"Otter could not be set up: {exc}"], error=f"Otter unavailable: {exc}")
    otter_env = dict(env)
    otter_env["PATH"] = f"{VENV / 'bin'}:{env.get('PATH', '')}"
    cpu = {"ours": [], "otter": []}
    scores = {}

    def ours(label="ref"):
        out = work / f"ours-{label}.json"
        wall, cp = run_timed([PY, "-m", "grader", "grade", str(paths[label]["ours"]), "--stages", ",".join(STAGES),
                              "--quiet", "--out", str(out)], env=env)
        rep = json.loads(out.read_text())
        scores[("ours", label)] = (rep["score"], rep["max_score"])
        if label == "ref":
            cpu["ours"].append(cp.cpu_s)
        return wall

    def theirs(label="ref"):
        wall, cp = run_timed(otter_argv(otter, work, paths[label]["otter"]), env=otter_env, cwd=work)
        scores[("otter", label)] = otter_score(work)
        if label == "ref":
            cpu["otter"].append(cp.cpu_s)
        return wall

    times = interleaved({"ours": ours, "otter": theirs}, repeat=repeat, warmup=1)
    # neither side's tests are vacuous: one catalogued mistake per question must cost points on both
    ours("broken")
    theirs("broken")
    a, b = summary(times["ours"]), summary(times["otter"])
    ratio = a["min"] / b["min"]
    notes = [f"{repeat} runs each, interleaved, after one warm-up; whole commands, best of each; median pair ratio "
             f"{paired_ratio(times['ours'], times['otter']):.2f}x",
             f"CPU seconds (all processes): {min(cpu['ours'][1:]):.2f} vs {min(cpu['otter'][1:]):.2f}",
             f"scores, reference: ours {scores[('ours', 'ref')][0]:g}/{scores[('ours', 'ref')][1]:g}, Otter "
             f"{scores[('otter', 'ref')][0]:g}/{scores[('otter', 'ref')][1]:g}; with mistakes "
             f"({', '.join(MISTAKES.values())}): ours {scores[('ours', 'broken')][0]:.3g}, Otter "
             f"{scores[('otter', 'broken')][0]:.3g}",
             f"Otter {OTTER_VERSION}, `otter run` (no container), .py submission run in a Jupyter kernel; ours: "
             f"{'strict' if os.geteuid() == 0 else 'degraded'} isolation, 2 workers started (one per stage)"]
    problems = []
    for side in ("ours", "otter"):
        s, m = scores[(side, "ref")]
        if abs(s - m) > 1e-6:
            problems.append(f"{side} did not give the reference full marks ({s:g}/{m:g})")
        if scores[(side, "broken")][0] >= m - 1e-6:
            problems.append(f"{side} gave full marks to the broken submission")
    notes += [f"WARNING: {p}" for p in problems]
    return Result("otter", title, "grader grade --stages a02,a03", a["min"], "otter run", b["min"], "s", ratio,
                  "<= 0.5", check_target(ratio, "<= 0.5") if not problems else None, notes,
                  {"times": times, "cpu": cpu, "scores": {f"{k[0]}/{k[1]}": v for k, v in scores.items()}})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.otter.compare")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeat", type=int)
    p.add_argument("--keep-env", action="store_true")
    args = p.parse_args(argv)
    log = lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", flush=True)  # noqa: E731
    r = run(args, log)
    print(f"{r.title}\n  ours {fmt_s(r.ours_value)}  otter {fmt_s(r.base_value)}  ratio "
          f"{r.ratio if r.ratio is None else round(r.ratio, 2)}  target {r.target}  {r.verdict}")
    for n in r.notes:
        print(f"  - {n}")
    if r.error:
        print(r.error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
