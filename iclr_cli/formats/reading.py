"""Reading helpers every format adapter shares: whole JSON or JSONL with located errors.

One place for the BOM, the JSON parse, the ``FILE:LINE: field F: problem`` errors, the
``FILE#N`` trajectory ids and the chunked reading of one-trajectory-per-line files, so no
adapter carries its own copy.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document, Unrecognised
from iclr_cli.formats.writeback import Records, field_name
from iclr_cli.jsonio import BOM, TOO_DEEP, loads
from iclr_cli.jsonl import BAD_LINE, JsonLine, bad_line_warning, iter_jsonl
from iclr_cli.trajectory import Trajectory


def base_name(source: str) -> str:
    """The name trajectory ids are made from: the file's base name, ``stdin`` for ``-``."""
    return os.path.basename(source) if source != "-" else "stdin"


def strip_bom(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte order mark."""
    return data[len(BOM) :] if data.startswith(BOM) else data


def parse_document(data: bytes, source: str) -> object:
    """The one JSON value a whole file holds (BOM tolerated).

    Raises:
        InputError: from :func:`document_error` (line and column of the syntax error).
    """
    try:
        return loads(strip_bom(data))
    except (ValueError, UnicodeDecodeError) as exc:
        raise document_error(data, source, exc) from None


def document_error(data: bytes, source: str, cause: Exception | None = None) -> InputError:
    """The error for ``data`` that is not one valid JSON document: ``FILE:LINE:`` with the
    line and column where parsing failed, and whether the document is cut short (it ends
    inside a value, as a partly written or truncated file does) or invalid. A document the
    syntax accepts but the reader refuses (a number beyond a double, an integer of more than
    4,300 digits, nesting past the parser's depth) is named by ``cause``, the reader's error."""
    body = strip_bom(data)
    try:
        text = body.decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError as exc:
        return InputError(source, f"not a valid JSON document: not UTF-8 text ({exc.reason} at byte {exc.start})")
    try:
        json.loads(text)
    except (RecursionError, ValueError) as exc:
        if not isinstance(exc, json.JSONDecodeError):
            return InputError(source, f"not a JSON document iclr can read back: {_reason(exc)}")
        at = f"line {exc.lineno}, column {exc.colno}"
        if exc.msg.startswith("Unterminated string"):
            return InputError(source, f"truncated JSON document: the string opened at {at} is never closed", line=exc.lineno)
        if exc.pos >= len(text.rstrip()):
            return InputError(source, f"truncated JSON document: it ends at {at} before its value is closed ({exc.msg})", line=exc.lineno)
        return InputError(source, f"not a valid JSON document: parsing failed at {at} ({exc.msg})", line=exc.lineno)
    if cause is not None:
        return InputError(source, f"not a JSON document iclr can read back: {_reason(cause)}")
    return InputError(source, "not a valid JSON document")


UNEXPECTED = (TypeError, AttributeError, KeyError, IndexError, RecursionError)
"""What a reader raises on a value of a shape it did not foresee (a ``type`` that is a list, an
object where a string belongs): :func:`unexpected_shape` turns it into an input error."""


def unexpected_shape(exc: BaseException, source: str, reader: str) -> InputError:
    """The input error for ``exc`` (one of :data:`UNEXPECTED`) raised while ``reader`` (an
    adapter's name) read ``source``: the file is named and nothing is written, where a
    traceback would have ended the run (and every other file of a run over many)."""
    return InputError(source, f"the {reader} reader met a value of a type or shape it does not expect ({_reason(exc)}); "
                              "if this is a real transcript, please report it")


def _reason(exc: BaseException) -> str:
    """A parser's refusal in words (Python's own messages name its internals)."""
    text = str(exc)
    if isinstance(exc, RecursionError):
        return TOO_DEEP
    if "integer string conversion" in text:
        return "an integer of more than 4,300 digits"
    return text


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
_STEP = re.compile(r"\[(\d+)\]|\.?([^.\[]+)")


def located(exc: InputError, data: bytes) -> InputError:
    """``exc`` (raised while reading the JSON document ``data``, so without a line) with the
    line of its field, found by walking the text with the stdlib decoder (orjson keeps no
    positions; this runs only on error). A field the document lacks (a message without its
    ``role``) is placed at the line of the nearest object or list that holds its path. When
    not even that can be found (a key holding ``.`` or ``[``, a duplicate key), the message
    says ``FILE (JSON document)`` instead. A document on one line (a dataset cell, a minified
    file) has nothing to locate: ``exc`` is returned."""
    if exc.line is not None or not exc.field or b"\n" not in data.strip():
        return exc
    line = _line_of(strip_bom(data), exc.field)
    if line is None:
        return InputError(f"{exc.source} (JSON document)", exc.problem, field=exc.field)
    return InputError(exc.source, exc.problem, line=line, field=exc.field)


def _line_of(body: bytes, name: str) -> int | None:
    """The 1-based line where the value of field ``name`` (``messages[1].content``) starts,
    or where its nearest present parent does (the field itself may be what is missing)."""
    path: list[Hashable] = [int(m[1]) if m[1] is not None else m[2] for m in _STEP.finditer(name)]
    if field_name(path) != name:
        return None
    try:
        text = body.decode("utf-8")
    except ValueError:
        return None
    for end in range(len(path), 0, -1):
        try:
            pos = _value_at(text, path[:end])
        except (ValueError, IndexError):
            return None
        if pos is not None:
            return text.count("\n", 0, pos) + 1
    return None


def _value_at(text: str, path: Sequence[Hashable]) -> int | None:
    """Index in ``text`` (one JSON document) where the value at ``path`` starts, or None.

    Raises:
        ValueError, IndexError: for text that is not the JSON it was parsed from.
    """
    pos = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    for key in path:
        is_index = isinstance(key, int)
        if text[pos] != ("[" if is_index else "{"):
            return None
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
        k = 0
        while True:
            if not is_index:
                if text[pos] != '"':
                    return None
                name, pos = json.decoder.scanstring(text, pos + 1)
                pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
                if text[pos] != ":":
                    return None
                pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            if (k == key) if is_index else (name == key):
                break
            _, pos = _DECODER.raw_decode(text, pos)  # skip this value
            pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
            if text[pos] != ",":
                return None
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            k += 1
    return pos


def spread_document(data: bytes) -> bool:
    """True when ``data`` is laid out as one JSON document rather than one record per
    line: it starts with ``{`` or ``[`` and its first line is not a complete JSON value (a
    pretty-printed document, whole or cut short). Reading such a file line by line would
    report its first line as a cut record and suggest --skip-bad-lines, which would only
    skip every line of it."""
    body = strip_bom(data)
    if body.lstrip()[:1] not in (b"[", b"{"):
        return False
    first = _first_line(body)
    try:
        loads(first)
    except UnicodeDecodeError:  # a complete record with a byte that is not UTF-8: a JSONL line, named as such
        try:
            loads(first.decode("utf-8", errors="replace"))
        except ValueError:
            return True
        return False
    except ValueError:
        return True
    return False


def _first_line(body: bytes) -> bytes:
    start = 0
    while True:
        nl = body.find(b"\n", start)
        line = body[start:] if nl == -1 else body[start:nl]
        if line.strip() or nl == -1:
            return line
        start = nl + 1


def unfinished_line(data: bytes) -> int | None:
    """The 1-based number of the last line of JSONL ``data`` when it is one still being
    written (:func:`~iclr_cli.jsonl.iter_jsonl` with ``live``: no line end, not blank, not
    JSON on its own), else None. A file of one line, or one JSON document spread over lines
    (whose last line, ``}``, is never JSON alone), has no such line. Cheap: only the last line
    is parsed, so ``savings`` can say it of a file it takes from its cache."""
    nl = data.rfind(b"\n")
    tail = data[nl + 1 :]
    if nl == -1 or not tail.strip() or spread_document(data):
        return None
    try:
        loads(tail)
    except (ValueError, UnicodeDecodeError):
        return data.count(b"\n") + 1
    return None


def try_document(data: bytes) -> object | None:
    """The whole file as one JSON value when it starts like one and parses, else None (a
    JSONL file fails at the end of its first line, so the attempt is cheap)."""
    body = strip_bom(data)
    if body.lstrip()[:1] not in (b"[", b"{"):
        return None
    try:
        return loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def read_lines(data: bytes, source: str, *, skip_bad_lines: bool = False, warnings: list[str] | None = None) -> Records:
    """A JSONL file as :class:`Records` (one value per line, ``None`` for blank lines,
    ``BAD_LINE`` for skipped ones). A session file may be one its agent is appending to: a
    last line still being written is reported in ``warnings`` and kept as ``BAD_LINE``
    (:func:`~iclr_cli.jsonl.iter_jsonl` with ``live``).

    Raises:
        InputError: for a file with no JSON line, or the first bad line (unless
        ``skip_bad_lines``; each skipped line is then reported in ``warnings``).
    """
    lines = list(iter_jsonl(data, source, skip_bad_lines=skip_bad_lines, warnings=warnings, live=True))
    if not any(line.value is not None for line in lines):
        raise InputError(source, "file is empty")
    return Records(data, lines, [line.value for line in lines])


def whole(data: bytes, value: object) -> Records:
    """:class:`Records` of a file that is one JSON document ``value``."""
    return Records(data, None, [value])


def dig(value: object, *keys: Hashable) -> object:
    """The value at ``keys`` inside ``value``, or None when any step is missing."""
    for key in keys:
        try:
            value = value[key]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def text_of(content: object) -> str:
    """The text of a chat ``content`` value: a string, or the ``text`` of its parts joined by
    newlines; ``""`` for anything else (``None``, images)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


@dataclass
class Where:
    """Where a record sits, for errors and :class:`Unrecognised` notes while it is read.

    ``rec`` indexes :attr:`Records.values`; ``line`` is 1-based (None for a whole JSON
    document); ``first_index`` counts the trajectories read before this record (``FILE#N``
    ids); ``unrecognised`` collects the notes of the document being read, ``sealed`` the
    reasoning it read but may not edit (:func:`sealed_warnings`), ``signatures`` the provider
    signatures the model does not hold (:attr:`Document.signatures`).
    """

    source: str
    rec: int = 0
    line: int | None = None
    first_index: int = 0
    unrecognised: list[Unrecognised] = field(default_factory=list)
    sealed: list[Unrecognised] = field(default_factory=list)
    signatures: list[Unrecognised] = field(default_factory=list)

    def error(self, problem: str, field_path: Sequence[Hashable] | str | None = None) -> InputError:
        """An :class:`InputError` at this record (``field_path``: a JSON path or its name)."""
        name = field_path if isinstance(field_path, str) or field_path is None else field_name(field_path)
        return InputError(self.source, problem, line=self.line, field=name or None)

    def note(self, field_path: Sequence[Hashable] | str, what: str) -> None:
        """Record assistant-turn text this adapter reads neither as reasoning nor as action."""
        name = field_path if isinstance(field_path, str) else field_name(field_path)
        self.unrecognised.append(Unrecognised(self.line, name, what))

    def at(self, field_path: Sequence[Hashable], what: str) -> Unrecognised:
        """A location record of this record's ``field_path`` (for ``sealed`` / ``signatures``)."""
        return Unrecognised(self.line, field_name(field_path), what)


def sealed_warnings(source: str, sealed: Sequence[Unrecognised]) -> list[str]:
    """One warning per kind of reasoning left unedited (signed, encrypted or redacted
    reasoning: present in the file, never scored or edited, written back as it was), with its
    count and where the first one is; ``what`` of each item names the kind.

    The same rule as Codex items holding only ``encrypted_content`` and mini-swe-agent's
    hidden ``reasoning_tokens`` (docs/FORMAT.md, "Reasoning left unedited"): the user is told
    reasoning exists that no variant touched.
    """
    groups: dict[str, list[Unrecognised]] = {}
    for item in sealed:
        groups.setdefault(item.what, []).append(item)
    out = []
    for what, items in groups.items():
        n, first = len(items), items[0]
        place = f"line {first.line}, " if first.line is not None else ""
        out.append(
            f"{source}: {n} reasoning part{'s' if n != 1 else ''} {what}: left unedited, not scored or pruned "
            f"({'first ' if n != 1 else ''}at {place}field {first.field!r})"
        )
    return out


RecordReader = Callable[[object, Where], "list[Trajectory] | None"]
"""``read(value, where) -> trajectories | None``: the trajectories in one record, or None
when it holds none of this format's shapes. Raises InputError for a malformed one."""


def load_chunks(
    data: bytes,
    source: str,
    fmt: str,
    read: RecordReader,
    *,
    not_found: str,
    documents: bool = True,
    skip_bad_lines: bool = False,
    chunk_size: int | None = 256,
) -> Iterator[Document]:
    """Documents of a file holding one or more trajectories per JSONL line, or one JSON
    document: the whole document first (with ``documents``, when ``read`` finds
    trajectories in it), else
    chunks of at most ``chunk_size`` lines (all lines for None), so long files are processed
    with flat memory. Each chunk's write-back returns exactly the bytes of its own lines.

    A line where ``read`` finds nothing is an input error (``not_found`` says what was
    expected); with ``skip_bad_lines`` it is reported and passed through unscored, as are
    lines that are not JSON. A last line still being written is reported and passed through
    always (:func:`read_lines`).

    Raises:
        InputError: for an empty file or the first bad line.
    """
    value = try_document(data) if documents else None
    if value is not None:
        where = Where(source)
        try:
            found = read(value, where)
        except InputError as exc:
            raise located(exc, data) from None
        if found is not None:
            yield Document(
                fmt, source, found, whole(data, value), sealed_warnings(source, where.sealed),
                unrecognised=where.unrecognised, signatures=where.signatures,
            )
            return
    if documents and spread_document(data):
        if value is None:
            raise document_error(data, source)
        raise InputError(source, not_found)
    chunk: list[JsonLine] = []
    seen = False
    count = 0
    for line in iter_jsonl(data, source, skip_bad_lines=skip_bad_lines, live=True):
        seen = seen or line.value is not None
        chunk.append(line)
        if chunk_size is not None and len(chunk) >= chunk_size:
            doc = _chunk(chunk, data, source, fmt, read, not_found, skip_bad_lines, count)
            count += len(doc.trajectories)
            yield doc
            chunk = []
    if not seen:
        raise InputError(source, "file is empty")
    if chunk:
        yield _chunk(chunk, data, source, fmt, read, not_found, skip_bad_lines, count)


def _chunk(lines: list[JsonLine], data: bytes, source: str, fmt: str, read: RecordReader, not_found: str, skip_bad_lines: bool, first: int) -> Document:
    warnings: list[str] = []
    notes: list[Unrecognised] = []
    sealed: list[Unrecognised] = []
    signatures: list[Unrecognised] = []
    trajectories: list[Trajectory] = []
    values = [line.value for line in lines]
    for rec, line in enumerate(lines):
        if line.value is BAD_LINE:
            warnings.append(bad_line_warning(source, line))
            continue
        if line.value is None:
            continue
        try:
            found = read(line.value, Where(source, rec, line.number, first + len(trajectories), notes, sealed, signatures))
            if found is None:
                raise InputError(source, not_found, line=line.number)
        except InputError as exc:
            if not skip_bad_lines:
                raise
            where = f"field {exc.field!r}: " if exc.field else ""
            warnings.append(f"{source}:{line.number}: passed through unscored: {where}{exc.problem}")
            values[rec] = BAD_LINE
            continue
        trajectories.extend(found)
    warnings += sealed_warnings(source, sealed)
    return Document(fmt, source, trajectories, Records(data, lines, values), warnings, unrecognised=notes, signatures=signatures)


class ChunkedRecords:
    """Mixin of an adapter whose file holds one history per JSON document or JSONL line:
    ``load`` and ``load_chunks`` through :func:`load_chunks` with the adapter's ``name``, its
    ``read_value`` (a :data:`RecordReader`) and ``not_found`` (what a line without a history
    was expected to hold)."""

    name: str
    not_found: str

    @staticmethod
    def read_value(value: object, where: Where) -> list[Trajectory] | None:  # pragma: no cover - each adapter's own
        raise NotImplementedError

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        """The whole file as one document (:meth:`load_chunks` without a chunk size)."""
        [doc] = self.load_chunks(data, source, skip_bad_lines=skip_bad_lines, chunk_size=None)
        return doc

    def load_chunks(self, data: bytes, source: str, *, skip_bad_lines: bool = False, chunk_size: int | None = 256) -> Iterator[Document]:
        """One Document for a JSON file; chunks of at most ``chunk_size`` lines for JSONL with one
        history per line (:func:`load_chunks`).

        Raises:
            InputError: for an empty file, a file holding no history, or a malformed record
                (naming the file, line and field).
        """
        return load_chunks(data, source, self.name, type(self).read_value, not_found=self.not_found, skip_bad_lines=skip_bad_lines,
                           chunk_size=chunk_size)
