"""The ASGI app (Starlette on uvicorn): routes of ``iclr serve``.

- ``POST /v1/chat/completions`` (also ``/chat/completions``), ``POST /v1/messages``
  (Anthropic Messages, ``?beta=true`` included: the query goes upstream as sent) and
  ``POST /v1/responses`` (OpenAI Responses): the online write-back of that route's dialect
  (:meth:`iclr_cli.serve.state.ServeState.rewrite`, in a worker thread so scoring never blocks
  the event loop), then the request goes upstream; a streamed answer (SSE) is relayed chunk by
  chunk as it arrives (each event as the upstream sent it), anything else whole. Status, body
  and headers come back unchanged, so an upstream 429 or 529 reaches the client with the
  status and ``retry-after`` / ``x-should-retry`` headers its SDK retries on (nothing is sent
  before the upstream's status is known). While a relayed stream is silent, the client gets
  its API's keep-alive every ``keepalive_s`` (:mod:`iclr_cli.serve.keepalive`).
  While a streamed answer is relayed, its step is fed to the scorer as it comes
  (:mod:`iclr_cli.serve.along`); once the answer has been sent, the reply's step is scored
  ahead (:func:`~iclr_cli.serve.replies.prefetch`, :mod:`iclr_cli.serve.eager`).
- ``GET /health/liveliness``, ``GET /health/readiness`` and ``GET /healthz``
  (:mod:`iclr_cli.serve.health`), ``GET /stats`` (JSON, :mod:`iclr_cli.serve.stats`), ``GET /metrics``
  (Prometheus text).
- ``POST /iclr/hooks/{before,feed,reply}``: the engine for a gateway that forwards requests
  itself, every LiteLLM worker of a machine sharing this process's proxy model
  (:mod:`iclr_cli.serve.hooks_http`).
- Any other ``/v1/...`` path (``/v1/models``, ``/v1/messages/count_tokens`` among them) is
  passed through untouched.
- With client keys (``AppConfig.client_keys``), every route but the health probes first
  checks the client's key (:mod:`iclr_cli.serve.auth`): 401 in the path's API error shape
  without one of them.

While a request waits for scoring (at most the latency budget, :mod:`iclr_cli.serve.budget`),
the proxy watches its client and the shutdown: a client that has gone (Claude Code gives up
after 300 s and sends the request again) has its request dropped, never forwarded, counted in
``/stats`` as ``client_gone``; a proxy that stops answers 503 ``shutting_down`` at once, and a
request still waiting for the upstream's answer gets the same shortly before the server's
shutdown grace ends (uvicorn would cancel it into a 500 and a traceback). Either gets one log
line. So does a request held longer than :data:`~iclr_cli.serve.budget.WAIT_LOG_S` before its
answer starts, saying what it waits on (the scorer queue, the prefill of P, the upstream).

Request bodies over ``max_body_bytes`` get 413 before anything is parsed. Errors the proxy
itself answers (413; 502 when the upstream is unreachable, closes the connection without a
response or breaks off a whole-body answer; 504 on an upstream timeout; 503 for a request
whose scoring shutdown cancelled) use the error shape of the API the path belongs to
(Anthropic's under ``/v1/messages``, OpenAI's elsewhere). A streamed answer that breaks off
(the upstream closes or stalls mid-stream) cannot be turned into an error any more: the
client's connection is cut the same way (curl exit 18, the SDKs' connection error), the log
gets one line naming the upstream and the error, and ``/stats`` and ``/metrics`` count it as
an upstream error (outcome ``upstream_dropped``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

import orjson

from iclr_cli.scoring.base import ScoringCancelled
from iclr_cli.serve import encoding, exchange
from iclr_cli.serve.along import Feeder
from iclr_cli.serve.auth import ClientKeys, RequireClientKey
from iclr_cli.serve.budget import WAIT_LOG_S, Waiting, describe
from iclr_cli.serve.chat import CHAT
from iclr_cli.serve.dialect import Dialect
from iclr_cli.serve.messages import MessagesDialect
from iclr_cli.serve.responses import ResponsesDialect
from iclr_cli.serve.fingerprint import HEADER
from iclr_cli.serve import health, hooks_http
from iclr_cli.serve.hooks import Hooks
from iclr_cli.serve.keepalive import DEFAULT_INTERVAL_S, KeepAlive, kind_of, streaming_response
from iclr_cli.serve.state import Rewrite, ServeState
from iclr_cli.serve.upstream import Upstream, UpstreamConfig, is_event_stream, redact, response_headers

DEFAULT_MAX_BODY = 32 * 1024 * 1024
log = logging.getLogger("iclr.serve")


@dataclass(frozen=True)
class AppConfig:
    """Knobs of the HTTP side.

    Attributes:
        upstream: where requests go (and the key that replaces the client's, if any).
        max_body_bytes: request bodies over this get 413.
        keepalive_s: seconds of silence on a relayed stream before the client gets a
            keep-alive in its API's form (:mod:`iclr_cli.serve.keepalive`); 0: never.
        worker_threads: most requests compressed at once (each waits on the batching scorer).
        describe: settings shown in ``/stats`` (variant, ratio, proxy model...).
        shutdown_grace_s: seconds the server gives requests in flight once it stops; a
            request still waiting for the upstream's answer is answered 503 a second before.
        client_keys: the keys a client must present (:mod:`iclr_cli.serve.auth`); ``None``:
            anyone who reaches the port is served.
    """

    upstream: UpstreamConfig
    max_body_bytes: int = DEFAULT_MAX_BODY
    keepalive_s: float = DEFAULT_INTERVAL_S
    worker_threads: int = 64
    describe: tuple[tuple[str, object], ...] = ()
    shutdown_grace_s: float = 5.0
    client_keys: ClientKeys | None = field(default=None, repr=False)


class _TooLarge(Exception):
    pass


class _Dropped(Exception):
    """Ends a relayed stream whose upstream broke off: the ASGI server cuts the client's
    connection (no closing chunk), and :class:`_QuietDrops` keeps its traceback out of the log."""


class _QuietDrops(logging.Filter):
    """Drops uvicorn's "Exception in ASGI application" record for :class:`_Dropped` (the
    proxy already logged one line about it); every other error is logged as before."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        while len(getattr(exc, "exceptions", ())) == 1:  # a task group's ExceptionGroup of one
            exc = exc.exceptions[0]
        return not isinstance(exc, _Dropped)


def _quiet_drops() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietDrops) for f in logger.filters):
        logger.addFilter(_QuietDrops())


def failure_of(exc: Exception) -> tuple[str, str]:
    """(what happened, error code) for an upstream request that got no response: the
    connection was refused or never made (``upstream_unreachable``), or it was made and the
    upstream closed it, or answered something that is not HTTP (``upstream_no_response``)."""
    import httpx

    if isinstance(exc, (httpx.ConnectError, httpx.UnsupportedProtocol, httpx.ProxyError)):
        return f"is unreachable ({type(exc).__name__})", "upstream_unreachable"
    if isinstance(exc, httpx.RemoteProtocolError) and "without sending" not in str(exc):
        return f"sent a response that is not valid HTTP ({exc})", "upstream_no_response"
    return f"closed the connection without a response ({type(exc).__name__})", "upstream_no_response"


GONE, STOPPED = "client_gone", "shutting_down"


async def _race(work, request, stopped, stop_delay: float = 0.0, *, watch_client: bool = True):
    """``("done", value)`` once ``work()`` returns (``("error", exc)`` when it raises), or
    ``(GONE, None)`` as soon as the client disconnects (when ``watch_client``), or
    ``(STOPPED, None)`` ``stop_delay`` seconds after ``stopped`` (an ``anyio.Event``) is set;
    the loser is cancelled (a thread it waits on is abandoned, its result dropped)."""
    import anyio

    outcome: list = []

    async with anyio.create_task_group() as tg:
        async def run() -> None:
            try:
                outcome.append(("done", await work()))
            except Exception as exc:
                outcome.append(("error", exc))
            tg.cancel_scope.cancel()

        async def client() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            outcome.append((GONE, None))
            tg.cancel_scope.cancel()

        async def stop() -> None:
            await stopped.wait()
            await anyio.sleep(stop_delay)
            outcome.append((STOPPED, None))
            tg.cancel_scope.cancel()

        tg.start_soon(run)
        if watch_client:
            tg.start_soon(client)
        tg.start_soon(stop)
    return outcome[0]


def _error(dialect: Dialect, status: int, message: str, kind: str, code: str | None = None):
    from starlette.responses import Response

    return Response(dialect.error_body(status, message, kind, code), status_code=status, media_type="application/json")


def default_dialects() -> dict[str, Dialect]:
    """Upstream path -> the dialect of its route (plain upstream rules)."""
    return {"chat/completions": CHAT, "messages": MessagesDialect(), "responses": ResponsesDialect()}


async def _read_body(request, limit: int) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise _TooLarge
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > limit:
            raise _TooLarge
    return bytes(data)


def create_app(config: AppConfig, state: ServeState, *, dialects: dict[str, Dialect] | None = None, transport=None, on_shutdown=None):
    """Build the Starlette app.

    ``dialects`` maps the upstream paths ``chat/completions``, ``messages`` and ``responses``
    to their dialects (:func:`default_dialects` when ``None``; ``iclr serve`` builds them for
    the upstream kind). ``transport`` is an ``httpx`` transport for tests; ``on_shutdown`` is
    called after the upstream client is closed (the CLI closes the batching scorer and the
    store there).
    """
    dialects = {**default_dialects(), **(dialects or {})}
    anthropic = dialects["messages"]
    import anyio
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    upstream_holder: dict[str, Upstream] = {}
    limiter_holder: dict[str, anyio.CapacityLimiter] = {}
    stopped_holder: dict[str, anyio.Event] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app):
        _quiet_drops()  # here: uvicorn configures its loggers when its config is made
        upstream_holder["u"] = Upstream(config.upstream, transport=transport)
        limiter_holder["l"] = anyio.CapacityLimiter(config.worker_threads)
        stopped = stopped_holder["s"] = anyio.Event()
        loop = asyncio.get_running_loop()
        state.when_stopping(lambda: loop.call_soon_threadsafe(stopped.set))
        try:
            yield
        finally:
            await upstream_holder["u"].aclose()
            if on_shutdown is not None:
                on_shutdown()

    async def in_thread(fn, *args, abandon: bool = False):
        return await anyio.to_thread.run_sync(fn, *args, limiter=limiter_holder["l"], abandon_on_cancel=abandon)

    def stopping(dialect: Dialect, path: str, waited: float, on: str, conv):
        log.warning("a request to /v1/%s waiting for %s was answered 503 shutting_down after %.1f s: the proxy is stopping", path, on, waited)
        state.stats.request(conv.counts if conv else None, waited, None, STOPPED)
        return _error(dialect, 503, "iclr serve is shutting down; send the request again", "server_error", "shutting_down")

    def report_wait(path: str, waiting: Waiting, timers: list) -> None:
        if not waiting.upstream and waiting.current() is None:  # between two waits: say it once there is one
            timers.append(asyncio.get_running_loop().call_later(WAIT_LOG_S / 10, report_wait, path, waiting, timers))
            return
        conv = f" (conversation {waiting.conversation})" if waiting.conversation else ""
        log.warning("a request to /v1/%s%s has waited %.0f s so far, on %s", path, conv, time.monotonic() - waiting.start, describe(waiting, state.scorer))

    def dialect_of(path: str) -> Dialect:
        """The API a path belongs to (its error shape and key header)."""
        return anthropic if path == "messages" or path.startswith("messages/") else CHAT

    def too_large(dialect: Dialect):
        return _error(dialect, 413, f"request body over {config.max_body_bytes} bytes (iclr serve --max-body-mb)", "invalid_request_error", "request_too_large")

    async def send(request, path: str, body: bytes, decoded: bool = False):
        """Open the upstream request; (response, None) or (None, the proxy's error answer).
        ``decoded``: ``body`` is the client's compressed body decoded, sent as identity
        (:mod:`iclr_cli.serve.encoding`)."""
        import httpx

        upstream = upstream_holder["u"]
        dialect = dialect_of(path)
        key_header = "x-api-key" if dialect is anthropic else "authorization"
        headers = upstream.headers(request.headers, key_header)
        if decoded:
            headers = [(k, v) for k, v in headers if k.lower() != "content-encoding"]
        try:
            return await upstream.open(request.method, path, request.url.query, body, headers), None
        except httpx.TimeoutException:
            return None, _error(dialect, 504, f"iclr serve: the upstream {redact(config.upstream.base_url)} timed out", "upstream_error", "upstream_timeout")
        except httpx.HTTPError as exc:
            what, code = failure_of(exc)
            return None, _error(dialect, 502, f"iclr serve: the upstream {redact(config.upstream.base_url)} {what}", "upstream_error", code)

    said_codings: set[str] = set()

    def undecodable(path: str, exc: encoding.Undecodable):
        """The answer to a compressed body that did not decode (413, or 400 in the API's error
        shape), or ``None`` to forward it as sent (a coding no library here reads: logged once
        per coding, counted every time)."""
        dialect = dialect_of(path)
        if exc.kind == "too_large":
            state.stats.body_encoding(exc.coding, "too_large")
            return too_large(dialect)
        if exc.kind == "corrupt":
            state.stats.body_encoding(exc.coding, "corrupt")
            log.warning("a request to /v1/%s says Content-Encoding %s but does not decode (%s): answered 400", path, exc.coding, exc.reason)
            return _error(dialect, 400, f"iclr serve: the request body says Content-Encoding: {exc.coding} but does not decode ({exc.reason})",
                          "invalid_request_error", "bad_content_encoding")
        state.stats.body_encoding(exc.coding, "passed_through")
        if exc.coding not in said_codings:
            said_codings.add(exc.coding)
            log.warning("request bodies to /v1/%s with Content-Encoding %s are forwarded as sent and not compressed: no decoder for %s here%s; "
                        "counted in /stats request_bodies", path, exc.coding, exc.coding,
                        " (pip install brotli)" if exc.coding == "br" else "")
        return None

    def dropped(path: str, exc: Exception, then: str) -> None:
        log.warning("the upstream %s broke off its answer to /v1/%s (%s: %s); %s",
                    redact(config.upstream.base_url), path, type(exc).__name__, exc, then)

    async def relay(resp, path: str, finish, after=None, feeder: Feeder | None = None):
        """The upstream answer to the client: SSE chunk by chunk, anything else whole.
        ``finish(body or None, streamed, outcome)`` runs once the answer went through
        (``outcome``: ``ok``, ``upstream_error``, or ``upstream_dropped`` when it broke off);
        ``after()``, if given, once the response has been sent. ``feeder`` sees the relayed
        bytes after each chunk (scoring along the stream, :mod:`iclr_cli.serve.along`)."""
        import httpx
        from starlette.background import BackgroundTask

        headers = response_headers(resp.headers)
        background = BackgroundTask(after) if after is not None else None
        ok = "ok" if 200 <= resp.status_code < 300 else "upstream_error"
        if not is_event_stream(resp.headers):
            try:
                content = await resp.aread()
            except httpx.HTTPError as exc:  # nothing sent yet: the client gets a 502
                dropped(path, exc, "the client got a 502")
                await finish(None, False, "upstream_dropped")
                return _error(dialect_of(path), 502, f"iclr serve: the upstream {redact(config.upstream.base_url)} broke off its answer ({type(exc).__name__})", "upstream_error", "upstream_dropped")
            finally:
                await resp.aclose()
            await finish(content, False, ok)
            return Response(content, status_code=resp.status_code, headers=headers, background=background)

        async def chunks():
            kept: bytearray | None = bytearray()
            sent, broke = 0, None
            try:
                try:
                    async for chunk in resp.aiter_bytes():
                        if kept is not None:
                            kept += chunk
                            if len(kept) > config.max_body_bytes:
                                kept = None  # too long to read usage from; still relayed
                        sent += len(chunk)
                        yield chunk
                        if feeder is not None and ok == "ok":
                            feeder.chunk(kept)
                except httpx.HTTPError as exc:  # closed or stalled mid-stream (ReadError, RemoteProtocolError, ReadTimeout)
                    broke = exc
            finally:
                if feeder is not None:  # ended, or the client went away: its queued feeds go
                    feeder.close()
                with anyio.CancelScope(shield=True):
                    await resp.aclose()
                    if broke is None:
                        await finish(None if kept is None else bytes(kept), True, ok)
                    else:
                        await finish(None, True, "upstream_dropped")
            if broke is not None:
                dropped(path, broke, f"the client's connection was cut after {sent} bytes")
                raise _Dropped  # the client must see a broken stream, not a complete one

        keepalive = KeepAlive(config.keepalive_s, kind_of(path)) if config.keepalive_s > 0 else None
        return streaming_response(chunks(), keepalive, on_frame=state.stats.keepalive, status_code=resp.status_code, headers=headers, background=background)

    def compressing(dialect: Dialect, path: str):
        """The handler of one compressing route: the dialect's write-back, then upstream."""

        async def handle(request):
            waiting = Waiting()
            timers: list = []  # the log line's timer (re-armed while the request is between two waits)
            timers.append(asyncio.get_running_loop().call_later(WAIT_LOG_S, report_wait, path, waiting, timers))
            try:
                return await held(request, waiting)
            finally:
                for timer in timers:
                    timer.cancel()

        async def held(request, waiting: Waiting):
            start = waiting.start
            try:
                raw = await _read_body(request, config.max_body_bytes)
            except _TooLarge:
                return too_large(dialect_of(path))
            try:
                decoded = encoding.decode(raw, request.headers.get("content-encoding"), config.max_body_bytes)
            except encoding.Undecodable as exc:
                refused = undecodable(path, exc)
                if refused is not None:
                    return refused
                decoded = None  # no decoder here: forwarded as sent, logged and counted
                body = None
            else:
                if decoded is not None:
                    state.stats.body_encoding(request.headers.get("content-encoding", ""), "decoded")
                    raw = decoded
                try:
                    body = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    body = None
            work = lambda: in_thread(state.rewrite, body, raw, request.headers.get(HEADER), dialect, waiting, abandon=True)  # noqa: E731
            how, value = await _race(work, request, stopped_holder["s"])
            added = time.monotonic() - start
            conv = state.find(waiting.conversation)
            if how == GONE:  # Claude Code gave up (300 s) and will send it again: never forward this copy
                log.warning("the client of a request to /v1/%s%s went away after %.1f s, waiting on %s; it was not forwarded",
                            path, f" (conversation {waiting.conversation})" if waiting.conversation else "", added, describe(waiting, state.scorer))
                state.stats.request(conv.counts if conv else None, added, None, GONE)
                return Response(status_code=499)
            if how == STOPPED or (how == "error" and isinstance(value, ScoringCancelled)):
                # shutting down: the client sends it again to the next proxy
                return stopping(dialect_of(path), path, added, "scoring", conv)
            if how == "error":  # a bug or a full disk must not take the agent down: forward as sent
                log.warning("request forwarded unchanged: the write-back failed (%s: %s)", type(value).__name__, value)
                rewrite = Rewrite(raw, None)
            else:
                rewrite = value
            added = time.monotonic() - start
            if rewrite.report is not None:  # one line per request: what it decided, waited and added
                log.info("%s", rewrite.report.line(added))
            waiting.upstream = True
            how, value = await _race(lambda: send(request, path, rewrite.body, decoded is not None), request, stopped_holder["s"],
                                     max(config.shutdown_grace_s - 1, config.shutdown_grace_s / 2), watch_client=False)
            conv = state.find(rewrite.conversation)
            if how == STOPPED:
                return stopping(dialect_of(path), path, time.monotonic() - start, "the upstream", conv)
            if how == "error":
                raise value
            resp, failure = value
            if failure is not None:
                state.stats.request(conv.counts if conv else None, added, None, "upstream_error")
                return failure

            recorded: list = []

            async def finish(content: bytes | None, streamed: bool, outcome: str) -> None:
                target, done, usage = await exchange.finish(state, dialect, rewrite, conv, content, streamed, outcome, in_thread)
                if done is not None:
                    recorded.append(done)
                state.stats.request(target.counts if target else None, added, usage, outcome)

            async def score_ahead() -> None:
                # the reply has reached the client: its step is scored while the agent runs its tool
                await exchange.score_ahead(state, dialect, rewrite, recorded[0] if recorded else None, in_thread)

            feeder = Feeder(state, rewrite, dialect, in_thread) if state.scores_ahead else None
            return await relay(resp, path, finish, score_ahead if state.scores_ahead else None, feeder)

        return handle

    async def passthrough(request):
        try:
            raw = await _read_body(request, config.max_body_bytes)
        except _TooLarge:
            return too_large(dialect_of(request.path_params["path"]))
        resp, failure = await send(request, request.path_params["path"], raw)
        if failure is not None:
            return failure

        async def finish(content, streamed, outcome) -> None:
            pass

        return await relay(resp, request.path_params["path"], finish)

    async def stats(request):
        convs = state.conversations()
        scorer = state.scorer
        data = {
            "upstream": redact(config.upstream.base_url),
            **dict(config.describe),
            "conversations_held": len(convs),
            "keepalives_sent": state.stats.keepalives,
            "client_keys": len(config.client_keys) if config.client_keys is not None else 0,
            "unauthorized_requests": state.stats.unauthorized,
            "request_bodies": state.stats.bodies_record(),
            "scorer_batches": getattr(scorer, "batches", None),
            "largest_scorer_batch": getattr(scorer, "largest_batch", None),
            "scorer_state": scorer.cache_info() if hasattr(scorer, "cache_info") else None,
            "eager_scoring": state.stats.eager.to_record(),
            "scorer_queue": {**scorer.queue_info(), "requests_waiting": state.stats.waiting,
                             "work": scorer.work() if hasattr(scorer, "work") else None} if hasattr(scorer, "queue_info") else None,
            "total": state.stats.total.to_record(),
            "conversations": {c.id: c.counts.to_record() for c in reversed(convs)},
        }
        return Response(orjson.dumps(data), media_type="application/json")

    async def metrics(request):
        body, content_type = state.stats.metrics.render()
        return Response(body, media_type=content_type)

    routes = [
        Route("/v1/chat/completions", compressing(dialects["chat/completions"], "chat/completions"), methods=["POST"]),
        Route("/chat/completions", compressing(dialects["chat/completions"], "chat/completions"), methods=["POST"]),
        Route("/v1/messages", compressing(anthropic, "messages"), methods=["POST"]),
        Route("/v1/responses", compressing(dialects["responses"], "responses"), methods=["POST"]),
        *health.routes(state, redact(config.upstream.base_url)),
        Route("/stats", stats, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        # the engine for gateways that forward requests themselves (LiteLLM's workers): docs/fleet.md
        *hooks_http.routes(Hooks(state, dialects, in_thread, config.max_body_bytes), config.max_body_bytes),
        Route("/v1/{path:path}", passthrough, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ]
    middleware = []
    if config.client_keys is not None:
        from starlette.middleware import Middleware

        def refusal(path: str, message: str) -> bytes:
            return dialect_of(path.removeprefix("/v1/")).error_body(401, message, "invalid_request_error", "invalid_api_key")

        middleware.append(Middleware(RequireClientKey, keys=config.client_keys, error_body=refusal, refused=state.stats.refused))
    return Starlette(routes=routes, lifespan=lifespan, middleware=middleware)
