"""Draw a plotly figure as inline SVG: the plots of ``iclr report --html`` and ``iclr analyze
patch --html`` without the 4.6 MB plotly.js bundle.

The figures are built with plotly's graph objects (data first: :mod:`iclr_cli.render.report_html`)
and drawn here from ``Figure.to_plotly_json()``, so a page's size follows its content (a few
kilobytes per plot) and it still opens offline: no script, no external reference. Hover text
becomes SVG ``<title>`` elements, which browsers show as tooltips. Drawn: ``scatter`` traces
(``lines``, ``markers``, ``lines+markers``; ``line.dash`` dash/dot; ``marker.symbol`` ``x``;
``fill="toself"`` bands), ``heatmap`` traces (cells coloured on the diff's heat scale,
:data:`iclr_cli.render.diff_view.HEAT`, with a colour bar), horizontal line shapes
(``add_hline``), axis titles, ``dtick`` and ``range``, and the legend. Anything else a
figure may hold is not drawn.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

WIDTH = 820
LEFT, RIGHT, TOP, BOTTOM = 72, 190, 16, 52  # margins in px; the legend sits in the right one
PALETTE = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880")
_DASH = {"dash": "6,4", "dot": "2,3", "dashdot": "6,3,2,3"}


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _title(axis: dict) -> str:
    title = axis.get("title")
    return (title.get("text") or "") if isinstance(title, dict) else (title or "")


def _nums(values) -> list[float]:
    return [float(v) for v in values or () if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


def nice_ticks(lo: float, hi: float, dtick: float | None = None, n: int = 6) -> list[float]:
    """Tick values covering ``lo..hi``: every ``dtick`` when given, else about ``n`` at a step
    of 1, 2 or 5 times a power of ten."""
    if hi <= lo:
        return [lo]
    step = dtick
    if not step:
        raw = (hi - lo) / n
        mag = 10 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt(v: float) -> str:
    if abs(v - round(v)) < 1e-9:
        return f"{int(round(v)):,}"
    return f"{v:.3g}"


class _Axes:
    """Data -> pixel mapping of one plot area."""

    def __init__(self, xr: tuple[float, float], yr: tuple[float, float], height: int):
        self.x0, self.x1, self.y0, self.y1 = LEFT, WIDTH - RIGHT, TOP, height - BOTTOM
        self.xr, self.yr = xr, yr

    def x(self, v: float) -> float:
        lo, hi = self.xr
        return self.x0 + (v - lo) / ((hi - lo) or 1) * (self.x1 - self.x0)

    def y(self, v: float) -> float:
        lo, hi = self.yr
        return self.y1 - (v - lo) / ((hi - lo) or 1) * (self.y1 - self.y0)


def _span(values: Sequence[float], pad: float = 0.05) -> tuple[float, float]:
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    if hi == lo:
        return lo - 1, hi + 1
    d = (hi - lo) * pad
    return lo - d, hi + d


def _ranges(data: list[dict], layout: dict) -> tuple[tuple[float, float], tuple[float, float]]:
    xs: list[float] = []
    ys: list[float] = []
    for t in data:
        if t.get("type") == "heatmap":
            hx, hy = _nums(t.get("x")), _nums(t.get("y"))
            xs += [min(hx) - 0.5, max(hx) + 0.5] if hx else []
            ys += [min(hy) - 0.5, max(hy) + 0.5] if hy else []
        else:
            xs += _nums(t.get("x"))
            ys += _nums(t.get("y"))
    ys += [s["y0"] for s in layout.get("shapes", ()) if isinstance(s.get("y0"), (int, float))]
    heat = any(t.get("type") == "heatmap" for t in data)
    xr = (min(xs), max(xs)) if heat and xs else _span(xs)
    yr = (min(ys), max(ys)) if heat and ys else _span(ys)
    given = layout.get("yaxis", {}).get("range")
    if given and len(given) == 2:
        yr = (float(given[0]), float(given[1]))
    return xr, yr


def _heat_colour(z: float, lo: float, hi: float) -> str:
    from iclr_cli.render.diff_view import heat_colour

    return heat_colour(z, lo, hi)


def _axes_svg(ax: _Axes, layout: dict) -> list[str]:
    out = [f'<rect x="{ax.x0}" y="{ax.y0}" width="{ax.x1 - ax.x0}" height="{ax.y1 - ax.y0}" fill="#fff" stroke="#ccc"/>']
    xa, ya = layout.get("xaxis", {}), layout.get("yaxis", {})
    for v in nice_ticks(*ax.xr, xa.get("dtick")):
        px = ax.x(v)
        out.append(f'<line x1="{px:.1f}" y1="{ax.y0}" x2="{px:.1f}" y2="{ax.y1}" stroke="#eee"/>'
                   f'<text x="{px:.1f}" y="{ax.y1 + 16}" text-anchor="middle">{_fmt(v)}</text>')
    for v in nice_ticks(*ax.yr, ya.get("dtick")):
        py = ax.y(v)
        out.append(f'<line x1="{ax.x0}" y1="{py:.1f}" x2="{ax.x1}" y2="{py:.1f}" stroke="#eee"/>'
                   f'<text x="{ax.x0 - 6}" y="{py + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    mid_x, mid_y = (ax.x0 + ax.x1) / 2, (ax.y0 + ax.y1) / 2
    out.append(f'<text x="{mid_x:.0f}" y="{ax.y1 + 40}" text-anchor="middle">{_esc(_title(xa))}</text>')
    out.append(f'<text transform="translate(16 {mid_y:.0f}) rotate(-90)" text-anchor="middle">{_esc(_title(ya))}</text>')
    for s in layout.get("shapes", ()):
        if s.get("type") == "line" and s.get("y0") == s.get("y1") and isinstance(s.get("y0"), (int, float)):
            line = s.get("line", {})
            py = ax.y(s["y0"])
            out.append(f'<line x1="{ax.x0}" y1="{py:.1f}" x2="{ax.x1}" y2="{py:.1f}" stroke="{_esc(line.get("color", "#888"))}"'
                       f' stroke-dasharray="{_DASH.get(line.get("dash"), "")}"/>')
    return out


def _hover(t: dict, i: int) -> str | None:
    h = t.get("hovertext")
    if isinstance(h, (list, tuple)):
        return str(h[i]) if i < len(h) else None
    return str(h) if h else None


def _scatter_svg(t: dict, ax: _Axes, colour: str) -> list[str]:
    xs, ys = list(t.get("x") or ()), list(t.get("y") or ())
    points = [(i, float(x), float(y)) for i, (x, y) in enumerate(zip(xs, ys)) if x is not None and y is not None]
    mode = t.get("mode", "lines+markers")
    line, marker = t.get("line", {}), t.get("marker", {})
    out: list[str] = []
    path = " ".join(f"{ax.x(x):.1f},{ax.y(y):.1f}" for _, x, y in points)
    name = _esc(t.get("name") or "")
    if t.get("fill") == "toself" and points:
        out.append(f'<polygon points="{path}" fill="{_esc(t.get("fillcolor", colour))}" stroke="none"><title>{name}</title></polygon>')
    elif "lines" in mode and len(points) > 1:
        dash = _DASH.get(line.get("dash"), "")
        width = line.get("width", 2)
        out.append(f'<polyline points="{path}" fill="none" stroke="{_esc(line.get("color", colour))}" stroke-width="{width}"'
                   + (f' stroke-dasharray="{dash}"' if dash else "") + f"><title>{name}</title></polyline>")
    if "markers" in mode:
        fill = _esc(marker.get("color", line.get("color", colour)))
        r = float(marker.get("size", 6)) / 2
        for i, x, y in points:
            px, py = ax.x(x), ax.y(y)
            tip = f"<title>{name}: ({_fmt(x)}, {_fmt(y)})" + (f" {_esc(h)}" if (h := _hover(t, i)) else "") + "</title>"
            if marker.get("symbol") == "x":
                out.append(f'<g stroke="{fill}" stroke-width="2"><line x1="{px - r:.1f}" y1="{py - r:.1f}" x2="{px + r:.1f}" y2="{py + r:.1f}"/>'
                           f'<line x1="{px - r:.1f}" y1="{py + r:.1f}" x2="{px + r:.1f}" y2="{py - r:.1f}"/>{tip}</g>')
            else:
                out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="{r:.1f}" fill="{fill}">{tip}</circle>')
    return out


def _heatmap_svg(t: dict, ax: _Axes, height: int) -> list[str]:
    xs, ys, z = list(t.get("x") or ()), list(t.get("y") or ()), [list(row) for row in t.get("z") or ()]
    values = [v for row in z for v in _nums(row)]
    if not values:
        return []
    lo, hi = min(values), max(values)
    out: list[str] = []
    for j, row in enumerate(z):
        for i, v in enumerate(row):
            if v is None or i >= len(xs) or j >= len(ys):
                continue
            x0, x1 = ax.x(xs[i] - 0.5), ax.x(xs[i] + 0.5)
            y0, y1 = ax.y(ys[j] + 0.5), ax.y(ys[j] - 0.5)
            out.append(f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" fill="{_heat_colour(v, lo, hi)}">'
                       f"<title>x {_fmt(xs[i])}, y {_fmt(ys[j])}: {v:.2f}</title></rect>")
    # the colour bar: the scale's bands from low (bottom) to high, and its title
    from iclr_cli.render.diff_view import HEAT

    bx, top, bottom = WIDTH - RIGHT + 24, TOP + 30, height - BOTTOM
    band = (bottom - top) / len(HEAT)
    for k, colour in enumerate(HEAT):
        out.append(f'<rect x="{bx}" y="{bottom - (k + 1) * band:.1f}" width="14" height="{band:.1f}" fill="{colour}"/>')
    bar = t.get("colorbar", {})
    out.append(f'<text x="{bx}" y="{top - 8}">{_esc(_title(bar))}</text>'
               f'<text x="{bx + 20}" y="{top + 10}">{hi:.2f}</text><text x="{bx + 20}" y="{bottom}">{lo:.2f}</text>')
    return out


def _legend_svg(entries: list[tuple[str, str, bool, bool]], title: str, x: float) -> list[str]:
    """``entries``: ``(name, colour, dashed line, markers only)``, one row each."""
    out = [f'<text x="{x}" y="{TOP + 12}" font-weight="bold">{_esc(title)}</text>'] if title else []
    for k, (name, colour, dashed, dots) in enumerate(entries):
        y = TOP + 30 + 18 * k
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        swatch = (f'<circle cx="{x + 11}" cy="{y - 4}" r="4" fill="{_esc(colour)}"/>' if dots else
                  f'<line x1="{x}" y1="{y - 4}" x2="{x + 22}" y2="{y - 4}" stroke="{_esc(colour)}" stroke-width="3"{dash}/>')
        out.append(f'<g class="legend-entry">{swatch}<text x="{x + 28}" y="{y}">{_esc(name)}</text></g>')
    return out


def render(fig: dict, div_id: str) -> str:
    """``fig`` (``Figure.to_plotly_json()``) as ``<div id=div_id class="plot"><svg>...</svg></div>``."""
    data, layout = list(fig.get("data") or ()), dict(fig.get("layout") or {})
    height = int(layout.get("height") or 420)
    ax = _Axes(*_ranges(data, layout), height)
    body = _axes_svg(ax, layout)
    legend: list[tuple[str, str, bool, bool]] = []
    seen: set[str] = set()
    heat = False
    for n, t in enumerate(data):
        colour = t.get("line", {}).get("color") or t.get("marker", {}).get("color") or PALETTE[n % len(PALETTE)]
        if t.get("type") == "heatmap":
            body += _heatmap_svg(t, ax, height)
            heat = True
            continue
        body += _scatter_svg(t, ax, colour if isinstance(colour, str) else PALETTE[n % len(PALETTE)])
        name, key = t.get("name"), t.get("legendgroup") or t.get("name")
        if name and t.get("showlegend", True) is not False and key not in seen:
            seen.add(key)
            band = t.get("fill") == "toself"
            legend.append((name, t.get("fillcolor") if band else colour, t.get("line", {}).get("dash") == "dash",
                           not band and t.get("mode") == "markers"))
    legend_x = WIDTH - RIGHT + (70 if heat else 14)
    body += _legend_svg(legend, _title(layout.get("legend", {})), legend_x)
    return (f'<div id="{_esc(div_id)}" class="plot"><svg viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" '
            f'font-family="system-ui,sans-serif" font-size="12">' + "".join(body) + "</svg></div>")
