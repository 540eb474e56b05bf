"""``iclr savings``: what online write-back would have saved on sessions already recorded."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from iclr_cli.cli import options as opt


def savings(
    paths: Annotated[list[str], typer.Argument(help="Session files or folders (searched recursively).", show_default=False)],
    variant: Annotated[str, typer.Option("--variant", "-v", help="iclr (default), step-only, delete-all (the upper bound; tokenizer only), random-R, none.")] = "iclr",
    as_json: Annotated[bool, typer.Option("--json", "-j", help="Print the estimate as JSON data instead of the table (both go to stdout).")] = False,
    since: Annotated[Optional[str], typer.Option("--since", help="Only sessions last active on or after this day (YYYYMMDD or YYYY-MM-DD, UTC). A session database's sessions are filtered each on its own dates; a file that holds no timestamps, by its modification time.", show_default=False)] = None,
    until: Annotated[Optional[str], typer.Option("--until", help="Only sessions last active on or before this day (a session database's: each session's own; a file without timestamps: its modification time).", show_default=False)] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache of sessions already estimated.")] = False,
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
    width: opt.Width = None,
    quiet: opt.Quiet = False,
) -> None:
    """Estimate, from recorded sessions, the input and cache-read tokens that online
    write-back of a variant would have saved: per session and in total.

    Request k (the one whose answer is step k) carries steps 0..k-1; with write-back each
    of them went out compressed, so its input is the recorded input minus the tokens the
    variant deletes from steps before k. A compressed step enters the prompt once, already
    compressed, and never changes, so the recorded cache hits carry over. Token counts are
    the provider's recorded usage where the log holds it (deleted text converted by the
    session's own ratio), else the proxy tokenizer's; each row says which. Reasoning that is
    signed or encrypted cannot be edited on its provider: it is counted apart ('sealed'),
    and never scored.

    Every file is read first; the first lines say how much of the reasoning is sealed, the
    upper bound (delete-all, tokenizer only) and how many steps the proxy will score (steps
    whose reasoning is all sealed, or is one block, or already holds [SKIP] markers, are not
    scored); then the progress counts those steps to a fixed total, with the time left. A step
    already compressed by iclr (serve or prune) is left as it is: write-back compresses a step
    once, and the notes count such steps.

    Dollars: each recorded request at its provider's list price, as recorded and with
    write-back (cache reads and writes at their own rates), from the genai-prices package
    (the 'savings' extra); without it the prices are said to be unavailable. Claude Code
    sub-agent transcripts (<session>/subagents/*.jsonl) are counted with their session.

    A static estimate: the same actions are assumed. A live run differs (trajectory
    amplification); 'iclr replay' measures it. Files no format reads are skipped with one
    line; sessions already estimated come from a cache. Ctrl-C prints the table so far and
    exits 130.
    """
    from iclr_cli.cli.common import check_splitter, scorer_config, warn_precision
    from iclr_cli.errors import Interrupted, UsageError
    from iclr_cli.jsonl import unfinished_warning
    from iclr_cli.policies import FILE_VARIANT_NAMES, parse_variant
    from iclr_cli.render import savings_view
    from iclr_cli.render.output import Output
    from iclr_cli.savings.cache import SavingsCache, default_path
    from iclr_cli.savings.run import Options, SavingsRun
    from iclr_cli.savings.sources import parse_day

    parsed = parse_variant(variant, names=FILE_VARIANT_NAMES)
    if parsed.kind == "sliding-window":
        raise UsageError("sliding-window-K drops whole steps; it exists only in 'iclr replay'")
    config = scorer_config(model, max_tokens, overflow.value, dtype.value, no_prefix_cache, batch_size, device,
                           context=context.value, cache_tokens=cache_tokens, exact=exact, elide=elide,
                           recheck_below=recheck_below)
    settings = config.settings(parsed, ratio=ratio, seed=seed, splitter=check_splitter(block_split.value), score_all=False)
    options = Options(settings, config, fmt, skip_bad_lines,
                      parse_day(since, "--since") if since else None, parse_day(until, "--until") if until else None)
    out = Output(None, quiet=quiet, width=width)
    cache = SavingsCache(None if no_cache else default_path())
    run = SavingsRun(options, cache)
    interrupted = False
    try:
        warn_precision(out, config)
        candidates = run.discover(paths)
        # every file first: the sealed share, the upper bound and the steps to score are said
        # before the long part, and the progress's total is final from its first line
        with out.progress(f"savings: reading {len(candidates):,} files", total=len(candidates), unit="files") as advance:
            run.prepare(candidates, advance)
        for line in savings_view.header(run):
            out.info(line)
        if run.plan.scored:
            with out.tracker(f"savings ({parsed.name}): scoring") as progress:
                run.progress = progress
                run.score()
        else:
            run.score()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        cache.close()
    for path, line in run.unfinished:
        out.warn(unfinished_warning(path, line))
    if cache.problem:
        out.warn(f"the savings cache could not be used ({cache.problem}); nothing was cached")
    if as_json:
        import orjson

        out.write_bytes(orjson.dumps(savings_view.to_json(run, complete=not interrupted), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    else:
        import sys

        from iclr_cli.render.diff_view import make_console
        from iclr_cli.render.output import FULL_WIDTH

        # Off a terminal (a pipe, a file) the table keeps its full width instead of 80 columns.
        savings_view.paint(make_console(width=width or (None if sys.stdout.isatty() else FULL_WIDTH)), run, interrupted=interrupted)
    if interrupted:
        done = run.files_read + run.files_cached
        covers = f"interrupted after {done} of {run.candidates} files: the {'JSON' if as_json else 'table'} covers those"
        if no_cache:
            raise Interrupted(f"{covers}; with --no-cache nothing was cached, so the same command starts over")
        if cache.problem:
            raise Interrupted(f"{covers}; the cache could not be used, so the same command starts over")
        raise Interrupted(f"{covers}, and the same command goes on from there (they are cached)")
