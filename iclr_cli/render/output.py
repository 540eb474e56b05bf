"""The one output sink of every command.

Data (JSONL records, output files) goes to ``-o`` or stdout; everything meant for a person
(summaries, warnings, progress) goes to stderr, so ``iclr score f.jsonl | jq`` stays clean.
``quiet`` silences the person-facing part; rich is imported only when something is shown.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence

import orjson

from iclr_cli.jsonio import open_output, write_output


class Output:
    """Where a command's results go.

    Args:
        target: output file path, ``-``/``None`` for stdout.
        quiet: no summaries, warnings or progress on stderr (errors still print).
    """

    def __init__(self, target: str | None = None, *, quiet: bool = False):
        self.target = target
        self.quiet = quiet
        self._err_console = None

    @property
    def console(self):
        """A rich console on stderr (created on first use)."""
        if self._err_console is None:
            from rich.console import Console

            self._err_console = Console(stderr=True, highlight=False)
        return self._err_console

    def write_bytes(self, data: bytes) -> None:
        """Write a finished output document atomically to the target."""
        write_output(self.target, data)

    def stream(self):
        """Context manager giving a binary file for the command's data: stdout, or a temp file
        renamed over ``target`` only when the block succeeds (nothing half-written)."""
        return open_output(self.target)

    @staticmethod
    def encode_records(records: Iterable[Mapping]) -> bytes:
        """JSON records, one per line (orjson; non-ASCII kept as UTF-8)."""
        return b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in records)

    def write_records(self, records: Iterable[Mapping]) -> int:
        """Write JSON records, one per line, atomically; returns how many were written."""
        lines = [orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in records]
        write_output(self.target, b"".join(lines))
        return len(lines)

    def warn(self, message: str) -> None:
        """One warning line on stderr (unless quiet)."""
        if not self.quiet:
            from rich.markup import escape

            # escaped: field names such as ``content[0]`` and quoted text are not markup
            self.console.print(f"[yellow]warning:[/] {escape(message)}", markup=True, soft_wrap=True)

    def info(self, message: str) -> None:
        """One informational line on stderr (unless quiet)."""
        if not self.quiet:
            self.console.print(message, markup=False, soft_wrap=True)

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        """A table on stderr (unless quiet)."""
        if self.quiet:
            return
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for i, col in enumerate(columns):
            table.add_column(col, justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*(str(c) for c in row))
        self.console.print(table)

    @contextlib.contextmanager
    def progress(self, description: str, total: int | None = None) -> Iterator:
        """A progress bar on stderr, shown only on a terminal and when not quiet.

        ``total=None`` shows a count without an end (streamed inputs). Yields a callable
        ``advance(n=1)``.
        """
        if self.quiet or not sys.stderr.isatty():
            yield lambda n=1: None
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        ) as bar:
            task = bar.add_task(description, total=total)
            yield lambda n=1: bar.advance(task, n)
