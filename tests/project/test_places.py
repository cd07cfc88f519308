"""The grader in three places, each a real process started the way a place starts it:

* ``root``: root with every capability (a course server, CI);
* ``docker``: root with Docker's default capability set (no CAP_SYS_ADMIN: every
  Docker/Kubernetes container by default), through ``setpriv``; the grader must
  confine through a user namespace and still give the reference full marks;
* ``no_namespaces``: every ``unshare`` fails. Injected with GRADER_TEST_DENY_UNSHARE=1,
  which only these tests set (test-only; read by ``grader.sandbox.jail``'s probe alone).
  ``grade`` refuses (exit 1, one line); with ``--allow-readable-secrets`` it grades,
  degraded, and the report says the secrets were readable.

In each: the reference scores full marks, the starter zero, the report's layers are
what the place allows, and the network attack (tests/hostile/network_call) reaches
nothing where the layers say the network is cut.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT
from test_hostile import listener, submission_with  # noqa: F401  (listener is a fixture)

DOCKER_CAPS = "chown,dac_override,fowner,fsetid,kill,setgid,setuid,setpcap,net_bind_service,net_raw,sys_chroot," \
              "mknod,audit_write,setfcap"
PLACES = {
    "root": ([], {}),
    "docker": (["setpriv", "--bounding-set", "-all," + ",".join("+" + c for c in DOCKER_CAPS.split(",")),
                "--inh-caps=-all", "--"], {}),
    "no_namespaces": ([], {"GRADER_TEST_DENY_UNSHARE": "1"}),
}
ALL_LAYERS = {"namespaces", "new_root", "separate_uid", "network", "secrets_hidden", "limits"}

pytestmark = [pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                 reason="the places are made from root with setpriv"),
              pytest.mark.xdist_group("places")]


def grade_in(place, submission, *extra, command="grade"):
    """(exit code, report or None, stderr lines) of ``python -m grader grade SUBMISSION`` in ``place``."""
    prefix, env_extra = PLACES[place]
    env = {k: v for k, v in os.environ.items() if k != "GRADER_TEST_DENY_UNSHARE"} | env_extra
    args = [*prefix, sys.executable, "-m", "grader", command]
    if command == "grade":
        args += [str(submission), "--stages", "a02_softmax", "--quiet", "--json", *extra]
    else:
        args += ["a02_softmax", str(submission), *extra]
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    report = json.loads(proc.stdout) if command == "grade" and proc.returncode == 0 else None
    return proc.returncode, report, proc.stderr.strip().splitlines()


def applied(report):
    return {k for k, v in report["isolation"]["layers"].items() if v["applied"]}


@pytest.mark.parametrize("place", ["root", "docker"])
def test_every_layer_where_root_has_setuid(place, tmp_path, listener):  # noqa: F811
    code, ref, err = grade_in(place, ROOT / "solutions")
    assert code == 0 and ref["score"] == ref["max_score"] > 0, err
    assert ref["isolation"]["mode"] == "strict" and applied(ref) == ALL_LAYERS
    assert err == ["isolation strict: " + ", ".join(ref["isolation"]["layers"])]
    code, starter, _ = grade_in(place, ROOT / "starter")
    assert code == 0 and starter["score"] == 0
    received, port = listener
    code, attack, _ = grade_in(place, submission_with("network_call", tmp_path, port))
    assert code == 0 and attack["score"] == 0 and received == []
    assert attack["isolation"]["network"] == "none"
    code, strict, err = grade_in(place, ROOT / "solutions", "--isolation", "strict")
    assert code == 0 and strict["score"] == strict["max_score"], err


def test_no_namespaces_refuses_unless_readable_secrets_are_allowed(tmp_path, listener):  # noqa: F811
    code, rep, err = grade_in("no_namespaces", ROOT / "solutions")
    assert code == 1 and rep is None and len(err) == 1, err
    assert "--allow-readable-secrets" in err[0] and err[0].startswith("error: refusing to grade")
    code, _, err = grade_in("no_namespaces", ROOT / "solutions", "--isolation", "strict")
    assert code == 1 and len(err) == 1 and "--isolation strict" in err[0], err

    code, ref, err = grade_in("no_namespaces", ROOT / "solutions", "--allow-readable-secrets")
    assert code == 0 and ref["score"] == ref["max_score"] > 0, err
    iso = ref["isolation"]
    assert iso["mode"] == "degraded" and applied(ref) == set() and not iso["secrets_hidden"]
    assert "--allow-readable-secrets" in iso["layers"]["secrets_hidden"]["why"]
    assert iso["network"] == "shared" and not iso["separate_user"]
    code, starter, _ = grade_in("no_namespaces", ROOT / "starter", "--allow-readable-secrets")
    assert code == 0 and starter["score"] == 0
    received, port = listener
    code, attack, _ = grade_in("no_namespaces", submission_with("network_call", tmp_path, port),
                               "--allow-readable-secrets")
    # the network is shared and the report says so; the attack still gains no point
    assert code == 0 and attack["score"] == 0 and attack["isolation"]["network"] == "shared"


def test_check_needs_no_secrets_and_runs_everywhere():
    code, _, err = grade_in("no_namespaces", ROOT / "solutions", command="check")
    assert code == 0 and any(line.startswith("isolation degraded") for line in err), err


@pytest.mark.parametrize("place", ["root", "docker"])
def test_a_worker_that_fails_to_confine_after_the_probe_could_is_a_grader_error(place, tmp_path):
    """GRADER_TEST_WORKER_CONFINE_FAILS=1 (test-only) puts a switch in the workers' plans that makes
    jail.confine fail in the worker alone; the probe, which never sees it, says every layer is there."""
    out = tmp_path / "report.json"
    prefix, _ = PLACES[place]
    env = {k: v for k, v in os.environ.items() if k != "GRADER_TEST_DENY_UNSHARE"}
    proc = subprocess.run([*prefix, sys.executable, "-m", "grader", "grade", str(ROOT / "solutions"),
                           "--stages", "a01_similarity,a02_softmax", "--out", str(out)], cwd=ROOT,
                          env=env | {"GRADER_TEST_WORKER_CONFINE_FAILS": "1"}, capture_output=True, text=True,
                          timeout=300)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(err) == 1, proc.stderr
    assert err[0].startswith("error: a worker of a01_similarity could not be set up and confined (strict isolation)")
    assert "test_confine_fails" in err[0] and not out.exists() and proc.stdout == ""


def _batch(subs, out, *extra):
    env = {k: v for k, v in os.environ.items() if k != "GRADER_TEST_DENY_UNSHARE"}
    return subprocess.run([sys.executable, "-m", "grader", "batch", str(subs), "--out", str(out), "--workers", "1",
                           "--stages", "a02_softmax", *extra], cwd=ROOT, env=env | {"GRADER_TEST_DENY_UNSHARE": "1"},
                          capture_output=True, text=True, timeout=600)


def test_batch_without_namespaces_grades_only_when_readable_secrets_are_allowed(tmp_path):
    subs = tmp_path / "class"
    for name, folder in (("ref", ROOT / "solutions"), ("starter", ROOT / "starter")):
        (subs / name).mkdir(parents=True)
        shutil.copy(folder / "a02_softmax.py", subs / name)
    out = tmp_path / "out"
    proc = _batch(subs, out)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(err) == 1 and err[0].startswith("error: refusing to grade"), proc.stderr
    assert "--allow-readable-secrets" in err[0] and not out.exists()

    proc = _batch(subs, out, "--allow-readable-secrets")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = {name: json.loads((out / "reports" / f"{name}.json").read_text()) for name in ("ref", "starter")}
    assert reports["ref"]["score"] == reports["ref"]["max_score"] > 0 and reports["starter"]["score"] == 0
    for rep in reports.values():
        iso = rep["isolation"]
        assert iso["mode"] == "degraded" and not iso["secrets_hidden"] and iso["network"] == "shared"
        assert "readable secrets accepted (--allow-readable-secrets)" in iso["layers"]["secrets_hidden"]["why"]
