"""The trusted side's clock of a worker's CPU time (grader/engine/cputime.py)."""
import os
import subprocess
import sys
import time

import pytest

from grader.engine.cputime import own_cpu_seconds, process_cpu_seconds


def test_another_process_cpu_time_counts_its_threads_and_not_its_sleep():
    code = ("import threading, time\n"
            "def spin():\n"
            "    t = time.thread_time()\n"
            "    while time.thread_time() - t < 0.3: pass\n"
            "threads = [threading.Thread(target=spin) for _ in range(2)]\n"
            "[t.start() for t in threads]; [t.join() for t in threads]\n"
            "print('done', flush=True); time.sleep(30)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "done"
        used = process_cpu_seconds(child.pid)
        time.sleep(0.3)
        assert 0.6 <= used < 2.0, used  # both threads' 0.3 s, exited threads included
        assert process_cpu_seconds(child.pid) - used < 0.05  # sleeping costs nothing
    finally:
        child.kill()
        child.wait()
    with pytest.raises(ProcessLookupError):
        process_cpu_seconds(child.pid)


def test_own_clock_is_this_thread():
    start = own_cpu_seconds()
    time.sleep(0.1)
    assert own_cpu_seconds() - start < 0.05
    assert process_cpu_seconds(os.getpid()) >= own_cpu_seconds()
