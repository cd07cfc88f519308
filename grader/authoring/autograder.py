"""The Gradescope autograder zip (``python -m grader gradescope OUT.zip``).

Gradescope unpacks it into ``/autograder/source``, runs ``setup.sh`` there once
when it builds the image, and ``/autograder/run_autograder`` for every
submission. Both scripts are files in ``templates/`` beside this module, and so
is the zip's ``README`` (``README.autograder.md``): the memory, CPU and timeout
the instructor must choose, from the measured peak and duration of grading the
reference (``autograder_measured.json``, one place, written by
``python -m benchmarks.run --only memory --record``).
"""
from __future__ import annotations

import json
import math
import os
import zipfile
from pathlib import Path

from grader.engine import paths, stages
from grader.engine.run import PYTEST_SLACK_S
from grader.i18n import languages

TEMPLATES = Path(__file__).resolve().parent / "templates"
SCRIPTS = ("setup.sh", "run_autograder")
MEASURED = TEMPLATES / "autograder_measured.json"
GRADESCOPE_DEFAULT_MB = 768
HEADROOM = 0.25  # above the reference's peak: students' code allocates more than the reference
SOURCE_PARTS = ("grader", "solutions", "starter", "assignments", "tests/hidden", "tests/grading.ini",
                "requirements.txt")


def _add_tree(zf: zipfile.ZipFile, rel: str) -> None:
    src = paths.ROOT / rel
    files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
    for p in files:
        if "__pycache__" not in p.parts:
            zf.write(p, str(p.relative_to(paths.ROOT)))


def settings(measured: dict | None = None) -> dict:
    """What the README asks the instructor to choose, from the measured figures:
    memory = the larger of the PSS and cgroup peaks plus HEADROOM, up to a multiple of
    256 MB; timeout = the grader's own budget (every stage's time limit plus slack)."""
    m = dict(measured or json.loads(MEASURED.read_text(encoding="utf-8")))
    peak = max(m["peak_pss_mb"], m.get("cgroup_peak_mb") or 0)
    memory_mb = int(math.ceil(peak * (1 + HEADROOM) / 256) * 256)
    stage_limits_s = int(sum(s.time_limit_s for s in stages.all_stages()))
    timeout_min = int(math.ceil((stage_limits_s + PYTEST_SLACK_S) / 60))
    if peak <= GRADESCOPE_DEFAULT_MB:
        fits = (f"The reference fits Gradescope's default {GRADESCOPE_DEFAULT_MB} MB "
                f"({GRADESCOPE_DEFAULT_MB - peak:.0f} MB to spare); the headroom is for students' code, which may "
                "hold more than the reference does.")
    else:
        fits = (f"Gradescope's default {GRADESCOPE_DEFAULT_MB} MB is too small: the trusted session and the "
                "worker each hold torch (and stages 7-9 the MiniLM model) at once.")
    return {**m, "memory_mb": memory_mb, "headroom_pct": int(HEADROOM * 100), "stage_limits_s": stage_limits_s,
            "slack_s": PYTEST_SLACK_S, "timeout_min": timeout_min, "fits_default": fits}


def readme(measured: dict | None = None) -> str:
    return (TEMPLATES / "README.autograder.md").read_text(encoding="utf-8").format(**settings(measured))


def build(out_zip: str, language: str | None = None) -> str:
    """Write the autograder zip; ``language``: what students read on Gradescope (default: course.toml's)."""
    language = languages.for_command("gradescope", language)
    os.makedirs(os.path.dirname(os.path.abspath(out_zip)), exist_ok=True)
    with zipfile.ZipFile(out_zip, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in SCRIPTS:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            zf.writestr(info, (TEMPLATES / name).read_text(encoding="utf-8").replace("@LANGUAGE@", language))
        zf.writestr("README", readme())
        for rel in SOURCE_PARTS:
            _add_tree(zf, rel)
    return out_zip
