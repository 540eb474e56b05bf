"""Compressed logs: gzip and zstd read wherever a file is read, and written back the same way.

Agents and log shippers keep old sessions compressed (``session.jsonl.gz``, ``run.json.gz``,
``trace.jsonl.zst``). A file is recognised by its magic bytes, never by its name, so a
compressed file read from standard input or renamed is read the same:

- gzip (RFC 1952, section 2.3.1): ``1f 8b``. Several members one after another (``cat a.gz
  b.gz``) are one stream, as ``gunzip`` reads them.
- zstd (RFC 8878, section 3.1.1): the frame magic ``28 b5 2f fd``; several frames are one
  stream, as ``zstd -d`` reads them.

Other compressions (xz, bzip2, zip) are recognised only to say what they are, so the error is
not "binary data".

``prune`` writes its output compressed as its name says, or as the input was when it
rewrites it in place (:func:`for_output`; docs/FORMAT.md, "Compressed files"): gzip without a file name and with modification time 0, so the same input pruned
twice gives the same bytes. zstd comes from the standard library's ``compression.zstd``
(Python 3.14+) or the ``zstandard`` package (a base dependency before 3.14).
"""

from __future__ import annotations

import contextlib
import gzip
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from iclr_cli.errors import InputError


@dataclass(frozen=True)
class Compression:
    """A compression iclr reads and writes: its ``name`` (``gzip``, ``zstd``), the ``magic``
    bytes a file of it starts with, and the file-name ``suffix`` it usually carries."""

    name: str
    magic: bytes
    suffix: str


GZIP = Compression("gzip", b"\x1f\x8b", ".gz")
ZSTD = Compression("zstd", b"\x28\xb5\x2f\xfd", ".zst")
READ = (GZIP, ZSTD)

# Recognised only to name them in the error (xz: tukaani.org/xz/xz-file-format.txt 2.1.1.1;
# bzip2: "BZh" and the block size digit; zip: the local file header, APPNOTE 4.3.7).
_UNREAD = ((b"\xfd7zXZ\x00", "xz", "unxz"), (b"BZh", "bzip2", "bunzip2"), (b"PK\x03\x04", "zip", "unzip"))

GZIP_LEVEL = 6  # gzip's own default: a little larger than 9, several times faster to write
ZSTD_LEVEL = 3  # zstd's own default; frames carry a checksum, as the zstd tool writes them


def detect(data: bytes) -> Compression | None:
    """The compression ``data`` is stored in, by its magic bytes (``None``: not compressed)."""
    return next((c for c in READ if data.startswith(c.magic)), None)


def decompress(data: bytes, source: str) -> tuple[bytes, Compression | None]:
    """``data`` decompressed when it is gzip or zstd, with its compression; other data as it
    is, with ``None``.

    Raises:
        InputError: naming ``source`` when the compressed data is cut or corrupt, or when it
        is xz, bzip2 or zip (iclr reads gzip and zstd; the message says how to decompress it).
    """
    found = detect(data)
    if found is None:
        for magic, name, tool in _UNREAD:
            if data.startswith(magic) and not (name == "bzip2" and data[3:4] not in b"123456789"):
                raise InputError(source, f"compressed with {name}, which iclr does not read (it reads gzip .gz and zstd .zst); decompress it first ({tool})")
        return data, None
    try:
        if found is GZIP:
            return gzip.decompress(data), found
        return _zstd_decompress(data), found
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        raise InputError(source, f"{found.name}-compressed, but the compressed data is cut or corrupt ({exc})") from None
    except _ZstdError as exc:
        raise InputError(source, f"{found.name}-compressed, but the compressed data is cut or corrupt ({exc})") from None


def for_output(target: str | None, stored: Compression | None, *, in_place: bool = False) -> Compression | None:
    """How ``prune`` compresses an output: as the input was stored when it rewrites the input
    in place; else as the output's name says (``.gz`` gzip, ``.zst`` / ``.zstd`` zstd, any other
    name plain), so ``-o pruned.traj`` is a file the agent reads as it is; standard output
    (``target`` None or ``-``) plain, for a pipe into ``jq``."""
    if in_place:
        return stored
    if target in (None, "-"):
        return None
    name = str(target).lower()
    return GZIP if name.endswith(GZIP.suffix) else ZSTD if name.endswith((ZSTD.suffix, ".zstd")) else None


@contextlib.contextmanager
def writer(fh: BinaryIO, compression: Compression | None) -> Iterator[BinaryIO]:
    """A binary file that writes into ``fh`` compressed with ``compression`` (``fh`` itself
    for ``None``). The compressed stream is finished when the block ends normally; ``fh`` is
    never closed (:func:`iclr_cli.jsonio.open_output` owns it)."""
    if compression is None:
        yield fh
        return
    if compression is GZIP:
        # no file name and mtime 0 in the header: the same input gives the same bytes
        stream: BinaryIO = gzip.GzipFile(filename="", mode="wb", compresslevel=GZIP_LEVEL, fileobj=fh, mtime=0)  # type: ignore[assignment]
    else:
        stream = _zstd_writer(fh)
    yield stream
    stream.close()  # writes the trailer; neither GzipFile nor the zstd writers close fh


# zstd: the standard library's module on 3.14+, else the zstandard package.
try:  # pragma: no cover - Python 3.14+
    from compression import zstd as _std_zstd  # type: ignore[import-not-found]

    _ZstdError: type[Exception] = _std_zstd.ZstdError

    def _zstd_decompress(data: bytes) -> bytes:
        return _std_zstd.decompress(data)

    def _zstd_writer(fh: BinaryIO) -> BinaryIO:
        options = {_std_zstd.CompressionParameter.compression_level: ZSTD_LEVEL, _std_zstd.CompressionParameter.checksum_flag: 1}
        return _std_zstd.ZstdFile(fh, "w", options=options)  # type: ignore[return-value]

except ImportError:
    import zstandard as _zstandard

    _ZstdError = _zstandard.ZstdError

    def _zstd_decompress(data: bytes) -> bytes:
        # one decompression object per frame; a frame that never ends is a cut file (a
        # stream reader would return what it has and say nothing)
        out = []
        dctx = _zstandard.ZstdDecompressor()
        while data:
            obj = dctx.decompressobj()
            out.append(obj.decompress(data))
            if not obj.eof:
                raise _zstandard.ZstdError("the last frame is cut short")
            data = obj.unused_data
        return b"".join(out)

    def _zstd_writer(fh: BinaryIO) -> BinaryIO:
        return _zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True).stream_writer(fh, closefd=False)  # type: ignore[return-value]
