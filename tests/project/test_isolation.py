"""What a worker can see and do, measured from inside by a probe submission."""
import json
import os
import re

import pytest
from conftest import ROOT

from grader.engine import run

PROBE = ROOT / "tests" / "project" / "isolation_probe" / "a02_softmax.py"
ALLOWED_ENV = {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "OMP_NUM_THREADS",
               "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "LC_CTYPE",
               "MALLOC_MMAP_THRESHOLD_"}  # glibc malloc tuning (isolation.MALLOC_ENV), no secret


def probe(tmp_path, isolation, monkeypatch):
    monkeypatch.setenv("GRADER_TEST_SECRET", "must-not-leak")
    sub = tmp_path / "probe"
    sub.mkdir()
    source = PROBE.read_text().replace('"/work/main"', repr(str(ROOT)))
    (sub / "a02_softmax.py").write_text(source)
    rep = run.grade(str(sub), stage_ids=["a02_softmax"], isolation=isolation)
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
    assert seen["trusted_modules"] == [], "the worker must not hold what the trusted session imported"
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
    assert seen["trusted_modules"] == []


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
