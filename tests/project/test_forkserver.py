"""The fork server that starts workers: return codes, restarts, and its own failure."""
import json
import os
import resource
import select
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
from conftest import ROOT

from grader.engine import forkservers, isolation, stages
from grader.engine.errors import WorkerCrashed
from grader.engine.worker_client import StageWorker, StudentModule
from grader.sandbox import jail
from grader.sandbox.forkserver import SERVER_NAME
from grader.sandbox.plan import Probed


@pytest.fixture
def server():
    srv = forkservers.ForkServer("numpy", isolation.base_env(1))
    yield srv
    srv.close()


def _worker(server, tmp_path, source):
    stage = stages.get("a02_softmax")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "a02_softmax.py").write_text(source)
    work = tmp_path / "work"
    work.mkdir()
    iso = isolation.Isolation.choose("strict" if os.geteuid() == 0 else "degraded").for_stage(stage)
    return StageWorker(stage, str(sub), iso, server, str(work), budget_s=60)


def test_each_worker_is_a_new_fork_and_a_crash_leaves_the_server_serving(server, tmp_path):
    source = (ROOT / "solutions" / "a02_softmax.py").read_text() + (
        "\n\ndef die(code):\n    import os\n    os._exit(code)\n\n\n"
        "def pid():\n    import os\n    return os.getpid()\n")
    worker = _worker(server, tmp_path, source)
    student = StudentModule(worker)
    try:
        first = student.pid()
        with pytest.raises(WorkerCrashed, match="exited with status 3"):
            student.die(3)
        second = student.pid()  # a fresh fork of the same server
        assert second != first and second != server.proc.pid
        assert abs(student.softmax([0.0, 0.0])[0] - 0.5) < 1e-12
    finally:
        worker.close()
    assert worker.pid is None and server.proc.poll() is None


def test_a_dead_fork_server_fails_only_the_stage_it_serves_with_a_reason(server, tmp_path):
    server.proc.kill()
    server.proc.wait()
    worker = _worker(server, tmp_path, (ROOT / "solutions" / "a02_softmax.py").read_text())
    with pytest.raises(WorkerCrashed, match="numpy fork server failed"):
        StudentModule(worker).softmax([0.0])
    assert worker.crashes == 1 and worker.events


def test_a_fork_server_dying_under_a_running_worker_costs_that_stage_only(server, tmp_path):
    worker = _worker(server, tmp_path, (ROOT / "solutions" / "a02_softmax.py").read_text())
    student = StudentModule(worker)
    assert abs(student.softmax([0.0, 0.0])[0] - 0.5) < 1e-12
    server.proc.kill()
    server.proc.wait()
    worker.close()  # no exception: the worker is killed directly
    assert worker.pid is None
    with pytest.raises(WorkerCrashed, match="fork server failed"):
        student.softmax([0.0])


SERVERS_SEEN = textwrap.dedent('''
    """Log the numpy fork servers alive while this stage's test runs (their pids)."""
    import os
    import psutil

    from grader.sandbox.forkserver import SERVER_NAME

    def test_log(request):
        if USES_WORKER:
            request.getfixturevalue("student").has("anything")  # the stage's worker: its library's server serves
        live = sorted(p.pid for p in psutil.Process().children()
                      if p.name() == SERVER_NAME.format(library="numpy"))
        with open(os.environ["SERVERS_LOG"], "a") as f:
            f.write(f"{os.path.basename(__file__)} {live}\\n")
''')


def _servers_seen(tmp_path, reverse: bool) -> dict:
    """Run a grading session (the plugin, the reference solutions) over two numpy stages that use their
    worker and a torch stage that does not, in course order or reversed: the numpy fork servers each
    stage's test saw."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for stage_id, uses_worker in (("a01_similarity", True), ("a04_positional", True), ("a05_encoder", False)):
        (suite / f"test_{stage_id}.py").write_text(f"USES_WORKER = {uses_worker}\n{SERVERS_SEEN}")
    log = tmp_path / "servers.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONPATH=str(ROOT), SERVERS_LOG=str(log))
    plugins = ["-p", "pytest_jsonreport.plugin", "--json-report", f"--json-report-file={tmp_path / 'report.json'}",
               "-p", "grader.engine.plugin", "-p", "no:cacheprovider"]
    done = subprocess.run([sys.executable, "-m", "pytest", *plugins, "-q", f"--rootdir={suite}", "-c", os.devnull,
                           str(suite), *(["--reverse-order"] * reverse)],
                          cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line.split(" ", 1) for line in log.read_text().splitlines()]
    return {name.removeprefix("test_").removesuffix(".py"): json.loads(pids) for name, pids in lines}


@pytest.mark.parametrize("reverse", [False, True], ids=["course order", "reversed"])
def test_a_librarys_server_stops_after_the_last_stage_that_needs_it(tmp_path, reverse):
    """The numpy server serves every numpy stage, then is not kept through the torch stages (its memory is
    given back); stages run in course order even with --reverse-order (which reverses within each)."""
    seen = _servers_seen(tmp_path, reverse)
    assert len(seen["a01_similarity"]) == 1, seen
    assert seen["a04_positional"] == seen["a01_similarity"], "one numpy server serves both numpy stages"
    assert seen["a05_encoder"] == [], "the numpy server stopped with the last numpy stage"


def test_closing_a_server_stops_it_and_the_next_get_starts_a_fresh_one():
    srv = forkservers.get("numpy", 1)
    forkservers.close("numpy", 1)
    assert srv.proc.poll() is not None
    forkservers.close("numpy", 1)  # closing twice is harmless
    fresh = forkservers.get("numpy", 1)
    try:
        assert fresh is not srv and fresh.proc.poll() is None
    finally:
        forkservers.close("numpy", 1)


# ----------------------------------------------------------------------------- a session forked by the server

def _run(server, argv, env=None, timeout=60.0):
    return server.run_module("forked_module", argv, {"PATH": "/usr/bin:/bin", **(env or {})}, cwd="/tmp",
                             path=[str(ROOT / "tests" / "project"), str(ROOT)], timeout=timeout)


def test_a_forked_session_runs_the_module_in_its_own_folder_and_environment_and_talks_to_its_server(server):
    done = _run(server, ["probe", "x"], {"MARKER": "m-1"})
    assert done.returncode == 3, done.stderr
    seen = json.loads(done.stdout)
    assert seen["argv"] == ["probe", "x"] and seen["cwd"] == "/tmp" and seen["marker"] == "m-1"
    assert seen["ppid"] == server.proc.pid and seen["numpy_preloaded"]  # a fork of the server: numpy is there
    assert seen["name"] == "grader-session" and seen["inherited"].startswith("numpy:")
    assert seen["adopted"] and seen["answers"]  # its workers would come from the same server
    assert server.proc.poll() is None and _run(server, ["again"]).returncode == 3  # and the server serves on


def test_the_server_never_holds_what_it_forks_a_session_with(server):
    """The session's arguments and environment (the grader's own: tokens, the submission's seed) reach
    the child in a file it opens after the fork, so no later worker forked by the server can find them
    in its memory."""
    if os.geteuid() != 0:
        pytest.skip("reading another process's memory needs root")
    marker = "course-token-" + os.urandom(8).hex()
    assert _run(server, ["probe"], {"MARKER": marker}).returncode == 3
    found = []
    with open(f"/proc/{server.proc.pid}/maps") as maps, open(f"/proc/{server.proc.pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if "r" not in fields[1] or (len(fields) > 5 and not fields[5].startswith("[")):
                continue  # the anonymous and heap memory, where a message would be
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                found.append(marker.encode() in mem.read(end - start))
            except OSError:
                continue
    assert found and not any(found)


def test_a_forked_session_past_its_time_is_killed_and_the_server_serves_on(server):
    with pytest.raises(subprocess.TimeoutExpired):
        _run(server, ["sleep"], timeout=1.0)
    assert _run(server, ["after"]).returncode == 3


def test_a_session_that_leaves_before_its_answer_leaves_the_server_serving(server):
    assert _run(server, ["leave"]).returncode == 0
    assert _run(server, ["after"]).returncode == 3 and server.proc.poll() is None


def test_a_forked_session_dies_with_its_server(server):
    """A server dies with the process that started it (a killed `grade` or batch), and its session with it."""
    with open(os.devnull, "wb") as null:
        forked = server.fork_module("forked_module", ["sleep"], {"PATH": "/usr/bin:/bin"}, cwd="/tmp",
                                    path=[str(ROOT / "tests" / "project"), str(ROOT)], stdout=null.fileno(),
                                    stderr=null.fileno())
    server.proc.kill()
    server.proc.wait()
    try:
        ended, _, _ = select.select([forked.done], [], [], 10)  # the pipe ends when the session does
    finally:
        os.close(forked.done)
    assert ended


# ----------------------------------------------------------------------------- a server started early

def test_an_early_server_probes_before_it_imports_its_library_and_finds_what_the_probes_own_interpreter_finds():
    """`check` and `grade` start a server before they know its library, and the isolation probe runs in it
    first: one thread, no numpy yet (the probe forks throwaway children); then it serves the library named."""
    asked = isolation._asked()
    srv = forkservers.ForkServer(None, isolation.base_env(1), probe=asked)
    try:
        found = srv.probed()
        server = psutil.Process(srv.proc.pid)
        assert server.num_threads() == 1
        assert not [m.path for m in server.memory_maps() if "numpy" in m.path]
        assert Probed.from_json(found) == Probed.from_json(isolation._in_a_child(asked)())
        srv.load("numpy")
        assert srv.wait(os.getpid(), 0) is None  # answered: it serves
        assert [m.path for m in server.memory_maps() if "numpy" in m.path]
        assert server.name() == SERVER_NAME.format(library="numpy")
    finally:
        srv.close()


def test_a_probe_that_fails_in_the_server_is_said_and_the_server_still_serves():
    srv = forkservers.ForkServer(None, isolation.base_env(1), probe={"course": "/"})  # no uid: the probe raises
    try:
        with pytest.raises(isolation.ProbeFailed, match="KeyError"):
            srv.probed()
        srv.load("numpy")
        assert srv.wait(os.getpid(), 0) is None
    finally:
        srv.close()


def test_the_first_library_asked_for_takes_the_early_server_and_an_unused_one_is_stopped(tmp_path):
    forkservers.start_soon(1, probe=False)
    early = forkservers._early[1]
    try:
        assert forkservers.get("numpy", 1) is early and early.library == "numpy"
        forkservers.start_soon(1, probe=False)
        unused = forkservers._early[1]
    finally:
        forkservers.close_all()
    assert early.proc.poll() is not None and unused.proc.poll() is not None
    assert not forkservers._early and not forkservers._servers


# ---------------------------------------------------------------- what the worker says about itself (issue 33)

def test_status_97_after_the_worker_is_ready_is_the_students_own_exit(server, tmp_path):
    """97 is how a fork says it could not confine itself (a grader error); once the submission's code runs,
    the same status is the submission's own exit, a crashed test."""
    source = (ROOT / "solutions" / "a02_softmax.py").read_text() + "\n\ndef die():\n    import os\n    os._exit(97)\n"
    worker = _worker(server, tmp_path, source)
    try:
        with pytest.raises(WorkerCrashed, match="exited with status 97"):
            StudentModule(worker).die()
    finally:
        worker.close()


def test_an_import_failure_is_the_graders_only_if_the_control_worker_fails_it_too(server, tmp_path):
    """The worker's reply says which module failed and whose code imported it; a submission can stage that
    (hide a module from the course's code, or forge the reply). The control worker, with none of the
    submission's code, decides."""
    worker = _worker(server, tmp_path, (ROOT / "solutions" / "a02_softmax.py").read_text())
    staged = {"ok": False, "kind": "error", "type": "ModuleNotFoundError", "message": "No module named 'json'",
              "import": {"module": "json", "not_found": True, "student_module": False, "by": "course",
                         "found_here": False}}
    try:
        worker._check_import(staged, "the run check")  # json imports in the control worker: the student's
        real = {**staged, "import": {**staged["import"], "module": "no_such_module_of_the_course"}}
        with pytest.raises(isolation.WorkerImportFailed, match="no_such_module_of_the_course"):
            worker._check_import(real, "the run check")
    finally:
        worker.close()
    assert worker._control is not None and worker._control.pid is None  # stopped with the stage


def test_a_worker_that_burns_cpu_between_calls_cannot_make_a_call_look_cheaper(server, tmp_path):
    """The baseline of a timed call comes from the control worker, so CPU the submission spends outside the
    call (to make the baseline dearer) only adds to its own time."""
    source = (ROOT / "solutions" / "a02_softmax.py").read_text() + textwrap.dedent('''
        import threading, time
        _busy = threading.Event()

        def _spin():
            while True:
                if not _busy.is_set():
                    sum(range(1000))
                else:
                    time.sleep(0.0005)

        threading.Thread(target=_spin, daemon=True).start()

        def slow(n):
            _busy.set()
            t = time.thread_time()
            while time.thread_time() - t < n:
                pass
            _busy.clear()
            return n
    ''')
    worker = _worker(server, tmp_path, source)
    try:
        value, seconds, handling = StudentModule(worker).timed("slow", 0.05)
    finally:
        worker.close()
    assert value == 0.05 and seconds - handling >= 0.045, (seconds, handling)


# ----------------------------------------------------------------------------- what a worker could see or change

def _cmdline_once_exec_is_done(pid: int) -> list:
    """A new process's command line: Popen returns once exec has closed its descriptors, a moment before the
    kernel sets up the new arguments (until then /proc shows none; seen under load)."""
    deadline = time.monotonic() + 10
    while not (line := psutil.Process(pid).cmdline()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return line


def test_no_grader_process_holds_a_path_of_the_course_or_the_probes_request_in_its_command_line():
    """Any process may read another's command line in /proc (where nothing hides it), and a forked session
    keeps its server's: the server's is the interpreter, ``-I -``, a descriptor and a pid; the probe in an
    interpreter of its own is the interpreter and ``-I -`` (what each runs comes on its standard input)."""
    asked = isolation._asked()
    srv = forkservers.ForkServer(None, isolation.base_env(1), probe=asked)
    try:
        lines = {"server": psutil.Process(srv.proc.pid).cmdline()}
        srv.load("numpy")
        with open(os.devnull, "wb") as null:
            forked = srv.fork_module("forked_module", ["sleep"], {"PATH": "/usr/bin:/bin"}, cwd="/tmp",
                                     path=[str(ROOT / "tests" / "project"), str(ROOT)], stdout=null.fileno(),
                                     stderr=null.fileno())
        lines["session"] = psutil.Process(forked.pid).cmdline()
        forkservers.kill_group(forked.pid)
        srv.finish(forked, 10)
        probing = subprocess.Popen([sys.executable, "-I", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        lines["probe"] = _cmdline_once_exec_is_done(probing.pid)
        probing.communicate(jail.probe_program(asked).encode(), timeout=60)
    finally:
        srv.close()
    assert lines["server"] == lines["session"] == [sys.executable, "-I", "-", lines["server"][3], str(os.getpid())]
    assert lines["probe"] == [sys.executable, "-I", "-"] and probing.returncode == 0
    assert not [arg for line in lines.values() for arg in line[1:] if "/" in arg], lines


def test_a_thread_keeps_its_server_until_its_limits_or_priority_change_or_workers_could_change_it(monkeypatch):
    """A batch's thread forks each grading from one server, and so each worker: a server whose limits a worker
    lowered (one ``prlimit`` where it shares the uid and nothing refuses it) would fail every later worker."""
    first = forkservers.of_this_thread("numpy", 1)
    try:
        assert _run(first, ["probe", "x"]).returncode == 3  # a grading forked from it leaves it as it was
        assert forkservers.of_this_thread("numpy", 1) is first and first.unchanged
        os.setpriority(os.PRIO_PROCESS, first.proc.pid, 5)
        second = forkservers.of_this_thread("numpy", 1)
        assert second is not first and first.proc.poll() is not None
        resource.prlimit(second.proc.pid, resource.RLIMIT_AS, (1 << 40, 1 << 40))
        third = forkservers.of_this_thread("numpy", 1)
        assert third is not second and third.unchanged
        shared = isolation.Probed(isolation.Route.USERNS, False, landlock=6, seccomp="")  # no uid, no seccomp
        monkeypatch.setattr(isolation, "probe", lambda: shared)
        assert forkservers.of_this_thread("numpy", 1) is not third
    finally:
        forkservers.close_threads()
