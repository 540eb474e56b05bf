"""Bytes in, bytes out: JSON parsing, the input's encoding, and atomic writes (JSONL lines:
:mod:`iclr_cli.jsonl`).

Format adapters parse through here so every input error names the file, the 1-based line and
the problem (a gzip or zstd file is read decompressed: :mod:`iclr_cli.compression`), and every output is written with temp file + rename so an error mid-run never
leaves a partial file (and never touches the input).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import math
import os
import re
import select
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from iclr_cli.compression import Compression, decompress
from iclr_cli.errors import InputError, UsageError

BOM = b"\xef\xbb\xbf"


def read_input(path: str) -> bytes:
    """Read a whole input file, or standard input for ``-``, as UTF-8 bytes: a gzip or zstd
    file is decompressed and a UTF-16 or UTF-32 file with a byte order mark is decoded
    (:func:`read_input_stored`).

    Raises:
        InputError: when the file does not exist, cannot be read, is cut or corrupt
        compressed data, or is not valid text in the encoding its byte order mark names.
    """
    return read_input_encoded(path)[0]


def read_input_encoded(path: str) -> tuple[bytes, TextEncoding | None]:
    """The input as UTF-8 bytes, and the encoding it was stored in when that is UTF-16 or
    UTF-32 with a byte order mark (None for UTF-8), so outputs can be written the same way.
    A gzip or zstd file is decompressed first (:func:`read_input_stored`).

    Raises:
        InputError: as :func:`read_input`.
    """
    stored = read_input_stored(path)
    return stored.data, stored.encoding


@dataclass(frozen=True)
class StoredInput:
    """An input as read: ``data`` (UTF-8 text bytes, decompressed and decoded), the text
    ``encoding`` it was stored in (``None``: UTF-8) and its ``compression``
    (:mod:`iclr_cli.compression`; ``None``: not compressed)."""

    data: bytes
    encoding: TextEncoding | None
    compression: Compression | None


def read_input_stored(path: str) -> StoredInput:
    """Read ``path`` (``-``: standard input) as :func:`read_input` does, and say how it was
    stored: a gzip or zstd file (found by its magic bytes, not its name) is decompressed,
    then a UTF-16 or UTF-32 text is decoded, so outputs can be written back the same way.

    Raises:
        InputError: as :func:`read_input`, and for compressed data that is cut or corrupt
        or in a compression iclr does not read (:func:`iclr_cli.compression.decompress`).
    """
    data, compression = decompress(_read_raw(path), path)
    text, encoding = decode_input(data, path)
    return StoredInput(text, encoding, compression)


def _read_raw(path: str) -> bytes:
    if path == "-":
        data = _read_all(sys.stdin.buffer)
    else:
        try:
            with open(path, "rb", buffering=0) as fh:
                data = _read_all(fh)
        except FileNotFoundError:
            raise InputError(path, "no such file") from None
        except IsADirectoryError:
            raise InputError(path, "is a directory, not a trajectory file") from None
        except OSError as exc:
            raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    return data


def _read_all(fh: BinaryIO) -> bytes:
    """Everything left in ``fh``. A pipe, FIFO or terminal is read in a poll loop that wakes
    every 0.2 s: CPython runs signal handlers only between bytecodes, so a Ctrl-C landing
    after ``open()`` but before a blocking ``read()`` would otherwise be noticed only when the
    writer closes, and the command would hang instead of exiting 130."""
    fd = fh.fileno()
    if stat.S_ISREG(os.fstat(fd).st_mode) or not hasattr(select, "poll"):
        return fh.read()
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    chunks: list[bytes] = []  # straight from the fd: nothing reads standard input before this
    while True:
        if not poller.poll(200):
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


@dataclass(frozen=True)
class TextEncoding:
    """A file's encoding other than UTF-8: Python ``codec`` name and the byte order mark
    (``bom``) it starts with. PowerShell and Windows editors write UTF-16 with a BOM."""

    codec: str
    bom: bytes

    def encode(self, utf8: bytes) -> bytes:
        """``utf8`` (no BOM) in this encoding, without the BOM (:func:`output_encoder` adds it once)."""
        return utf8.decode("utf-8", errors="surrogatepass").encode(self.codec, errors="surrogatepass")


# UTF-32 LE first: its BOM starts with the UTF-16 LE one (FF FE).
_BOMS = (
    TextEncoding("utf-32-le", codecs.BOM_UTF32_LE),
    TextEncoding("utf-32-be", codecs.BOM_UTF32_BE),
    TextEncoding("utf-16-le", codecs.BOM_UTF16_LE),
    TextEncoding("utf-16-be", codecs.BOM_UTF16_BE),
)


def decode_input(data: bytes, source: str) -> tuple[bytes, TextEncoding | None]:
    """``data`` as UTF-8 (BOM removed) when it starts with a UTF-16 or UTF-32 byte order mark,
    with that encoding; other data as it is, with None. Lone surrogates pass through both
    ways, as JSON text may hold them.

    Raises:
        InputError: when the text after the mark is not valid in its encoding.
    """
    for enc in _BOMS:
        if data.startswith(enc.bom):
            try:
                text = data[len(enc.bom) :].decode(enc.codec, errors="surrogatepass")
            except UnicodeDecodeError as exc:
                where = exc.start + len(enc.bom)
                raise InputError(source, f"starts with a {enc.codec.upper()} byte order mark but is not valid {enc.codec.upper()} text ({exc.reason} at byte {where})") from None
            return text.encode("utf-8", errors="surrogatepass"), enc
    return data, None


def output_encoder(encoding: TextEncoding | None) -> Callable[[bytes], bytes]:
    """A function that turns successive UTF-8 output chunks into ``encoding``, the byte order
    mark before the first non-empty one (identity for None): an input's outputs are written
    in the input's own encoding."""
    if encoding is None:
        return lambda chunk: chunk
    started = False

    def encode(chunk: bytes) -> bytes:
        nonlocal started
        if not chunk:
            return chunk
        out = encoding.encode(chunk)
        if not started:
            started = True
            out = encoding.bom + out
        return out

    return encode


def output_path(path: str, *, force: bool = False) -> Path:
    """The file an output path really names, checked before any work is done.

    - A symbolic link is followed (to its final target): the target is written and the link
      stays a link.
    - An existing file that is read-only (no write permission bit, or not writable by this
      user) is refused unless ``force``; with ``force`` it is replaced and keeps its mode.
    - A folder, or a path whose folder does not exist, is refused.

    Raises:
        UsageError: naming the path and what to do.
    """
    given = Path(path)
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    if target.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"cannot write {path}: no such directory {folder}")
    try:
        st = target.stat()
    except FileNotFoundError:
        return target
    read_only = not (st.st_mode & 0o222) or not os.access(target, os.W_OK)
    if read_only and not force:
        via = f" (through the link {path})" if target != given else ""
        raise UsageError(f"{target}{via} is read-only; pass --force to replace it (its mode {stat.S_IMODE(st.st_mode):o} is kept)")
    return target


def same_file(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` name the same existing regular file: links followed, a hard
    link to it included (same device and inode). A device such as ``/dev/null`` is never the
    same file as anything (writing it replaces nothing)."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(sa.st_mode) and (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def refuse_output_over_input(output: str | None, inputs: Sequence[str], *, in_place: str | None = None) -> None:
    """Refuse an ``-o`` that names one of the command's own input files: the output would
    replace the original, silently (``sed`` and ``ruff`` write over their input only when
    asked, with ``-i`` / ``--fix``).

    ``in_place``: the option that asks for it (``--in-place``), named in the message when the
    command has one.

    Raises:
        UsageError: naming the file and what to do instead.
    """
    if output in (None, "-"):
        return
    for given in inputs:
        if given != "-" and same_file(output, given):
            also = f" (it is {given})" if os.path.abspath(output) != os.path.abspath(given) else ""
            ask = f"pass {in_place} to edit it in place (written atomically), or " if in_place else ""
            raise UsageError(f"-o {output} is an input file{also}: the output would replace it; {ask}give another -o")


@contextlib.contextmanager
def open_output(path: str | None, *, force: bool = False) -> Iterator[BinaryIO]:
    """A binary file to stream output into, made visible only when the block succeeds.

    ``None`` or ``-`` is standard output (streamed as written). For a path (see
    :func:`output_path`: links followed, read-only files refused without ``force``), data goes
    to a temp file in the same folder that is renamed over the file at the end, with the mode
    of the file it replaces; on any exception the temp file is removed and the file is left as
    it was. A device or named pipe (``/dev/null``) is written in place, never replaced.
    """
    if path is None or path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    target = output_path(path, force=force)
    if _special(target):
        # /dev/null, a named pipe, a terminal: written in place. Renaming a temp file over
        # one would replace the device with a plain file (as root, /dev/null itself).
        with open(target, "wb") as fh:
            yield fh
        return
    fd, tmp = temp_beside(target)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_output(path: str | None, data: bytes, *, force: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, then rename), with
    the rules of :func:`open_output`. ``None`` or ``-`` writes to standard output."""
    with open_output(path, force=force) as fh:
        fh.write(data)


def _special(target: Path) -> bool:
    """True for an existing path that is not a regular file (a device, pipe or socket)."""
    try:
        return not stat.S_ISREG(target.stat().st_mode)
    except FileNotFoundError:
        return False


def temp_beside(target: Path) -> tuple[int, str]:
    """A temp file in ``target``'s folder with the mode of the file it will replace, or the
    permissions a plain ``open`` would give a new file (mkstemp makes 0600, which would leave
    outputs unreadable to others).

    Raises:
        UsageError: when the folder does not exist or cannot be written.
    """
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except FileNotFoundError:
        raise UsageError(f"cannot write {target}: no such directory {folder}") from None
    except PermissionError:
        raise UsageError(f"cannot write {target}: permission denied in {folder}") from None
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.fchmod(fd, mode)
    return fd, tmp


_OBJECT_HOOK: ContextVar[Callable | None] = ContextVar("iclr_json_object_hook", default=None)


@contextlib.contextmanager
def objects_as(hook: Callable[[list], dict]) -> Iterator[None]:
    """While the block runs (in this thread or task), :func:`loads` builds every JSON object
    with ``hook(pairs)`` (the stdlib parser's ``object_pairs_hook``): ``convert`` reads its
    input with objects that record which keys the adapter asked for."""
    token = _OBJECT_HOOK.set(hook)
    try:
        yield
    finally:
        _OBJECT_HOOK.reset(token)


# A number token of 20 digits or more (beyond 64 bits): orjson reads it as a float and loses
# digits, so such text is parsed by the stdlib, whose ints are exact. A match inside a string
# only sends that text down the slower exact path.
TOO_DEEP = "nested deeper than the JSON parser follows (about 1,000 levels of lists and objects)"
_LONG_INT = re.compile(rb"[:\[,]\s*-?\d{20,}")


def _finite(text: str) -> float:
    """A JSON float literal's value; a literal beyond a double's range (``1e400``) is refused:
    it could only be written back as ``Infinity``, which is not JSON."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is beyond the range of a double")
    return value


def loads(data: bytes | memoryview | str):
    """Parse one JSON value, every value as it can be written back (:func:`dumps_like`):
    orjson first; the stdlib parser for lone UTF-16 surrogates (``"\\ud800"``), which real
    transcripts contain and orjson rejects, for integers beyond 64 bits (exact there, a float
    in orjson), for ``NaN`` / ``Infinity`` (not JSON, but Python's writer emits them; kept as
    they are), and under :func:`objects_as`, which needs its object hook.

    Raises:
        ValueError: when neither parser accepts the text (message from the stdlib parser,
        which names the column), for a number beyond a double's range (``1e400``), an
        integer of more than 4,300 digits, or nesting deeper than the parser's recursion.
    """
    hook = _OBJECT_HOOK.get()
    raw = data.encode("utf-8", errors="surrogatepass") if isinstance(data, str) else data
    if hook is None and not _LONG_INT.search(raw):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(_text(data), object_pairs_hook=hook, parse_float=_finite)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None


def _text(data: bytes | memoryview | str) -> str:
    return data if isinstance(data, str) else bytes(data).decode("utf-8", errors="surrogatepass")


def dumps_like(value, original: bytes) -> bytes:
    """Serialise ``value`` in the style of ``original`` (compact or spaced separators,
    ``\\uXXXX`` escapes or raw UTF-8), without a trailing newline."""
    structure = _STRINGS.sub(b'""', original)  # a tool call's arguments hold '": ' of their own
    spaced = b'": ' in structure or b', "' in structure
    escaped = not _has_non_ascii(original) and b"\\u" in original
    if not spaced and not escaped and _orjson_exact(original):
        try:
            return orjson.dumps(value)
        except TypeError:  # lone surrogates: orjson cannot encode them
            pass
    separators = (", ", ": ") if spaced else (",", ":")
    return _utf8(json.dumps(value, ensure_ascii=escaped, separators=separators))


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


_NOT_JSON = re.compile(rb"NaN|Infinity")


def _orjson_exact(original: bytes) -> bool:
    """False when the text a value was read from may hold what orjson would not write back as
    read: ``NaN`` or ``Infinity`` (orjson writes ``null``) or an integer beyond 64 bits (read
    exactly by the stdlib: :func:`loads`); the stdlib writer then keeps them. A scan of the
    bytes, not a walk of the value: a match inside a string only costs the slower writer."""
    return not (_NOT_JSON.search(original) or _LONG_INT.search(original))


def _utf8(text: str) -> bytes:
    """JSON text as UTF-8, each lone surrogate (a string cut inside an emoji) written as the
    ``\\uXXXX`` escape it was read from: raw, it is not UTF-8 and no reader takes it."""
    if _LONE_SURROGATE.search(text):
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.encode("utf-8")


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _has_non_ascii(data: bytes) -> bool:
    return any(b >= 0x80 for b in data)


def dumps_document_like(value, original: bytes) -> bytes:
    """Serialise a whole-file JSON document in the layout of ``original``: the same indent
    (or compact), the same escaping of non-ASCII text, the same line ends (CRLF kept: a file
    written on Windows must not come back with every line changed) and the same trailing
    newline."""
    body = original[len(BOM) :] if original.startswith(BOM) else original
    m = re.match(rb"\s*[\[{]\s*?\n([ \t]+)\S", body)
    indent: int | str | None = None
    if m:
        ws = m.group(1).decode()
        indent = ws if "\t" in ws else len(ws)
    escaped = not _has_non_ascii(body) and b"\\u" in body
    if indent is None:
        text = dumps_like(value, body)
    else:
        text = _utf8(json.dumps(value, indent=indent, ensure_ascii=escaped))
    if b"\r\n" in body and body.count(b"\n") == body.count(b"\r\n"):
        text = text.replace(b"\n", b"\r\n")  # JSON escapes newlines inside strings: only layout ones are raw
    trailing = body[len(body.rstrip()) :]
    return (BOM if original.startswith(BOM) else b"") + text + trailing
