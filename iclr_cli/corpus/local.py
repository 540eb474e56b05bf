"""``--engine local``: shards read and processed one after another in this process."""

from __future__ import annotations

from collections.abc import Collection, Iterator

from iclr_cli.corpus.shard import Job, ShardProcessor
from iclr_cli.corpus.source import read_shards


def columns_needed(job: Job) -> list[str] | None:
    """``score`` needs only the trajectory and id columns; ``prune`` writes every column."""
    return [job.dataset.column, job.dataset.id_column] if job.command == "score" else None


def run_local(job: Job, skip: Collection[int], progress=None) -> Iterator:
    """Result tables (:mod:`iclr_cli.corpus.shard` layout), one per unfinished shard, in
    row order. The scorer is built on the first shard that needs it; ``progress`` (a
    :class:`~iclr_cli.render.progress.Tracker`) hears of every step inside a shard."""
    processor = ShardProcessor(job, progress)
    for table in read_shards(job.dataset, job.shard_rows, skip, columns_needed(job)):
        yield processor(table)
