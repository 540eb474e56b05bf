"""Steps already scored by an interrupted ``score`` / ``prune`` of files, so the same command
resumes where it stopped (``--dataset`` runs resume by shard: :mod:`iclr_cli.corpus.manifest`).

- **Where**: one SQLite file per run in ``$ICLR_CHECKPOINT_DIR``, else ``checkpoints/`` of the
  user cache folder (``$ICLR_CACHE_DIR``, else the platform's, as for the proxy model), named by the run's
  identity: the command, the input paths and the ``-o`` path. It is removed when the run
  finishes; files left by runs not resumed within :data:`KEEP_DAYS` are removed by the next
  run.
- **Key**: a hash of the inputs' bytes and of every setting that changes a step's result
  (:func:`run_key`). A checkpoint whose key differs (an input edited, another ratio or
  model) is not used: the run starts over and says which changed.
- **What a step keeps**: its reasoning as written back and its report (blocks, entropies,
  selection, token counts) as JSON, committed once the step is finished. The online loop
  (:func:`iclr_cli.compress.compress_trajectories`) takes finished steps from here instead of
  scoring them; the steps after them are scored on the same compressed history, so the
  output is the uninterrupted run's (a scorer's key/value cache starts cold on resume, which
  changes no score beyond float rounding: the cached and uncached paths agree).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import orjson

from iclr_cli.compress import BlockReport, StepReport
from iclr_cli.token_accounting import ReasoningTokens

FOLDER = "checkpoints"
KEEP_DAYS = 14
VERSION = 1
"""Bumped when what a step keeps changes, so an old checkpoint is never read."""


def run_key(inputs: Sequence[bytes], settings: Mapping[str, object]) -> str:
    """The key of a run over ``inputs`` (their bytes, in order) with ``settings`` (JSON-able)."""
    h = hashlib.sha256()
    for data in inputs:
        h.update(hashlib.sha256(data).digest())
    h.update(orjson.dumps({"version": VERSION, **settings}, option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()


def identity(command: str, inputs: Sequence[str], output: str | None) -> str:
    """The name of a run's checkpoint: its command, inputs and output, as absolute paths."""
    where = [p if p == "-" else os.path.abspath(p) for p in inputs]
    out = "-" if output in (None, "-") else os.path.abspath(output)  # type: ignore[arg-type]
    return hashlib.sha256(orjson.dumps([command, where, out])).hexdigest()[:32]


def _dumps(value: object) -> str:
    """JSON text of ``value``: the standard library's, which escapes a lone surrogate that a
    transcript can hold (``\\ud800``; orjson refuses it) and writes floats exactly (``repr``)."""
    return json.dumps(value, ensure_ascii=True, allow_nan=False)


def report_json(report: StepReport) -> dict:
    """A :class:`StepReport` as JSON data (:func:`_dumps` keeps its floats exact)."""
    return dataclasses.asdict(report)


def report_from(value: Mapping) -> StepReport:
    """The :class:`StepReport` of :func:`report_json`."""
    fields = dict(value)
    fields["blocks"] = tuple(BlockReport(**b) for b in fields["blocks"])
    fields["tokens"] = ReasoningTokens(**fields["tokens"])
    return StepReport(**fields)


class Checkpoint:
    """The finished steps of one run (see the module docstring).

    ``resumed``: steps found from an earlier run when it was opened; ``saved``: steps kept so
    far (found or finished now); ``started_over``: why an earlier checkpoint was not used
    (``None`` when there was none or it was used).
    """

    def __init__(self, path: Path, key: str, settings: Mapping[str, object]):
        self.path = path
        self.resumed = 0
        self.started_over: str | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(path.parent)
        if path.exists():
            self.started_over = _why_not(path, key, settings)
            if self.started_over is not None:
                _unlink(path)
        self._db = sqlite3.connect(str(path), timeout=30, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # a power cut may lose the last steps, never the file
        self._db.execute("CREATE TABLE IF NOT EXISTS run (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.execute("CREATE TABLE IF NOT EXISTS steps (source TEXT, trajectory TEXT, step INTEGER, texts BLOB NOT NULL, "
                         "report BLOB NOT NULL, PRIMARY KEY (source, trajectory, step))")
        self._db.execute("INSERT OR REPLACE INTO run VALUES ('key', ?)", (key,))
        self._db.execute("INSERT OR REPLACE INTO run VALUES ('settings', ?)", (orjson.dumps(dict(settings)).decode(),))
        self.resumed = self._db.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
        self.saved = self.resumed

    @classmethod
    def open(cls, command: str, inputs: Sequence[str], output: str | None, data: Sequence[bytes],
             settings: Mapping[str, object], root: Path | None = None) -> Checkpoint:
        """The checkpoint of this run, in ``root`` (default: ``$ICLR_CHECKPOINT_DIR``, else the
        user cache folder's ``checkpoints``)."""
        if root is None:
            from iclr_cli.scoring.loading import cache_root

            root = Path(os.environ["ICLR_CHECKPOINT_DIR"]) if os.environ.get("ICLR_CHECKPOINT_DIR") else cache_root() / FOLDER
        return cls(root / f"{identity(command, inputs, output)}.sqlite3", run_key(data, settings), settings)

    def for_source(self, source: str) -> SourceSteps:
        """The steps of one input file (:class:`SourceSteps`)."""
        return SourceSteps(self, source)

    def get(self, source: str, trajectory: str, step: int) -> tuple[list[str], StepReport] | None:
        row = self._db.execute("SELECT texts, report FROM steps WHERE source = ? AND trajectory = ? AND step = ?",
                               (source, trajectory, step)).fetchone()
        if row is None:
            return None
        return json.loads(row[0]), report_from(json.loads(row[1]))

    def put(self, source: str, trajectory: str, step: int, texts: Sequence[str], report: StepReport) -> None:
        self._db.execute("INSERT OR REPLACE INTO steps VALUES (?, ?, ?, ?, ?)",
                         (source, trajectory, step, _dumps(list(texts)), _dumps(report_json(report))))
        self.saved += 1

    def close(self, *, finished: bool) -> None:
        """Close the file; it is removed when the run ``finished`` or kept no step (a run that
        failed on its input before scoring anything: nothing to resume, and the next run must
        not be told of an interrupted one)."""
        self._db.close()
        if finished or not self.saved:
            for suffix in ("", "-wal", "-shm"):
                _unlink(Path(str(self.path) + suffix))


@dataclasses.dataclass
class SourceSteps:
    """The steps of one input file, as :func:`iclr_cli.compress.compress_trajectories` asks
    for them (``get`` / ``put`` by trajectory id and step index)."""

    checkpoint: Checkpoint
    source: str

    def get(self, trajectory: str, step: int) -> tuple[list[str], StepReport] | None:
        return self.checkpoint.get(self.source, trajectory, step)

    def put(self, trajectory: str, step: int, texts: Sequence[str], report: StepReport) -> None:
        self.checkpoint.put(self.source, trajectory, step, texts, report)


def _why_not(path: Path, key: str, settings: Mapping[str, object]) -> str | None:
    """Why the checkpoint at ``path`` cannot be resumed with ``key`` (``None``: it can)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = dict(db.execute("SELECT name, value FROM run").fetchall())
        finally:
            db.close()
    except sqlite3.Error as exc:
        return f"the checkpoint could not be read ({exc})"
    if rows.get("key") == key:
        return None
    old = orjson.loads(rows["settings"]) if "settings" in rows else {}
    changed = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
    if changed:
        return f"the settings changed since the unfinished run ({', '.join(changed)})"
    return "the input changed since the unfinished run"


def _remove_stale(folder: Path) -> None:
    cutoff = time.time() - KEEP_DAYS * 86400
    for entry in folder.glob("*.sqlite3*"):
        try:
            if entry.stat().st_mtime < cutoff:
                entry.unlink()
        except OSError:
            pass


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def settings_of(command: str, settings, config, fmt: str | None, skip_bad_lines: bool, **extra: object) -> dict[str, object]:
    """Every setting that changes a step's result (the key's settings, named in the message
    when a run starts over): the command, the variant's settings (:class:`iclr_cli.compress.
    Settings`), the scorer's (:class:`iclr_cli.pipeline.ScorerConfig`: model, input limit,
    overflow, precision, context, profile, elision and recheck; not batch sizes or caches, which change no score), the
    format and ``--skip-bad-lines``, and ``extra`` (``prune``'s ``--encrypted-reasoning``)."""
    return {"command": command, "variant": settings.variant.name, "ratio": settings.ratio, "seed": settings.seed,
            "split": settings.splitter, "score_all": settings.score_all, "model": config.model, "max_tokens": config.max_tokens,
            "overflow": config.overflow, "dtype": config.precision if settings.variant.needs_scores else config.dtype, "context": config.context,
            "profile": config.profile, "elide": settings.elide, "recheck_below": config.recheck_below, "format": fmt,
            "skip_bad_lines": skip_bad_lines, **extra}


@contextlib.contextmanager
def resumable(command: str, inputs: Sequence[str], output: str | None, items, settings, config, fmt: str | None,
              skip_bad_lines: bool, out, *, finished: list[Path] | None = None, **extra: object) -> Iterator[Checkpoint | None]:
    """The run's checkpoint while the block runs (``None`` for variants that score nothing:
    there is nothing to keep). Says on ``out`` when it resumes or starts over; removes the
    checkpoint when the block ends normally, keeps it when it is interrupted or fails.

    ``items``: the opened inputs (:class:`iclr_cli.inputs.Input`, their bytes are keyed).
    ``finished``: a run over many files keeps each file's checkpoint until the whole run
    ends, so an interrupted run resumes the files it finished without scoring them again:
    a block that ends normally adds its checkpoint's path there instead of removing it
    (:func:`discard` removes them).
    """
    if not settings.variant.needs_scores:
        yield None
        return
    checkpoint = Checkpoint.open(command, inputs, output, [item.data for item in items],
                                 settings_of(command, settings, config, fmt, skip_bad_lines, **extra))
    if checkpoint.started_over:
        out.info(f"{checkpoint.started_over}: starting over (checkpoint {checkpoint.path})")
    elif checkpoint.resumed:
        out.info(f"resuming: {checkpoint.resumed} step{'s' if checkpoint.resumed != 1 else ''} already scored by the unfinished run "
                 f"(checkpoint {checkpoint.path})")
    try:
        yield checkpoint
    except BaseException:
        checkpoint.close(finished=False)
        raise
    checkpoint.close(finished=finished is None)
    if finished is not None:
        finished.append(checkpoint.path)


def discard(paths: Sequence[Path]) -> None:
    """Remove the checkpoints at ``paths`` (with their SQLite side files): their run finished."""
    for path in paths:
        for suffix in ("", "-wal", "-shm"):
            _unlink(Path(str(path) + suffix))


def kept_note(checkpoint: Checkpoint | None) -> str:
    """What an interrupted run says about its checkpoint (empty without one)."""
    if checkpoint is None or not checkpoint.saved:
        return ""
    n = checkpoint.saved
    return f"; {n} scored step{'s' if n != 1 else ''} kept: the same command resumes from them"
