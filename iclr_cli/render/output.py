"""The one output sink of every command.

Data (JSONL records, output files) goes to ``-o`` or stdout; everything meant for a person
(summaries, warnings, progress) goes to stderr, so ``iclr score f.jsonl | jq`` stays clean.
``quiet`` silences the person-facing part; rich is imported only when something is shown.

Tables keep their full width when stderr is not a terminal (a log file, a CI job): rich would
otherwise cut them at 80 columns (a path, a label). ``width`` (``--width``) sets the width
everywhere.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence

import orjson

from iclr_cli.errors import Interrupted
from iclr_cli.jsonio import open_output, output_path, refuse_output_over_input, write_output

FULL_WIDTH = 100_000  # "as wide as the table": rich tables never pad past their own width
PROSE_WIDTH = 80
"""Most columns of a cell in a table's last column (:meth:`Output.table` ``wrap_last``): the
run summary's prose values (the scorer profile) wrap there instead of making the table as wide
as its longest sentence and pushing every number to the far right."""


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
        inputs: the command's input files: a target that is one of them is refused
            (:func:`iclr_cli.jsonio.refuse_output_over_input`; ``in_place`` names the option
            that asks for it, where the command has one).

    Raises:
        UsageError: for a target that cannot be written (see ``output_path``), or that is
            one of ``inputs``.
    """

    def __init__(self, target: str | None = None, *, quiet: bool = False, force: bool = False, width: int | None = None,
                 inputs: Sequence[str] = (), in_place: str | None = None):
        self.target = target
        self.quiet = quiet
        self.force = force
        self.width = width
        self._err_console = None
        self._existed = False
        refuse_output_over_input(target, inputs, in_place=in_place)
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

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[object]], *, wrap_last: bool = False) -> None:
        """A table on stderr (unless quiet); ``wrap_last``: cells of the last column wrap at
        :data:`PROSE_WIDTH` columns (a label/value summary with sentences among its values)."""
        if self.quiet:
            return
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for i, col in enumerate(columns):
            last = wrap_last and i == len(columns) - 1
            table.add_column(col, justify="left" if i == 0 else "right", max_width=PROSE_WIDTH if last else None)
        for row in rows:
            table.add_row(*(str(c) for c in row))
        self.console.print(table)

    @contextlib.contextmanager
    def tracker(self, description: str, *, rows_total: int | None = None, dataset: bool = False, every_s: float = 30.0) -> Iterator:
        """Progress of a scoring run on stderr (unless quiet): steps and tokens done of those
        known, rows for a dataset run (``dataset``; ``rows_total`` when counted), and the time
        left. A bar on a terminal; else a line every ``every_s`` seconds, from a timer, so a
        long step does not leave the log silent (:mod:`iclr_cli.render.progress`).

        Yields a :class:`~iclr_cli.render.progress.Tracker` to report work to.
        """
        from iclr_cli.render.progress import Tracker

        tracker = Tracker(description, rows_total=rows_total, dataset=dataset)
        with self._drawn(tracker, every_s):
            yield tracker

    @contextlib.contextmanager
    def progress(self, description: str, total: int | None = None, unit: str = "steps", every_s: float = 30.0) -> Iterator:
        """Progress of ``total`` whole units (``None``: unknown) on stderr, drawn as
        :meth:`tracker` draws it. Yields a callable ``advance(n=1)``."""
        from iclr_cli.render.progress import Ticker

        ticker = Ticker(description, total, unit)
        with self._drawn(ticker, every_s):
            yield ticker.advance

    @contextlib.contextmanager
    def _drawn(self, source, every_s: float) -> Iterator[None]:
        """Draw ``source`` (``line()``, ``fraction()``) while the block runs."""
        if self.quiet:
            yield
            return
        if not sys.stderr.isatty():
            from iclr_cli.render.progress import Timer

            timer = Timer(source, self.info, every_s).start()
            try:
                yield
            except BaseException:
                timer.stop(final=False)
                raise
            timer.stop()
            return
        from rich.live import Live

        from iclr_cli.render.progress import Bar

        with Live(Bar(source), console=self.console, transient=True, refresh_per_second=2):
            yield
