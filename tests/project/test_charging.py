"""What a worker is charged for (grader/engine/charging.py), on real processes sharing one core with busy loops
(``taskset``): its own time, never the time the machine made it wait for a CPU; a wait of its own making is
its own; a backstop on a worker the machine starved is the grader's trouble."""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time

import pytest

from grader.engine import charging

pytestmark = [pytest.mark.skipif(not shutil.which("taskset"), reason="needs taskset to share one core"),
              pytest.mark.xdist_group("one-core")]

SPIN = "while True: pass"


@contextlib.contextmanager
def on_core_0(code: str, loops: int = 0, sessions: bool = True):
    """A Python child running ``code`` on core 0 beside ``loops`` busy loops there; yields (child, the read end of a
    pipe it may write to: fd ``$REPLY_FD``). With ``sessions``, each is a session of its own, as a worker is (and,
    where the kernel groups a session's processes, ``autogroup``, each has an equal share of the core)."""
    r, w = os.pipe()
    started = [subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", SPIN], start_new_session=sessions)
               for _ in range(loops)]
    child = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", code], pass_fds=(w,),
                             env={**os.environ, "REPLY_FD": str(w)}, start_new_session=sessions)
    os.close(w)
    try:
        yield child, r
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, 9)  # its own processes too (a session leader's group)
        for p in [child, *started]:
            p.kill()
            p.wait()
        os.close(r)


def _outcome(window: charging.Window, fd: int) -> str:
    try:
        window.wait(fd)
        return "answered"
    except charging.OverLimit:
        return "over its limit"
    except charging.Starved:
        return "starved"


def test_a_sleeper_is_charged_its_sleep():
    with on_core_0("import time; time.sleep(60)") as (child, r):
        window = charging.Window(child.pid, 1.0)
        assert _outcome(window, r) == "over its limit"
    assert 1.0 <= window.wall < 3 and window.waited < 0.5 and window.charged >= 1.0


def test_an_answer_within_the_limit_is_read():
    code = "import os, time; time.sleep(0.3); os.write(int(os.environ['REPLY_FD']), b'x'); time.sleep(60)"
    with on_core_0(code) as (child, r):
        window = charging.Window(child.pid, 5.0)
        assert _outcome(window, r) == "answered"
        window.measure()
    assert 0.2 <= window.charged < 3


def test_a_loop_sharing_its_core_is_charged_its_share_not_the_wait():
    """On a core shared with one busy loop, a loop's 1 s limit is reached after about 2 s of wall time."""
    with on_core_0(SPIN, loops=1) as (child, r):
        time.sleep(0.5)  # both running
        window = charging.Window(child.pid, 1.0)
        assert _outcome(window, r) == "over its limit"
    assert window.wall >= 1.5, f"the wait for a CPU was charged: {window.wall:.2f} s of wall time"
    assert window.waited >= 0.5


def test_the_backstop_on_a_starved_worker_is_the_machine_s_doing():
    """Five busy loops beside it on one core: a sixth of the core, its 1 s limit not reached when a 2 s
    backstop fires."""
    with on_core_0(SPIN, loops=5) as (child, r):
        time.sleep(0.5)
        window = charging.Window(child.pid, 1.0, backstop=2.0)
        assert _outcome(window, r) == "starved"
    assert window.charged < 1.0 and window.waited > 1.0


OWN_WAITS = {  # how: (code, its own session from the start); the busy loops share this process's session
    "nice": ("import os\nos.nice(19)\nwhile True: pass", False),
    "autogroup": ("import os\nos.setsid()\nopen('/proc/self/autogroup', 'w').write('19')\nwhile True: pass", False),
    "children": ("import os\nfor _ in range(5):\n    if os.fork() == 0: break\nwhile True: pass", True),
}


@pytest.mark.parametrize("how", sorted(OWN_WAITS))
def test_a_wait_of_its_own_making_is_its_own(how):
    """The same starvation, made by the worker itself: it lowered its own priority (its nice value, or its
    session's autogroup's: a worker is a session of its own), or started processes of its own beside it."""
    if how == "autogroup" and not os.path.exists("/proc/self/autogroup"):
        pytest.skip("no autogroups in this kernel")
    code, session = OWN_WAITS[how]
    with on_core_0(code, loops=0 if how == "children" else 5, sessions=session) as (child, r):
        time.sleep(0.5)
        window = charging.Window(child.pid, 1.0, backstop=2.0)
        assert _outcome(window, r) == "over its limit"
    assert window.charged < 1.0  # the backstop decided


def test_cpu_time_counts_per_thread_the_worker_was_given():
    """A worker given two threads that keeps both busy is charged its wall time, not twice it."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    code = ("import threading\ndef spin():\n    while True: pass\n"
            "threading.Thread(target=spin, daemon=True).start()\nspin()")
    r, w = os.pipe()
    child = subprocess.Popen(["taskset", "-c", "0,1", sys.executable, "-c", code])
    try:
        time.sleep(0.5)
        window = charging.Window(child.pid, 1.0, threads=2)
        with pytest.raises(charging.OverLimit):
            window.wait(r)
    finally:
        child.kill()
        child.wait()
        os.close(r)
        os.close(w)
    assert window.wall >= 0.9, f"two busy threads were charged double: {window.charged:.2f} s in {window.wall:.2f} s"


def test_a_stage_clock_adds_its_requests():
    clock = charging.StageClock(2.0)
    for charged in (0.5, 1.0):
        window = charging.Window(os.getpid(), 1.0)
        window.charged = charged
        clock.add(window)
    assert clock.remaining() == pytest.approx(0.5) and not clock.spent()
    clock.add(window)
    assert clock.spent()
