"""The ``--dataset`` branch of ``iclr score`` and ``iclr prune`` (kept out of their modules)."""

from __future__ import annotations

from dataclasses import dataclass

from iclr_cli.compress import Settings
from iclr_cli.errors import UsageError
from iclr_cli.pipeline import ScorerConfig
from iclr_cli.render.output import Output


@dataclass(frozen=True)
class DatasetArgs:
    """The ``--dataset`` options as given on the command line."""

    src: str
    split: str = "train"
    column: str = "messages"
    id_column: str = "id"
    shard_rows: int = 64
    engine: str = "local"
    workers: int = 1
    gpus_per_worker: float = 0.0
    ray_address: str | None = None


def run_dataset_command(command: str, args: DatasetArgs, files: list[str] | None, settings: Settings, config: ScorerConfig, out: Output, *, target: str | None, fmt: str | None, skip_bad_rows: bool, strict: bool = False, opaque: str = "drop") -> None:
    """Run ``command`` (``score`` or ``prune``) over a dataset into ``target`` (``-o``) and
    print the summary through ``out``.

    Raises:
        UsageError: files given together with ``--dataset``; see also
            :func:`iclr_cli.corpus.run.run_dataset`.
    """
    from iclr_cli.cli.common import print_summary, warn_precision
    from iclr_cli.corpus.run import EngineOptions, run_dataset
    from iclr_cli.corpus.shard import Job
    from iclr_cli.corpus.source import DatasetSpec

    if files:
        raise UsageError(f"give trajectory files or --dataset, not both (got {', '.join(files)})")
    spec = DatasetSpec(args.src, args.split, args.column, args.id_column)
    job = Job(command, spec, settings, config, args.shard_rows, fmt, skip_bad_rows, opaque, strict)
    options = EngineOptions(args.engine, args.workers, args.gpus_per_worker, args.ray_address)
    warn_precision(out, config)
    result = run_dataset(job, options, target, out)
    print_summary(out, result.summary, result.tokenizer, settings.variant.name, command=command)
