"""CPU threads of the scorer on a shared machine (docs/scoring.md, "When the machine is busy"): the wait policy, the CPUs the
process may use (affinity and cgroup quota, the files given as inputs), and their division."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from iclr_cli.scoring import threads

ROOT = Path(__file__).resolve().parents[1]


def test_passive_waiting_unless_the_user_chose():
    assert threads.wait_policy({}) == {"OMP_WAIT_POLICY": "PASSIVE"}
    for name, value in (("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "300000"), ("KMP_BLOCKTIME", "200")):
        assert threads.wait_policy({name: value}) == {}


def test_choose_sets_the_variable_only_before_torch_and_never_over_the_user(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    env: dict[str, str] = {"PATH": "/bin"}
    assert threads.choose_wait_policy(env) is True and env["OMP_WAIT_POLICY"] == "PASSIVE"
    mine = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert threads.choose_wait_policy(mine) is False and mine == {"OMP_WAIT_POLICY": "ACTIVE"}
    monkeypatch.setitem(sys.modules, "torch", object())  # already loaded: too late to matter
    late: dict[str, str] = {}
    assert threads.choose_wait_policy(late) is False and late == {}


def test_workers_get_the_drivers_choice():
    assert threads.worker_environment({}) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert threads.worker_environment({"GOMP_SPINCOUNT": "0", "HOME": "/h"}) == {"GOMP_SPINCOUNT": "0"}


def _omp_environment(extra_env: dict[str, str]) -> str:
    """libgomp's own report of its settings (OMP_DISPLAY_ENV) in a fresh ``iclr`` process
    that loads torch (``--device cpu`` checks the device with torch even for the fake)."""
    env = {k: v for k, v in os.environ.items() if k not in threads.WAIT_VARIABLES}
    env.update(OMP_DISPLAY_ENV="TRUE", PYTHONPATH=str(ROOT), **extra_env)
    sample = str(ROOT / "sample_trajectories" / "openai_chat.json")
    done = subprocess.run([sys.executable, "-m", "iclr_cli", "score", sample, "--model", "fake", "--device", "cpu", "-q"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.slow  # two fresh interpreters that import torch
def test_the_openmp_runtime_loaded_by_the_cli_waits_passively_unless_told_otherwise():
    pytest.importorskip("torch")
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in _omp_environment({})
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in _omp_environment({"OMP_WAIT_POLICY": "ACTIVE"})


def test_quota_from_cgroup_v2_and_v1_files():
    assert threads.quota_cpus(cpu_max="max 100000\n") is None
    assert threads.quota_cpus(cpu_max="150000 100000\n") == 1.5
    assert threads.quota_cpus(cfs_quota_us="-1\n", cfs_period_us="100000\n") is None
    assert threads.quota_cpus(cfs_quota_us="200000\n", cfs_period_us="100000\n") == 2.0
    assert threads.quota_cpus() is None


def test_tightest_quota_over_the_cgroup_and_its_ancestors():
    files = {
        "/sys/fs/cgroup/ci/job/cpu.max": "max 100000",
        "/sys/fs/cgroup/ci/cpu.max": "250000 100000",  # the parent's limit binds the child
    }
    assert threads.cgroup_cpus("0::/ci/job\n", files.get) == 2.5
    # a container whose cgroup is the root of its view
    assert threads.cgroup_cpus("0::/\n", {"/sys/fs/cgroup/cpu.max": "50000 100000"}.get) == 0.5
    # cgroup v1, the host's path visible and not (the container's files at the mount root)
    v1 = "11:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n"
    host = {"/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "300000", "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000"}
    assert threads.cgroup_cpus(v1, host.get) == 3.0
    inside = {"/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "100000", "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000"}
    assert threads.cgroup_cpus(v1, inside.get) == 1.0
    assert threads.cgroup_cpus("0::/user.slice\n", {}.get) is None


def test_usable_cpus_is_the_affinity_lowered_to_the_whole_quota():
    assert threads.usable_cpus(64, 2.5) == 2
    assert threads.usable_cpus(2, None) == 2
    assert threads.usable_cpus(4, 0.5) == 1
    assert threads.usable_cpus(2, 8.0) == 2
    assert 1 <= threads.available_cpus() <= (os.cpu_count() or 1)


def test_actors_divide_the_cpus_of_their_nodes():
    assert threads.actor_cpus([2.0], 2) == 1.0
    assert threads.actor_cpus([2.0], 1) == 2.0
    assert threads.actor_cpus([16.0, 16.0], 4) == 8.0
    assert threads.actor_cpus([16.0, 8.0, 0.0], 4) == 4.0  # the smallest CPU node sizes them; a 0-CPU head hosts none
    assert threads.actor_cpus([2.0], 3) == pytest.approx(2 / 3)  # all three still start
    assert threads.actor_cpus([], 2) == 1.0


def test_serve_keeps_a_cpu_for_its_event_loop_from_four_cpus():
    assert [threads.serve_threads(n) for n in (1, 2, 3, 4, 16)] == [1, 2, 3, 3, 15]


def test_limit_torch_lowers_the_pool_and_never_raises_it():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert threads.limit_torch(4) == 1  # a pool made smaller (a test, Ray, the user) stays
        torch.set_num_threads(2)
        assert threads.limit_torch(1) == 1
    finally:
        torch.set_num_threads(before)


def test_ray_workers_run_at_normal_priority_on_a_local_cluster_only():
    pytest.importorskip("ray")
    from iclr_cli.corpus.ray_engine import worker_env

    assert worker_env({}, local=True) == {"OMP_WAIT_POLICY": "PASSIVE", "RAY_worker_niceness": "0"}
    assert worker_env({"RAY_worker_niceness": "10"}, local=True) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert worker_env({"OMP_WAIT_POLICY": "ACTIVE"}, local=False) == {"OMP_WAIT_POLICY": "ACTIVE"}
