"""``iclr analyze patch --html``: one self-contained HTML page with the patching curve (plotly).

The page holds the summary table (mean repair per layer with its bootstrap 95% interval and
n, top-1 agreement) and two plots: mean repair against the patched layer with the interval
as a band (the paper's Figure/Table 13 curve), with the per-boundary curves faint behind it;
and top-1 agreement against the layer. The figures are drawn as inline SVG, so the file opens
with no network, as ``iclr report --html`` does (:mod:`iclr_cli.render.report_html`).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from iclr_cli.errors import IclrError
from iclr_cli.render.report_html import _CSS, figure_sections


def patch_figures(summary: Sequence, records: Sequence[dict]) -> list[tuple[str, str, object | str]]:
    """``(div id, title, figure or note)`` for the repair curve and the top-1 agreement.

    ``summary`` holds :class:`~iclr_cli.analysis.patching.LayerSummary` rows.

    Raises:
        IclrError: when plotly is not installed (``pip install 'iclr-cli[report]'``).
    """
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise IclrError("iclr analyze patch --html needs plotly: pip install 'iclr-cli[report]'") from None
    if not summary:
        note = "no boundary had d = KL(P_full || P_del) above the floor, so nothing was patched"
        return [("plot-repair", "Repair by layer", note), ("plot-top1", "Top-1 agreement by layer", note)]
    layout = dict(template="plotly_white", height=440, margin=dict(l=60, r=20, t=40, b=50))
    layers = [s.layer for s in summary]
    fig = go.Figure(layout=dict(layout, xaxis_title="patched layer (decoder layer output, 0-based)",
                                yaxis_title="Repair = 1 - KL(P_full || P_patch) / d"))
    curves: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for r in records:
        if r.get("layer") is not None:
            curves.setdefault((r["trajectory"], r["step"]), []).append((r["layer"], r["repair"]))
    for (traj, step), points in curves.items():
        points.sort()
        fig.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines",
                                 line=dict(color="rgba(99,110,250,0.15)", width=1), showlegend=False,
                                 hovertext=f"{traj} step {step}", hoverinfo="text"))
    low = [s.repair_ci[0] if s.repair_ci else s.repair for s in summary]
    high = [s.repair_ci[1] if s.repair_ci else s.repair for s in summary]
    fig.add_trace(go.Scatter(x=layers + layers[::-1], y=high + low[::-1], fill="toself", fillcolor="rgba(239,85,59,0.2)",
                             line=dict(color="rgba(0,0,0,0)"), name="95% bootstrap interval", hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=layers, y=[s.repair for s in summary], mode="lines+markers", line=dict(color="#ef553b"),
                             name="mean repair", hovertext=[f"n = {s.n}" for s in summary]))
    out: list[tuple[str, str, object | str]] = [("plot-repair", "Mean KL repair by patched layer", fig)]
    fig = go.Figure(layout=dict(layout, xaxis_title="patched layer", yaxis=dict(title="top-1 agreement with P_full", range=[0, 1.05])))
    fig.add_trace(go.Scatter(x=layers, y=[s.top1 for s in summary], mode="lines+markers", line=dict(color="#00cc96"), name="top-1 agreement"))
    out.append(("plot-top1", "Top-1 agreement of the patched run with the full history", fig))
    return out


def render_page(title: str, intro: str, columns: Sequence[str], rows: Sequence[Sequence[object]],
                figures: Sequence[tuple[str, str, object | str]]) -> str:
    """The whole page: title, an introductory paragraph, the table, one section per figure."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    parts = [
        "<!DOCTYPE html>",
        f"<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{html.escape(intro)}</p>",
        f"<section id=\"summary\"><table class=\"summary\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>",
    ]
    parts.extend(figure_sections(figures))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
