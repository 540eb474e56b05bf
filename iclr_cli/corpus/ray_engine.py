"""``--engine ray``: Ray Data reads the split; an actor pool of scorers processes the shards.

The read is one Ray Data datasource (:class:`ShardDatasource`) that streams the split through
``datasets`` exactly as the local engine does. Each Ray row is one whole shard (its Arrow table
as IPC bytes, lossless for every type), and every row is its own block, so Ray's re-blocking
never cuts a shard and shards spread over the ``workers`` actors of ``map_batches``
(each a :class:`~iclr_cli.corpus.shard.ShardProcessor` with its own scorer and
``gpus_per_worker`` GPUs). Results come back in row order (``preserve_order``) and the driver
writes them exactly as the local engine's. For a local ``SRC`` the read runs on the driver's
node, where the files are.

``ray.init()`` joins the cluster named by ``address`` or ``RAY_ADDRESS``, else starts a local
one. On a local cluster workers import this very ``iclr_cli`` (its folder goes on their
``PYTHONPATH``); on an existing cluster the package is shipped to the workers with the job
(``runtime_env`` ``py_modules``), so nodes need only its dependencies.

CPUs (docs/scoring.md, "When the machine is busy"): each actor reserves its share of a node's CPUs
(:func:`~iclr_cli.scoring.threads.actor_cpus`), and Ray sets its ``OMP_NUM_THREADS`` to it,
so actors sharing a node divide its cores instead of each using one or all; workers get the
driver's OpenMP wait policy. A local cluster is sized to the CPUs this process may use and its
workers run at the driver's priority: Ray starts workers at nice 15 (``RAY_worker_niceness``)
so that its own daemons stay responsive on a shared cluster, which on a busy laptop or CI
machine starves the scoring. An existing cluster keeps its own setting.

Progress (docs/datasets.md): the scorer actors report the steps and tokens inside their shards to a
counter actor that the driver's progress polls (:mod:`iclr_cli.corpus.ray_progress`).
"""

from __future__ import annotations

import functools
import logging
import os
import warnings
from collections.abc import Collection, Iterator
from dataclasses import dataclass

import orjson
import ray
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

import iclr_cli
from iclr_cli.corpus.local import columns_needed
from iclr_cli.corpus.ray_progress import Poller, ProgressCounter, RemoteProgress
from iclr_cli.corpus.shard import WORKER, Job, ShardProcessor
from iclr_cli.corpus.source import read_shards
from iclr_cli.errors import IclrError
from iclr_cli.scoring import threads


@dataclass(frozen=True)
class RayOptions:
    """Cluster options of ``--engine ray``.

    Attributes:
        workers: actors in the scorer pool (``--workers``), each with its own proxy model.
        gpus_per_worker: GPUs each actor reserves (``--num-gpus-per-worker``; fractions share
            a GPU); 0 scores on CPU.
        cpus_per_worker: CPUs each actor reserves (torch uses that many threads); ``None``:
            the actors' share of the nodes' CPUs (:func:`~iclr_cli.scoring.threads.actor_cpus`).
        address: cluster to join (``--ray-address``); ``None`` uses ``RAY_ADDRESS`` when set,
            else starts a local cluster for the run.
    """

    workers: int = 1
    gpus_per_worker: float = 0.0
    cpus_per_worker: float | None = None
    address: str | None = None


def to_ipc(table) -> bytes:
    """A table as Arrow IPC stream bytes (lossless: types, extension types, metadata)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes):
    import pyarrow as pa

    return pa.ipc.open_stream(data).read_all()


def _shard_rows(job: Job, skip: frozenset[int]) -> Iterator:
    """The read task: one Ray row per shard, the shard's table in :data:`PAYLOAD`."""
    import pyarrow as pa

    for table in read_shards(job.dataset, job.shard_rows, skip, columns_needed(job)):
        yield pa.table({PAYLOAD: pa.array([to_ipc(table)], pa.large_binary())})


PAYLOAD = "shard"
FAILURE = "failure"


class ShardDatasource(Datasource):
    """The split, streamed through ``datasets`` in one read task: one row per shard, whose
    value is the shard's Arrow table (so Ray's re-blocking can never cut a shard)."""

    def __init__(self, job: Job, skip: Collection[int]):
        super().__init__()
        self._job = job
        self._skip = frozenset(skip)

    def estimate_inmemory_data_size(self):
        return None

    def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
        meta = BlockMetadata(num_rows=None, size_bytes=None, input_files=None, exec_stats=None)
        return [ReadTask(functools.partial(_shard_rows, self._job, self._skip), meta, per_task_row_limit=per_task_row_limit)]

    @property
    def supports_distributed_reads(self) -> bool:
        # Local files exist only on the driver's node.
        return not self._job.dataset.is_local

    def get_name(self) -> str:
        return "iclr-shards"


def _actor_class(job: Job) -> type:
    """The actor class of the scorer pool, with ``job`` bound in (not a constructor
    argument, which Ray would keep in the object store for restarts)."""

    class ShardActor:
        def __init__(self, counter=None):
            self.progress = RemoteProgress(counter) if counter is not None else None
            self.processor = ShardProcessor(job, self.progress)
            self.worker = ray.get_runtime_context().get_actor_id() or str(os.getpid())

        def __call__(self, batch):
            import pyarrow as pa

            try:
                out = [to_ipc(self.processor(from_ipc(data))) for data in batch.column(PAYLOAD).to_pylist()]
                errors = [None] * len(out)
                if self.progress is not None:
                    self.progress.sync()
            except IclrError as exc:
                # Ray would pass on only the traceback's text; the driver re-raises this.
                out, errors = [b""], [orjson.dumps({"message": str(exc), "exit_code": exc.exit_code}).decode()]
            return pa.table({PAYLOAD: pa.array(out, pa.large_binary()), FAILURE: pa.array(errors, pa.string()),
                             WORKER: pa.array([self.worker] * len(out), pa.string())})

    return ShardActor


def worker_env(environ=None, *, local: bool) -> dict[str, str]:
    """Environment variables for the workers: the OpenMP wait policy, and on a local cluster
    normal priority (``RAY_worker_niceness=0``) unless the user set a niceness."""
    environ = os.environ if environ is None else environ
    env = threads.worker_environment(environ)
    if local and "RAY_worker_niceness" not in environ:
        env["RAY_worker_niceness"] = "0"
    return env


def connect(options: RayOptions) -> bool:
    """Connect to or start a cluster; True when this call did it (and must shut it down)."""
    if ray.is_initialized():
        return False
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(iclr_cli.__file__)))
    address = options.address or os.environ.get("RAY_ADDRESS")
    # Ray's own logs stay in its session folder (/tmp/ray/session_latest/logs); worker
    # output is not forwarded. Errors still arrive as exceptions.
    common = {"logging_level": logging.ERROR, "log_to_driver": False}
    if address:
        runtime_env = {"py_modules": [os.path.dirname(os.path.abspath(iclr_cli.__file__))], "excludes": ["__pycache__"],
                       "env_vars": worker_env(local=False)}
        ray.init(address=address, runtime_env=runtime_env, **common)
    else:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        ray.init(include_dashboard=False, num_cpus=threads.available_cpus(),
                 runtime_env={"env_vars": {"PYTHONPATH": path, **worker_env(local=True)}}, **common)
    for name in ("ray", "ray.data"):
        logging.getLogger(name).setLevel(logging.ERROR)
    # Ray Data sizes the pool from the read's one task; the shards it emits spread fine.
    warnings.filterwarnings("ignore", message="The minimum number of concurrent actors", category=UserWarning)
    return True


def node_cpus(gpus_per_worker: float = 0.0) -> list[float]:
    """The ``CPU`` resource of each live node that can host a scorer actor (one with
    ``gpus_per_worker`` GPUs when the actors need GPUs)."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return [n["Resources"].get("CPU", 0.0) for n in nodes if n["Resources"].get("GPU", 0.0) >= gpus_per_worker]


def run_ray(job: Job, skip: Collection[int], options: RayOptions, progress=None) -> Iterator:
    """Result tables (:mod:`iclr_cli.corpus.shard` layout) of every unfinished shard, in row
    order, computed on a Ray cluster, each with :data:`~iclr_cli.corpus.shard.WORKER` (the
    actor that scored it). ``progress`` (a :class:`~iclr_cli.render.progress.Tracker`) gets
    the steps and tokens inside the shards through a :class:`ProgressCounter`.

    Raises:
        IclrError: an error a worker reported (a bad ``--model``, say), with its message
            and exit code.
    """
    started = connect(options)
    cpus = options.cpus_per_worker or threads.actor_cpus(node_cpus(options.gpus_per_worker), options.workers)
    counter = None
    if progress is not None:
        counter = ray.remote(num_cpus=0)(ProgressCounter).remote()
        progress.poll = Poller(counter)
    context = ray.data.DataContext.get_current()
    saved = (context.execution_options.preserve_order, context.enable_progress_bars, context.target_max_block_size)
    try:
        context.execution_options.preserve_order = True
        context.enable_progress_bars = False
        # Every shard its own block (a block holds whole rows, and a row is a shard), so
        # that shards spread over the actors instead of travelling together.
        context.target_max_block_size = 1
        # The read reserves no CPU: it only streams files, and the actors may hold every
        # CPU of a small cluster.
        data = ray.data.read_datasource(ShardDatasource(job, skip), num_cpus=0, override_num_blocks=1)
        with warnings.catch_warnings():
            # max_restarts has no named parameter yet; Ray's own docs suggest passing it so.
            warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
            data = data.map_batches(
                _actor_class(job),
                batch_size=1,
                batch_format="pyarrow",
                zero_copy_batch=True,
                fn_constructor_kwargs={"counter": counter},
                compute=ray.data.ActorPoolStrategy(size=options.workers),
                num_cpus=cpus,
                num_gpus=options.gpus_per_worker or None,
                # A dead actor stops the run and the same command resumes it. (Ray can
                # restart actors, but then logs on every run that restarts may fail.)
                max_restarts=0,
            )
        import pyarrow as pa

        for block in data.iter_batches(batch_size=None, batch_format="pyarrow"):
            columns = (block.column(PAYLOAD).to_pylist(), block.column(FAILURE).to_pylist(), block.column(WORKER).to_pylist())
            for payload, failure, worker in zip(*columns):
                if failure:
                    raise _remote_error(failure)
                table = from_ipc(payload)
                yield table.append_column(WORKER, pa.array([worker] * table.num_rows, pa.string()))
    finally:
        if counter is not None:
            progress.poll.freeze()  # the final line keeps the last counts
            if not started:
                ray.kill(counter)
        context.execution_options.preserve_order, context.enable_progress_bars, context.target_max_block_size = saved
        if started:
            ray.shutdown()


def _remote_error(failure: str) -> IclrError:
    """The error an actor reported (e.g. a bad ``--model``), as iclr prints it locally."""
    fields = orjson.loads(failure)
    error = IclrError(fields["message"])
    error.exit_code = fields["exit_code"]
    return error
