"""JSONL lines: split, parsed with located errors, and written back byte for byte.

One reader for every JSONL input (format adapters through :mod:`iclr_cli.formats.reading`,
score records, run files): each line's bytes and line end are kept so an unedited line is
written back as it was, a bad line is an error naming the file and line (or, with
``skip_bad_lines``, a :data:`BAD_LINE` kept as it is), and a last line still being written by
a live agent is told apart from damage (:func:`iter_jsonl` with ``live``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from iclr_cli.errors import InputError
from iclr_cli.jsonio import BOM, dumps_like, loads


_BLANK = re.compile(rb"\s*")


@dataclass(frozen=True)
class JsonLine:
    """One line of a JSONL file.

    ``number`` is 1-based; ``raw`` is the line's bytes without its line end (a
    ``memoryview`` into the file's bytes when read by :func:`iter_jsonl`: bytes-like, not a
    copy); ``end`` is the line end as found (``b"\\n"``, ``b"\\r\\n"`` or ``b""`` on a last line
    without one); ``value`` is the parsed JSON, or ``None`` for a blank line. ``unfinished``
    marks a last line still being written (:func:`iter_jsonl` with ``live``).
    """

    number: int
    raw: bytes | memoryview
    end: bytes
    value: object
    problem: str | None = None
    unfinished: bool = False


def iter_jsonl(data: bytes, source: str, *, skip_bad_lines: bool = False, warnings: list[str] | None = None,
               live: bool = False) -> Iterator[JsonLine]:
    """Yield every line of a JSONL document, parsed, in order; blank lines have ``value None``.

    A UTF-8 BOM at the start is tolerated (and kept in ``raw`` of line 1 so writing the lines
    back reproduces the input). A line that is not valid JSON raises :class:`InputError`
    naming ``source`` and the line, or, with ``skip_bad_lines``, is reported in ``warnings``
    and yielded with ``value`` set to :data:`BAD_LINE` (and ``problem`` set) so writers can
    keep it byte for byte.

    ``live``: ``data`` may be a session file an agent is appending to right now, so a last
    line with no line end that does not parse is the record being written, not damage: it is
    reported in ``warnings`` whatever ``skip_bad_lines`` says and yielded as :data:`BAD_LINE`
    with ``unfinished`` set (written back byte for byte). A bad line anywhere else, and a bad
    last line that does end in a newline, stay errors. Off for iclr's own outputs, which are
    written whole (temp file + rename) and so are never seen half-written.
    """
    start = 0
    number = 0
    size = len(data)
    view = memoryview(data)
    while start < size:
        number += 1
        nl = data.find(b"\n", start)
        stop, end = (size, b"") if nl == -1 else (nl, b"\n")
        if stop > start and data[stop - 1 : stop] == b"\r":
            stop, end = stop - 1, b"\r" + end
        # A view, not a copy: a 100 MB session is not held twice (the file's bytes are kept).
        line = view[start:stop]
        lead = len(BOM) if number == 1 and data.startswith(BOM, start, stop) else 0
        body = line[lead:]
        blank = _BLANK.fullmatch(data, start + lead, stop) is not None
        start = stop + len(end)
        if blank:
            yield JsonLine(number, line, end, None)
            continue
        try:
            value = loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            if live and not end:  # the last line (no line end: nothing follows it), still being written
                bad = JsonLine(number, line, end, BAD_LINE, UNFINISHED, unfinished=True)
            elif not skip_bad_lines:
                problem = _describe_bad_line(bytes(body), exc)
                raise InputError(source, problem + " (use --skip-bad-lines to skip such lines)", line=number) from None
            else:
                bad = JsonLine(number, line, end, BAD_LINE, _describe_bad_line(bytes(body), exc))
            if warnings is not None:
                warnings.append(bad_line_warning(source, bad))
            yield bad
            continue
        if value is None:  # a literal null: no format's record, and None stands for a blank line to every reader
            problem = "line is JSON null, not a record"
            if not skip_bad_lines:
                raise InputError(source, problem + " (use --skip-bad-lines to skip such lines)", line=number)
            bad = JsonLine(number, line, end, BAD_LINE, problem)
            if warnings is not None:
                warnings.append(bad_line_warning(source, bad))
            yield bad
            continue
        yield JsonLine(number, line, end, value)


def dump_lines(lines: Sequence[JsonLine], edited: Mapping[int, object], drops: Collection[int] = ()) -> bytes:
    """Write a JSONL document back: line ``i`` in ``edited`` is re-serialised in its own style
    (BOM and line end kept), lines in ``drops`` are left out, every other line is copied byte
    for byte."""
    out = []
    for rec, line in enumerate(lines):
        if rec in drops:
            continue
        if rec in edited:
            raw = bytes(line.raw)
            bom = BOM if raw.startswith(BOM) else b""
            out.append(bom + dumps_like(edited[rec], raw[len(bom) :]))
        else:
            out.append(line.raw)
        out.append(line.end)
    return b"".join(out)


class _BadLine:
    def __repr__(self) -> str:
        return "BAD_LINE"


BAD_LINE = _BadLine()
"""Sentinel ``value`` of a line that could not be parsed and was skipped."""

UNFINISHED = "the last line looks like one still being written (no line end yet, and not complete JSON)"
"""``problem`` of a line :func:`iter_jsonl` reads as still being written."""


def bad_line_warning(source: str, line: JsonLine) -> str:
    """The warning for a line read as :data:`BAD_LINE`: ``FILE:LINE:``, what is wrong and
    what became of it (skipped, or for a line still being written, :func:`unfinished_warning`)."""
    if line.unfinished:
        return unfinished_warning(source, line.number)
    return f"{source}:{line.number}: skipped: {line.problem}"


def unfinished_warning(source: str, number: int) -> str:
    """The warning for line ``number`` of ``source``, a last line still being written: left
    out of what is read, and written back as it is."""
    return (f"{source}:{number}: {UNFINISHED}: read up to line {number - 1}; this line is not scored, "
            "and prune writes it back byte for byte")


def _describe_bad_line(body: bytes, exc: Exception) -> str:
    if body.strip(b"\x00") == b"":
        return "line holds only NUL bytes"
    if isinstance(exc, UnicodeDecodeError):  # Python's codec text names its internals: said plainly
        return (f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x}, the line's byte {exc.start + 1} "
                "(save the file as UTF-8; iclr also reads UTF-16 and UTF-32 with a byte order mark)")
    msg = str(exc)
    if "Extra data" in msg:
        return f"two JSON values on one line ({msg})"
    if "Unterminated string" in msg or "Expecting" in msg:
        return f"line is not a complete JSON record, cut or split across lines ({msg})"
    return f"invalid JSON ({msg})"
