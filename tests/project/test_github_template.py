"""The course's template repository on GitHub (`python -m grader classroom OUT`).

Its workflow parses and runs the public check of every stage on push; every command of its steps
runs, in order, in the generated template on a fresh venv (GitHub's `uses:` steps emulated: the
checkout is the template itself, setup-python a new venv of this Python), and the points it shows
are 0 on the untouched template and every public point with the reference copied over starter/.
The template passes the student bundle's leak checks.
"""
from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import venv
from fractions import Fraction
from pathlib import Path

import leaks
import pytest
import tomllib
import yaml
from conftest import ROOT, made_report
from test_places import filtered

from grader.authoring import github_template
from grader.engine import github_actions, seeds, stages
from grader.engine.report import Report

TOTAL = "python -m grader.engine.github_actions"


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    out = tmp_path_factory.mktemp("github") / "template"
    done = subprocess.run([sys.executable, "-m", "grader", "classroom", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def workflow(template):
    return yaml.safe_load((template / github_template.WORKFLOW).read_text(encoding="utf-8"))


def _job(workflow):
    (name, job), = workflow["jobs"].items()
    return name, job


def _public_points(stage) -> Fraction:
    return sum(stage.test_points("public").values(), Fraction(0))


def _stage_steps(job):
    ids = {github_template.step_id(st) for st in stages.all_stages()}
    return {s["id"]: s for s in job["steps"] if s.get("id") in ids}


# -- what the workflow says ------------------------------------------------------------------------------------

def test_the_workflow_runs_on_push_with_checkout_and_python_only(workflow):
    assert workflow["name"] == "Public checks"
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads `on` as true
    assert {"push", "workflow_dispatch"} <= set(triggers)
    name, job = _job(workflow)
    assert job["runs-on"].startswith("ubuntu-")
    assert job["env"]["PIP_EXTRA_INDEX_URL"] == github_template.TORCH_CPU_INDEX
    (setup,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/setup-python@")]
    assert str(setup["with"]["python-version"]) == github_template.PYTHON and setup["with"]["cache"] == "pip"
    assert [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")] == [job["steps"][0]]
    used = {str(s["uses"]).split("@")[0] for s in job["steps"] if "uses" in s}
    assert used == {"actions/checkout", "actions/setup-python"}, "no grading action: GitHub Classroom's are retired"


def test_permissions_are_read_only(workflow):
    assert workflow["permissions"] == {"contents": "read"}
    assert "permissions" not in _job(workflow)[1]


def test_the_install_step_installs_what_the_bundle_makefile_does(template, workflow):
    """`make check` in the bundle and the workflow install the same packages the same way, at the versions the
    instructor's set-up pins for the workflow's Python."""
    pins = f"constraints/py{github_template.PYTHON}.txt"
    assert (template / pins).is_file()
    def installs(lines):
        found = []
        for line in (x for x in lines if "pip install" in x):
            words = shlex.split(line.replace("$(PY)", "python").replace("$(PIN)", f"-c {pins}"))
            if "install" in words and "pip" in words:
                found.append([w for w in words[words.index("install") + 1:] if w != "-q"])
        return found

    make = installs((template / "Makefile").read_text(encoding="utf-8").splitlines())
    runs = [line for s in _job(workflow)[1]["steps"] if "run" in s for line in s["run"].splitlines()]
    assert installs(runs) == make and len(make) == 2, (installs(runs), make)


def test_each_stage_has_its_step_with_its_public_points(template, workflow):
    steps = _stage_steps(_job(workflow)[1])
    assert list(steps) == [github_template.step_id(s) for s in stages.all_stages()]
    for stage in stages.all_stages():
        step = steps[github_template.step_id(stage)]
        assert step["run"] == f"python -m grader check {stage.id} starter --github"
        assert step["continue-on-error"] is True
        # what check scores in the template: the public table of its stage.toml, the stage's points exactly
        with open(template / "assignments" / stage.id / "stage.toml", "rb") as f:
            public = tomllib.load(f)["public"]
        assert sum(Fraction(str(v["points"])) for v in public.values()) == _public_points(stage) == \
            Fraction(str(stage.points))
        assert f"{float(_public_points(stage)):g} {'bonus ' if stage.bonus else ''}points" in step["name"]
        assert step["timeout-minutes"] * 60 >= stage.time_limit_s


def test_the_last_step_adds_up_every_stage(workflow):
    job = _job(workflow)[1]
    last = job["steps"][-1]
    assert last["run"] == f"{TOTAL} " + " ".join(s.id for s in stages.all_stages())
    assert last["if"] == "always()", "the total is shown even when a stage step failed"
    assert all(job["steps"].index(s) < len(job["steps"]) - 1 for s in _stage_steps(job).values())


def test_the_workflow_holds_nothing_secret(template, workflow):
    text = (template / github_template.WORKFLOW).read_text(encoding="utf-8")
    for word in ("secrets.", "tests/hidden", "course_secret", "solutions", "--allow-readable-secrets"):
        assert word not in text, word
    assert seeds.course_secret() not in text
    assert "${{" not in text, "no expression: nothing from the event or a secret reaches a command"
    runs = [s["run"] for s in _job(workflow)[1]["steps"] if "run" in s]
    assert not [r for r in runs if "grader grade" in r or "grader batch" in r], "only check runs in a student repo"


def test_the_readme_says_what_classroom_shows_and_what_the_grade_is(template):
    text = (template / "README.md").read_text(encoding="utf-8")
    for words in ("public checks only", "hidden suites", "`starter/aNN_<name>.py`", "`tests/`", "`.github/`",
                  "never your grade", "make check"):
        assert words in text, words
    for stage in stages.all_stages():
        assert re.search(rf"`{stage.id}`.*\| {float(_public_points(stage)):g} \|", text), stage.id
    assert "## Notebooks" in text  # the bundle's README follows
    korean = (template / "README.ko.md").read_text(encoding="utf-8")
    for words in ("공개 검사만", "숨은 테스트", "`starter/aNN_<name>.py`", "`tests/`", "`.github/`", "make check",
                  "## 노트북"):
        assert words in korean, words
    for stage in stages.all_stages():
        assert re.search(rf"`{stage.id}`.*\| {float(_public_points(stage)):g} \|", korean), stage.id


# -- leaks: the same checks as the release bundle's ------------------------------------------------------------

def test_no_solution_line_in_the_template(template):
    leaks.assert_no_solution_line(template)


def test_no_hidden_test_stand_in_or_fixture_in_the_template(template):
    leaks.assert_no_hidden_test_stand_in_or_fixture(template)


def test_the_template_cannot_regenerate_the_hidden_tweets(template, tmp_path):
    leaks.assert_hidden_split_cannot_be_regenerated(template, tmp_path)


def test_classroom_refuses_a_folder_that_is_not_empty(template):
    done = subprocess.run([sys.executable, "-m", "grader", "classroom", str(template)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("error:"), done.stderr


# -- check --github -------------------------------------------------------------------------------------------

def _github_env(tmp_path: Path) -> dict:
    files = {"GITHUB_STEP_SUMMARY": tmp_path / "summary.md", "RUNNER_TEMP": tmp_path / "runner-temp"}
    files["RUNNER_TEMP"].mkdir(exist_ok=True)
    return {k: str(v) for k, v in files.items()}


def test_check_github_shows_the_stage_points_without_namespaces(tmp_path):
    """GitHub's Ubuntu 24.04 runner restricts user namespaces (AppArmor): a user namespace holds no
    capability, so no mount or network namespace can be made in it (tests/project/place.py's filter, loaded
    before the grader). `check` confines its workers with Landlock and seccomp instead, every guarantee kept
    (`--isolation strict` refuses anything less), and scores."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(stages.get("a02_softmax").solution, work)
    github = _github_env(tmp_path)
    env = {**os.environ, **github}
    logs = []
    for folder in (work, ROOT / "starter"):
        done = subprocess.run([*filtered("apparmor"), sys.executable, "-m", "grader", "check", "a02_softmax",
                               str(folder), "--github", "--isolation", "strict"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "isolation" not in done.stdout + done.stderr, "strict, so a student is told nothing about it"
        logs.append(done.stdout)
    points = f"{float(_public_points(stages.get('a02_softmax'))):g}"
    assert f"::notice title=a02_softmax::a02_softmax: {points} / {points} public points" in logs[0]
    assert f"::notice title=a02_softmax::a02_softmax: 0 / {points} public points" in logs[1]
    rows = (Path(github["RUNNER_TEMP"]) / github_actions.POINTS_FILE).read_text().splitlines()
    assert [r.split("\t")[0] for r in rows] == ["a02_softmax", "a02_softmax"]
    summary = Path(github["GITHUB_STEP_SUMMARY"]).read_text()
    assert "Every public test of this stage passed." in summary and "NotImplementedError" in summary


def test_the_total_names_a_stage_that_wrote_no_points(tmp_path):
    github = _github_env(tmp_path)
    (Path(github["RUNNER_TEMP"]) / github_actions.POINTS_FILE).write_text("a01_similarity\t6.75\t8.0\n")
    out = io.StringIO()
    got, most, missing = github_actions.total(["a01_similarity", "a02_softmax"], environ=github, out=out)
    assert (got, most, missing) == (Fraction(27, 4), 8, ["a02_softmax"])
    assert "::notice title=Public points::Public points: 6.75 / 8" in out.getvalue()
    assert "::warning title=Not checked::no points from a02_softmax" in out.getvalue()
    assert "Not checked: a02_softmax" in Path(github["GITHUB_STEP_SUMMARY"]).read_text()


def test_feedback_cannot_end_a_workflow_command():
    rep = Report.from_json(made_report([{"id": "a01_similarity", "score": 0.0}]))
    assert github_actions.notices(rep) == ["::notice title=a01_similarity::a01_similarity: 0 / 8 public points"]
    assert github_actions._command_data("50%\n::error::x") == "50%25%0A::error::x"


# -- the workflow, run ------------------------------------------------------------------------------------------

def _reachable(url: str) -> bool:
    """Whether the index's host resolves (no packet is sent to it)."""
    try:
        return bool(socket.getaddrinfo(url.split("/")[2], 443))
    except OSError:
        return False


def run_workflow(workflow, checkout: Path, venv_dir: Path, log: Path) -> dict:
    """Run the job's steps in order as a runner would: each `run:` with bash (`-eo pipefail`, GitHub's
    default shell) in the checkout, with the job's and the step's env, a fresh GITHUB_STEP_SUMMARY file
    per step and one RUNNER_TEMP for the job; `uses:` steps emulated. Returns {"steps": {id or name:
    (exit code, seconds)}, "points": the rows of the points file, "log": the steps' output, "summary":
    the summaries}."""
    _, job = _job(workflow)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith(("GRADER_", "PYTEST_"))}
    runner_files = log.parent / f"runner-{checkout.name}"
    (runner_files / "temp").mkdir(parents=True)
    env |= {"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(checkout),
            "RUNNER_TEMP": str(runner_files / "temp")}
    env |= {k: str(v) for k, v in job.get("env", {}).items()}
    if not _reachable(env.get("PIP_EXTRA_INDEX_URL", "https://x/")):
        env.pop("PIP_EXTRA_INDEX_URL", None)  # here pip takes torch from this machine's wheel, the same pin
    timings, summaries = {}, []
    for n, step in enumerate(job["steps"]):
        key = step.get("id") or step.get("name") or str(n)
        uses = str(step.get("uses", ""))
        if uses.startswith("actions/checkout@"):
            continue  # the checkout is the template itself
        if uses.startswith("actions/setup-python@"):
            venv.create(venv_dir, with_pip=True)
            env["PATH"] = f"{venv_dir / 'bin'}{os.pathsep}{env['PATH']}"
            version = subprocess.run(["python", "--version"], env=env, capture_output=True, text=True).stdout
            assert version.split()[1].startswith(str(step["with"]["python-version"]) + "."), version
            continue
        assert "run" in step and not uses, f"the emulator cannot run step {key!r} ({uses})"
        summary = runner_files / f"{n}_summary.md"
        summary.write_text("")
        script = runner_files / f"{n}.sh"
        script.write_text(step["run"] + "\n")
        step_env = env | {k: str(v) for k, v in step.get("env", {}).items()} | {"GITHUB_STEP_SUMMARY": str(summary)}
        start = time.monotonic()
        with open(log, "a") as out:
            out.write(f"\n=== step {key}: {step['run']}\n")
            out.flush()
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                                  cwd=checkout, env=step_env, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=60 * float(step.get("timeout-minutes", job["timeout-minutes"])))
        timings[key] = (done.returncode, round(time.monotonic() - start, 1))
        assert done.returncode == 0, f"step {key} exited {done.returncode}:\n{log.read_text()[-3000:]}"
        summaries.append(summary.read_text())
    points = (runner_files / "temp" / github_actions.POINTS_FILE).read_text().splitlines()
    return {"steps": timings, "points": [p.split("\t") for p in points], "log": log.read_text(),
            "summary": "".join(summaries)}


@pytest.mark.skipif(shutil.which("bash") is None, reason="the runner's shell is bash")
def test_the_workflow_runs_in_the_template_on_a_fresh_venv(template, workflow, tmp_path):
    """The workflow on the untouched template (no point), then with the reference over starter/ (every
    public point), each in a copy of the template, on one fresh venv (the second run's install finds
    everything installed, as a runner with a warm cache nearly does)."""
    venv_dir = tmp_path / "venv"
    runs = {}
    for name in ("untouched", "reference"):
        checkout = tmp_path / name
        shutil.copytree(template, checkout)
        if name == "reference":
            for stage in stages.all_stages():
                shutil.copy(stage.solution, checkout / "starter" / stage.module_file)
        start = time.monotonic()
        runs[name] = run_workflow(workflow, checkout, venv_dir, tmp_path / f"{name}.log")
        print(f"\n{name}: {time.monotonic() - start:.1f} s, steps (exit, s): {runs[name]['steps']}")
    full = sum(_public_points(s) for s in stages.all_stages())
    for name, run in runs.items():
        assert list(run["steps"]) == [s.get("id") or s.get("name") for s in _job(workflow)[1]["steps"] if "run" in s]
        assert [p[0] for p in run["points"]] == [s.id for s in stages.all_stages()]
        for (sid, got, most), stage in zip(run["points"], stages.all_stages()):
            points = _public_points(stage)
            assert Fraction(most) == points, (sid, most)
            assert Fraction(got) == (0 if name == "untouched" else points), (sid, got)
            shown = f"{float(Fraction(got)):g} / {float(points):g} public points"
            assert f"::notice title={sid}::{sid}: {shown}" in run["log"]
        total = f"Public points: {0 if name == 'untouched' else float(full):g} / {float(full):g}"
        assert f"::notice title=Public points::{total}" in run["log"] and f"## {total}" in run["summary"]
        assert "Not checked" not in run["summary"]
