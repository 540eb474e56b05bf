"""The ``--dataset`` branch of ``iclr score`` and ``iclr prune`` (kept out of their modules)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from iclr_cli.compress import Settings
from iclr_cli.errors import UsageError
from iclr_cli.pipeline import ScorerConfig
from iclr_cli.render.output import Output


SHARD_ROWS = 64


def default_shard_rows(rows: int | None, workers: int) -> int:
    """Rows per shard when ``--shard-rows`` is not given: :data:`SHARD_ROWS`, or fewer when
    ``rows`` rows would otherwise make fewer shards than ``workers`` (a shard goes to one
    worker whole, so 20 rows in one 64-row shard leave a second worker idle):
    ``ceil(rows / workers)``. ``rows`` ``None`` (not counted) keeps the default."""
    if rows is None or workers <= 1 or rows <= 0:
        return SHARD_ROWS
    return max(1, min(SHARD_ROWS, math.ceil(rows / workers)))


@dataclass(frozen=True)
class DatasetArgs:
    """The ``--dataset`` options as given on the command line (``shard_rows`` ``None``:
    chosen by :func:`default_shard_rows`, or the earlier run's when resuming)."""

    src: str
    split: str = "train"
    column: str = "messages"
    id_column: str = "id"
    shard_rows: int | None = None
    engine: str = "local"
    workers: int = 1
    gpus_per_worker: float = 0.0
    ray_address: str | None = None


def run_dataset_command(command: str, args: DatasetArgs, files: list[str] | None, settings: Settings, config: ScorerConfig, out: Output, *, target: str | None, fmt: str | None, skip_bad_rows: bool, strict: bool = False, opaque: str = "seal", signed: str = "seal") -> None:
    """Run ``command`` (``score`` or ``prune``) over a dataset into ``target`` (``-o``) and
    print the summary through ``out``.

    Raises:
        UsageError: files given together with ``--dataset``; see also
            :func:`iclr_cli.corpus.run.run_dataset`.
    """
    from iclr_cli.cli.common import print_summary, warn_precision
    from iclr_cli.corpus.run import EngineOptions, run_dataset
    from iclr_cli.corpus.shard import Job
    from iclr_cli.corpus.sinks import resumed_shard_rows
    from iclr_cli.corpus.source import DatasetSpec, count_rows

    if files:
        raise UsageError(f"give trajectory files or --dataset, not both (got {', '.join(files)})")
    spec = DatasetSpec(args.src, args.split, args.column, args.id_column)
    options = EngineOptions(args.engine, args.workers, args.gpus_per_worker, args.ray_address)
    options.check()
    rows = count_rows(spec)
    shard_rows = args.shard_rows or resumed_shard_rows(command, target) or default_shard_rows(rows, args.workers if args.engine == "ray" else 1)
    job = Job(command, spec, settings, config, shard_rows, fmt, skip_bad_rows, opaque, strict, signed)
    warn_precision(out, config)
    result = run_dataset(job, options, target, out, rows_total=rows)
    print_summary(out, result.summary, result.tokenizer, settings.variant.name, command=command,
                  splitter=settings.splitter if settings.variant.needs_scores else None)
    if args.engine == "ray" and result.workers is not None and result.new_shards:
        used = len(result.workers)
        if used < args.workers:
            out.warn(f"{used} of {args.workers} Ray workers got a shard: {result.new_rows} row(s) in {result.new_shards} shard(s) of up to "
                     f"{shard_rows} rows (--shard-rows); a worker takes whole shards, so use at most rows / workers per shard")
        else:
            out.info(f"Ray: {used} of {args.workers} workers got shards ({result.new_shards} shard(s) of up to {shard_rows} rows)")
