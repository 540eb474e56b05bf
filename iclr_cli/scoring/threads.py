"""CPU threads of the proxy scorer on a machine it shares (docs/scoring.md, "When the machine is busy").

Two choices, both made for the user only when the user has not made them:

- **Wait passively.** torch's CPU build (2.13, Linux) runs its intra-op pool, MKL and oneDNN
  on GNU OpenMP (``libgomp``, shipped in ``torch/lib``). Between two parallel regions an idle
  libgomp thread spins for ``GOMP_SPINCOUNT`` checks (300,000, a few ms, when no wait policy
  is set: GCC's libgomp manual) before it sleeps, and a forward pass is a long series of short
  regions separated by Python: so the pool's threads spin most of the time they are not
  computing, and take the cores that another process, the ``serve`` event loop or another Ray
  actor needs. ``OMP_WAIT_POLICY=PASSIVE`` (the OpenMP specification's environment variable;
  GNU libgomp, LLVM ``libomp`` and Intel ``libiomp5`` honour it) makes them sleep at once. The
  runtime reads its environment once, when the library is loaded, that is on ``import torch``:
  :func:`choose_wait_policy` runs before that (the CLI's entry point,
  :func:`~iclr_cli.scoring.factory.build_scorer`, and Ray workers through their environment).
  A user who set ``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT`` or ``KMP_BLOCKTIME`` keeps that choice.
- **No more threads than CPUs granted.** libgomp counts the CPUs of the affinity mask; nothing
  in torch counts the cgroup's CPU quota, so a container limited to 2 CPUs on a 64-core host
  runs 64 threads on them. :func:`available_cpus` is the smaller of the affinity mask and the
  quota (cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, the tightest
  of the process's cgroup and its ancestors), rounded down; :func:`limit_torch` lowers torch's
  pool to it (never raises it: a pool the user or Ray made smaller stays so). Ray actors
  sharing a node divide its CPUs (:func:`actor_cpus`); ``serve`` keeps one CPU for its event
  loop when it has 4 or more (:func:`serve_threads`).

Nothing here imports torch.
"""

from __future__ import annotations

import ctypes
import math
import os
import platform
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence

WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
"""A user who set any of these chose how OpenMP threads wait; iclr leaves the choice alone."""

PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE"}
CGROUP_ROOT = "/sys/fs/cgroup"


def wait_policy(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to ``environ``: :data:`PASSIVE`, or nothing when ``environ``
    already holds one of :data:`WAIT_VARIABLES` (the user's choice)."""
    if any(name in environ for name in WAIT_VARIABLES):
        return {}
    return dict(PASSIVE)


def choose_wait_policy(environ: MutableMapping[str, str] | None = None) -> bool:
    """Put :func:`wait_policy` into the process environment before torch is imported.

    Returns True when it set something. False when the user had chosen, or when torch is
    already imported: its OpenMP runtime has read the environment, so setting the variable
    now would only mislead the processes started later into thinking it applies here.
    """
    environ = os.environ if environ is None else environ
    if "torch" in sys.modules:
        return False
    updates = wait_policy(environ)
    environ.update(updates)
    return bool(updates)


def worker_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The wait-policy variables of this process, for the environment of worker processes
    (Ray actors on other nodes do not inherit the driver's)."""
    environ = os.environ if environ is None else environ
    chosen = {name: environ[name] for name in WAIT_VARIABLES if name in environ}
    return chosen or wait_policy(environ)


def quota_cpus(cpu_max: str | None = None, cfs_quota_us: str | None = None, cfs_period_us: str | None = None) -> float | None:
    """CPUs a cgroup's quota allows (may be fractional), or ``None`` for no quota.

    Args:
        cpu_max: the content of cgroup v2 ``cpu.max``: ``"QUOTA PERIOD"`` in microseconds,
            QUOTA ``max`` for none (kernel docs, ``Documentation/admin-guide/cgroup-v2.rst``).
        cfs_quota_us / cfs_period_us: cgroup v1 ``cpu.cfs_quota_us`` (``-1`` for none) and
            ``cpu.cfs_period_us`` (``Documentation/scheduler/sched-bwc.rst``).
    """
    if cpu_max is not None:
        fields = cpu_max.split()
        if not fields or fields[0] == "max":
            return None
        try:
            quota, period = int(fields[0]), int(fields[1]) if len(fields) > 1 else 100_000
        except ValueError:
            return None
        return quota / period if quota > 0 and period > 0 else None
    if cfs_quota_us is not None and cfs_period_us is not None:
        try:
            quota, period = int(cfs_quota_us), int(cfs_period_us)
        except ValueError:
            return None
        return quota / period if quota > 0 and period > 0 else None
    return None


def _ancestors(path: str) -> list[str]:
    """``/a/b`` -> ``["/a/b", "/a", "/"]``."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:k]) if k else "/" for k in range(len(parts), -1, -1)]


def cgroup_cpus(proc_self_cgroup: str, read: Callable[[str], str | None], root: str = CGROUP_ROOT) -> float | None:
    """The tightest CPU quota over the process's cgroup and its ancestors, or ``None``.

    Args:
        proc_self_cgroup: the content of ``/proc/self/cgroup`` (``0::/path`` for cgroup v2,
            ``N:cpu,cpuacct:/path`` for v1).
        read: returns a file's content, or ``None`` when it cannot be read (so tests pass
            the files as a mapping).
        root: where the cgroup file system is mounted. Inside a container the path in
            ``/proc/self/cgroup`` may be the host's; the walk up to ``/`` then reads the
            container's own files at the mount root.
    """
    limits: list[float] = []
    for line in proc_self_cgroup.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if controllers == "":  # cgroup v2 (unified)
            found = [quota_cpus(cpu_max=read(_under(root, folder, "cpu.max"))) for folder in _ancestors(path)]
        elif "cpu" in controllers.split(","):  # cgroup v1, mounted as cpu/ or cpu,cpuacct/
            found = [
                quota_cpus(cfs_quota_us=read(_under(f"{root}/{mount}", folder, "cpu.cfs_quota_us")),
                           cfs_period_us=read(_under(f"{root}/{mount}", folder, "cpu.cfs_period_us")))
                for mount in ("cpu", "cpu,cpuacct") for folder in _ancestors(path)
            ]
        else:
            continue
        limits += [cpus for cpus in found if cpus is not None]
    return min(limits) if limits else None


def _under(mount: str, folder: str, name: str) -> str:
    """``mount/folder/name`` (``folder`` is ``/`` or starts with ``/``)."""
    return f"{mount.rstrip('/')}{folder.rstrip('/')}/{name}"


def usable_cpus(affinity: int, quota: float | None) -> int:
    """CPUs worth a thread each: the affinity mask's size, lowered to the quota rounded down
    (a quota of 1.5 CPUs gives 1: a second thread would only be throttled), at least 1."""
    cpus = max(1, affinity)
    if quota is not None:
        cpus = min(cpus, max(1, math.floor(quota)))
    return cpus


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def available_cpus() -> int:
    """The CPUs this process may use (:func:`usable_cpus` of this process's affinity mask and
    cgroup quota; ``os.cpu_count()`` where neither can be read)."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)
    cgroup = _read("/proc/self/cgroup")
    return usable_cpus(affinity, cgroup_cpus(cgroup, _read) if cgroup else None)


def actor_cpus(node_cpus: Sequence[float], workers: int) -> float:
    """CPUs each of ``workers`` scorer actors reserves so that they divide the nodes' CPUs.

    Args:
        node_cpus: the CPUs of each node that can host an actor (Ray's ``CPU`` resource).
        workers: actors in the pool (``--workers``).

    Returns:
        A whole number of CPUs when every node can give each of its actors at least one
        (actors spread evenly: ``ceil(workers / nodes)`` per node, sized by the smallest
        node, so every actor can be placed); a fraction when there are more actors than
        CPUs, so all of them still start (each then runs torch on one thread). Ray sets an
        actor's ``OMP_NUM_THREADS`` to its whole CPUs (at least 1), and torch sizes its pool
        from that.
    """
    usable = [c for c in node_cpus if c > 0]
    if not usable or workers < 1:
        return 1.0
    per_node = math.ceil(workers / len(usable))
    share = min(usable) / per_node
    return float(math.floor(share)) if share >= 1 else share


def serve_threads(cpus: int) -> int:
    """Threads of ``serve``'s scorer: all CPUs up to 3, one left for the event loop from 4 on.

    With passive waiting the loop gets a core whenever the scorer is between two parallel
    regions, which is enough on 2 or 3 CPUs, where one thread fewer would cost a third to
    a half of the scoring speed; from 4 CPUs on a reserved core costs at most a quarter.
    """
    return cpus - 1 if cpus >= 4 else max(1, cpus)


def limit_torch(threads: int | None = None) -> int | None:
    """Lower torch's intra-op pool to ``threads`` (default: :func:`available_cpus`); a pool
    that is already smaller (``OMP_NUM_THREADS``, ``torch.set_num_threads``, a Ray actor's
    share) stays as it is. Returns the pool's size, or ``None`` when torch is not imported."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    cap = available_cpus() if threads is None else max(1, threads)
    if torch.get_num_threads() > cap:
        torch.set_num_threads(cap)
    return torch.get_num_threads()


def fix_mmap_threshold(threshold: int = 1 << 20) -> None:
    """Serve allocations above 1 MiB with mmap, so freed KV buffers go back to the OS (glibc).

    A growing KV cache is re-allocated a little larger at every forward chunk. glibc raises
    its mmap threshold each time such a block is freed, after which the blocks come from the
    heap, which fragments and does not shrink: peak RSS for a 4,096-token context was ~125 MiB
    higher. Setting the threshold explicitly (the ``MALLOC_MMAP_THRESHOLD_`` variable does
    the same) turns that adjustment off. Process-wide and harmless elsewhere; skipped when the
    user set the variable or the C library is not glibc.
    """
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return
    if platform.libc_ver()[0] != "glibc":
        return
    try:
        ctypes.CDLL(None).mallopt(-3, threshold)  # -3 = M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass
