"""``iclr report``: the summary table of a replay run, and an HTML report with plots."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from iclr_cli.cli import options as opt


def report(
    run_dir: Annotated[str, typer.Argument(help="Run folder written by 'iclr replay --out' (holds results.jsonl), or a session file.", show_default=False)],
    html: Annotated[Optional[str], typer.Option("--html", help="Also write a self-contained HTML report with plots to this file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON data instead of a table.")] = False,
    heatmap: Annotated[Optional[str], typer.Option("--heatmap", help="Replay whose block heat map the HTML shows: TASK/VARIANT/SEED (default: the first iclr or step-only replay).")] = None,
    variant: Annotated[str, typer.Option("--variant", "-v", help="For a session file: the variant whose write-back is estimated (as 'iclr savings').")] = "iclr",
    model: opt.Model = "smollm2",
    max_tokens: opt.MaxTokens = None,
    width: Annotated[Optional[int], typer.Option("--width", min=40, help="Table width in columns (default: the terminal's).")] = None,
    force: opt.Force = False,
    quiet: opt.Quiet = False,
) -> None:
    """Summarise a replay run per variant (the rules of 'iclr replay''s summary): mean
    reward, wins/ties/losses against 'none', token totals and their change, deletion ratio
    and amplification.

    --html FILE adds plots (tokens per request over the steps, reward against tokens,
    deletion ratio against the change in total tokens, and one trajectory's block entropy
    heat map) in one file that opens without a network. Block entropies come from the
    replay's saved scores, or are computed with --model when it saved none.

    For a session file (any format 'iclr score' reads): the 'iclr savings' table of its
    sessions, and with --html the input tokens of every request, as recorded and with online
    write-back of --variant (a static estimate).
    """
    if html:
        from iclr_cli.jsonio import output_path

        output_path(html, force=force)  # refuse an unwritable --html file before any work
    if Path(run_dir).is_file():
        return _report_file(run_dir, html, as_json, variant, model, max_tokens, width, force, quiet)
    from iclr_cli.render import runs
    from iclr_cli.render.output import Output
    from iclr_cli.replay.summary import summarize, to_records

    records = runs.load_run(run_dir)
    rows = summarize([r.record for r in records])
    out = Output(None, quiet=quiet)
    if as_json:
        import orjson

        out.write_bytes(orjson.dumps(to_records(rows), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    else:
        from iclr_cli.render import diff_view, report_view

        import sys

        from iclr_cli.render.output import FULL_WIDTH

        # Off a terminal (a pipe, a log) the table keeps its full width instead of 80 columns.
        full = width or (None if sys.stdout.isatty() else FULL_WIDTH)
        report_view.paint(diff_view.make_console(width=full), Path(run_dir).name, rows,
                          [r.record.get("reasoning_tokenizer") for r in records])
    if html:
        from iclr_cli.jsonio import write_output
        from iclr_cli.render import report_html

        heat = _heat_map(records, heatmap, model, max_tokens, out)
        figures = report_html.build_figures(records, heat)
        write_output(html, report_html.render_html(f"iclr replay report: {Path(run_dir).resolve().name}", rows, figures).encode("utf-8"), force=force)
        out.info(f"wrote {html}")


def _heat_map(records, spec, model, max_tokens, out):
    """The heat map with the most scored blocks among the candidates' saved block scores
    (the first on a tie); when none saved scores, the first candidate with reasoning is
    scored with ``model``."""
    from iclr_cli.jsonio import read_input
    from iclr_cli.render import runs
    from iclr_cli.render.diffinput import read_scores
    from iclr_cli.render.report_html import heat_map

    candidates = runs.heat_candidates(records, spec)
    best, cells = None, 0
    for cand in candidates:
        name = cand.record.get("block_scores")
        if isinstance(name, str):
            path = str(Path(cand.run_dir) / name)
            heat = heat_map(cand.label, read_scores(read_input(path), path))
            n = sum(v is not None for row in heat.z for v in row) if heat else 0
            if n > cells:
                best, cells = heat, n
    if best is not None:
        return best
    if any(isinstance(c.record.get("block_scores"), str) for c in candidates):
        return None  # the replay scored what it could: no step had a block to score
    for cand in candidates:
        if any(step.reasoning for step in cand.trajectory.steps):
            return _score_for_heat(cand, model, max_tokens, out)
    return None


def _score_for_heat(cand, model, max_tokens, out):
    from iclr_cli.compress import compress_trajectories
    from iclr_cli.pipeline import ScorerConfig, build_engines
    from iclr_cli.policies import parse_variant
    from iclr_cli.render.diffinput import scores_from_results
    from iclr_cli.render.report_html import heat_map

    rec = cand.record
    variant = parse_variant(rec["variant"] if rec["variant"] in ("iclr", "iclr-ext", "step-only") else "iclr")
    out.info(f"scoring {cand.label} with {model} for the heat map (the replay saved no block scores)")
    config = ScorerConfig.chosen(max_tokens=max_tokens, model=model)
    scorer, tokenizer = build_engines(variant, config)
    results = compress_trajectories([cand.trajectory], config.settings(variant), scorer, tokenizer)
    return heat_map(f"{cand.label} ({variant.name} entropies by {scorer.name})", scores_from_results(results))


def _report_file(path, html, as_json, variant, model, max_tokens, width, force, quiet):
    """``iclr report FILE``: the ``iclr savings`` estimate of one session file (its cache
    included), as a table or JSON, and with ``--html`` the input tokens per request."""
    import sys

    from iclr_cli.errors import UsageError
    from iclr_cli.pipeline import ScorerConfig
    from iclr_cli.policies import FILE_VARIANT_NAMES, parse_variant
    from iclr_cli.render import savings_view
    from iclr_cli.render.output import FULL_WIDTH, Output
    from iclr_cli.savings.cache import SavingsCache, default_path
    from iclr_cli.savings.run import Options, SavingsRun

    parsed = parse_variant(variant, names=FILE_VARIANT_NAMES)
    if parsed.kind == "sliding-window":
        raise UsageError("sliding-window-K drops whole steps; it exists only in 'iclr replay'")
    out = Output(None, quiet=quiet)
    cache = SavingsCache(default_path())
    config = ScorerConfig.chosen(max_tokens=max_tokens, model=model)
    run = SavingsRun(Options(config.settings(parsed, score_all=False), config), cache)
    try:
        candidates = run.discover([path])
        with out.tracker(f"report ({parsed.name})") as progress:
            run.progress = progress
            run.run(candidates)
    finally:
        cache.close()
    if as_json:
        import orjson

        out.write_bytes(orjson.dumps(savings_view.to_json(run), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    else:
        from iclr_cli.render.diff_view import make_console

        savings_view.paint(make_console(width=width or (None if sys.stdout.isatty() else FULL_WIDTH)), run)
    if html:
        from iclr_cli.jsonio import write_output
        from iclr_cli.render import report_html

        page = report_html.render_page(
            f"iclr report: {Path(path).name}", savings_view.title(run),
            report_html.html_table(savings_view.COLUMNS, savings_view.table_rows(run)),
            report_html.savings_figures(run.sessions), notes=savings_view.notes(run),
        )
        write_output(html, page.encode("utf-8"), force=force)
        out.info(f"wrote {html}")
