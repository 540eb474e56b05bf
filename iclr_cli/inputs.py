"""Input files, read and recognised: their bytes (decoded, decompressed), the format adapter
that reads them, and the checks made before any work (JSON syntax, a session database that
cannot be written back). The first stage of the pipeline (:mod:`iclr_cli.pipeline`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from iclr_cli.compression import Compression
from iclr_cli.errors import InputError, UsageError
from iclr_cli.formats import registry
from iclr_cli.formats.base import Document, FormatAdapter
from iclr_cli.formats.reading import UNEXPECTED, unexpected_shape
from iclr_cli.jsonio import StoredInput, TextEncoding, output_encoder, read_input, read_input_stored

T = TypeVar("T")


@dataclass
class Input:
    """One input file: its bytes (UTF-8), the adapter that reads them, the encoding the
    file was stored in when it is UTF-16 or UTF-32 with a byte order mark, and its
    ``compression`` when it was gzip or zstd (:mod:`iclr_cli.compression`). ``chosen`` says
    why that adapter was chosen when another one could read the file too (``None``
    otherwise, and with ``--format``): the command prints it with the summary (docs/FORMAT.md,
    "How a file's format is chosen")."""

    path: str
    adapter: FormatAdapter
    data: bytes
    chosen: str | None = None
    encoding: TextEncoding | None = None
    forced: bool = False  # the adapter was named with --format (registry.forced_error)
    compression: Compression | None = None

    def output_encoder(self):
        """``chunk -> bytes`` for outputs written in this file's format: the file's own
        encoding and byte order mark (:func:`iclr_cli.jsonio.output_encoder`)."""
        return output_encoder(self.encoding)

    def output_stream(self, fh, target: str | None, *, in_place: bool = False):
        """Context manager: a binary file writing into ``fh``, compressed as
        :func:`iclr_cli.compression.for_output` says for the output ``target`` (``fh`` itself
        when plain; :func:`iclr_cli.compression.writer`), for outputs written in this file's
        format (``prune``)."""
        from iclr_cli.compression import for_output, writer

        return writer(fh, for_output(target, self.compression, in_place=in_place))

    def require_writable(self, command: str) -> None:
        """Refuse, before any work, to write ``command``'s output in the format of a session
        database (:mod:`iclr_cli.formats.database`): iclr reads those and never writes one.

        Raises:
            InputError: naming the file and the agent's export command (the adapter's
            ``export_hint``) that gives a file ``command`` can write.
        """
        from iclr_cli.formats.database import is_database

        if is_database(self.data) and getattr(self.adapter, "tables", ()):
            hint = getattr(self.adapter, "export_hint", "") or "export the session to a file"
            raise InputError(self.path, f"a session database ({self.adapter.name}): {command} writes a file in its input's format and never writes a database (score and savings read it as it is); {hint}, and {command} that file")

    def check_syntax(self, *, skip_bad_lines: bool) -> None:
        """Find a JSON syntax error (a truncated file, a cut line) before the proxy model loads,
        with the error the reader would give later: a whole JSON document must parse, and so
        must every line of a JSONL file unless ``skip_bad_lines``. A session database and a
        file that parses whole pass at once.

        Raises:
            InputError: naming the file and the line (and column) of the first syntax error.
        """
        from iclr_cli.formats.database import is_database
        from iclr_cli.formats.reading import parse_document, spread_document, try_document
        from iclr_cli.jsonl import iter_jsonl

        if is_database(self.data) or try_document(self.data) is not None:
            return
        if spread_document(self.data):
            parse_document(self.data, self.path)
        elif not skip_bad_lines:
            for _ in iter_jsonl(self.data, self.path, live=True):  # a line still being written is read later, with a warning
                pass

    def documents(self, *, skip_bad_lines: bool, chunk_size: int = 256) -> Iterator[Document]:
        """The file's documents: several chunks for adapters that stream (one trajectory per
        line), else the whole file as one document.

        Raises:
            InputError: naming the file, line and field of the first bad record; after the
            last document, when the file held no step at all.
        """
        from iclr_cli.formats import forced

        if self.forced:  # before any work: another format's file read as this one
            forced.check_unlike(self.adapter, self.data, self.path, skip_bad_lines=skip_bad_lines)
        chunks = getattr(self.adapter, "load_chunks", None)
        reasoning = 0
        try:
            if chunks is not None:
                docs = chunks(self.data, self.path, skip_bad_lines=skip_bad_lines, chunk_size=chunk_size)
            else:
                docs = iter([self.adapter.load(self.data, self.path, skip_bad_lines=skip_bad_lines)])
            steps = trajectories = 0
            held = None  # history on the server (Responses previous_response_id)
            for doc in docs:
                steps += sum(len(t.steps) for t in doc.trajectories)
                trajectories += len(doc.trajectories)
                held = held or next((t.meta["server_history"] for t in doc.trajectories if t.meta.get("server_history")), None)
                if self.forced:
                    reasoning += forced.Reading.of([doc]).reasoning
                yield doc
            # inside the try: a file of another agent read with --format holds no step, and is
            # told what it looks like rather than that it is an empty file of this format
            registry.require_steps(self.adapter, self.path, steps, trajectories, held)
        except InputError as exc:
            raise (registry.forced_error(self.adapter, self.data, self.path, exc) if self.forced else exc) from None
        except UNEXPECTED as exc:
            raise unexpected_shape(exc, self.path, self.adapter.name) from exc
        if self.forced:  # nothing was scored: say where the reasoning is, if another format finds it
            forced.check_nothing(self.adapter, self.data, self.path, reasoning, skip_bad_lines=skip_bad_lines)


def with_last(items: Iterable[T]) -> Iterator[tuple[T, bool]]:
    """``(item, is_last)`` pairs, reading one item ahead: a chunked file's progress knows its
    totals are final once the last chunk is read (the next chunk is parsed before the current
    one is scored; a bad line there is reported that much earlier)."""
    it = iter(items)
    try:
        current = next(it)
    except StopIteration:
        return
    for following in it:
        yield current, False
        current = following
    yield current, True


def open_inputs(paths: Sequence[str], fmt: str | None) -> list[Input]:
    """Read every input (``-`` is stdin, at most once; gzip and zstd files decompressed,
    :func:`iclr_cli.jsonio.read_input_stored`) and pick its adapter.

    Raises:
        InputError: for a file that cannot be read or is not a known format.
        UsageError: for ``-`` given twice or an unknown ``--format``.
    """
    if sum(p == "-" for p in paths) > 1:
        raise UsageError("standard input ('-') can be read only once")
    return [input_of(path, read_input_stored(path), fmt) for path in paths]


def input_of(path: str, stored: StoredInput, fmt: str | None) -> Input:
    """The :class:`Input` of a file already read (:func:`iclr_cli.jsonio.read_input_stored`):
    the adapter ``fmt`` names, else the one that recognises it.

    Raises:
        InputError: when no adapter recognises it (:func:`iclr_cli.formats.registry.detect_why`).
        UsageError: for an unknown ``fmt``.
    """
    if fmt:
        return Input(path, registry.get(fmt), stored.data, encoding=stored.encoding, forced=True, compression=stored.compression)
    found = registry.detect_why(stored.data, path)
    return Input(path, found.adapter, stored.data, found.note(path), stored.encoding, compression=stored.compression)


def load_file(path: str, fmt: str | None = None, *, skip_bad_lines: bool = False, allow_empty: bool = False) -> tuple[FormatAdapter, Document]:
    """Read ``path`` (``-`` for stdin) with the named adapter or the detected one.
    ``allow_empty`` accepts a file with no step (a replay run that ended before its first
    turn); user input never gets it.

    Raises:
        InputError: for an unreadable or unknown file, a bad record, or one with no step.
    """
    from iclr_cli.formats import forced

    data = read_input(path)
    adapter = registry.get(fmt) if fmt else registry.detect(data, path)
    if fmt:
        forced.check_unlike(adapter, data, path, skip_bad_lines=skip_bad_lines)
    try:
        doc = adapter.load(data, path, skip_bad_lines=skip_bad_lines)
        if not allow_empty:
            registry.require_steps(adapter, path, sum(len(t.steps) for t in doc.trajectories), len(doc.trajectories))
    except InputError as exc:
        raise (registry.forced_error(adapter, data, path, exc) if fmt else exc) from None
    except UNEXPECTED as exc:
        raise unexpected_shape(exc, path, adapter.name) from exc
    if fmt and not allow_empty:
        forced.check_nothing(adapter, data, path, forced.Reading.of([doc]).reasoning, skip_bad_lines=skip_bad_lines)
    return adapter, doc
