"""Paint a :class:`~iclr_cli.render.rundiff.RunDiff`: both runs' headers, the first divergent
step, then one table row per step (actions side by side, tokens, running difference).

Rows after the first divergence are marked ``!`` when the actions differ; plain text reads
the same without colours.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from iclr_cli.render.rundiff import RunDiff, RunSide


def _n(value) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else f"{value:.3g}"


def _signed(value: int | None) -> str:
    return "-" if value is None else f"{value:+,}"


def _clip(text: str, limit: int = 240) -> str:
    """At most ``limit`` characters of a folded action (the JSON output keeps it whole)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _header(name: str, side: RunSide) -> Text:
    text = Text(f"{name}: ", style="bold")
    text.append(side.label)
    text.append(f"  reward {_n(side.reward)} · {side.status or '?'} · {_n(side.requests)} requests · {_n(side.input_tokens)} in / {_n(side.output_tokens)} out tokens", style="dim")
    return text


def render(diff: RunDiff) -> Group:
    """The whole run diff as one renderable."""
    parts: list = [_header("A", diff.a), _header("B", diff.b)]
    if not diff.same_task:
        parts.append(Text(f"warning: different tasks ({diff.a.task} vs {diff.b.task})", style="yellow"))
    if diff.first_divergence is None:
        parts.append(Text("actions identical at every step", style="green"))
    else:
        row = diff.rows[diff.first_divergence]
        first = Text(f"first divergent action: step {row.step}", style="bold red")
        first.append(f"\n  A: {_clip(row.action_a) if row.action_a is not None else '(run ended)'}")
        first.append(f"\n  B: {_clip(row.action_b) if row.action_b is not None else '(run ended)'}")
        parts.append(first)
    table = Table(show_edge=False, pad_edge=False, header_style="bold", expand=True)
    table.add_column("step", justify="right", no_wrap=True, min_width=4)
    table.add_column("", no_wrap=True, min_width=1)
    table.add_column("action A", ratio=1, overflow="ellipsis", no_wrap=True)
    table.add_column("action B", ratio=1, overflow="ellipsis", no_wrap=True)
    for name in ("A in/out", "B in/out", "B-A running"):
        table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    for row in diff.rows:
        mark = "" if row.same else "!"
        style = "" if row.same else "yellow"
        running = Text(_signed(row.running_diff), style="red" if (row.running_diff or 0) > 0 else "green" if (row.running_diff or 0) < 0 else "")
        table.add_row(
            str(row.step),
            Text(mark, style="bold red"),
            Text(row.action_a if row.action_a is not None else "(ended)", style=style),
            Text(row.action_b if row.action_b is not None else "(ended)", style=style),
            f"{_n(row.input_a)}/{_n(row.output_a)}",
            f"{_n(row.input_b)}/{_n(row.output_b)}",
            running,
        )
    parts.append(table)
    return Group(*parts)


def show(console: Console, diff: RunDiff, *, pager: bool = True) -> None:
    """Print through :func:`iclr_cli.render.diff_view.emit` (pager, plain text)."""
    from iclr_cli.render.diff_view import emit

    emit(console, lambda c: c.print(render(diff)), pager=pager)
