"""``prune`` and ``score`` over many files: each file on its own, its output written as it finishes.

Which files and where their outputs go: :mod:`iclr_cli.batch`. A run goes in two passes:

1. **Check** every file before the model loads: read it (gzip / zstd decompressed), find its
   format, refuse a session database for ``prune`` (:meth:`Input.require_writable`), and
   find JSON syntax errors (:meth:`Input.check_syntax`). A file that fails is named with its
   error and left out; in a folder walked, a file no format recognises is not a trajectory
   (a note, a tool output saved beside a session) and is listed as skipped instead.
2. **Run** the rest one file at a time, as the single-file command does (the same code:
   :class:`~iclr_cli.cli.prune.Pruner`, :class:`~iclr_cli.cli.score.BlockScorer`), with the
   scorer's caches reset between files, so each output has the bytes a run on that file alone
   writes. Each output is written atomically when its file is done; a file that fails here
   (a bad record the syntax check cannot see) is named and skipped, nothing of it written.

The end: a table with one row per file and a total, the usual summary of the whole run, one
line per file left out, and exit 1 when any file failed (:class:`~iclr_cli.errors.IclrError`).
Ctrl-C exits 130 naming the files finished (written) and the one that was not; each file's
checkpoint is kept until the whole run ends, so the same command resumes without scoring the
finished files again (:func:`iclr_cli.checkpoint.resumable`, ``finished``).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from iclr_cli.batch import Job, names_folder, plan, require_jobs, scores_name, targets
from iclr_cli.errors import IclrError, InputError, Interrupted, UsageError
from iclr_cli.inputs import Input
from iclr_cli.pipeline import NotAsAsked, ScorerConfig, Summary
from iclr_cli.render.output import Output
from iclr_cli.savings.sources import Skipped

LISTED = 8  # files named in one line (interrupts, the final error); more are counted


@dataclass
class Many:
    """A ``prune`` / ``score`` run over many files: the command line as given (``output`` is
    ``-o``), the settings and scorer config every file is run with, ``out`` for messages
    (stderr), and ``extra`` settings keyed in each checkpoint (``--encrypted-reasoning``,
    ``--signed-thinking``)."""

    command: str
    inputs: Sequence[str]
    output: str | None
    settings: object
    config: ScorerConfig
    fmt: str | None
    skip_bad_lines: bool
    out: Output
    force: bool = False
    extra: dict = field(default_factory=dict)


def _row(many: Many, job: Job, target: str | None) -> Row:
    """A file's row, its summary counting sealed blocks with the run's --block-split."""
    return Row(job, target, summary=Summary(splitter=many.settings.splitter))


@dataclass
class Row:
    """One file of the run: where it was written (``target``), its format, what it counted
    (``summary``; ``records`` for ``score``), or the ``error`` that left it out."""

    job: Job
    target: str | None = None
    format: str = ""
    summary: Summary = field(default_factory=Summary)
    records: int = 0
    error: IclrError | None = None
    written: bool = False


def prune_many(many: Many, make: Callable) -> None:
    """Prune every file of ``many`` below its ``-o`` folder (``make(scorer, tokenizer)`` gives
    the :class:`~iclr_cli.cli.prune.Pruner`). See the module docstring.

    Raises:
        UsageError: without ``-o OUTDIR``, or for outputs refused up front (:func:`iclr_cli.batch.targets`).
        IclrError: (exit 1) after the run, when a file could not be pruned.
        Interrupted: on Ctrl-C, naming the files written and the one that was not.
    """
    from iclr_cli.jsonio import open_output

    outdir = many.output
    if outdir in (None, "-"):
        raise UsageError("several inputs or a folder: give -o OUTDIR; each file is written below it at its own relative path")
    jobs, skipped = plan(many.inputs, outdir)
    rows = [_row(many, job, target) for job, target in zip(jobs, targets(jobs, outdir, many.inputs, force=many.force))]
    require_jobs(jobs, skipped, many.inputs)

    def write(row: Row, item: Input, runner, progress, checkpoint, more: bool) -> None:
        os.makedirs(os.path.dirname(row.target) or ".", exist_ok=True)
        with open_output(row.target, force=many.force) as fh:
            runner.file(item, fh, row.summary, progress, checkpoint, more, target=row.target)

    failed = _run(many, rows, skipped, make, write, f"pruning ({many.settings.variant.name})", where=f"below {outdir}")
    if failed is not None:
        raise failed


def score_many(many: Many, make: Callable) -> None:
    """Score every file of ``many`` into one JSONL (stdout or ``-o FILE``), or one JSONL per
    file below ``-o DIR/`` (:func:`iclr_cli.batch.scores_name`); ``make(scorer, tokenizer)``
    gives the :class:`~iclr_cli.cli.score.BlockScorer`. See the module docstring.

    Raises:
        UsageError: for outputs refused up front.
        IclrError: (exit 1) after the run, when a file could not be scored.
        Interrupted: on Ctrl-C, naming the files finished and the one that was not.
    """
    from iclr_cli.jsonio import open_output

    folder = names_folder(many.output)
    jobs, skipped = plan(many.inputs, many.output if folder else None)
    paths = targets(jobs, many.output, many.inputs, rename=scores_name, force=many.force) if folder else []
    require_jobs(jobs, skipped, many.inputs)
    if folder:
        rows = [_row(many, job, target) for job, target in zip(jobs, paths)]

        def write(row: Row, item: Input, runner, progress, checkpoint, more: bool) -> None:
            os.makedirs(os.path.dirname(row.target) or ".", exist_ok=True)
            with open_output(row.target, force=many.force) as fh:
                row.records = runner.file(item, fh.write, row.summary, progress, checkpoint, more)

        failed = _run(many, rows, skipped, make, write, "scoring", where=f"below {many.output}")
        if failed is not None:
            raise failed
        return
    # one JSONL: each file's records go out once the file is done, so a file that fails
    # leaves none of its records in it
    sink_out = Output(many.output, quiet=many.out.quiet, force=many.force, inputs=[job.source for job in jobs])
    rows = [_row(many, job, None if sink_out.to_stdout else many.output) for job in jobs]
    with sink_out.stream() as sink:

        def write(row: Row, item: Input, runner, progress, checkpoint, more: bool) -> None:
            chunks: list[bytes] = []
            row.records = runner.file(item, chunks.append, row.summary, progress, checkpoint, more)
            sink.write(b"".join(chunks))

        # the records of the files that went right are written, then the run fails
        failed = _run(many, rows, skipped, make, write, "scoring", where="to stdout" if sink_out.to_stdout else f"to {many.output}",
                      sink=sink_out)
    if failed is not None:
        raise failed


def _run(many: Many, rows: list[Row], skipped: list[Skipped], make: Callable, write: Callable, label: str, *, where: str,
         sink: Output | None = None) -> IclrError | None:
    """Both passes over ``rows`` (``write(row, item, runner, progress, checkpoint, more)`` runs
    one file into its output) and the report; returns the error (exit 1) naming the files
    that failed, ``None`` when none did.

    Raises:
        Interrupted: on Ctrl-C (:func:`_interrupted`).
    """
    from iclr_cli.checkpoint import discard
    from iclr_cli.cli.common import warn_precision
    from iclr_cli.pipeline import build_engines

    out = many.out
    state = _State()
    try:
        ready = _check(many, rows, skipped)
        for path, reason in ((s.path, s.reason) for s in skipped):
            out.info(f"skipped {path}: {reason}")
        if ready:
            warn_precision(out, many.config)
            scorer, tokenizer = build_engines(many.settings.variant, many.config)
            runner = make(scorer, tokenizer)
            with out.tracker(label) as progress:
                for n, row in enumerate(ready):
                    state.current = row
                    _one(many, row, runner, write, progress, more=n < len(ready) - 1, state=state)
                    reset = getattr(scorer, "reset", None)
                    if reset is not None:
                        reset()  # the next file starts as a run on it alone would
            state.current = None
    except KeyboardInterrupt:
        raise Interrupted(_interrupted(many, rows, state, sink)) from None
    discard(state.finished)
    return _report(many, rows, skipped, where, tokenizer.name if ready else None, scorer if ready else None,
                   warned=ready and getattr(runner, "warned", False))


@dataclass
class _State:
    current: Row | None = None  # the file being run
    checkpoint: object = None  # its checkpoint (iclr_cli.checkpoint.Checkpoint), None for variants that score nothing
    finished: list[Path] = field(default_factory=list)  # checkpoints of files done, kept until the run ends


def _check(many: Many, rows: list[Row], skipped: list[Skipped]) -> list[Row]:
    """The first pass (module docstring): rows whose file can be run; the others get their
    ``error``, or are moved to ``skipped``."""
    from iclr_cli.jsonio import read_input_stored
    from iclr_cli.inputs import input_of

    ready = []
    for row in list(rows):
        job = row.job
        try:
            stored = read_input_stored(job.source)
        except InputError as exc:
            row.error = exc
            continue
        try:
            item = input_of(job.source, stored, many.fmt)
        except InputError as exc:
            if job.explicit:
                row.error = exc
            else:  # not a trajectory file: a note or a tool output beside the sessions
                rows.remove(row)
                skipped.append(Skipped(job.source, f"not read as a trajectory: {exc.summary}"))
            continue
        try:
            if many.command == "prune":
                item.require_writable("prune")
            item.check_syntax(skip_bad_lines=many.skip_bad_lines)
        except InputError as exc:
            row.error = exc
            continue
        row.format = item.adapter.name
        if item.chosen:
            many.out.info(item.chosen)
        ready.append(row)
    return ready


def _one(many: Many, row: Row, runner, write: Callable, progress, *, more: bool, state: _State) -> None:
    """Run one checked file (read again: the first pass kept no file's bytes in memory)."""
    from iclr_cli.checkpoint import resumable
    from iclr_cli.jsonio import read_input_stored
    from iclr_cli.inputs import input_of

    job = row.job
    try:
        item = input_of(job.source, read_input_stored(job.source), many.fmt)
        with resumable(many.command, [job.source], row.target, [item], many.settings, many.config, many.fmt, many.skip_bad_lines,
                       many.out, finished=state.finished, **many.extra) as checkpoint:
            state.checkpoint = checkpoint
            write(row, item, runner, progress, checkpoint, more)
        row.written = True
    except (InputError, UsageError) as exc:  # a bad record, or a trajectory id named twice
        row.error = exc


def _interrupted(many: Many, rows: list[Row], state: _State, sink: Output | None) -> str:
    """What Ctrl-C says: the files finished, the one cut short, and how to resume."""
    from iclr_cli.checkpoint import kept_note

    done = [r.job.source for r in rows if r.written]
    current = state.current
    what = "pruning" if many.command == "prune" else "scoring"
    if current is None and not done:
        return f"interrupted before any file was {what[:-3]}ed; nothing written"
    head = f"interrupted while {what} {current.job.source}" if current is not None else "interrupted"
    if sink is not None:  # one JSONL
        kept = ("their records went to stdout" if sink.to_stdout else f"nothing written, {sink.target} is as it was (written only at the end)")
        told = f"{len(done)} file(s) finished ({_names(done)}); {kept}" if done else kept
    else:
        told = f"{len(done)} file(s) finished and written ({_names(done)})" if done else "no file finished"
        if current is not None:
            told += f"; {current.target} was not written"
    return f"{head}; {told}{kept_note(state.checkpoint)}; finished files resume from their checkpoints"


def _names(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:LISTED])
    return shown + (f" and {len(paths) - LISTED} more" if len(paths) > LISTED else "")


def _report(many: Many, rows: list[Row], skipped: list[Skipped], where: str, tokenizer: str | None, scorer,
            warned: bool = False) -> IclrError | None:
    """The per-file table with a total, the whole run's summary, the files left out (failed,
    or found in a folder but not read as a trajectory: both counted in the total), and the
    error (exit 1) when any file failed."""
    from iclr_cli.cli.common import print_summary

    out = many.out
    total = Summary(splitter=many.settings.splitter)
    for row in rows:
        if row.written:
            merge(total, row.summary)
    prune = many.command == "prune"
    columns = ["file", "format", "steps", "blocks", "removed" if prune else "selected", "reasoning tokens", "deleted",
               *([] if prune else ["records"]), "written"]
    table = []
    for row in rows:
        s = row.summary
        counts = [s.steps, s.blocks, s.removed, f"{s.tokens.generated:,}", f"{s.tokens.deleted:,}", *([] if prune else [row.records])]
        if row.error is not None:
            counts = ["-"] * len(counts)
        status = (row.target or "stdout") if row.written else "not written: error below"
        table.append([row.job.source, row.format or "-", *counts, status])
    written = [r for r in rows if r.written]
    found = len(rows) + len(skipped)
    table.append([f"total: {len(written)} of {found} files", "", total.steps, total.blocks, total.removed,
                  f"{total.tokens.generated:,}", f"{total.tokens.deleted:,}", *([] if prune else [sum(r.records for r in written)]), where])
    out.table(f"iclr {many.command}: {found} files" + (f", {len(skipped)} not read as a trajectory" if skipped else ""), columns, table)
    variant = many.settings.variant
    if tokenizer is not None:
        print_summary(out, total, tokenizer, variant.name, command=many.command,
                      splitter=many.settings.splitter if variant.needs_scores and not warned else None,  # said before the run
                      scorer=many.config.describe(getattr(scorer, "max_tokens", None)) if variant.needs_scores else None)
    if not prune and written and not any(r.records for r in written):
        out.info("no reasoning blocks in the inputs: nothing to score (0 records written)")
    if skipped:
        out.warn(f"{len(skipped)} of {found} files skipped, not read as a trajectory ({_names([s.path for s in skipped])}): "
                 "each is named above with its reason; pass a file by name to see its error")
    failed = [r for r in rows if r.error is not None]
    for row in failed:
        out.warn(f"not {'pruned' if prune else 'scored'}: {row.error}")
    if not failed:
        return None
    names = _names([r.job.source for r in failed])
    return IclrError(f"{len(failed)} of {len(rows)} files could not be {'pruned' if prune else 'scored'} and were skipped ({names}); "
                     f"{len(written)} written {where}")


def merge(into: Summary, part: Summary) -> None:
    """Add ``part``'s counts to ``into`` (the run's total of per-file summaries)."""
    for f in fields(into):
        mine, theirs = getattr(into, f.name), getattr(part, f.name)
        if isinstance(mine, NotAsAsked):
            mine.dropped += theirs.dropped
            mine.kept += theirs.kept
        elif isinstance(mine, list):
            mine.extend(theirs)
        elif isinstance(mine, Counter):
            mine.update(theirs)
        else:
            setattr(into, f.name, mine + theirs)
