"""The grading session's entry point: pytest with the grader's two plugins.

``python -m grader.engine.session ARGS`` (a session forked by a fork server, ``run._forked_session``) or
:func:`main` in the grading process itself (``check``, a batch's per-submission process). The plugins
are handed to pytest as modules, not named with ``-p``: pytest looks each ``-p`` name up among the
entry points of every installed distribution first (~5 ms a name, with about 120 installed).
"""
from __future__ import annotations

import gc
import importlib
import os
import sys

PLUGINS = ("pytest_jsonreport.plugin", "grader.engine.plugin")


def main(args) -> int:
    """Run pytest with ``args`` (no ``-p`` of these plugins) and only the plugins grading asks for."""
    import pytest  # start-up: `check` imports it beside the probe (run._start_up_beside_the_probe), not with run
    gc.freeze()  # what is imported by now is never garbage: a collection (Hypothesis runs one) skips it
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # none of the installed packages' own plugins
    return int(pytest.main(list(args), plugins=[importlib.import_module(name) for name in PLUGINS]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
