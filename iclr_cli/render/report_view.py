"""Paint the per-variant summary of a replay run as a rich table (``iclr report``)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from iclr_cli.replay.summary import VariantSummary, table_rows

NOTE = (
    "W/T/L: reward against 'none' on the same task and seed; (±%): change against 'none' on those runs; "
    "deleted: reasoning tokens removed / generated; amplification: change in total tokens / reasoning tokens deleted "
    "(negative: saved; below -1: each deleted token saved more than itself)."
)


def render(title: str, rows: Sequence[VariantSummary]) -> Table:
    """The summary table: one row per variant, ``none`` first."""
    columns, cells = table_rows(rows)
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right", overflow="fold")
    for row in cells:
        table.add_row(*row)
    return table


def paint(console: Console, title: str, rows: Sequence[VariantSummary]) -> None:
    """Print the table, with a line explaining its columns."""
    from iclr_cli.render.diff_view import emit

    def draw(c: Console) -> None:
        c.print(render(f"replay run {title}", rows))
        c.print(NOTE, style="dim")

    emit(console, draw, pager=False)
