"""``iclr score``: one JSONL record per reasoning block with its proxy entropy in bits."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from iclr_cli.cli import dataset_options as dopt
from iclr_cli.cli import options as opt


def score(
    inputs: Annotated[Optional[list[str]], typer.Argument(help="Trajectory files ('-' for stdin); none with --dataset.", show_default=False)] = None,
    output: opt.Output = None,
    variant: opt.ScoredVariantOpt = opt.ScoredVariant("iclr"),
    ratio: opt.Ratio = opt.DEFAULT_RATIO_VALUE,
    model: opt.Model = "smollm2",
    max_tokens: opt.MaxTokens = None,
    exact: opt.Exact = False,
    elide: opt.Elide = None,
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
    """
    from iclr_cli.checkpoint import kept_note, resumable
    from iclr_cli.cli.common import check_splitter, interruptible, print_summary, report_reading, scorer_config, warn_one_block, warn_precision
    from iclr_cli.errors import UsageError
    from iclr_cli.formats.base import OpaqueEdits
    from iclr_cli.formats.sealing import Sealer
    from iclr_cli.formats.writeback import write_document
    from iclr_cli.pipeline import IdRegistry, Summary, as_written, build_engines, compress_document, open_inputs, score_records, track_steps, with_last
    from iclr_cli.policies import parse_variant
    from iclr_cli.render.output import Output

    parsed = parse_variant(variant.value)
    splitter = check_splitter(block_split.value)
    dataset_split = dopt.chosen_split(dataset, dataset_split)
    config = scorer_config(model, max_tokens, overflow.value, dtype.value, no_prefix_cache, batch_size, device,
                           context=context.value, cache_tokens=cache_tokens, exact=exact, elide=elide)
    out = Output(output, quiet=quiet, force=force, inputs=inputs or ())
    if dataset is not None:
        from iclr_cli.corpus.command import DatasetArgs, run_dataset_command

        args = DatasetArgs(dataset, dataset_split, column, id_column, shard_rows, engine, workers, num_gpus_per_worker, ray_address)
        return run_dataset_command("score", args, inputs, config.settings(parsed, ratio=ratio, splitter=splitter), config, out, target=output, fmt=fmt, skip_bad_rows=skip_bad_lines, strict=strict, opaque=opaque.value, signed=signed.value)
    if not inputs:
        raise UsageError("give trajectory files ('-' for stdin) or --dataset")
    summary, ids = Summary(splitter=splitter), IdRegistry()
    records = 0
    warned = False

    checkpoint = None

    def done() -> str:
        return f"interrupted after {summary.trajectories} trajectories ({records} block records)" + kept_note(checkpoint)

    with interruptible(out, done):
        items = open_inputs(inputs, fmt)
        for item in items:
            item.check_syntax(skip_bad_lines=skip_bad_lines)  # a cut file fails before the model loads
        for item in items:
            if item.chosen:
                out.info(item.chosen)
        warn_precision(out, config)
        scorer, tokenizer = build_engines(parsed, config)
        settings = config.settings(parsed, ratio=ratio, splitter=splitter)
        # each scored step is kept as it finishes, so Ctrl-C loses nothing (iclr_cli.checkpoint)
        with resumable("score", inputs, output, items, settings, config, fmt, skip_bad_lines, out,
                       opaque=opaque.value, signed=signed.value) as checkpoint, \
                out.stream() as sink, out.tracker("scoring") as progress:
            for n, item in enumerate(items, 1):
                sealer = Sealer(signed.value, OpaqueEdits(opaque.value))  # the provider rule table, as iclr serve applies it
                for doc, last in with_last(item.documents(skip_bad_lines=skip_bad_lines)):
                    # the totals are final once the last document of the last input is read
                    progress.growing(not last or n < len(items))
                    doc = sealer.apply(doc)
                    ids.check(item.path, doc)
                    report_reading(out, doc, strict=strict)
                    if parsed.needs_scores and not warned:
                        warned = warn_one_block(out, doc.trajectories, splitter)  # before a long run, not after
                    on_step = track_steps(progress, doc.trajectories, tokenizer, limit=getattr(scorer, "max_tokens", None))
                    results = compress_document(doc, settings, scorer, tokenizer, on_step=on_step, checkpoint=checkpoint)
                    lines = list(score_records(item.path, results, parsed, *((config.profile, config.precision) if parsed.needs_scores else ())))
                    sink.write(out.encode_records(lines))
                    records += len(lines)
                    # The summary counts what 'prune' with the same options would write (one
                    # accounting: Codex items dropped whole or kept unedited count as written).
                    wrote = write_document(item.adapter, doc, [r.compressed for r in results], opaque=OpaqueEdits(opaque.value))
                    summary.add(as_written(results, wrote.written, tokenizer, summary.not_as_asked), doc)
    if records == 0:  # an empty output must not look like a failed or cut run
        if summary.sealed_blocks:
            out.info(f"no reasoning block a variant may edit: all {summary.sealed_blocks} are sealed by the provider rule "
                     "(see the warning above; --signed-thinking / --encrypted-reasoning choose otherwise), so nothing to score (0 records written)")
        else:
            out.info("no reasoning blocks in the input: nothing to score (0 records written)")
    print_summary(out, summary, tokenizer.name, parsed.name, command="score", splitter=splitter if parsed.needs_scores else None,
                  scorer=config.describe(getattr(scorer, "max_tokens", None)) if parsed.needs_scores else None)
