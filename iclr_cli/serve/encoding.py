"""Request bodies a client compressed (RFC 9110, section 8.4: ``Content-Encoding``).

Codex compresses its ``/v1/responses`` bodies with zstd when it talks to the ChatGPT backend
(and so to a proxy put at that backend's place); other clients gzip. Read as JSON, such a body
is no request at all, and a proxy that forwards it as it came compresses nothing and says
nothing. So ``iclr serve`` decodes the codings RFC 9110 registers that a library here reads
(:data:`DECODERS`: ``gzip`` and ``x-gzip``, ``deflate``, ``zstd``; ``br`` when the ``brotli``
package is installed), applied in the order the header lists them, and rewrites the request.

The rewritten body goes upstream **uncompressed**, without the ``Content-Encoding`` header:
every server accepts an identity body (RFC 9110, 8.4.1: identity is always acceptable, and a
server that cannot decode a coding answers 415), while the coding a client chose may be one
only its own backend reads; re-compressing would cost the proxy's CPU on every request for the
one hop that usually stays inside a machine or a data centre.

A body that cannot be decoded is never silent (:class:`Undecodable`): a coding no library here
reads is forwarded as sent, with its header, logged once per coding and counted in ``/stats``
(``request_bodies``); a body whose data does not decode (corrupt, truncated) is answered 400 in
the API's error shape, since the upstream could not read it either; one that decodes past
``--max-body-mb`` is answered 413 like any body that large (a small body can inflate a
thousandfold).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable


class Undecodable(Exception):
    """A body that could not be decoded. ``coding``: the content coding at fault; ``kind``:
    ``unsupported`` (no decoder here: forward as sent), ``corrupt`` (answer 400) or
    ``too_large`` (answer 413)."""

    def __init__(self, coding: str, kind: str, reason: str):
        super().__init__(f"Content-Encoding {coding}: {reason}")
        self.coding, self.kind, self.reason = coding, kind, reason


def _zlib(wbits: int) -> Callable[[bytes, int], bytes]:
    def decode(data: bytes, limit: int) -> bytes:
        d = zlib.decompressobj(wbits)
        out = d.decompress(data, limit + 1)
        if len(out) > limit:
            raise Undecodable("", "too_large", f"more than {limit} bytes once decoded")
        if not d.eof:
            raise zlib.error("the compressed data ends early")
        return out

    return decode


def _deflate(data: bytes, limit: int) -> bytes:
    """``deflate`` is zlib-wrapped (RFC 9110, 8.4.1.2); some clients send raw deflate."""
    try:
        return _zlib(15)(data, limit)
    except zlib.error:
        return _zlib(-15)(data, limit)


def _zstd(data: bytes, limit: int) -> bytes:
    import zstandard

    try:
        with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
            out = reader.read(limit + 1)
    except zstandard.ZstdError as exc:
        raise ValueError(str(exc)) from None
    if len(out) > limit:
        raise Undecodable("zstd", "too_large", f"more than {limit} bytes once decoded")
    if not out and data:
        raise ValueError("no zstd frame decoded")
    return out


def _brotli() -> Callable[[bytes, int], bytes] | None:
    try:
        import brotli  # type: ignore[import-not-found]
    except ImportError:
        return None

    def decode(data: bytes, limit: int) -> bytes:
        out = brotli.decompress(data)
        if len(out) > limit:
            raise Undecodable("br", "too_large", f"more than {limit} bytes once decoded")
        return out

    return decode


DECODERS: dict[str, Callable[[bytes, int], bytes] | None] = {
    "gzip": _zlib(31), "x-gzip": _zlib(31), "deflate": _deflate, "zstd": _zstd, "br": _brotli(),
}
"""Content coding -> ``decode(data, limit)``; ``None``: registered but no library here reads it."""


def codings(header: str | None) -> list[str]:
    """The codings of a ``Content-Encoding`` value, in the order they were applied, without
    ``identity``."""
    return [c.strip().lower() for c in (header or "").split(",") if c.strip() and c.strip().lower() != "identity"]


def decode(raw: bytes, header: str | None, limit: int) -> bytes | None:
    """``raw`` with every coding of ``header`` undone (last applied first), or ``None`` when the
    header names none.

    Raises:
        Undecodable: a coding without a decoder here (``unsupported``), data that does not
            decode (``corrupt``), or more than ``limit`` bytes once decoded (``too_large``).
    """
    applied = codings(header)
    if not applied:
        return None
    for coding in applied:
        if DECODERS.get(coding) is None:
            raise Undecodable(coding, "unsupported", "no decoder for it here")
    data = raw
    for coding in reversed(applied):
        try:
            data = DECODERS[coding](data, limit)  # type: ignore[misc]
        except Undecodable as exc:
            raise Undecodable(coding, exc.kind, exc.reason) from None
        except Exception as exc:  # zlib.error, zstandard's and brotli's errors: the data does not decode
            raise Undecodable(coding, "corrupt", str(exc) or type(exc).__name__) from None
    return data
