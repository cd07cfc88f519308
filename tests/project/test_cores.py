"""The cores a grading may use (grader/engine/cores.py): affinity, cgroup quotas, the share per grading."""
import os

from grader.engine import cores


def _cpu_max(folder, text):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cpu.max").write_text(text)


def test_quota_of_cgroup_v2_is_the_smallest_on_the_way_up(tmp_path):
    _cpu_max(tmp_path, "max 100000\n")
    _cpu_max(tmp_path / "docker", "150000 100000\n")
    _cpu_max(tmp_path / "docker" / "job", "max 100000\n")
    assert cores.quota(tmp_path, "/docker/job") == 1.5
    assert cores.quota(tmp_path, "/") is None


def test_quota_of_cgroup_v1(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cores.quota(tmp_path, "/") == 0.5
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cores.quota(tmp_path, "/") is None


def test_available_is_within_the_affinity(monkeypatch):
    affinity = len(os.sched_getaffinity(0))
    assert 1 <= cores.available() <= affinity
    monkeypatch.setattr(cores, "quota", lambda: 0.5)  # half a core still runs one thread
    assert cores.available() == 1


def test_threads_per_grading_share_the_cores():
    assert cores.threads_per_grading(1, cores=2) == 2
    assert cores.threads_per_grading(2, cores=2) == 1
    assert cores.threads_per_grading(4, cores=2) == 1
    assert cores.threads_per_grading(2, cores=8) == 4
