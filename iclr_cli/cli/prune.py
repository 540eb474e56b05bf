"""``iclr prune``: the same file format out, selected reasoning blocks replaced by ``[SKIP]``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, BinaryIO, Optional

import typer

from iclr_cli.cli import dataset_options as dopt
from iclr_cli.cli import options as opt

if TYPE_CHECKING:  # the CLI imports its engines lazily (iclr --help stays fast)
    from iclr_cli.compress import Settings
    from iclr_cli.formats.base import OpaqueEdits
    from iclr_cli.inputs import Input
    from iclr_cli.pipeline import Summary
    from iclr_cli.policies import Variant
    from iclr_cli.render.output import Output
    from iclr_cli.scoring.base import Scorer, Tokenizer


def prune(
    inputs: Annotated[Optional[list[str]], typer.Argument(
        help="Trajectory file ('-' for stdin), or several files and folders with -o OUTDIR (each output at its input's path below OUTDIR); none with --dataset.",
        show_default=False)] = None,
    variant: Annotated[str, typer.Option("--variant", "-v", help="none, iclr (default), iclr-ext, step-only, delete-all, random-R (e.g. random-10). iclr-ext is this project's hypothesis from the paper's externalization finding, not the paper's method: BottomK as iclr, but a block whose derived state (identifiers, paths, numbers, quoted text, code it introduced) has not yet reached an action, a written file or a tool result is never removed.")] = "iclr",
    output: opt.Output = None,
    ratio: opt.Ratio = opt.DEFAULT_RATIO_VALUE,
    seed: opt.Seed = 0,
    model: opt.Model = "smollm2",
    max_tokens: opt.MaxTokens = None,
    exact: opt.Exact = False,
    elide: opt.Elide = None,
    recheck_below: opt.RecheckBelow = None,
    overflow: opt.Overflow = opt.WINDOW,
    dtype: opt.Dtype = opt.AUTO_DTYPE,
    no_prefix_cache: opt.NoPrefixCache = False,
    batch_size: opt.BatchSize = None,
    cache_tokens: opt.CacheTokens = None,
    context: opt.Context = opt.CONTEXT,
    device: opt.Device = None,
    block_split: opt.BlockSplit = opt.PARAGRAPH,
    fmt: opt.Format = None,
    skip_bad_lines: opt.SkipBadLines = False,
    opaque: opt.EncryptedReasoning = opt.SEAL,
    signed: opt.SignedThinking = opt.SEAL_SIGNED,
    strict: opt.Strict = False,
    force: opt.Force = False,
    in_place: opt.InPlace = False,
    quiet: opt.Quiet = False,
    dataset: dopt.Dataset = None,
    dataset_split: dopt.DatasetSplit = None,
    column: dopt.Column = "messages",
    id_column: dopt.IdColumn = "id",
    shard_rows: dopt.ShardRows = None,
    engine: dopt.Engine = "local",
    workers: dopt.Workers = 1,
    num_gpus_per_worker: dopt.GpusPerWorker = 0.0,
    ray_address: dopt.RayAddress = None,
) -> None:
    """Prune reasoning online and write the trajectory back in its own format.

    Actions, tool calls and observations are never changed, and neither is reasoning its
    provider verifies (signed or encrypted; see --signed-thinking, --encrypted-reasoning). A summary (steps, blocks, blocks
    removed, reasoning tokens generated / deleted / kept, [SKIP] markers, written, the
    tokenizer that counted them, and the input tokens re-sent over the session's requests
    before and after, as 'iclr savings' estimates them) goes to stderr. Ctrl-C exits 130 and says what was kept;
    the same command resumes from the steps already scored.
    With --dataset -o OUT_DIR: the dataset back as parquet, same rows in the same order, only
    the trajectory column pruned; an interrupted run restarted with the same -o resumes.
    Several files or folders need -o OUTDIR: each file is pruned on its own and written below
    OUTDIR at its relative path (a folder given: its path there; a file given: its name) as
    soon as it is done; a table gives one row per file and a total; a file that cannot be
    pruned is named with its error and skipped, and the run exits 1 at the end. A gzip or zstd
    input is written back compressed the same way.
    """
    from iclr_cli.batch import is_many
    from iclr_cli.checkpoint import kept_note, resumable
    from iclr_cli.cli.common import check_splitter, in_place_target, interruptible, print_summary, scorer_config, warn_precision
    from iclr_cli.errors import UsageError
    from iclr_cli.formats.base import OpaqueEdits
    from iclr_cli.inputs import open_inputs
    from iclr_cli.pipeline import Summary, build_engines
    from iclr_cli.policies import FILE_VARIANT_NAMES, parse_variant
    from iclr_cli.render.output import Output

    parsed = parse_variant(variant, names=FILE_VARIANT_NAMES)
    if parsed.kind == "sliding-window":
        raise UsageError("sliding-window-K drops whole steps from the agent's context; it exists only in 'iclr replay' (prune never removes actions or observations)")
    splitter = check_splitter(block_split.value)
    dataset_split = dopt.chosen_split(dataset, dataset_split)
    config = scorer_config(model, max_tokens, overflow.value, dtype.value, no_prefix_cache, batch_size, device,
                           context=context.value, cache_tokens=cache_tokens, exact=exact, elide=elide,
                           recheck_below=recheck_below)
    edits = OpaqueEdits(opaque.value)
    if dataset is not None and in_place:
        raise UsageError("--in-place edits one trajectory file; with --dataset, -o names the output folder")
    if dataset is not None:  # -o is a dataset folder here
        from iclr_cli.corpus.command import DatasetArgs, run_dataset_command

        args = DatasetArgs(dataset, dataset_split, column, id_column, shard_rows, engine, workers, num_gpus_per_worker, ray_address)
        settings = config.settings(parsed, ratio=ratio, seed=seed, splitter=splitter, score_all=False)
        out = Output(None, quiet=quiet, force=force)
        return run_dataset_command("prune", args, inputs or None, settings, config, out, target=output, fmt=fmt, skip_bad_rows=skip_bad_lines, strict=strict, opaque=edits.value, signed=signed.value)
    if not inputs:
        raise UsageError("give a trajectory file ('-' for stdin), files and folders with -o OUTDIR, or --dataset")
    # Steps whose BottomK cannot depend on the scores (N = 1) are not scored: same output.
    settings = config.settings(parsed, ratio=ratio, seed=seed, splitter=splitter, score_all=False)
    if is_many(inputs, output):
        from iclr_cli.cli.many import Many, prune_many

        if in_place:
            raise UsageError("--in-place edits one trajectory file; for several files or a folder give -o OUTDIR (the originals stay as they are)")
        many = Many("prune", inputs, output, settings, config, fmt, skip_bad_lines, Output(None, quiet=quiet, force=force), force=force,
                    extra={"opaque": edits.value, "signed": signed.value})
        return prune_many(many, lambda scorer, tokenizer: Pruner(many.out, parsed, settings, scorer, tokenizer, signed.value, edits, strict, skip_bad_lines, splitter))
    [input] = inputs
    output = in_place_target(input, output) if in_place else output
    out = Output(output, quiet=quiet, force=force, inputs=() if in_place else [input], in_place="--in-place")
    summary = Summary(splitter=splitter)

    checkpoint = None

    def done() -> str:
        return f"interrupted after {summary.trajectories} trajectories" + kept_note(checkpoint)

    with interruptible(out, done):
        [item] = open_inputs([input], fmt)
        item.require_writable("prune")
        item.check_syntax(skip_bad_lines=skip_bad_lines)
        if item.chosen:
            out.info(item.chosen)
        warn_precision(out, config)
        scorer, tokenizer = build_engines(parsed, config)
        pruner = Pruner(out, parsed, settings, scorer, tokenizer, signed.value, edits, strict, skip_bad_lines, splitter)
        # each scored step is kept as it finishes, so Ctrl-C loses nothing (iclr_cli.checkpoint)
        with resumable("prune", [input], output, [item], settings, config, fmt, skip_bad_lines, out, opaque=edits.value, signed=signed.value) as checkpoint, \
                out.stream() as sink, out.tracker(f"pruning ({parsed.name})") as progress:
            pruner.file(item, sink, summary, progress, checkpoint, target=output, in_place=in_place)
    # the one-block note was given before the run when it applied: not again under the table
    print_summary(out, summary, tokenizer.name, parsed.name, splitter=splitter if parsed.needs_scores and not pruner.warned else None,
                  scorer=config.describe(getattr(scorer, "max_tokens", None)) if parsed.needs_scores else None)


@dataclass
class Pruner:
    """One prune run's engines and options, applied to one input file at a time: the file's
    documents compressed online and written back in its format (its text encoding and its
    compression kept) into a binary sink. ``scorer`` is ``None`` for variants that score
    nothing; ``warned``: the one-block warning was given (once a run, before a long run)."""

    out: Output
    variant: Variant
    settings: Settings
    scorer: Scorer | None
    tokenizer: Tokenizer
    signed: str
    edits: OpaqueEdits
    strict: bool
    skip_bad_lines: bool
    splitter: str
    warned: bool = False

    def file(self, item: Input, sink: BinaryIO, summary: Summary, progress, checkpoint, more: bool = False, *,
             target: str | None = None, in_place: bool = False) -> None:
        """Prune ``item`` into ``sink``, adding what was written to ``summary``; ``progress``
        (a tracker) and ``checkpoint`` as the run's; ``more``: other files follow this one
        (the progress totals are not final at its last document); ``target``: the output's
        path (None: stdout) and ``in_place``, which decide its compression
        (:func:`iclr_cli.compression.for_output`).

        Raises:
            InputError: for a bad record or field of the file (as :meth:`Input.documents`).
        """
        from iclr_cli.cli.common import report_reading, warn_one_block
        from iclr_cli.formats.sealing import Sealer
        from iclr_cli.formats.writeback import write_document
        from iclr_cli.inputs import with_last
        from iclr_cli.pipeline import as_written, compress_document, track_steps
        from iclr_cli.savings.measure import static_totals
        from iclr_cli.token_accounting import token_counter

        sealer = Sealer(self.signed, self.edits)  # the provider rule table, as iclr serve applies it
        encode = item.output_encoder()  # a UTF-16/32 input is written back in its encoding
        tokenizer, scorer = self.tokenizer, self.scorer
        with item.output_stream(sink, target, in_place=in_place) as stream:  # compressed as the output's name says
            for doc, last in with_last(item.documents(skip_bad_lines=self.skip_bad_lines)):
                progress.growing(not last or more)  # the totals are final once the last document is read
                doc = sealer.apply(doc)
                report_reading(self.out, doc, strict=self.strict)
                if self.variant.needs_scores and not self.warned:
                    self.warned = warn_one_block(self.out, doc.trajectories, self.splitter)  # before a long run, not after
                on_step = track_steps(progress, doc.trajectories, tokenizer, limit=getattr(scorer, "max_tokens", None))
                results = compress_document(doc, self.settings, scorer, tokenizer, on_step=on_step, checkpoint=checkpoint)
                wrote = write_document(item.adapter, doc, [r.compressed for r in results], opaque=self.edits)
                stream.write(encode(wrote.data))
                # Count what was written, not what compression asked for (Codex items dropped
                # whole or kept unedited).
                summary.add(as_written(results, wrote.written, tokenizer, summary.not_as_asked), doc)
                # ...and the input re-sent as 'iclr savings' estimates it, of what was written:
                # reasoning counted apart as sealed only where an asked edit was left out
                summary.resent = summary.resent + static_totals(results, token_counter(tokenizer), self.edits, wrote.written)
