"""Paint the per-variant summary of a replay run as a rich table (``iclr report``)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from iclr_cli.render.report_html import SUMMARY_COLUMNS, summary_cells
from iclr_cli.render.runsummary import VariantSummary


def render(title: str, rows: Sequence[VariantSummary]) -> Table:
    """The summary table: one row per variant, ``none`` first; '-' where unknown."""
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(SUMMARY_COLUMNS):
        table.add_column(name, justify="left" if i == 0 else "right", overflow="fold")
    for row in rows:
        table.add_row(*summary_cells(row))
    return table


def paint(console: Console, title: str, rows: Sequence[VariantSummary]) -> None:
    """Print the table, with a line explaining the Δ columns and amplification."""
    from iclr_cli.render.diff_view import emit

    def draw(c: Console) -> None:
        c.print(render(f"replay run {title}", rows))
        c.print(NOTE, style="dim")

    emit(console, draw, pager=False)


NOTE = "Δ: change against 'none' on the same task and seed; amplification: Δ total tokens / reasoning tokens deleted (below -1: each deleted token saved more than itself)."
