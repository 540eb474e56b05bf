"""``iclr diff``: what pruning removed, block by block; or where two replays parted ways."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Optional

import typer

from iclr_cli.cli import options as opt


def diff(
    original: Annotated[str, typer.Argument(help="Original trajectory file, 'iclr score' output, or a replay record (run folder or its trajectory file).", show_default=False)],
    pruned: Annotated[str, typer.Argument(help="Pruned copy of ORIGINAL (any variant), the input of a score file, or a second replay record.", show_default=False)],
    step: Annotated[Optional[int], typer.Option("--step", help="Show only this step (0-based assistant turn).")] = None,
    context: Annotated[int, typer.Option("--context", "-C", min=0, help="Unchanged steps shown around each changed one.")] = 1,
    all_steps: Annotated[bool, typer.Option("--all", help="Show every step, changed or not.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON data instead of painting it.")] = False,
    output: opt.Output = None,
    score: Annotated[bool, typer.Option("--score", help="Compute block entropies with the proxy model (--model) to tag blocks.")] = False,
    scores_file: Annotated[Optional[str], typer.Option("--scores", help="Tag blocks with the entropies of this 'iclr score' output of ORIGINAL (instead of --score).")] = None,
    model: opt.Model = "smollm2",
    variant: Annotated[opt.ScoredVariant, typer.Option("--variant", "-v", help="With --score: iclr (context-conditioned) or step-only.")] = opt.ScoredVariant("iclr"),
    ratio: opt.Ratio = opt.DEFAULT_RATIO_VALUE,
    max_tokens: opt.MaxTokens = None,
    block_split: opt.BlockSplit = opt.PARAGRAPH,
    fmt: opt.Format = None,
    task: Annotated[Optional[str], typer.Option("--task", help="Replay records: pick this task in a run folder holding several.")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Replay records: pick this seed in a run folder holding several.")] = None,
    width: Annotated[Optional[int], typer.Option("--width", min=40, help="Output width in columns (default: the terminal's).")] = None,
    no_pager: Annotated[bool, typer.Option("--no-pager", help="Never page long output.")] = False,
    force: opt.Force = False,
) -> None:
    """Show which reasoning blocks were removed, with their entropies, step by step.

    ORIGINAL PRUNED: two files of any supported format, or 'iclr score' output and its
    input (selected blocks shown removed). Removed blocks are struck through and marked '-',
    changed ones (random-R token deletions) '~' with the new text '+'; actions '>' and
    observations '<' are folded to one line. Plain text when stdout is not a terminal;
    NO_COLOR is honoured.

    Two replay records (a run folder with results.jsonl, or a trajectory file inside one):
    the first step where the actions diverge, then per step both actions, request
    input/output tokens and the running difference in total tokens.
    """
    from iclr_cli.cli.common import check_splitter
    from iclr_cli.render import diff_view, runs

    split = check_splitter(block_split.value)
    if output not in (None, "-"):
        from iclr_cli.jsonio import output_path, refuse_output_over_input

        refuse_output_over_input(output, [original, pruned, *([scores_file] if scores_file else [])])
        output_path(output, force=force)  # refuse an unwritable -o file before any work
    console = diff_view.make_console(width=width)
    if runs.is_run_record(original) and runs.is_run_record(pruned):
        _run_diff(original, pruned, task, seed, as_json, output, console, not no_pager, force)
        return
    built = _build(original, pruned, score=score, scores_file=scores_file, model=model, variant=variant.value, ratio=ratio, max_tokens=max_tokens, split=split, fmt=fmt)
    _emit(built, step, None if all_steps or step is not None else context, as_json, output, console, not no_pager, force)


def _build(original: str, pruned: str, *, score: bool, scores_file: str | None, model: str, variant: str, ratio: float, max_tokens: int, split: str, fmt):
    from iclr_cli.errors import UsageError
    from iclr_cli.formats.sealing import default_sealed  # sealed reasoning counted apart, as score counts it
    from iclr_cli.jsonio import read_input
    from iclr_cli.render import diffdata, diffinput
    from iclr_cli.token_accounting import token_counter

    data_a, data_b = read_input(original), read_input(pruned)
    score_a, score_b = diffinput.is_score_output(data_a), diffinput.is_score_output(data_b)
    if score_a and score_b:
        raise UsageError(f"{original} and {pruned} are both 'iclr score' output; give one of them with the input it scored")
    tokenizer = _tokenizer(model)
    count = token_counter(tokenizer)
    if score_a or score_b:
        (scores_name, scores_data), input_name = ((original, data_a), pruned) if score_a else ((pruned, data_b), original)
        doc = _load_doc(input_name, fmt)
        trajectories = doc.trajectories
        scores = diffinput.read_scores(scores_data, scores_name)
        diffinput.check_ids(scores, [t.id for t in trajectories], scores_name, input_name)
        built = diffdata.diff_scores(trajectories, scores, original_name=input_name, scores_name=scores_name, count_tokens=count, tokenizer=tokenizer.name,
                                     splitter=split, sealed=default_sealed(doc))
        return dataclasses.replace(built, precision=diffinput.scores_precision(scores))
    doc = _load_doc(original, fmt)
    before, after = doc.trajectories, _load(pruned, fmt)
    scores, source, precision = None, None, None
    if score and scores_file:
        raise UsageError("give --score (compute entropies) or --scores FILE (read them), not both")
    if scores_file:
        scores, source = diffinput.read_scores(read_input(scores_file), scores_file), scores_file
        diffinput.check_ids(scores, [t.id for t in before], scores_file, original)
        precision = diffinput.scores_precision(scores)
    elif score:
        scores, source, precision = _compute_scores(original, before, model, variant, ratio, max_tokens, split)
    built = diffdata.diff_files(
        before, after, original_name=original, pruned_name=pruned, count_tokens=count, tokenizer=tokenizer.name,
        scores=scores, scores_from=source, splitter=split, sealed=default_sealed(doc),
    )
    return dataclasses.replace(built, precision=precision)


def _load_doc(path: str, fmt):
    from iclr_cli.inputs import load_file

    return load_file(path, fmt)[1]


def _load(path: str, fmt):
    return _load_doc(path, fmt).trajectories


def _tokenizer(model: str):
    from iclr_cli.scoring.factory import load_tokenizer

    return load_tokenizer(model)


def _compute_scores(path, trajectories, model, variant, ratio, max_tokens, split):
    from iclr_cli.compress import compress_trajectories
    from iclr_cli.errors import UsageError
    from iclr_cli.pipeline import ScorerConfig, build_engines
    from iclr_cli.policies import parse_variant
    from iclr_cli.render.diffinput import scores_from_results

    parsed = parse_variant(variant)
    if not parsed.needs_scores:
        raise UsageError(f"--score takes --variant iclr or step-only, not {variant!r}")
    config = ScorerConfig.chosen(max_tokens=max_tokens, model=model)
    scorer, tokenizer = build_engines(parsed, config)
    results = compress_trajectories(trajectories, config.settings(parsed, ratio=ratio, splitter=split), scorer, tokenizer)
    return scores_from_results(results), f"--score ({parsed.name}, {scorer.name} scorer)", config.precision


def _emit(built, step, context, as_json, output, console, pager, force=False) -> None:
    from iclr_cli.render import diff_view, diffdata
    from iclr_cli.render.output import Output

    if as_json:
        import orjson

        doc = diffdata.to_json(built, step=step)
        Output(output, force=force).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        return
    views = [(t, diffdata.select(t, step=step, context=context)) for t in built.trajectories]
    diff_view.show(console, built, views, pager=pager)


def _run_diff(a: str, b: str, task, seed, as_json, output, console, pager, force=False) -> None:
    from iclr_cli.render import rundiff, runs
    from iclr_cli.render.output import Output

    side_a, side_b = runs.load_record(a, task=task, seed=seed), runs.load_record(b, task=task, seed=seed)
    data = rundiff.align_runs(side_a, side_b)
    if as_json:
        import orjson

        Output(output, force=force).write_bytes(orjson.dumps(rundiff.to_json(data), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        return
    from iclr_cli.render import rundiff_view

    rundiff_view.show(console, data, pager=pager)
