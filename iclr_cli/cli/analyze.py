"""``iclr analyze``: which reasoning is still needed (the paper's sections 3.3-3.4 and 4.3-4.4).

Three subcommands on any trajectory, with the proxy (or any local causal LM, ``--model``) as
the frozen sensor: ``patch`` (activation patching at every compression boundary), ``probe``
(a linear probe of the boundary hidden states under task-level nested evaluation) and
``externalization`` (where each block's derived state lives, joined with the labels).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from iclr_cli.cli import analyze_options as aopt
from iclr_cli.cli import dataset_options as dopt
from iclr_cli.cli import options as opt

app = typer.Typer(help="Which reasoning is still needed: activation patching, a future-necessity probe and state externalization (paper sections 3.3-3.4, 4.3-4.4).",
                  no_args_is_help=True, add_completion=False)


@app.command("patch")
def patch(
    paths: aopt.Paths = None,
    output: opt.Output = None,
    layers: aopt.Layers = None,
    html: Annotated[Optional[str], typer.Option("--html", help="Also write a self-contained HTML report with the repair curve to this file.", show_default=False)] = None,
    min_kl: Annotated[float, typer.Option("--min-kl", min=0.0, help="Floor on d = KL(P_full || P_del) in bits: boundaries at or below it are not patched (repair over a near-zero d is noise).")] = 1e-3,
    model: opt.Model = "smollm2",
    max_tokens: opt.MaxTokens = None,
    exact: opt.Exact = False,
    elide: opt.Elide = None,
    overflow: opt.Overflow = opt.WINDOW,
    dtype: opt.Dtype = opt.AUTO_DTYPE,
    device: opt.Device = None,
    fmt: opt.Format = None,
    skip_bad_lines: opt.SkipBadLines = False,
    force: opt.Force = False,
    quiet: opt.Quiet = False,
    dataset: dopt.Dataset = None,
    dataset_split: dopt.DatasetSplit = None,
    column: dopt.Column = "messages",
    id_column: dopt.IdColumn = "id",
    task_column: aopt.TaskColumn = None,
) -> None:
    """Activation patching at every compression boundary (paper section 3.4).

    At the request after each step, with earlier reasoning in the history, the sensor reads
    the full history, the history with every earlier step's reasoning deleted (delete-all),
    and for each layer the deleted history with the boundary residual (last token) replaced
    by the full history's. Records (JSONL, one per trajectory, boundary and layer): d =
    KL(P_full || P_del) in bits, Repair = 1 - KL(P_full || P_patch) / d, top-1 agreement.
    The summary table (stderr) gives the mean repair per layer with a bootstrap 95% interval
    and n. A patched run is the boundary token alone on the deleted run's cached keys and
    values: a boundary costs about two scoring passes, not L + 2 forwards.
    """
    from iclr_cli.analysis.patching import boundary_counts, parse_layers, patch_trajectory, summarize
    from iclr_cli.cli.common import interruptible
    from iclr_cli.errors import UsageError
    from iclr_cli.render import analysis_view
    from iclr_cli.render.output import Output

    out = Output(output, quiet=quiet, force=force, inputs=paths or ())
    if html:
        from iclr_cli.jsonio import output_path

        output_path(html, force=force)
    records: list[dict] = []

    def done() -> str:
        return f"interrupted after {len(records)} records"

    with interruptible(out, done):
        sources = aopt.read_sources(paths, dataset, dataset_split, column, id_column, task_column, fmt, skip_bad_lines, out)
        sensor = aopt.build_sensor(model, max_tokens, overflow.value, dtype.value, device, out, exact=exact, elide=elide)
        try:
            chosen = parse_layers(layers, sensor.n_layers)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        with out.stream() as sink, out.progress("patching boundaries", unit="boundaries") as advance:
            for src in sources:
                last = None
                for record in patch_trajectory(sensor, src.trajectory, source=src.file, layers=chosen, min_kl=min_kl):
                    records.append(record)
                    sink.write(out.encode_records([record]))
                    if record["step"] != last:
                        last = record["step"]
                        advance()
    summary = summarize(records)
    counts = boundary_counts(records)
    analysis_view.patch_table(out, summary, counts, sensor.name, sensor.n_layers, min_kl)
    if html:
        from iclr_cli.jsonio import write_output
        from iclr_cli.render import analysis_html

        columns, rows = analysis_view.patch_rows(summary)
        intro = analysis_view.patch_intro(counts, sensor.name, sensor.n_layers, min_kl)
        page = analysis_html.render_page("iclr analyze patch", intro, columns, rows, analysis_html.patch_figures(summary, records))
        write_output(html, page.encode("utf-8"), force=force)
        out.info(f"wrote {html}")


@app.command("probe")
def probe(
    paths: aopt.Paths = None,
    labels_file: aopt.LabelsFile = None,
    label: aopt.LabelSource = None,
    output: opt.Output = None,
    layers: aopt.Layers = None,
    group_by: aopt.GroupBy = aopt.AUTO,
    outer_folds: Annotated[int, typer.Option("--outer-folds", min=2, help="Most outer folds (held-out tasks); fewer when there are fewer tasks.")] = 5,
    inner_folds: Annotated[int, typer.Option("--inner-folds", min=2, help="Most inner folds (on the training tasks) that choose layer, pooling, standardisation, PCA and C.")] = 3,
    seed: aopt.ProbeSeed = 0,
    horizon: aopt.Horizon = 5,
    judge_model: aopt.JudgeModel = None,
    judge_base_url: aopt.JudgeUrl = None,
    judge_api_key_env: aopt.JudgeKeyEnv = None,
    judge_cache: aopt.JudgeCache = None,
    judge_max_tokens: aopt.JudgeMaxTokens = 8,
    model: opt.Model = "smollm2",
    max_tokens: opt.MaxTokens = None,
    exact: opt.Exact = False,
    elide: opt.Elide = None,
    overflow: opt.Overflow = opt.WINDOW,
    dtype: opt.Dtype = opt.AUTO_DTYPE,
    device: opt.Device = None,
    fmt: opt.Format = None,
    skip_bad_lines: opt.SkipBadLines = False,
    force: opt.Force = False,
    quiet: opt.Quiet = False,
    dataset: dopt.Dataset = None,
    dataset_split: dopt.DatasetSplit = None,
    column: dopt.Column = "messages",
    id_column: dopt.IdColumn = "id",
    task_column: aopt.TaskColumn = None,
) -> None:
    """A linear probe of the boundary hidden states that predicts whether the reasoning is
    needed again (paper sections 3.3, 4.3).

    Features: each layer's hidden states at the boundary after every labelled step, pooled
    three ways (boundary token, mean over the step's reasoning tokens, mean over the last 64
    tokens). Labels: --labels FILE.jsonl, --label heuristic, or --label judge. Strict nested
    evaluation by task (--group-by): inner folds on the training tasks choose layer, pooling,
    standardisation, PCA size and C; outer folds score held-out tasks. Reports AUROC, average
    precision and balanced accuracy with bootstrap intervals, n boundaries, tasks and
    positives, and what each outer fold selected; -o writes it all as JSON with every
    boundary's held-out score.
    """
    from iclr_cli.analysis import features as feats
    from iclr_cli.analysis import probe as probing
    from iclr_cli.analysis.patching import parse_layers
    from iclr_cli.cli.common import interruptible
    from iclr_cli.errors import UsageError
    from iclr_cli.render import analysis_view
    from iclr_cli.render.output import Output

    out = Output(output, quiet=quiet, force=force, inputs=paths or ())
    with interruptible(out, lambda: "interrupted before the probe finished"):
        sources = aopt.read_sources(paths, dataset, dataset_split, column, id_column, task_column, fmt, skip_bad_lines, out)
        for src in sources:
            src.group(group_by.value)  # a trajectory without a task fails before the model loads
        labels, label_source = aopt.labels_for(sources, labels_file, label, horizon,
                                               (judge_model, judge_base_url, judge_api_key_env, judge_cache, judge_max_tokens), out)
        if not labels:
            raise UsageError("no boundary has a label (a boundary needs reasoning in its step and a later step)")
        sensor = aopt.build_sensor(model, max_tokens, overflow.value, dtype.value, device, out, exact=exact, elide=elide)
        try:
            chosen = parse_layers(layers, sensor.n_layers)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        with out.progress("reading boundaries", total=len(labels), unit="boundaries") as advance:
            found = feats.extract(sensor, sources, set(labels), layers=chosen, group_by=group_by.value, on_boundary=advance)
        y = [labels[k].value for k in found.keys]
        with out.progress("nested evaluation", unit="outer folds") as advance:
            try:
                result = probing.evaluate(found.x, y, found.groups, outer=outer_folds, inner=inner_folds, seed=seed,
                                          on_fold=lambda _f: advance())
            except ValueError as exc:
                raise UsageError(f"cannot evaluate a probe on these boundaries: {exc}") from None
    caveats = probing.caveats(len(set(found.groups)), result.folds, found.layers, found.pools)
    report = analysis_view.probe_report(found, y, result, label_source, sensor.name, group_by.value, caveats)
    out.write_bytes(analysis_view.json_bytes(report))
    analysis_view.probe_table(out, report)


@app.command("externalization")
def externalization(
    paths: aopt.Paths = None,
    labels_file: aopt.LabelsFile = None,
    label: aopt.LabelSource = None,
    output: opt.Output = None,
    probe_report: Annotated[Optional[str], typer.Option("--probe", help="The JSON of 'iclr analyze probe -o': adds the mean held-out probe score by G.", show_default=False)] = None,
    group_by: aopt.GroupBy = aopt.AUTO,
    horizon: aopt.Horizon = 5,
    judge_model: aopt.JudgeModel = None,
    judge_base_url: aopt.JudgeUrl = None,
    judge_api_key_env: aopt.JudgeKeyEnv = None,
    judge_cache: aopt.JudgeCache = None,
    judge_max_tokens: aopt.JudgeMaxTokens = 8,
    fmt: opt.Format = None,
    skip_bad_lines: opt.SkipBadLines = False,
    force: opt.Force = False,
    quiet: opt.Quiet = False,
    dataset: dopt.Dataset = None,
    dataset_split: dopt.DatasetSplit = None,
    column: dopt.Column = "messages",
    id_column: dopt.IdColumn = "id",
    task_column: aopt.TaskColumn = None,
) -> None:
    """Where each reasoning block's derived state lives (paper sections 3.4, 4.4).

    Per block: the identifiers, paths, numbers, quoted strings and code it introduced (found
    in no earlier part of the history), and at which later step each reached an external
    carrier (an action's arguments, a written file, a tool result). Per step: G = 1 while
    some derived state lives only in reasoning. Records (JSONL, one per step) go to -o or
    stdout. With labels (--labels, --label heuristic or judge) the table on stderr gives the
    future-behaviour rate by G, per task and overall, with 95% intervals. No model is loaded
    (except the judge's endpoint).
    """
    from iclr_cli.analysis import externalization as ext
    from iclr_cli.cli.common import interruptible
    from iclr_cli.render import analysis_view
    from iclr_cli.render.output import Output

    out = Output(output, quiet=quiet, force=force, inputs=paths or ())
    with interruptible(out, lambda: "interrupted before the records were written"):
        sources = aopt.read_sources(paths, dataset, dataset_split, column, id_column, task_column, fmt, skip_bad_lines, out)
        groups = {s.trajectory.id: s.group(group_by.value) for s in sources}
        records = ext.trace_all(sources)
        joined = None
        if labels_file is not None or label is not None:
            labels, label_source = aopt.labels_for(sources, labels_file, label, horizon,
                                                   (judge_model, judge_base_url, judge_api_key_env, judge_cache, judge_max_tokens), out)
            scores = analysis_view.read_probe_scores(probe_report) if probe_report else None
            joined = ext.join(records, labels, groups, scores)
        out.write_records(records)
    analysis_view.externalization_table(out, records, joined, label_source if joined else None, group_by.value)
