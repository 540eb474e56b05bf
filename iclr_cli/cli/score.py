"""``iclr score``: one JSONL record per reasoning block with its proxy entropy in bits."""

from __future__ import annotations

from typing import Annotated

import typer

from iclr_cli.cli import options as opt


def score(
    inputs: Annotated[list[str], typer.Argument(help="Trajectory files ('-' for stdin).", show_default=False)],
    output: opt.Output = None,
    variant: Annotated[str, typer.Option("--variant", "-v", help="iclr (context-conditioned) or step-only.")] = "iclr",
    ratio: opt.Ratio = opt.DEFAULT_RATIO_VALUE,
    model: opt.Model = "smollm2",
    max_tokens: opt.MaxTokens = 42_000,
    overflow: opt.Overflow = "window",
    dtype: opt.Dtype = "float32",
    no_prefix_cache: opt.NoPrefixCache = False,
    batch_size: opt.BatchSize = 8,
    device: opt.Device = None,
    split: opt.Split = "paragraph",
    fmt: opt.Format = None,
    skip_bad_lines: opt.SkipBadLines = False,
    quiet: opt.Quiet = False,
) -> None:
    """Score every reasoning block by mean token entropy (bits) under the proxy model.

    Scores of step t are taken on the history in which steps before t were already
    compressed (the online simulation). Output: JSONL, one record per block, with
    trajectory, step, block, n_blocks, n_tokens, entropy_bits, selected, text.
    """
    from iclr_cli.cli.common import check_splitter, print_summary, scorer_config, warn_precision
    from iclr_cli.compress import Settings
    from iclr_cli.errors import UsageError
    from iclr_cli.pipeline import Summary, build_engines, load_inputs, run, score_records
    from iclr_cli.policies import parse_variant
    from iclr_cli.render.output import Output

    parsed = parse_variant(variant)
    if not parsed.needs_scores:
        raise UsageError(f"score takes --variant iclr or step-only, not {variant!r} (use 'iclr prune' for other variants)")
    check_splitter(split)
    config = scorer_config(model, max_tokens, overflow, dtype, no_prefix_cache, batch_size, device)
    out = Output(output, quiet=quiet)
    loaded = load_inputs(inputs, fmt, skip_bad_lines=skip_bad_lines)
    for item in loaded:
        for w in item.doc.warnings:
            out.warn(w)
    warn_precision(out, config)
    scorer, tokenizer = build_engines(parsed, config)
    total = sum(len(t.steps) for item in loaded for t in item.doc.trajectories)
    with out.progress("scoring steps", total) as advance:
        grouped = run(loaded, Settings(parsed, ratio=ratio, splitter=split), scorer, tokenizer, on_step=lambda _r: advance())
    records = [r for item, results in zip(loaded, grouped) for r in score_records(item.path, results, parsed)]
    out.write_records(records)
    summary = Summary()
    for results in grouped:
        summary.add(results)
    print_summary(out, summary, tokenizer.name, parsed.name)
