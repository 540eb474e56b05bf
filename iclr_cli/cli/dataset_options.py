"""Option types of ``score --dataset`` and ``prune --dataset`` (one definition each)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

Dataset = Annotated[Optional[str], typer.Option("--dataset", help="Read one trajectory per row of a dataset: anything datasets.load_dataset takes (a folder or file of parquet/arrow/JSON/JSONL, or a Hub id). Replaces the file arguments.", rich_help_panel="Datasets")]
DatasetSplit = Annotated[Optional[str], typer.Option("--split", "--dataset-split", help="Split of --dataset to read: train (default), test, ...", rich_help_panel="Datasets", show_default=False)]
Column = Annotated[str, typer.Option("--column", help="Column holding the trajectory: an OpenAI message list, or a JSON string in any format iclr reads.", rich_help_panel="Datasets")]
IdColumn = Annotated[str, typer.Option("--id-column", help="Column holding each row's id (records' 'trajectory'); with the default 'id', the row index when the dataset has no such column.", rich_help_panel="Datasets")]
ShardRows = Annotated[Optional[int], typer.Option("--shard-rows", min=1, help="Rows per shard: the unit of work, of batching across trajectories and of resuming. Default 64, or rows / workers with --engine ray when that is fewer (every worker gets a shard); a resumed run keeps its own.", rich_help_panel="Datasets", show_default=False)]
Engine = Annotated[str, typer.Option("--engine", help="local (this process) or ray (Ray Data with an actor pool of scorers).", rich_help_panel="Datasets")]
Workers = Annotated[int, typer.Option("--workers", min=1, help="Scorer actors of --engine ray, each with its own proxy model.", rich_help_panel="Datasets")]
GpusPerWorker = Annotated[float, typer.Option("--num-gpus-per-worker", min=0.0, help="GPUs each --engine ray actor reserves (fractions share a GPU; 0: CPU).", rich_help_panel="Datasets")]
RayAddress = Annotated[Optional[str], typer.Option("--ray-address", help="Ray cluster to join (default: RAY_ADDRESS if set, else a local cluster for the run).", rich_help_panel="Datasets")]


def chosen_split(dataset: str | None, split: str | None) -> str:
    """The dataset split to read: ``split``, or ``train`` when none was given.

    Raises:
        UsageError: for ``--split`` without ``--dataset`` (the block splitter, ``--split`` in
            earlier versions, is ``--block-split``; a value such as ``line`` must not be
            ignored silently).
    """
    from iclr_cli.errors import UsageError

    if dataset is None and split is not None:
        raise UsageError(f"--split {split!r} names a split of --dataset (train, test, ...) and there is no --dataset; "
                         "to choose how reasoning is cut into blocks, use --block-split paragraph|line|sentence")
    return split or "train"
