"""The driver of a dataset run: engine results in row order -> shard files, manifest, summary.

Engines yield one result table per shard (:mod:`iclr_cli.corpus.shard` layout) in row
order; the driver stops at the first bad row (unless bad rows are skipped), writes each
shard through its sink as soon as it arrives and records it in the manifest, and adds its
totals to the run summary. A restarted run with the same output skips the shards the manifest lists.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pickle
from collections.abc import Iterator
from dataclasses import dataclass

from iclr_cli.corpus.manifest import ShardEntry
from iclr_cli.scoring.profile import FAST
from iclr_cli.corpus.shard import ERROR, INTERNAL, RECORDS, STATS, WORKER, Job, row_error
from iclr_cli.corpus.sinks import PruneSink, ScoreSink
from iclr_cli.corpus.source import ROW, SHARD, fingerprint, peek_schema
from iclr_cli.errors import Interrupted, UsageError
from iclr_cli.pipeline import Summary
from iclr_cli.render.output import Output

ENGINES = ("local", "ray")


@dataclass(frozen=True)
class EngineOptions:
    """``--engine`` and its cluster options (see :class:`~iclr_cli.corpus.ray_engine.RayOptions`)."""

    engine: str = "local"
    workers: int = 1
    gpus_per_worker: float = 0.0
    ray_address: str | None = None

    def check(self) -> None:
        """Raises UsageError for an unknown engine or cluster options without ``ray``."""
        if self.engine not in ENGINES:
            raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, not {self.engine!r}")
        if self.engine == "local" and (self.workers != 1 or self.gpus_per_worker or self.ray_address):
            raise UsageError("--workers, --num-gpus-per-worker and --ray-address need --engine ray")


@dataclass
class RunResult:
    """What a dataset run did: totals over every shard (resumed ones included); ``new_rows``
    and ``new_shards`` are this run's; ``workers`` the Ray actors that returned a shard
    (``None`` on the local engine)."""

    summary: Summary
    tokenizer: str
    rows: int
    shards: int
    resumed_shards: int
    new_rows: int = 0
    new_shards: int = 0
    workers: set[str] | None = None


def run_settings(job: Job) -> dict[str, object]:
    """Everything that changes a run's results; a resumed run must match it exactly.
    (Engine, workers, batch size and device do not change results.)"""
    spec, settings, scorer = job.dataset, job.settings, job.scorer
    return {
        "command": job.command, "dataset": spec.path, "data": fingerprint(spec), "split": spec.split,
        "column": spec.column, "id_column": spec.id_column, "shard_rows": job.shard_rows, "format": job.fmt,
        "skip_bad_rows": job.skip_bad_rows, "encrypted_reasoning": job.opaque, "signed_thinking": job.signed, "variant": settings.variant.name,
        "ratio": settings.ratio, "seed": settings.seed, "splitter": settings.splitter, "model": scorer.model,
        "max_tokens": scorer.max_tokens, "overflow": scorer.overflow, "dtype": scorer.precision if settings.variant.needs_scores else scorer.dtype,
        # only when not the fast default's: manifests written before profiles stay valid
        **({"profile": scorer.profile} if scorer.profile != "fast" else {}),
        **({"elide": settings.elide} if settings.elide != FAST.elide else {}),
        # a run made before near ties were rechecked selected otherwise: it starts over
        **({"recheck_below": scorer.recheck_below} if scorer.recheck_below else {}),
    }


def _engine(job: Job, skip: set[int], options: EngineOptions, progress) -> Iterator:
    if options.engine == "ray":
        try:
            from iclr_cli.corpus.ray_engine import RayOptions, run_ray
        except ImportError as exc:
            raise UsageError(f"--engine ray needs Ray Data: pip install 'iclr-cli[ray]' ({exc})") from exc
        return run_ray(job, skip, RayOptions(options.workers, options.gpus_per_worker, address=options.ray_address), progress)
    from iclr_cli.corpus.local import run_local

    return run_local(job, skip, progress)


def merge_summary(into: Summary, other: Summary) -> None:
    """Add ``other``'s totals to ``into`` (counts add, lists extend)."""
    for f in dataclasses.fields(Summary):
        mine, theirs = getattr(into, f.name), getattr(other, f.name)
        if isinstance(mine, str):
            continue  # a setting (the splitter), not a count
        if isinstance(mine, list):
            mine.extend(theirs)
        elif dataclasses.is_dataclass(mine) and not hasattr(mine, "__add__"):
            for g in dataclasses.fields(mine):
                setattr(mine, g.name, getattr(mine, g.name) + getattr(theirs, g.name))
        else:
            setattr(into, f.name, mine + theirs)


def run_dataset(job: Job, options: EngineOptions, target: str | None, out: Output, *, rows_total: int | None = None) -> RunResult:
    """Score or prune every row of ``job.dataset`` into ``target`` (see
    :mod:`iclr_cli.corpus.sinks` for what is written where). ``rows_total``: the split's
    rows when counted, the total of the progress.

    Raises:
        UsageError: bad options, a missing column, an output that holds another run.
        InputError: the first bad row (``SRC [split] row N: field ...``), unless
            ``job.skip_bad_rows``, which warns and passes it through unscored.
        Interrupted: Ctrl-C (exit 130); finished shards are kept for a resumed run.
    """
    options.check()
    schema = peek_schema(job.dataset)
    settings = run_settings(job)
    with contextlib.ExitStack() as stack:
        if job.command == "score":
            stream = stack.enter_context(out.stream()) if target in (None, "-") else None
            sink = ScoreSink(target, settings, stream)
        else:
            sink = PruneSink(target, job.dataset.split, schema, settings)
        stack.callback(sink.close)
        done = sink.finished()
        result = RunResult(Summary(), "", 0, 0, len(done))
        for entry in done.values():
            _add_shard(result, entry)
        if done and not sink.complete:
            out.info(f"resuming: {len(done)} shard(s), {result.rows} row(s) already done")
        if sink.complete:
            return result
        n_shards = max(done, default=-1) + 1
        if options.engine == "ray":
            result.workers = set()
        left = None if rows_total is None else max(0, rows_total - result.rows)
        try:
            with out.tracker(f"iclr {job.command} --dataset", rows_total=left, dataset=True) as progress:
                for table in _engine(job, set(done), options, progress):
                    shard = table.column(SHARD)[0].as_py()
                    if WORKER in table.column_names and result.workers is not None:
                        result.workers.add(table.column(WORKER)[0].as_py())
                    entry = _finish_shard(job, shard, table, sink, out)
                    _add_shard(result, entry)
                    result.new_rows += entry.n_rows
                    result.new_shards += 1
                    progress.rows(entry.n_rows)
                    n_shards = max(n_shards, shard + 1)
        except KeyboardInterrupt:
            kept = f"{result.shards} shard(s), {result.rows} row(s) done"
            if target in (None, "-"):
                raise Interrupted(f"interrupted after {kept}; what went to stdout is incomplete") from None
            raise Interrupted(f"interrupted after {kept} and kept; run the same command again to resume") from None
        sink.finish(n_shards)
    return result


def _finish_shard(job: Job, shard: int, table, sink, out: Output) -> ShardEntry:
    rows = table.column(ROW).to_pylist()
    errors = table.column(ERROR).to_pylist()
    bad = next((e for e in errors if e), None)
    if bad and not job.skip_bad_rows:
        raise row_error(bad)
    totals = Summary()
    tokenizer = ""
    for raw in table.column(STATS).to_pylist():
        stats = pickle.loads(raw)
        merge_summary(totals, stats["summary"])
        tokenizer = stats["tokenizer"]
        for warning in stats["warnings"]:
            out.warn(warning)
    stats = pickle.dumps({"summary": totals, "tokenizer": tokenizer})
    entry = ShardEntry(shard, rows[0], len(rows), stats)
    if job.command == "score":
        sink.write(entry, b"".join(table.column(RECORDS).to_pylist()))
    else:
        sink.write(entry, table.drop_columns([c for c in INTERNAL if c in table.column_names]))
    return entry


def _add_shard(result: RunResult, entry: ShardEntry) -> None:
    stats = pickle.loads(entry.stats)
    merge_summary(result.summary, stats["summary"])
    result.tokenizer = stats["tokenizer"] or result.tokenizer
    result.rows += entry.n_rows
    result.shards += 1
