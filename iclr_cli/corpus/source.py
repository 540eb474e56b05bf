"""Where dataset rows come from: anything ``datasets.load_dataset`` takes, streamed.

``SRC`` is a local folder or file of parquet / arrow / JSON / JSONL / CSV, a folder written by
``Dataset.save_to_disk``, or a Hub id where the Hub is reachable. Rows are read with
``streaming=True`` in shards of ``shard_rows`` consecutive rows as Arrow tables, so memory
holds one shard at a time whatever the number of rows. Every table gets two columns the
engines carry through: :data:`ROW` (0-based row index in the split) and :data:`SHARD`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from iclr_cli.errors import InputError, UsageError

# Without this column the row index is the id; another --id-column that is missing is an error.
DEFAULT_ID_COLUMN = "id"
ROW = "__iclr_row__"
SHARD = "__iclr_shard__"

# Builder of ``datasets`` for a single file, by suffix.
_BUILDERS = {
    ".parquet": "parquet",
    ".arrow": "arrow",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".json.gz": "json",
    ".jsonl.gz": "json",
    ".csv": "csv",
}


@dataclass(frozen=True)
class DatasetSpec:
    """One split of one dataset and the columns that matter.

    Attributes:
        src: ``SRC`` as the user gave it (used in messages and records).
        split: the split to read (``train`` by default).
        column: the column holding one trajectory per row.
        id_column: the column holding the row's id; when the dataset has no column ``id``
            (the default) the row index is the id; another name must exist.
    """

    src: str
    split: str = "train"
    column: str = "messages"
    id_column: str = DEFAULT_ID_COLUMN

    @property
    def path(self) -> str:
        """``src`` made absolute when it names a local file or folder (Ray workers run
        elsewhere), else ``src`` unchanged (a Hub id)."""
        return os.path.abspath(self.src) if os.path.exists(self.src) else self.src

    @property
    def is_local(self) -> bool:
        return os.path.exists(self.src)

    def where(self, row: int | None = None) -> str:
        """``SRC [split]`` or ``SRC [split] row N``, the prefix of every message about it."""
        base = f"{self.src} [{self.split}]"
        return base if row is None else f"{base} row {row}"


def open_stream(spec: DatasetSpec):
    """The split as a ``datasets.IterableDataset``.

    Raises:
        InputError: the dataset cannot be found or read.
        UsageError: the split does not exist (the message lists those that do).
    """
    import datasets

    path = spec.path
    try:
        if os.path.isfile(path):
            builder = _builder_for(path)
            return datasets.load_dataset(builder, data_files={spec.split: path}, split=spec.split, streaming=True)
        if os.path.isdir(path) and any(os.path.exists(os.path.join(path, f)) for f in ("state.json", "dataset_dict.json")):
            saved = datasets.load_from_disk(path)
            if isinstance(saved, datasets.DatasetDict):
                if spec.split not in saved:
                    raise UsageError(f"{spec.src}: no split {spec.split!r}; splits: {', '.join(saved)}")
                saved = saved[spec.split]
            return saved.to_iterable_dataset()
        return datasets.load_dataset(path, split=spec.split, streaming=True)
    except UsageError:
        raise
    except ValueError as exc:
        if "split" in str(exc).lower():
            raise UsageError(f"{spec.src}: {exc}") from exc
        raise InputError(spec.src, f"cannot be read as a dataset: {exc}") from exc
    except (OSError, ConnectionError, ImportError) as exc:
        raise InputError(spec.src, f"cannot be read as a dataset: {exc}") from exc


def _builder_for(path: str) -> str:
    name = path.lower()
    for suffix, builder in sorted(_BUILDERS.items(), key=lambda kv: -len(kv[0])):
        if name.endswith(suffix):
            return builder
    raise UsageError(f"{path}: unknown dataset file type; use one of {', '.join(sorted(_BUILDERS))} or a folder")


def read_shards(spec: DatasetSpec, shard_rows: int, skip: Collection[int] = (), columns: Collection[str] | None = None) -> Iterator:
    """Yield one ``pyarrow.Table`` per shard (``shard_rows`` rows, the last may be shorter),
    in row order, with :data:`ROW` and :data:`SHARD` appended; shards in ``skip`` are read
    past but not yielded (a resumed run). ``columns`` keeps only those columns (``score``
    needs only the trajectory and id columns).

    Raises:
        InputError / UsageError: as :func:`open_stream`.
    """
    import pyarrow as pa

    stream = open_stream(spec)
    first_row = 0
    for shard, table in enumerate(stream.with_format("arrow").iter(batch_size=shard_rows)):
        n = table.num_rows
        if shard not in skip:
            if columns is not None:
                table = table.select([c for c in table.column_names if c in columns])
            table = table.append_column(ROW, pa.array(range(first_row, first_row + n), pa.int64()))
            table = table.append_column(SHARD, pa.array([shard] * n, pa.int64()))
            yield table
        first_row += n


def count_rows(spec: DatasetSpec) -> int | None:
    """Rows in the split, for the progress's total and the default shard size; ``None`` for a
    Hub dataset (counting would download it) or when the count fails.

    A saved dataset's count is in its metadata; local files are read once, only the trajectory
    column (a fraction of the time scoring takes). A failure here is left to the run to
    report: it opens the same stream.
    """
    if not spec.is_local:
        return None
    try:
        stream = open_stream(spec)
        n_rows = getattr(stream, "num_rows", None)  # not on streams; kept should datasets add it
        if isinstance(n_rows, int):
            return n_rows
        batches = stream.select_columns([spec.column]).with_format("arrow").iter(batch_size=1024)
        try:
            return sum(table.num_rows for table in batches)
        finally:
            getattr(batches, "close", lambda: None)()
    except Exception:  # the run itself reports a dataset it cannot read
        return None


def peek_schema(spec: DatasetSpec):
    """The Arrow schema of the split (from its first row), with the dataset's metadata.

    Raises:
        UsageError: the trajectory column, or an ``id_column`` other than ``id``, is missing
            (the message lists the columns).
        InputError: the split is empty or unreadable.
    """
    batches = open_stream(spec).with_format("arrow").iter(batch_size=1)
    try:
        table = next(batches, None)
    finally:
        # An iterator left open at exit can abort the process from a reader thread.
        getattr(batches, "close", lambda: None)()
    if table is None:
        raise InputError(spec.where(), "the split has no rows")
    schema = table.schema
    if spec.column not in schema.names:
        raise UsageError(f"{spec.where()}: no column {spec.column!r} (--column); columns: {', '.join(schema.names)}")
    if spec.id_column != DEFAULT_ID_COLUMN and spec.id_column not in schema.names:
        raise UsageError(f"{spec.where()}: no column {spec.id_column!r} (--id-column); columns: {', '.join(schema.names)}")
    return schema


def fingerprint(spec: DatasetSpec) -> str:
    """A digest of what the split's data is: for local files their paths, sizes and
    modification times; for a Hub id the id itself. A resumed run must see the same."""
    digest = hashlib.sha256(spec.path.encode())
    if spec.is_local:
        paths = [spec.path] if os.path.isfile(spec.path) else sorted(_files_under(spec.path))
        for p in paths:
            st = os.stat(p)
            digest.update(f"\0{os.path.relpath(p, spec.path)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def _files_under(folder: str) -> Iterator[str]:
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
        for name in files:
            if not name.startswith((".", "__")):
                yield os.path.join(root, name)
