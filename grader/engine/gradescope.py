"""Gradescope's results.json from a report (``grade --format gradescope``).

The autograder zip itself is built by ``grader.authoring.autograder``.
"""
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
                  + (f" (+{report['bonus_score']:.2f} bonus, capped at the course total)"
                     if "bonus_score" in report else ""),
        "tests": tests,
        "visibility": "visible",
        "execution_time": int(report["duration_s"]),
    }
