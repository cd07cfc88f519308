"""A batch's output folder: where each output goes, and the mode people can read them with.

    OUT/gradebook.sqlite          every run, submission, stage and test result (or --gradebook URL)
    OUT/reports/<slug>.json       one schema-v1 report per submission
    OUT/grades.csv                one row per student (grades_csv.py)
    OUT/grades-canvas.csv         the same final grades as Canvas imports them (canvas.py)
    OUT/html/<slug>.html          a feedback page per submission (html_report.py)
    OUT/html/class.html           the class report (instructors only)
    OUT/similarity.csv, OUT/similarity-pairs.csv, OUT/html/similarity.html   (similarity.py)
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Outputs:
    folder: Path

    @property
    def reports(self) -> Path:
        return self.folder / "reports"

    @property
    def html(self) -> Path:
        return self.folder / "html"

    @property
    def grades_csv(self) -> Path:
        return self.folder / "grades.csv"

    @property
    def canvas_csv(self) -> Path:
        return self.folder / "grades-canvas.csv"

    def report_of(self, job) -> Path:
        return self.reports / f"{job.slug}.json"


TABLES = ("grades.csv", "grades-canvas.csv", "similarity.csv", "similarity-pairs.csv")


def readable_outputs(out_dir: Path) -> None:
    """Atomic writes create files readable by their owner only; give the outputs the usual mode
    (0666 less the umask), so that a web server or a TA's account can read them."""
    mask = os.umask(0)
    os.umask(mask)
    mode = 0o666 & ~mask
    tables = [out_dir / name for name in TABLES]
    for p in [*tables, *(out_dir / "reports").glob("*.json"), *(out_dir / "html").glob("*.html")]:
        try:
            if p.is_file() and (p.stat().st_mode & 0o777) != mode:
                os.chmod(p, mode)
        except OSError:
            pass
