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
from iclr_cli.corpus.shard import Job, ShardProcessor
from iclr_cli.corpus.source import read_shards
from iclr_cli.errors import IclrError


@dataclass(frozen=True)
class RayOptions:
    """Cluster options of ``--engine ray``.

    Attributes:
        workers: actors in the scorer pool (``--workers``), each with its own proxy model.
        gpus_per_worker: GPUs each actor reserves (``--num-gpus-per-worker``; fractions share
            a GPU); 0 scores on CPU.
        cpus_per_worker: CPUs each actor reserves (torch uses that many threads).
        address: cluster to join (``--ray-address``); ``None`` uses ``RAY_ADDRESS`` when set,
            else starts a local cluster for the run.
    """

    workers: int = 1
    gpus_per_worker: float = 0.0
    cpus_per_worker: float = 1.0
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
        def __init__(self):
            self.processor = ShardProcessor(job)

        def __call__(self, batch):
            import pyarrow as pa

            try:
                out = [to_ipc(self.processor(from_ipc(data))) for data in batch.column(PAYLOAD).to_pylist()]
                errors = [None] * len(out)
            except IclrError as exc:
                # Ray would pass on only the traceback's text; the driver re-raises this.
                out, errors = [b""], [orjson.dumps({"message": str(exc), "exit_code": exc.exit_code}).decode()]
            return pa.table({PAYLOAD: pa.array(out, pa.large_binary()), FAILURE: pa.array(errors, pa.string())})

    return ShardActor


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
        runtime_env = {"py_modules": [os.path.dirname(os.path.abspath(iclr_cli.__file__))], "excludes": ["__pycache__"]}
        ray.init(address=address, runtime_env=runtime_env, **common)
    else:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        ray.init(include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": path}}, **common)
    for name in ("ray", "ray.data"):
        logging.getLogger(name).setLevel(logging.ERROR)
    # Ray Data sizes the pool from the read's one task; the shards it emits spread fine.
    warnings.filterwarnings("ignore", message="The minimum number of concurrent actors", category=UserWarning)
    return True


def run_ray(job: Job, skip: Collection[int], options: RayOptions) -> Iterator:
    """Result tables (:mod:`iclr_cli.corpus.shard` layout) of every unfinished shard, in row
    order, computed on a Ray cluster.

    Raises:
        IclrError: an error a worker reported (a bad ``--model``, say), with its message
            and exit code.
    """
    started = connect(options)
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
                compute=ray.data.ActorPoolStrategy(size=options.workers),
                num_cpus=options.cpus_per_worker,
                num_gpus=options.gpus_per_worker or None,
                # A dead actor stops the run and the same command resumes it. (Ray can
                # restart actors, but then logs on every run that restarts may fail.)
                max_restarts=0,
            )
        for block in data.iter_batches(batch_size=None, batch_format="pyarrow"):
            for payload, failure in zip(block.column(PAYLOAD).to_pylist(), block.column(FAILURE).to_pylist()):
                if failure:
                    raise _remote_error(failure)
                yield from_ipc(payload)
    finally:
        context.execution_options.preserve_order, context.enable_progress_bars, context.target_max_block_size = saved
        if started:
            ray.shutdown()


def _remote_error(failure: str) -> IclrError:
    """The error an actor reported (e.g. a bad ``--model``), as iclr prints it locally."""
    fields = orjson.loads(failure)
    error = IclrError(fields["message"])
    error.exit_code = fields["exit_code"]
    return error
