"""The one output sink of every command.

Data (JSONL records, output files) goes to ``-o`` or stdout; everything meant for a person
(summaries, warnings, progress) goes to stderr, so ``iclr score f.jsonl | jq`` stays clean.
``quiet`` silences the person-facing part; rich is imported only when something is shown.

Tables keep their full width when stderr is not a terminal (a log file, a CI job): rich would
otherwise cut them at 80 columns. ``width`` (``--width``) sets the width everywhere.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence

import orjson

from iclr_cli.errors import Interrupted
from iclr_cli.jsonio import open_output, output_path, write_output

FULL_WIDTH = 100_000  # "as wide as the table": rich tables never pad past their own width


class Output:
    """Where a command's results go.

    Args:
        target: output file path, ``-``/``None`` for stdout. Checked at once (see
            :func:`iclr_cli.jsonio.output_path`), so a long run never fails at its end for a
            file it could not write.
        quiet: no summaries, warnings or progress on stderr (errors still print).
        force: replace a read-only target (its mode is kept).
        width: columns for tables on stderr (default: the terminal's, or the table's full
            width when stderr is not a terminal).

    Raises:
        UsageError: for a target that cannot be written (see ``output_path``).
    """

    def __init__(self, target: str | None = None, *, quiet: bool = False, force: bool = False, width: int | None = None):
        self.target = target
        self.quiet = quiet
        self.force = force
        self.width = width
        self._err_console = None
        self._existed = False
        if target not in (None, "-"):
            self._existed = output_path(target, force=force).exists()

    @property
    def to_stdout(self) -> bool:
        return self.target in (None, "-")

    @property
    def console(self):
        """A rich console on stderr (created on first use)."""
        if self._err_console is None:
            from rich.console import Console

            width = self.width
            if width is None and not sys.stderr.isatty():
                width = FULL_WIDTH
            self._err_console = Console(stderr=True, highlight=False, width=width)
        return self._err_console

    def write_bytes(self, data: bytes) -> None:
        """Write a finished output document atomically to the target."""
        write_output(self.target, data, force=self.force)

    def stream(self):
        """Context manager giving a binary file for the command's data: stdout, or a temp file
        renamed over ``target`` only when the block succeeds (nothing half-written)."""
        return open_output(self.target, force=self.force)

    def interrupted(self, done: str) -> Interrupted:
        """The error for Ctrl-C (exit 130): one line saying what was kept.

        ``done`` says how far the command got ("3 of 10 trajectories"). Output to a file is
        all or nothing (written atomically), so the file is as it was; on stdout, what went
        out before the interrupt stays there and is incomplete.
        """
        if self.to_stdout:
            return Interrupted(f"{done}; what went to stdout before the interrupt is incomplete")
        if self._existed:
            return Interrupted(f"{done}; nothing written, {self.target} is as it was")
        return Interrupted(f"{done}; nothing written, {self.target} was not created")

    @staticmethod
    def encode_records(records: Iterable[Mapping]) -> bytes:
        """JSON records, one per line (orjson; non-ASCII kept as UTF-8)."""
        return b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in records)

    def write_records(self, records: Iterable[Mapping]) -> int:
        """Write JSON records, one per line, atomically; returns how many were written."""
        lines = [orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in records]
        write_output(self.target, b"".join(lines), force=self.force)
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
    def throughput(self, description: str, units: Sequence[str], every_s: float = 30.0) -> Iterator:
        """Running totals and rates per second on stderr (unless quiet): a live line on a
        terminal, else one line every ``every_s`` seconds (logs of long cluster jobs).

        Yields a callable ``advance(*amounts)`` taking one amount per unit, in order.
        """
        import time

        if self.quiet:
            yield lambda *amounts: None
            return
        totals = [0] * len(units)
        start = last = time.monotonic()

        def line() -> str:
            elapsed = max(time.monotonic() - start, 1e-9)
            parts = [f"{total:,} {unit} ({total / elapsed:,.1f}/s)" for total, unit in zip(totals, units)]
            return f"{description}: " + ", ".join(parts) + f", {elapsed:,.0f} s"

        if not sys.stderr.isatty():
            def advance(*amounts) -> None:
                nonlocal last
                for i, amount in enumerate(amounts):
                    totals[i] += amount
                if time.monotonic() - last >= every_s:
                    last = time.monotonic()
                    self.info(line())

            yield advance
            return
        from rich.live import Live

        with Live(line(), console=self.console, transient=True, refresh_per_second=2) as live:
            def advance(*amounts) -> None:
                for i, amount in enumerate(amounts):
                    totals[i] += amount
                live.update(line())

            yield advance

    @contextlib.contextmanager
    def progress(self, description: str, total: int | None = None, unit: str = "steps", every_s: float = 30.0) -> Iterator:
        """A progress bar on stderr when it is a terminal; else, so that a long run in CI or a
        log is not silent, one line of ``unit`` done and the rate every ``every_s`` seconds
        (:meth:`throughput`). Nothing when quiet.

        ``total=None`` shows a count without an end (streamed inputs). Yields a callable
        ``advance(n=1)``.
        """
        if self.quiet:
            yield lambda n=1: None
            return
        if not sys.stderr.isatty():
            with self.throughput(description, (unit,), every_s) as tick:
                yield lambda n=1: tick(n)
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
