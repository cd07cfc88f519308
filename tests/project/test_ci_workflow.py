"""The repository's GitHub workflow runs what CI runs here (`.ci/run`), with the venv cached."""
import yaml

from grader.engine import paths

WORKFLOW = paths.ROOT / ".github" / "workflows" / "ci.yml"


def _steps():
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert set(data[True] if True in data else data["on"]) >= {"push"}, "the workflow must run on every push"
    (job,) = data["jobs"].values()
    return job, job["steps"]


def test_the_workflow_runs_ci_run_on_every_push():
    job, steps = _steps()
    runs = [s["run"] for s in steps if "run" in s]
    assert any(r.strip() == "bash .ci/run" for r in runs), runs
    assert "make test" in (paths.ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_venv_is_cached_on_everything_that_decides_it():
    job, steps = _steps()
    (cache,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/cache@")]
    assert cache["with"]["path"] == ".venv"
    for name in ("constraints.txt", "pyproject.toml", "requirements.txt", "requirements-dev.txt"):
        assert name in cache["with"]["key"], f"the cache key ignores {name}"
    position = steps.index(cache)
    ci = next(i for i, s in enumerate(steps) if s.get("run", "").strip() == "bash .ci/run")
    assert position < ci, "the venv must be restored before the tests run"
