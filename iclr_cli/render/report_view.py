"""Paint the per-variant summary of a replay run as a rich table (``iclr report``)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from iclr_cli.replay.summary import VariantSummary, legend, table_rows


def render(title: str, rows: Sequence[VariantSummary]) -> Table:
    """The summary table: one row per variant, ``none`` first."""
    columns, cells = table_rows(rows)
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right", overflow="fold")
    for row in cells:
        table.add_row(*row)
    return table


def paint(console: Console, title: str, rows: Sequence[VariantSummary], tokenizers: Sequence[str | None] = ()) -> None:
    """Print the table, with a line giving its columns' units (``tokenizers``: the runs'
    ``reasoning_tokenizer``, see :func:`~iclr_cli.replay.summary.legend`)."""
    from iclr_cli.render.diff_view import emit

    def draw(c: Console) -> None:
        c.print(render(f"replay run {title}", rows))
        c.print(legend(tokenizers), style="dim")

    emit(console, draw, pager=False)
