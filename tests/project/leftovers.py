"""What a grading could leave behind on this machine besides files: System V IPC objects (what ``ipcs`` lists,
read from /proc/sysvipc) and POSIX message queues (listed from an mqueue file system mounted for the moment in a
mount namespace of its own: root only). test_hostile.py and test_places.py compare them before and after."""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path


def sysv_objects() -> set:
    """(kind, id, key, creator uid) of every System V shared memory segment, semaphore set and message queue."""
    found = set()
    for kind, ident in (("shm", "shmid"), ("sem", "semid"), ("msg", "msqid")):
        header, *rows = [line.split() for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()]
        for row in rows:
            got = dict(zip(header, row))
            found.add((kind, int(got[ident]), int(got["key"]), int(got["cuid"])))
    return found


def message_queues() -> set:
    """The names of this IPC namespace's POSIX message queues (empty where no mount namespace can be made)."""
    if os.geteuid() != 0:
        return set()
    with tempfile.TemporaryDirectory() as where:
        listed = subprocess.run(["unshare", "--mount", "sh", "-c", f"mount -t mqueue none {where} && ls -A {where}"],
                                capture_output=True, text=True)
    return set(listed.stdout.split()) if listed.returncode == 0 else set()


def ipc_objects() -> set:
    """Everything of :func:`sysv_objects` and :func:`message_queues`, for a before-and-after comparison."""
    return sysv_objects() | {("mq", name) for name in message_queues()}


def remove(objects) -> None:
    """Remove the objects among ``objects`` (as :func:`ipc_objects` names them): what a test's own unconfined
    attack left."""
    flag = {"shm": "-m", "sem": "-s", "msg": "-q"}
    for kind, ident, *_ in objects:
        if kind in flag:
            subprocess.run(["ipcrm", flag[kind], str(ident)], check=False, capture_output=True)
        elif kind == "mq":
            with tempfile.TemporaryDirectory() as where:
                subprocess.run(["unshare", "--mount", "sh", "-c", f"mount -t mqueue none {where} && rm -f "
                                f"{where}/{ident}"], check=False, capture_output=True)
