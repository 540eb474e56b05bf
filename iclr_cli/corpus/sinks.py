"""Where a dataset run's results go, one finished shard at a time, in row order.

- ``score -o OUT.jsonl|OUT.parquet``: each shard's records go to a part file in a hidden
  folder beside ``OUT`` (``.OUT.iclr-parts/``, with the manifest); when every shard is done the
  parts become ``OUT`` in one atomic rename and the folder goes. Without ``-o`` records stream
  to stdout and nothing is resumable.
- ``prune -o OUT_DIR``: each shard is a parquet file in ``OUT_DIR/.iclr/shards/``; when every
  shard is done they move to ``OUT_DIR/data/SPLIT-NNNNN-of-MMMMM.parquet`` (the layout
  ``datasets.load_dataset(OUT_DIR)`` reads back as split ``SPLIT``, rows in order). The
  manifest stays in ``OUT_DIR/.iclr/`` (hidden: ``datasets`` ignores it).

Every file is written to a temp name and renamed into place.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

import orjson

from iclr_cli.corpus.manifest import Manifest, ShardEntry
from iclr_cli.errors import UsageError
from iclr_cli.jsonio import open_output, temp_beside

# Fields of a score record and their Arrow types (pipeline.score_records plus ``row``);
# fields added later are inferred.
RECORD_FIELDS = (
    ("trajectory", "string"), ("row", "int64"), ("step", "int64"), ("block", "int64"), ("n_blocks", "int64"),
    ("n_tokens", "int64"), ("entropy_bits", "float64"), ("selected", "bool_"), ("text", "string"), ("part", "int64"),
    ("source", "string"), ("variant", "string"), ("windowed", "bool_"), ("history_kept", "int64"),
    ("context_tokens", "int64"), ("context", "string"), ("skipped", "string"), ("history_tail_tokens", "int64"),
)


def _atomic_write(path: str, write) -> None:
    """Call ``write(tmp_path)`` and rename the result over ``path``; the file gets the mode
    every other output gets (:func:`iclr_cli.jsonio.temp_beside`: the umask's, or the mode of
    the file it replaces), not mkstemp's 0600."""
    fd, tmp = temp_beside(Path(path))
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def manifest_path(command: str, target: str | None) -> str | None:
    """Where the manifest of a ``command`` run into ``target`` lives (``None``: a ``score``
    to stdout keeps none)."""
    if target in (None, "-"):
        return None
    if command == "score":
        folder, name = os.path.split(os.path.abspath(target))
        return os.path.join(folder, f".{name}.iclr-parts", "manifest.sqlite")
    return os.path.join(target, ".iclr", "manifest.sqlite")


def resumed_shard_rows(command: str, target: str | None) -> int | None:
    """``--shard-rows`` of the earlier run into ``target`` when it finished a shard (a resumed
    run must keep it), else ``None``."""
    path = manifest_path(command, target)
    found = Manifest.recorded(path) if path else None
    if found is None or not found[1]:
        return None
    rows = found[0].get("shard_rows")
    return rows if isinstance(rows, int) else None


class ScoreSink:
    """Score records of finished shards; see the module docstring.

    ``stream``: the binary file records go to when there is no ``target`` (stdout).

    Raises:
        UsageError: ``target`` has an unknown suffix, or its parts folder belongs to a run
            with other settings.
    """

    def __init__(self, target: str | None, settings: Mapping[str, object], stream=None):
        self.target = None if target in (None, "-") else target
        self.manifest: Manifest | None = None
        self._stream = stream
        if self.target is None:
            return
        if not self.target.endswith((".jsonl", ".parquet")):
            raise UsageError(f"-o {self.target}: score --dataset writes .jsonl or .parquet")
        path = manifest_path("score", self.target)
        self.parts = os.path.dirname(path)
        self.manifest = Manifest(path, settings)

    def finished(self) -> dict[int, ShardEntry]:
        return self.manifest.finished() if self.manifest else {}

    complete = False  # a finished score run leaves no parts folder behind

    def _part(self, shard: int) -> str:
        return os.path.join(self.parts, f"{shard:06d}.jsonl")

    def write(self, entry: ShardEntry, records: bytes) -> None:
        """Write one shard's records (JSONL bytes) and record the shard as finished."""
        if self.manifest is None:
            self._stream.write(records)
            self._stream.flush()
            return

        def put(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                fh.write(records)
                fh.flush()
                os.fsync(fh.fileno())

        _atomic_write(self._part(entry.shard), put)
        self.manifest.add(entry)

    def finish(self, n_shards: int) -> None:
        """Join the parts into ``target`` atomically and remove the parts folder."""
        if self.manifest is None:
            return
        parts = [self._part(k) for k in range(n_shards)]
        if self.target.endswith(".parquet"):
            _atomic_write(self.target, lambda tmp: _jsonl_to_parquet(parts, tmp))
        else:
            with open_output(self.target) as out:
                for part in parts:
                    with open(part, "rb") as fh:
                        shutil.copyfileobj(fh, out)
        self.manifest.close()
        shutil.rmtree(self.parts)

    def close(self) -> None:
        if self.manifest is not None:
            self.manifest.close()


def _read_records(path: str) -> list[dict]:
    with open(path, "rb") as fh:
        return [orjson.loads(line) for line in fh if line.strip()]


def _jsonl_to_parquet(parts: list[str], dest: str) -> None:
    """Score records from JSONL parts into one parquet file, one part in memory at a time:
    a first pass finds the schema (known fields typed, later additions inferred)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    known = pa.schema([(name, getattr(pa, kind)()) for name, kind in RECORD_FIELDS])
    extra: list = []
    for part in parts:
        records = _read_records(part)
        keys = list(dict.fromkeys(k for r in records for k in r if k not in known.names))
        if keys:
            extra.append(pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in records]).schema)
    schema = pa.unify_schemas([known, *extra], promote_options="permissive") if extra else known
    with pq.ParquetWriter(dest, schema) as writer:
        for part in parts:
            writer.write_table(pa.Table.from_pylist(_read_records(part), schema=schema))


_SPLIT_NAME = re.compile(r"[^\w.]+")


class PruneSink:
    """Pruned shards as parquet files of a dataset folder; see the module docstring.

    Raises:
        UsageError: no ``-o``, ``-o`` is a non-empty folder that is no ``iclr prune`` output,
            or its manifest belongs to a run with other settings.
    """

    def __init__(self, target: str | None, split: str, schema, settings: Mapping[str, object]):
        if target in (None, "-"):
            raise UsageError("prune --dataset writes a dataset folder: give -o OUT_DIR")
        self.root = target
        self.state = os.path.join(target, ".iclr")
        self.split = _SPLIT_NAME.sub("_", split)
        self.metadata = schema.metadata
        if os.path.isfile(target) or (os.path.isdir(target) and os.listdir(target) and not os.path.isdir(self.state)):
            raise UsageError(f"-o {target}: exists and is not the output of 'iclr prune --dataset'; choose a new folder")
        self.manifest = Manifest(manifest_path("prune", target), settings)
        os.makedirs(os.path.join(self.state, "shards"), exist_ok=True)

    def finished(self) -> dict[int, ShardEntry]:
        return self.manifest.finished()

    @property
    def complete(self) -> bool:
        return self.manifest.complete

    def _part(self, shard: int) -> str:
        return os.path.join(self.state, "shards", f"{shard:06d}.parquet")

    def write(self, entry: ShardEntry, table) -> None:
        """Write one shard's pruned rows (internal columns already dropped) as parquet."""
        import pyarrow.parquet as pq

        if table.schema.metadata is None and self.metadata:
            table = table.replace_schema_metadata(self.metadata)
        # Non-"compliant" nested names keep list fields named as they came (``item``).
        _atomic_write(self._part(entry.shard), lambda tmp: pq.write_table(table, tmp, use_compliant_nested_type=False))
        self.manifest.add(entry)

    def final_paths(self, n_shards: int) -> Iterator[str]:
        for k in range(n_shards):
            yield os.path.join(self.root, "data", f"{self.split}-{k:05d}-of-{n_shards:05d}.parquet")

    def finish(self, n_shards: int) -> None:
        """Move every shard to its final name (idempotent) and mark the run complete."""
        os.makedirs(os.path.join(self.root, "data"), exist_ok=True)
        for k, final in enumerate(self.final_paths(n_shards)):
            if os.path.exists(self._part(k)):
                os.replace(self._part(k), final)
        shutil.rmtree(os.path.join(self.state, "shards"), ignore_errors=True)
        self.manifest.mark_complete()
        self.manifest.close()

    def close(self) -> None:
        self.manifest.close()
