"""One shard of rows through the online loop: the unit of work of every engine.

:class:`ShardProcessor` takes one shard's table from :func:`~iclr_cli.corpus.source.read_shards`
and returns a table of the same rows, in the same order, in a fixed layout:

- :data:`ROW`, :data:`SHARD`: carried through;
- :data:`STATS`: per row, the row's :class:`~iclr_cli.pipeline.Summary` (pickled with the
  tokenizer's name and the row's warnings; engines and the manifest carry it as bytes);
- :data:`ERROR`: per row, the :class:`InputError` of a bad row as JSON, else null;
- ``score``: :data:`RECORDS`, per row, the JSONL bytes of its block records;
- ``prune``: every input column, the trajectory column pruned in its own type.

All trajectories of a shard are compressed together (step t of each in one scorer call), so a
shard's results do not depend on which worker runs it. Bad rows are results, not exceptions:
the driver reports the first in row order, whichever engine found it.
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass

import orjson

from iclr_cli.compress import CompressionResult, Settings, compress_trajectories
from iclr_cli.corpus.codec import Cell, CellCodec
from iclr_cli.corpus.source import ROW, SHARD, DatasetSpec
from iclr_cli.errors import InputError
from iclr_cli.formats.base import OpaqueEdits
from iclr_cli.formats.sealing import Sealer
from iclr_cli.pipeline import ScorerConfig, Summary, as_written, build_engines, score_records, track_steps

RECORDS = "__iclr_records__"
STATS = "__iclr_stats__"
ERROR = "__iclr_error__"
WORKER = "__iclr_worker__"  # which Ray actor scored the shard (added by the Ray engine)
INTERNAL = (ROW, SHARD, RECORDS, STATS, ERROR, WORKER)


@dataclass(frozen=True)
class Job:
    """Everything a worker needs to process shards (pickled to Ray actors).

    Attributes:
        command: ``score`` or ``prune``.
        dataset: the split and its columns.
        settings: variant, ratio, seed, splitter (METHOD.md defaults).
        scorer: how to build the proxy scorer.
        shard_rows: rows per shard; part of the result (trajectories batched together), so a
            resumed run must use the same.
        fmt: ``--format`` for the trajectory column (default: OpenAI for message lists,
            sniffed for JSON strings).
        skip_bad_rows: pass bad rows through unscored (warned) instead of failing.
        opaque: ``seal``, ``drop`` or ``keep`` (``--encrypted-reasoning``).
        strict: a row with unrecognised assistant-turn text is a bad row (``--strict``).
        signed: ``seal`` or ``edit`` (``--signed-thinking``; :mod:`iclr_cli.formats.sealing`).
    """

    command: str
    dataset: DatasetSpec
    settings: Settings
    scorer: ScorerConfig
    shard_rows: int = 64
    fmt: str | None = None
    skip_bad_rows: bool = False
    opaque: str = "seal"
    strict: bool = False
    signed: str = "seal"


class ShardProcessor:
    """Callable on one shard's table; builds the scorer on first use. The local engine keeps
    one; the Ray engine one per actor. ``progress`` (``plan`` / ``step``, as
    :class:`~iclr_cli.render.progress.Tracker`) hears of each shard's steps and tokens before
    it is scored and of every step as it completes."""

    def __init__(self, job: Job, progress=None):
        self.job = job
        self.progress = progress
        self._engines = None

    def engines(self):
        if self._engines is None:
            self._engines = build_engines(self.job.settings.variant, self.job.scorer)
        return self._engines

    def __call__(self, table):
        """Process one shard's table (see the module docstring)."""
        return self.process(table)

    def process(self, table):
        """The result table of one shard's rows (see the module docstring)."""
        job, spec = self.job, self.job.dataset
        rows = table.column(ROW).to_pylist()
        ids = table.column(spec.id_column).to_pylist() if spec.id_column in table.column_names else [None] * len(rows)
        codec = CellCodec(spec, table.schema.field(spec.column).type, fmt=job.fmt, skip_bad_lines=job.skip_bad_rows)
        stored = table.column(spec.column).to_pylist()

        cells: list[Cell | None] = []
        errors: list[str | None] = []
        sealer = Sealer(job.signed, OpaqueEdits(job.opaque))  # the provider rule table, as for files
        for row, value in zip(rows, stored):
            try:
                cell = codec.read(value, row)
                cell = dataclasses.replace(cell, doc=sealer.apply(cell.doc))
                if job.strict and cell.doc.unrecognised:
                    n = len(cell.doc.unrecognised)
                    raise InputError(cell.doc.source, f"{n} text(s) or field(s) not read as reasoning or action (--strict)", field=spec.column)
                cells.append(cell)
                errors.append(None)
            except InputError as exc:
                cells.append(None)
                errors.append(orjson.dumps({"source": exc.source, "problem": exc.problem, "line": exc.line, "field": exc.field}).decode())
        if any(errors) and not job.skip_bad_rows:
            # The driver stops at the first bad row; scoring the rest would be wasted.
            return self._layout(table, rows, [b""] * len(rows), [b""] * len(rows), errors, None)

        scorer, tokenizer = self.engines()
        names = [_display_ids(ident, row, cell) for ident, row, cell in zip(ids, rows, cells)]
        flat = [
            dataclasses.replace(traj, id=f"{row}:{name}")
            for row, cell, row_names in zip(rows, cells, names)
            if cell is not None
            for traj, name in zip(cell.doc.trajectories, row_names)
        ]
        on_step = track_steps(self.progress, flat, tokenizer, limit=getattr(scorer, "max_tokens", None), rows=len(rows)) if self.progress is not None else None
        results = iter(compress_trajectories(flat, job.settings, scorer, tokenizer, on_step=on_step))
        per_row = [[next(results) for _ in cell.doc.trajectories] if cell is not None else [] for cell in cells]

        records, stats, new_cells = [], [], []
        for row, value, cell, row_names, row_results, error in zip(rows, stored, cells, names, per_row, errors):
            summary = Summary(splitter=job.settings.splitter)
            warnings = [str(row_error(error))] if error else []
            if cell is not None:
                warnings += cell.doc.warnings + _unrecognised(spec, row, cell)
            if job.command == "prune" and cell is not None:
                new_cell, written = codec.write(cell, [r.compressed for r in row_results], OpaqueEdits(job.opaque), row)
                new_cells.append(new_cell)
                # Count what was written, not what compression asked for (as file prune does).
                row_results = as_written(row_results, written, tokenizer, summary.not_as_asked)
            elif job.command == "prune":
                new_cells.append(value)
            summary.add(row_results, cell.doc if cell is not None else None)
            stats.append(pickle.dumps({"summary": summary, "tokenizer": tokenizer.name, "warnings": warnings}))
            records.append(self._records(row, row_names, row_results))
        pruned = codec.array(new_cells) if job.command == "prune" else None
        return self._layout(table, rows, records, stats, [None] * len(rows), pruned)

    def _records(self, row: int, names: list[str], results: list[CompressionResult]) -> bytes:
        if self.job.command != "score":
            return b""
        out = []
        for name, result in zip(names, results):
            variant = self.job.settings.variant
            for record in score_records(self.job.dataset.src, [result], variant, *((self.job.scorer.profile, self.job.scorer.precision) if variant.needs_scores else ())):
                out.append(orjson.dumps({"trajectory": name, "row": row, **{k: v for k, v in record.items() if k != "trajectory"}}, option=orjson.OPT_APPEND_NEWLINE))
        return b"".join(out)

    def _layout(self, table, rows, records, stats, errors, pruned):
        import pyarrow as pa

        extra = {STATS: pa.array(stats, pa.binary()), ERROR: pa.array(errors, pa.string())}
        if self.job.command == "score":
            cols = {ROW: table.column(ROW), SHARD: table.column(SHARD), RECORDS: pa.array(records, pa.binary()), **extra}
            return pa.table(cols)
        out = table
        if pruned is not None:
            out = out.set_column(out.schema.get_field_index(self.job.dataset.column), out.schema.field(self.job.dataset.column), pruned)
        for name, array in extra.items():
            out = out.append_column(name, array)
        return out


def row_error(error: str) -> InputError:
    """The :class:`InputError` a worker stored in :data:`ERROR` for a bad row."""
    fields = orjson.loads(error)
    return InputError(fields["source"], fields["problem"], line=fields["line"], field=fields["field"])


def _display_ids(ident, row: int, cell: Cell | None) -> list[str]:
    """Record ids of a row's trajectories: the row's id (the row index when the dataset has
    no id column), suffixed ``#k`` only when one cell holds several trajectories."""
    base = str(row) if ident is None else str(ident)
    n = len(cell.doc.trajectories) if cell is not None else 0
    return [base] if n == 1 else [f"{base}#{k}" for k in range(n)]


def _unrecognised(spec: DatasetSpec, row: int, cell: Cell) -> list[str]:
    """Warnings for text an adapter read neither as reasoning nor as action (docs/FORMAT.md,
    "Unrecognised text"), as ``score``/``prune`` give them for files."""
    return [f"{item.describe(cell.doc.source)} (not read as reasoning or action)" for item in cell.doc.unrecognised]
