"""Run by test_forkserver.py as ``python -m forked_module MODE`` in a fork of a fork server
(``ForkServer.run_module``): prints what it finds as JSON, or sleeps."""
import json
import os
import sys
import time

if __name__ == "__main__":
    if sys.argv[1:] == ["sleep"]:
        time.sleep(60)
    if sys.argv[1:] == ["leave"]:  # ask the server something and leave before the answer
        import socket

        from grader.sandbox.forkserver import CONNECTION_ENV, send_message
        fd = int(os.environ[CONNECTION_ENV].partition(":")[2])
        send_message(socket.socket(fileno=fd), {"op": "wait", "pid": 1, "timeout": 0.2})
        os._exit(0)
    preloaded = "numpy" in sys.modules
    from grader.engine import forkservers
    from grader.sandbox.forkserver import CONNECTION_ENV
    inherited = os.environ.get(CONNECTION_ENV)
    server = forkservers.get("numpy", 1)
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "marker": os.environ.get("MARKER"),
                      "ppid": os.getppid(), "numpy_preloaded": preloaded,
                      "name": open("/proc/self/comm").read().strip(), "inherited": inherited,
                      "adopted": server.proc is None, "answers": server.wait(1, timeout=0) is None}))
    sys.exit(3)
