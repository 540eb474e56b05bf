"""``iclr score``: one JSONL record per reasoning block with its proxy entropy in bits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from iclr_cli.cli import dataset_options as dopt
from iclr_cli.cli import options as opt

if TYPE_CHECKING:  # the CLI imports its engines lazily (iclr --help stays fast)
    from iclr_cli.compress import Settings
    from iclr_cli.formats.base import OpaqueEdits
    from iclr_cli.inputs import Input
    from iclr_cli.pipeline import IdRegistry, ScorerConfig, Summary
    from iclr_cli.policies import Variant
    from iclr_cli.render.output import Output
    from iclr_cli.scoring.base import Scorer, Tokenizer


def score(
    inputs: Annotated[Optional[list[str]], typer.Argument(help="Trajectory files ('-' for stdin) and folders; none with --dataset.", show_default=False)] = None,
    output: opt.Output = None,
    variant: opt.ScoredVariantOpt = opt.ScoredVariant("iclr"),
    ratio: opt.Ratio = opt.DEFAULT_RATIO_VALUE,
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
    opaque: opt.EncryptedReasoning = opt.SEAL,
    signed: opt.SignedThinking = opt.SEAL_SIGNED,
    fmt: opt.Format = None,
    skip_bad_lines: opt.SkipBadLines = False,
    strict: opt.Strict = False,
    force: opt.Force = False,
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
    """Score every reasoning block by mean token entropy (bits) under the proxy model.

    Scores of step t are taken on the history in which steps before t were already
    compressed (the online simulation). Output: JSONL, one record per block, with
    trajectory, step, block, n_blocks, n_tokens, entropy_bits, selected, text.
    Ctrl-C exits 130 and says what was kept: every scored step is kept, and the same command
    resumes from there (a changed input or setting starts over, saying so). With --dataset: one trajectory per row, records
    also carry 'row' (JSONL or, for -o X.parquet, parquet); an interrupted run restarted with
    the same -o resumes.
    Several files or a folder: each file is scored on its own (records carry its path in
    'source'); a file that cannot be read is named with its error and skipped, and the run
    exits 1 at the end. Their records go to one JSONL (stdout or -o FILE), or, with -o DIR/
    (a path ending in '/', or an existing folder), one JSONL per file at its relative path
    below DIR, named NAME.scores.jsonl, each written as soon as its file is done.
    """
    from iclr_cli.batch import is_many
    from iclr_cli.checkpoint import kept_note, resumable
    from iclr_cli.cli.common import check_splitter, interruptible, print_summary, scorer_config, warn_precision
    from iclr_cli.errors import UsageError
    from iclr_cli.formats.base import OpaqueEdits
    from iclr_cli.inputs import open_inputs
    from iclr_cli.pipeline import Summary, build_engines
    from iclr_cli.policies import parse_variant
    from iclr_cli.render.output import Output

    parsed = parse_variant(variant.value)
    splitter = check_splitter(block_split.value)
    dataset_split = dopt.chosen_split(dataset, dataset_split)
    config = scorer_config(model, max_tokens, overflow.value, dtype.value, no_prefix_cache, batch_size, device,
                           context=context.value, cache_tokens=cache_tokens, exact=exact, elide=elide,
                           recheck_below=recheck_below)
    settings = config.settings(parsed, ratio=ratio, splitter=splitter)
    if dataset is None and inputs and is_many(inputs, output):
        from iclr_cli.cli.many import Many, score_many

        many = Many("score", inputs, output, settings, config, fmt, skip_bad_lines, Output(None, quiet=quiet, force=force), force=force,
                    extra={"opaque": opaque.value, "signed": signed.value})
        return score_many(many, lambda scorer, tokenizer: BlockScorer(many.out, parsed, settings, config, scorer, tokenizer, signed.value,
                                                                       OpaqueEdits(opaque.value), strict, skip_bad_lines, splitter))
    out = Output(output, quiet=quiet, force=force, inputs=inputs or ())
    if dataset is not None:
        from iclr_cli.corpus.command import DatasetArgs, run_dataset_command

        args = DatasetArgs(dataset, dataset_split, column, id_column, shard_rows, engine, workers, num_gpus_per_worker, ray_address)
        return run_dataset_command("score", args, inputs, settings, config, out, target=output, fmt=fmt, skip_bad_rows=skip_bad_lines, strict=strict, opaque=opaque.value, signed=signed.value)
    if not inputs:
        raise UsageError("give trajectory files ('-' for stdin), folders, or --dataset")
    summary = Summary(splitter=splitter)
    records = 0

    checkpoint = None

    def done() -> str:
        return f"interrupted after {summary.trajectories} trajectories ({records} block records)" + kept_note(checkpoint)

    with interruptible(out, done):
        [item] = open_inputs(inputs, fmt)
        item.check_syntax(skip_bad_lines=skip_bad_lines)  # a cut file fails before the model loads
        if item.chosen:
            out.info(item.chosen)
        warn_precision(out, config)
        scorer, tokenizer = build_engines(parsed, config)
        scoring = BlockScorer(out, parsed, settings, config, scorer, tokenizer, signed.value, OpaqueEdits(opaque.value), strict, skip_bad_lines, splitter)
        # each scored step is kept as it finishes, so Ctrl-C loses nothing (iclr_cli.checkpoint)
        with resumable("score", inputs, output, [item], settings, config, fmt, skip_bad_lines, out,
                       opaque=opaque.value, signed=signed.value) as checkpoint, \
                out.stream() as sink, out.tracker("scoring") as progress:
            records = scoring.file(item, sink.write, summary, progress, checkpoint)
    if records == 0:  # an empty output must not look like a failed or cut run
        if summary.sealed_blocks:
            out.info(f"no reasoning block a variant may edit: all {summary.sealed_blocks} are sealed by the provider rule "
                     "(see the warning above; --signed-thinking / --encrypted-reasoning choose otherwise), so nothing to score (0 records written)")
        else:
            out.info("no reasoning blocks in the input: nothing to score (0 records written)")
    # the one-block note was given before the run when it applied: not again under the table
    print_summary(out, summary, tokenizer.name, parsed.name, command="score",
                  splitter=splitter if parsed.needs_scores and not scoring.warned else None,
                  scorer=config.describe(getattr(scorer, "max_tokens", None)) if parsed.needs_scores else None)


@dataclass
class BlockScorer:
    """One score run's engines and options, applied to one input file at a time: the file's
    block records (:func:`iclr_cli.pipeline.score_records`) as JSONL. ``scorer`` is ``None``
    for variants that score nothing; ``warned``: the one-block warning was given (once a run)."""

    out: Output
    variant: Variant
    settings: Settings
    config: ScorerConfig
    scorer: Scorer | None
    tokenizer: Tokenizer
    signed: str
    edits: OpaqueEdits
    strict: bool
    skip_bad_lines: bool
    splitter: str
    warned: bool = False

    def file(self, item: Input, write: Callable[[bytes], object], summary: Summary, progress, checkpoint, more: bool = False, ids: IdRegistry | None = None) -> int:
        """Score ``item``, passing its records (JSONL bytes, a document at a time) to ``write``
        and adding to ``summary`` what ``prune`` with the same options would write; returns
        how many records. ``more``: other files follow (the progress totals are not final);
        ``ids``: trajectory ids must differ from those of the files before.

        Raises:
            InputError: for a bad record or field of the file (as :meth:`Input.documents`).
            UsageError: for a trajectory id another file of ``ids`` has.
        """
        from iclr_cli.cli.common import report_reading, warn_one_block
        from iclr_cli.formats.sealing import Sealer
        from iclr_cli.formats.writeback import write_document
        from iclr_cli.inputs import with_last
        from iclr_cli.pipeline import as_written, compress_document, score_records, track_steps

        sealer = Sealer(self.signed, self.edits)  # the provider rule table, as iclr serve applies it
        named = (self.config.profile, self.config.precision) if self.variant.needs_scores else ()
        records = 0
        for doc, last in with_last(item.documents(skip_bad_lines=self.skip_bad_lines)):
            progress.growing(not last or more)  # the totals are final once the last document of the last input is read
            doc = sealer.apply(doc)
            if ids is not None:
                ids.check(item.path, doc)
            report_reading(self.out, doc, strict=self.strict)
            if self.variant.needs_scores and not self.warned:
                self.warned = warn_one_block(self.out, doc.trajectories, self.splitter)  # before a long run, not after
            on_step = track_steps(progress, doc.trajectories, self.tokenizer, limit=getattr(self.scorer, "max_tokens", None))
            results = compress_document(doc, self.settings, self.scorer, self.tokenizer, on_step=on_step, checkpoint=checkpoint)
            lines = list(score_records(item.path, results, self.variant, *named))
            write(self.out.encode_records(lines))
            records += len(lines)
            # The summary counts what 'prune' with the same options would write (one
            # accounting: Codex items dropped whole or kept unedited count as written).
            wrote = write_document(item.adapter, doc, [r.compressed for r in results], opaque=self.edits)
            summary.add(as_written(results, wrote.written, self.tokenizer, summary.not_as_asked), doc)
        return records
