"""``iclr report --html``: one self-contained HTML file of a replay run.

The figures are built with plotly's graph objects and drawn as inline SVG
(:mod:`iclr_cli.render.svgplot`), not with the 4.6 MB plotly.js bundle: the file opens with
no network and its size follows its content (tens of kilobytes for a small run). Sections, each left out with a note when the run lacks its data:

1. ``plot-tokens``: input tokens of every agent request over the steps, one line per replay,
   coloured by variant (needs request logs);
2. ``plot-reward``: reward against total (input + output) tokens, one point per replay;
3. ``plot-amplification``: deletion ratio against the change in total tokens relative to the
   ``none`` replay of the same task and seed (trajectory amplification);
4. ``plot-heatmap``: per step (x) and block (y) the block's mean entropy in bits for one
   trajectory, removed blocks marked with a cross.

For a session file (``iclr report FILE --html``) the page holds the ``iclr savings`` table and
``plot-savings``: input tokens per request as recorded and with online write-back.

The figures are built as data (:func:`build_figures`) and only then turned into HTML.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from iclr_cli.errors import IclrError
from iclr_cli.render.diffdata import ScoreMap
from iclr_cli.render.runs import RunRecord, total_tokens
from iclr_cli.replay.summary import VariantSummary, latest, table_rows

if TYPE_CHECKING:
    from iclr_cli.savings.result import SessionResult

_PALETTE = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880")


@dataclass(frozen=True)
class HeatMap:
    """Entropies of one trajectory's blocks: ``z[block][i]`` is block ``block`` of step
    ``steps[i]`` in bits (``None``: no such block, or not scored); ``removed`` lists
    ``(step, block)`` pairs the variant replaced by ``[SKIP]``."""

    title: str
    steps: tuple[int, ...]
    z: tuple[tuple[float | None, ...], ...]
    removed: tuple[tuple[int, int], ...]


def heat_map(title: str, scores: ScoreMap, trajectory: str | None = None) -> HeatMap | None:
    """Build the heat map of ``trajectory`` (default: the first in ``scores``); ``None`` when
    it has no scored block."""
    ids = [t for t, _ in scores]
    if not ids:
        return None
    traj = trajectory or sorted(ids)[0]
    steps = sorted(s for t, s in scores if t == traj and scores[(t, s)].blocks)
    if not steps:
        return None
    height = max(max(scores[(traj, s)].blocks) + 1 for s in steps)
    z = tuple(tuple(_entropy(scores, traj, s, b) for s in steps) for b in range(height))
    removed = tuple((s, b) for s in steps for b, info in sorted(scores[(traj, s)].blocks.items()) if info.selected)
    return HeatMap(title, tuple(steps), z, removed)


def _entropy(scores: ScoreMap, traj: str, step: int, block: int) -> float | None:
    info = scores[(traj, step)].blocks.get(block)
    return info.entropy_bits if info else None


def _step_tick(n: int) -> int:
    """Whole-number ticks, at most about a dozen of them."""
    return max(1, -(-n // 12))


def _pairs(records: Sequence[dict], baseline: str = "none") -> list[tuple[dict, dict]]:
    """``(record, baseline record of the same task and seed)``, with the pairing rules of
    :mod:`iclr_cli.replay.summary`: the last record of each key wins, ``error`` runs are out."""
    by_key = {k: r for k, r in latest(records).items() if r.get("status") != "error"}
    base = {(t, s): r for (t, v, s), r in by_key.items() if v == baseline}
    return [(r, base[(t, s)]) for (t, v, s), r in by_key.items() if v != baseline and (t, s) in base]


def _colours(runs: Sequence[RunRecord]) -> dict[str, str]:
    variants: list[str] = []
    for r in runs:
        if r.record["variant"] not in variants:
            variants.append(r.record["variant"])
    return {v: _PALETTE[i % len(_PALETTE)] for i, v in enumerate(variants)}


def build_figures(runs: Sequence[RunRecord], heat: HeatMap | None) -> list[tuple[str, str, object | str]]:
    """``(div id, title, plotly Figure or a note saying why it is missing)`` per section.

    Raises:
        IclrError: when plotly is not installed (``pip install 'iclr-cli[report]'``).
    """
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise IclrError("iclr report --html needs plotly: pip install 'iclr-cli[report]'") from None
    colours = _colours(runs)
    layout = dict(template="plotly_white", height=420, margin=dict(l=60, r=20, t=40, b=50), legend=dict(title="variant"))
    out: list[tuple[str, str, object | str]] = []

    logged = [r for r in runs if r.usage]
    if logged:
        longest = max(len(r.usage) for r in logged)  # type: ignore[arg-type]
        fig = go.Figure(layout=dict(layout, xaxis=dict(title="step (agent request)", dtick=_step_tick(longest)), yaxis_title="input tokens per request"))
        seen: set[str] = set()
        for r in logged:
            v = r.record["variant"]
            fig.add_trace(go.Scatter(
                x=[u.step for u in r.usage], y=[u.input_tokens for u in r.usage], mode="lines+markers",
                name=v, legendgroup=v, showlegend=v not in seen, line=dict(color=colours[v]), hovertext=r.label,
            ))
            seen.add(v)
        out.append(("plot-tokens", "Input tokens per request over the steps", fig))
    else:
        out.append(("plot-tokens", "Input tokens per request over the steps", "no request logs in this run"))

    fig = go.Figure(layout=dict(layout, xaxis_title="total tokens (input + output)", yaxis_title="reward"))
    for v, colour in colours.items():
        mine = [r for r in runs if r.record["variant"] == v and total_tokens(r.record) is not None and r.record.get("reward") is not None]
        if mine:
            fig.add_trace(go.Scatter(
                x=[total_tokens(r.record) for r in mine], y=[r.record["reward"] for r in mine], mode="markers",
                name=v, marker=dict(color=colour, size=10), hovertext=[r.label for r in mine],
            ))
    out.append(("plot-reward", "Reward against total tokens", fig if fig.data else "no replay reports both reward and tokens"))

    fig = go.Figure(layout=dict(layout, xaxis_title="deletion ratio (reasoning tokens removed / generated)", yaxis_title="change in total tokens vs none (%)"))
    points: dict[str, list[tuple[float, float, str]]] = {}
    for r, base in _pairs([x.record for x in runs]):
        t, b = total_tokens(r), total_tokens(base)
        gen, rem = r.get("reasoning_tokens_generated"), r.get("reasoning_tokens_removed")
        if t is None or not b or not gen or rem is None:
            continue
        points.setdefault(r["variant"], []).append((rem / gen, 100.0 * (t - b) / b, f"{r['task']}/seed {r['seed']}"))
    for v, pts in points.items():
        fig.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers", name=v, marker=dict(color=colours[v], size=10), hovertext=[p[2] for p in pts]))
    fig.add_hline(y=0, line_dash="dot", line_color="#888")
    out.append(("plot-amplification", "Deletion ratio against the change in total tokens (trajectory amplification)", fig if fig.data else "no replay has a 'none' replay of the same task and seed to compare with"))

    if heat is not None:
        fig = go.Figure(layout=dict(layout, xaxis=dict(title="step", dtick=_step_tick(len(heat.steps))), yaxis=dict(title="block", dtick=_step_tick(len(heat.z))), legend=dict()))
        fig.add_trace(go.Heatmap(x=list(heat.steps), y=list(range(len(heat.z))), z=[list(row) for row in heat.z], colorscale="RdYlBu_r", colorbar=dict(title="bits"), hoverongaps=False, name="entropy"))
        if heat.removed:
            fig.add_trace(go.Scatter(x=[s for s, _ in heat.removed], y=[b for _, b in heat.removed], mode="markers", marker=dict(symbol="x", color="black", size=8), name="removed"))
        out.append(("plot-heatmap", f"Block entropy per step: {heat.title}", fig))
    else:
        out.append(("plot-heatmap", "Block entropy per step", "no scored trajectory in this run"))
    return out


def summary_table(rows: Sequence[VariantSummary]) -> str:
    """The per-variant summary as an HTML table (the cells of the terminal table)."""
    return html_table(*table_rows(rows))


def html_table(columns: Sequence[str], cells: Sequence[Sequence[str]]) -> str:
    """A table of text cells (escaped), first column left-aligned."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in cells)
    return f"<table class=\"summary\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def savings_figures(sessions: Sequence[SessionResult]) -> list[tuple[str, str, object | str]]:
    """``iclr report FILE --html``: input tokens of every request of each session, as recorded
    (solid) and with online write-back (dashed), as ``iclr savings`` estimates them.

    Raises:
        IclrError: when plotly is not installed (``pip install 'iclr-cli[report]'``).
    """
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise IclrError("iclr report --html needs plotly: pip install 'iclr-cli[report]'") from None
    heading = "Input tokens per request, as recorded and with write-back (static estimate)"
    with_requests = [s for s in sessions if s.estimate.requests]
    if not with_requests:
        return [("plot-savings", heading, "no session with a request")]
    longest = max(len(s.estimate.requests) for s in with_requests)
    fig = go.Figure(layout=dict(template="plotly_white", height=420, margin=dict(l=60, r=20, t=40, b=50),
                                xaxis=dict(title="request (in order)", dtick=_step_tick(longest)), yaxis_title="input tokens", legend=dict(title="session")))
    for i, s in enumerate(with_requests):
        colour = _PALETTE[i % len(_PALETTE)]
        x = list(range(1, len(s.estimate.requests) + 1))
        hover = [f"{s.id}: request {n}, answer is step {r.step}" for n, r in zip(x, s.estimate.requests)]
        fig.add_trace(go.Scatter(x=x, y=[round(r.input) for r in s.estimate.requests], mode="lines+markers", name=f"{s.id} as recorded",
                                 line=dict(color=colour), hovertext=hover))
        fig.add_trace(go.Scatter(x=x, y=[round(r.input_after) for r in s.estimate.requests], mode="lines+markers", name=f"{s.id} with write-back",
                                 line=dict(color=colour, dash="dash"), hovertext=hover))
    return [("plot-savings", heading, fig)]


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table.summary{border-collapse:collapse;font-size:14px}table.summary td,table.summary th{border:1px solid #ccc;padding:4px 8px;text-align:right}
table.summary td:first-child,table.summary th:first-child{text-align:left}section{margin-top:2em}p.note{color:#777;font-style:italic}
div.plot svg{max-width:100%;height:auto}"""


def render_html(title: str, rows: Sequence[VariantSummary], figures: Sequence[tuple[str, str, object | str]]) -> str:
    """The whole page: title, summary table, one section per figure (inline SVG)."""
    return render_page(title, "Summary per variant", summary_table(rows), figures)


def render_page(title: str, heading: str, table: str, figures: Sequence[tuple[str, str, object | str]], notes: Sequence[str] = ()) -> str:
    """A page: title, a summary section (``heading``, the HTML ``table`` and ``notes`` under
    it), then one section per figure (inline SVG)."""
    parts = [
        "<!DOCTYPE html>",
        f"<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<section id=\"summary\"><h2>{html.escape(heading)}</h2>",
        table,
        *(f"<p class=\"note\">{html.escape(n)}</p>" for n in notes),
        "</section>",
    ]
    parts.extend(figure_sections(figures))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def figure_sections(figures: Sequence[tuple[str, str, object | str]]) -> list[str]:
    """One ``<section>`` per ``(div_id, heading, figure)``: a plotly figure drawn as inline SVG
    (:mod:`iclr_cli.render.svgplot`: no script, so the page opens offline and its size follows
    its content) or, for a string, a note in its place."""
    from iclr_cli.render import svgplot

    parts: list[str] = []
    for div_id, heading, fig in figures:
        parts.append(f"<section id=\"section-{div_id}\"><h2>{html.escape(heading)}</h2>")
        if isinstance(fig, str):
            parts.append(f"<p class=\"note\">{html.escape(fig)}</p>")
        else:
            parts.append(svgplot.render(fig.to_plotly_json(), div_id))  # type: ignore[attr-defined]
        parts.append("</section>")
    return parts
