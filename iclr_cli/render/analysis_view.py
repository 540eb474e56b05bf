"""The stderr tables of ``iclr analyze`` (through the one output sink, :class:`~iclr_cli.render.output.Output`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from iclr_cli.render.output import Output


def fmt_ci(value: float | None, ci: tuple[float, float] | None, digits: int = 3) -> str:
    """``0.512 [0.401, 0.630]`` for tables (``-`` when there is no value). Formatting is this
    layer's job: the analyses compute the interval, the views write it."""
    if value is None:
        return "-"
    if ci is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def patch_rows(summary: Sequence) -> tuple[list[str], list[list[str]]]:
    """Columns and rows of the repair table (one row per layer)."""
    columns = ["layer", "n", "mean repair [95% CI]", "top-1 agreement"]
    rows = [[str(s.layer), str(s.n), fmt_ci(s.repair, s.repair_ci), f"{s.top1:.3f}"] for s in summary]
    return columns, rows


def patch_intro(counts: Mapping[str, int], model: str, n_layers: int, min_kl: float) -> str:
    """One sentence saying what the table covers."""
    return (f"Sensor {model} ({n_layers} layers). {counts['boundaries']} boundaries in {counts['trajectories']} trajectories: "
            f"{counts['patched']} patched, {counts['below_floor']} with d <= {min_kl:g} bits (not patched), "
            f"{counts['skipped']} skipped over the input limit, {counts['windowed']} windowed. "
            "Repair = 1 - KL(P_full || P_patch) / d; the interval is a bootstrap over boundaries.")


def patch_table(out: Output, summary: Sequence, counts: Mapping[str, int], model: str, n_layers: int, min_kl: float) -> None:
    """The repair table and a line of counts on stderr."""
    columns, rows = patch_rows(summary)
    out.table("iclr analyze patch: mean KL repair by patched layer", columns, rows)
    out.info(patch_intro(counts, model, n_layers, min_kl))


def json_bytes(data) -> bytes:
    """An analysis report as indented JSON (orjson; numpy scalars as numbers)."""
    import orjson

    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY)


def _metric(value, ci) -> dict:
    return {"value": value, "ci95": list(ci) if ci else None}


def probe_report(features, y: Sequence[int], result, label_source: str, model: str, group_by: str, caveats: Sequence[str] = ()) -> dict:
    """The probe's result as data (``-o OUT.json``): cohort, metrics with intervals, what
    every outer fold chose (layers and pools by name), each boundary's held-out score and the
    ``caveats`` of the estimate (:func:`iclr_cli.analysis.probe.caveats`, found by the command:
    render does not import analysis)."""
    pools = features.pools

    def chosen(cfg) -> dict | None:
        if cfg is None:
            return None
        return {"layer": features.layers[cfg.layer], "pooling": pools[cfg.pool], "standardize": cfg.scale, "pca": cfg.pca, "C": cfg.c}

    fold_of = {}
    for fold in result.folds:
        for g in fold.held_out:
            fold_of[g] = fold.index
    return {
        "label_source": label_source,
        "model": model,
        "group_by": group_by,
        "n_boundaries": len(y),
        "n_tasks": len(set(features.groups)),
        "n_positives": int(sum(y)),
        "metrics": {name: _metric(*v) for name, v in result.metrics.items()},
        "folds": [
            {"fold": f.index, "held_out": f.held_out, "n": f.n, "positives": f.positives, "selected": chosen(f.selected),
             "inner_auroc": f.inner_auroc, "auroc": f.auroc}
            for f in result.folds
        ],
        "predictions": [
            {"trajectory": t, "step": s, "group": g, "label": int(label), "score": float(score), "fold": fold_of.get(g)}
            for (t, s), g, label, score in zip(features.keys, features.groups, y, result.scores)
        ],
        "skipped": [{"trajectory": t, "step": s, "reason": r} for t, s, r in features.skipped],
        "caveats": list(caveats),
    }


def probe_table(out: Output, report: Mapping) -> None:
    """The probe's metrics and the outer folds' choices on stderr."""
    rows = [[name.replace("_", " "), fmt_ci(m["value"], tuple(m["ci95"]) if m["ci95"] else None)] for name, m in report["metrics"].items()]
    # Short: rich wraps a title to the table's width (two narrow columns here); the label
    # source, which can be a long path, goes in the closing line.
    out.table("probe on held-out tasks", ["metric", "value [95% CI]"], rows)
    folds = []
    for f in report["folds"]:
        sel = f["selected"] or {}
        folds.append([str(f["fold"]), str(len(f["held_out"])), str(f["n"]), str(f["positives"]), str(sel.get("layer", "-")),
                      str(sel.get("pooling", "-")), "yes" if sel.get("standardize") else "no", str(sel.get("pca") or "-"),
                      f"{sel['C']:g}" if sel else "-", fmt_ci(f["inner_auroc"], None), fmt_ci(f["auroc"], None)])
    out.table("what each outer fold selected (on its training tasks only)",
              ["fold", "tasks", "n", "positives", "layer", "pooling", "standardize", "PCA", "C", "inner AUROC", "held-out AUROC"], folds)
    out.info(f"{report['n_boundaries']} boundaries from {report['n_tasks']} tasks ({report['group_by']}), "
             f"{report['n_positives']} positive; labels: {report['label_source']}; sensor {report['model']}; "
             f"{len(report['skipped'])} labelled boundaries without features.")
    for line in report["caveats"]:
        out.warn(line)


def read_probe_scores(path: str) -> dict[tuple[str, int], float]:
    """``(trajectory, step) -> held-out score`` from the JSON of ``iclr analyze probe -o``.

    Raises:
        InputError: the file is not such a report (names the file and the field).
    """
    from iclr_cli.errors import InputError
    from iclr_cli.jsonio import loads, read_input

    try:
        report = loads(read_input(path))
    except ValueError as exc:
        raise InputError(path, f"not JSON: {exc}") from None
    predictions = report.get("predictions") if isinstance(report, dict) else None
    if not isinstance(predictions, list):
        raise InputError(path, "not a report of 'iclr analyze probe -o' (no list of predictions)", field="predictions")
    out = {}
    for i, p in enumerate(predictions):
        if not isinstance(p, dict) or not isinstance(p.get("trajectory"), str) or not isinstance(p.get("step"), int) \
                or not isinstance(p.get("score"), (int, float)):
            raise InputError(path, "each prediction needs trajectory, step and score", field=f"predictions[{i}]")
        out[(p["trajectory"], p["step"])] = float(p["score"])
    return out


def _pct(value: float | None, ci) -> str:
    if value is None:
        return "-"
    text = f"{100 * value:.1f}%"
    return f"{text} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else text


def externalization_table(out: Output, records: Sequence[Mapping], joined, label_source: str | None, group_by: str) -> None:
    """Counts of G, and with labels the future-behaviour rate by G per task and overall."""
    steps = len(records)
    g1 = sum(r["G"] for r in records)
    derived = sum(r["derived"] for r in records)
    carried: dict[str, int] = {}
    for r in records:
        for kind, n in r["externalized"].items():
            carried[kind] = carried.get(kind, 0) + n
    out.info(f"{steps} steps in {len({r['trajectory'] for r in records})} trajectories; G = 1 after {g1} of them; "
             f"{derived} derived items, externalized: " + (", ".join(f"{k} {n}" for k, n in sorted(carried.items())) or "none"))
    if joined is None:
        return
    columns = ["task", "n (G=0 / G=1)", "rate G=1 [95% CI]", "rate G=0 [95% CI]", "difference"]

    def row(r) -> list[str]:
        diff = "-" if r.diff is None else f"{100 * r.diff:+.1f} pts" + (f" [{100 * r.diff_ci[0]:+.1f}, {100 * r.diff_ci[1]:+.1f}]" if r.diff_ci else "")
        return [r.group, f"{r.n[0]} / {r.n[1]}", _pct(r.rate[1], r.ci[1]), _pct(r.rate[0], r.ci[0]), diff]

    rows = [row(r) for r in joined.tasks] + [row(joined.overall)]
    out.table(f"future-behaviour rate by G ({label_source} labels, tasks by {group_by})", columns, rows)
    within = "-" if joined.within_task is None else f"{100 * joined.within_task:+.1f} pts over {joined.within_tasks} task(s) with both"
    out.info(f"within-task difference (mean over tasks): {within}")
    if joined.probe is not None:
        g0, g1s = joined.probe
        shown = " / ".join("-" if v is None else f"{v:.3f}" for v in (g1s, g0))
        out.info(f"mean held-out probe score G=1 / G=0: {shown}")
