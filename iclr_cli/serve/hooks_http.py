"""The gateway hooks (:mod:`iclr_cli.serve.hooks`) over HTTP: one ``iclr serve`` scores for
every LiteLLM worker of a machine, or for a fleet from a GPU box (docs/fleet.md).

Routes on ``iclr serve`` (behind its client keys, as every route but the health probes):

- ``POST /iclr/hooks/before``: JSON ``{"call": ID, "route": ROUTE, "body": {...}, "header":
  STR|null}``; answers ``{"body": {...}|null}`` (``null``: send the body as it is).
- ``POST /iclr/hooks/feed?call=ID``: the next bytes of the streamed reply, as the body;
  header ``x-iclr-unreadable: 1`` when the reply can no longer be read. Answers 204.
- ``POST /iclr/hooks/reply?call=ID&streamed=0|1&outcome=OUTCOME``: a whole reply as the body
  (for a stream, the bytes fed so far are the reply; ``x-iclr-unreadable: 1``: the reply
  could not be read). Answers 204 once it is recorded.

:class:`RemoteHooks` is the gateway's end: the same methods as
:class:`~iclr_cli.serve.hooks.Hooks`, each call bounded by ``timeout_s``, so a serve that is
down or slow costs a request at most that long before it goes upstream as the client sent it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict

import orjson

from iclr_cli.serve.hooks import MAX_PENDING, Hooks

log = logging.getLogger("iclr.serve")

BEFORE, FEED, REPLY = "/iclr/hooks/before", "/iclr/hooks/feed", "/iclr/hooks/reply"
UNREADABLE = "x-iclr-unreadable"
OUTCOMES = ("ok", "upstream_error", "upstream_dropped")


def _bad(message: str):
    from starlette.responses import Response

    return Response(orjson.dumps({"error": message}), status_code=400, media_type="application/json")


def routes(hooks: Hooks, max_body_bytes: int) -> list:
    """The three Starlette routes serving ``hooks`` (module docstring); bodies over
    ``max_body_bytes`` are refused with 413."""
    from starlette.responses import Response
    from starlette.routing import Route

    async def body_of(request) -> bytes | None:
        size = request.headers.get("content-length")
        if size is not None and size.isdigit() and int(size) > max_body_bytes:
            return None
        raw = await request.body()
        return raw if len(raw) <= max_body_bytes else None

    async def before(request):
        raw = await body_of(request)
        if raw is None:
            return Response(status_code=413)
        try:
            payload = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return _bad(f"{BEFORE}: the body is not JSON ({exc})")
        if not isinstance(payload, dict):
            return _bad(f"{BEFORE}: the body is a JSON object, not {type(payload).__name__}")
        route, body, call, header = payload.get("route"), payload.get("body"), payload.get("call"), payload.get("header")
        if route not in hooks.dialects:
            return _bad(f"{BEFORE}: field 'route' is one of {', '.join(sorted(hooks.dialects))}, not {route!r}")
        if not isinstance(body, dict):
            return _bad(f"{BEFORE}: field 'body' is the client's request object, not {type(body).__name__}")
        if not isinstance(call, (str, type(None))) or not isinstance(header, (str, type(None))):
            return _bad(f"{BEFORE}: fields 'call' and 'header' are strings or null")
        try:
            edited = await hooks.before(call, route, body, header)
        except Exception as exc:  # the gateway sends the request as the client did
            log.warning("hooks: a request was not rewritten (%s: %s)", type(exc).__name__, exc)
            return Response(orjson.dumps({"error": f"not rewritten: {type(exc).__name__}"}), status_code=500, media_type="application/json")
        return Response(orjson.dumps({"body": edited}), media_type="application/json")

    async def feed(request):
        call = request.query_params.get("call")
        if not call:
            return _bad(f"{FEED}: query parameter 'call' is missing")
        raw = await body_of(request)
        hooks.feed(call, None if raw is None or request.headers.get(UNREADABLE) else raw)
        return Response(status_code=204)

    async def reply(request):
        call, streamed, outcome = (request.query_params.get(k) for k in ("call", "streamed", "outcome"))
        if not call:
            return _bad(f"{REPLY}: query parameter 'call' is missing")
        if streamed not in ("0", "1") or outcome not in OUTCOMES:
            return _bad(f"{REPLY}: query parameters 'streamed' (0 or 1) and 'outcome' ({', '.join(OUTCOMES)}) are required")
        raw = await body_of(request)
        unreadable = raw is None or bool(request.headers.get(UNREADABLE))
        if streamed == "1" and unreadable:
            hooks.feed(call, None)
        await hooks.reply(call, None if unreadable else raw, streamed == "1", outcome)
        return Response(status_code=204)

    return [Route(BEFORE, before, methods=["POST"]), Route(FEED, feed, methods=["POST"]), Route(REPLY, reply, methods=["POST"])]


class _Followed:
    """A call :class:`RemoteHooks` follows: its route, the stream pieces not yet sent."""

    __slots__ = ("route", "pieces", "sending", "unreadable")

    def __init__(self, route: str):
        self.route = route
        self.pieces: list[bytes] = []
        self.sending: asyncio.Task | None = None
        self.unreadable = False


class RemoteHooks:
    """The hooks of an ``iclr serve`` at ``url`` (module docstring).

    Args:
        url: the serve's base URL (``http://127.0.0.1:8790``; a trailing ``/v1`` is ignored).
        key: one of its client keys (``--client-key-env``), sent as ``Authorization: Bearer``.
        timeout_s: the most one call may take (connecting included); ``inf``: no limit.

    :meth:`before` raises on any failure (the caller sends the request as it came); the other
    calls never raise. ``errors`` counts failed calls; one warning a minute says why.
    """

    def __init__(self, url: str, key: str | None = None, timeout_s: float = 5.0):
        import httpx

        self.url = url.rstrip("/").removesuffix("/v1")
        limit = None if timeout_s == float("inf") else timeout_s
        headers = {"authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(limit), headers=headers)
        self._calls: OrderedDict[str, _Followed] = OrderedDict()
        self.errors = 0
        self._said_at = 0.0

    def _failed(self, what: str, exc: BaseException) -> None:
        self.errors += 1
        if time.monotonic() - self._said_at > 60:
            self._said_at = time.monotonic()
            log.warning("iclr serve at %s: %s failed (%s: %s); requests go as the client sent them meanwhile",
                        self.url, what, type(exc).__name__, exc)

    def route_of(self, call_id: str) -> str | None:
        """As :meth:`Hooks.route_of <iclr_cli.serve.hooks.Hooks.route_of>`."""
        call = self._calls.get(call_id)
        return call.route if call is not None else None

    async def before(self, call_id: str | None, route: str, body: dict, header: str | None) -> dict | None:
        """As :meth:`Hooks.before <iclr_cli.serve.hooks.Hooks.before>`.

        Raises:
            Exception: the serve could not be reached in time, or answered an error.
        """
        try:
            answer = await self._client.post(self.url + BEFORE, content=orjson.dumps({"call": call_id, "route": route, "body": body, "header": header}),
                                             headers={"content-type": "application/json"})
            answer.raise_for_status()
            edited = orjson.loads(answer.content)["body"]
        except Exception as exc:
            self._failed("a rewrite", exc)
            raise
        if call_id:
            self._calls[call_id] = _Followed(route)
            while len(self._calls) > MAX_PENDING:
                self._calls.popitem(last=False)
        return edited

    def feed(self, call_id: str, piece: bytes | None) -> None:
        """As :meth:`Hooks.feed <iclr_cli.serve.hooks.Hooks.feed>`: the pieces go in order,
        those that arrive while one is being sent go together with the next."""
        call = self._calls.get(call_id)
        if call is None or call.unreadable:
            return
        if piece is None:
            call.unreadable = True
        else:
            call.pieces.append(piece)
        if call.sending is None or call.sending.done():
            call.sending = asyncio.ensure_future(self._send_pieces(call_id, call))

    async def _send_pieces(self, call_id: str, call: _Followed) -> None:
        while call.pieces or call.unreadable:
            content, call.pieces = b"".join(call.pieces), []
            headers = {UNREADABLE: "1"} if call.unreadable else {}
            try:
                answer = await self._client.post(self.url + FEED, params={"call": call_id}, content=content, headers=headers)
                answer.raise_for_status()
            except Exception as exc:
                self._failed("feeding a stream", exc)
                call.unreadable = True
                return
            if call.unreadable:
                return

    async def reply(self, call_id: str, content: bytes | None, streamed: bool, outcome: str) -> None:
        """As :meth:`Hooks.reply <iclr_cli.serve.hooks.Hooks.reply>`; never raises."""
        call = self._calls.pop(call_id, None)
        if call is None:
            return
        if call.sending is not None:
            await asyncio.gather(call.sending, return_exceptions=True)
        headers = {UNREADABLE: "1"} if (call.unreadable if streamed else content is None) else {}
        try:
            answer = await self._client.post(self.url + REPLY, params={"call": call_id, "streamed": int(streamed), "outcome": outcome},
                                             content=b"" if streamed or content is None else content, headers=headers)
            answer.raise_for_status()
        except Exception as exc:
            self._failed("recording a reply", exc)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()
