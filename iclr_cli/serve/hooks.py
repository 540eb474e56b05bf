"""The engine's side of a gateway's request hooks: rewrite a request, follow its reply.

A gateway that forwards requests itself (the LiteLLM proxy, through
:mod:`iclr_cli.serve.litellm_guardrail`) asks the engine three things per request, keyed by
the gateway's own call id:

1. :meth:`Hooks.before`: the client's body, rewritten as ``iclr serve`` would send it (the
   earlier steps' reasoning as decided, this request's late steps as the budget allows);
2. :meth:`Hooks.feed`: the bytes of a streamed reply as they arrive, so the step is scored
   along the stream (:class:`~iclr_cli.serve.along.Feeder`);
3. :meth:`Hooks.reply`: the whole reply (or that it failed), recorded under its conversation,
   then its step scored ahead while the agent runs its tool (:mod:`iclr_cli.serve.exchange`).

The same interface runs in the gateway's process (:class:`Hooks`) or in one ``iclr serve``
that every worker of a machine reaches over HTTP (:mod:`iclr_cli.serve.hooks_http`), so the
workers share one proxy model, one batcher and one kept scorer state (docs/fleet.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict

import orjson

from iclr_cli.serve import exchange
from iclr_cli.serve.along import Feeder
from iclr_cli.serve.budget import Waiting

log = logging.getLogger("iclr.serve")
# Requests rewritten whose reply is not in yet, at most: a request the gateway never answers
# (its client gone first) must not stay forever.
MAX_PENDING = 10_000


class _Call:
    """One request between :meth:`Hooks.before` and :meth:`Hooks.reply`."""

    __slots__ = ("route", "rewrite", "conv", "added_s", "relayed", "feeder")

    def __init__(self, route: str, rewrite, conv, added_s: float):
        self.route, self.rewrite, self.conv, self.added_s = route, rewrite, conv, added_s
        self.relayed: bytearray | None = bytearray()
        self.feeder: Feeder | None = None


class Hooks:
    """The three hooks on the engine's state, in this process.

    Args:
        state: the :class:`~iclr_cli.serve.state.ServeState`.
        dialects: route (``chat/completions``, ``messages``, ``responses``) -> its dialect.
        in_thread: ``async (fn, *args) -> result``, running blocking work (scoring, the
            store) in a worker thread so the event loop never waits on it.
        max_reply_bytes: a streamed reply longer than this is not kept (nor read).
    """

    def __init__(self, state, dialects: dict, in_thread, max_reply_bytes: int = 32 * 1024 * 1024):
        self.state, self.dialects, self.in_thread = state, dialects, in_thread
        self.max_reply_bytes = max_reply_bytes
        self._calls: OrderedDict[str, _Call] = OrderedDict()
        self._tasks: set[asyncio.Task] = set()

    def route_of(self, call_id: str) -> str | None:
        """The route of ``call_id`` while it is followed (:meth:`before` took it, its reply has
        not come yet), else ``None``."""
        call = self._calls.get(call_id)
        return call.route if call is not None else None

    async def before(self, call_id: str | None, route: str, body: dict, header: str | None) -> dict | None:
        """``body`` (the client's request fields) as it goes upstream, or ``None`` when nothing
        changed. ``header``: the client's conversation header, if it sent one
        (:data:`~iclr_cli.serve.fingerprint.HEADER`). With a ``call_id`` the request is
        followed until :meth:`reply`.

        Raises:
            Exception: whatever the write-back raised; the caller forwards the request as the
                client sent it.
        """
        waiting = Waiting()
        rewrite = await self.in_thread(self.state.rewrite, body, b"", header, self.dialects[route], waiting)
        added = time.monotonic() - waiting.start
        if rewrite.report is not None:  # serve's line per request: what it decided, waited and added
            log.info("%s", rewrite.report.line(added))
        if call_id:
            self._calls[call_id] = _Call(route, rewrite, self.state.find(rewrite.conversation), added)
            while len(self._calls) > MAX_PENDING:
                self._calls.popitem(last=False)
        return orjson.loads(rewrite.body) if rewrite.body else None  # b"": nothing changed

    def feed(self, call_id: str, piece: bytes | None) -> None:
        """The streamed reply of ``call_id`` grew by ``piece`` (``None``: it can no longer be
        read, nothing more is kept). Call from the event loop."""
        call = self._calls.get(call_id)
        if call is None or call.relayed is None:
            return
        if piece is None or len(call.relayed) + len(piece) > self.max_reply_bytes:
            call.relayed = None
        else:
            call.relayed += piece
        if call.feeder is None and self.state.scores_ahead:
            call.feeder = Feeder(self.state, call.rewrite, self.dialects[call.route], self.in_thread)
        if call.feeder is not None:
            call.feeder.chunk(call.relayed)

    async def reply(self, call_id: str, content: bytes | None, streamed: bool, outcome: str) -> None:
        """The reply of ``call_id`` is in: ``content`` the whole body (``None`` when not
        streamed and not readable), or for a stream the bytes :meth:`feed` kept; ``outcome``
        ``ok``, ``upstream_error`` or ``upstream_dropped``. The reply is recorded and counted;
        an ``ok`` one's step is scored ahead in the background. Never raises."""
        call = self._calls.pop(call_id, None)
        if call is None:
            return
        if call.feeder is not None:
            call.feeder.close()
        if streamed:
            content = bytes(call.relayed) if call.relayed is not None else None
        ok = outcome == "ok"
        dialect = self.dialects[call.route]
        target, recorded, usage = await exchange.finish(self.state, dialect, call.rewrite, call.conv, content if ok else None,
                                                        streamed, outcome, self.in_thread)
        self.state.stats.request(target.counts if target else None, call.added_s, usage, outcome)
        if ok and self.state.scores_ahead:
            task = asyncio.ensure_future(exchange.score_ahead(self.state, dialect, call.rewrite, recorded, self.in_thread))
            self._tasks.add(task)  # held: the event loop keeps only weak references
            task.add_done_callback(self._tasks.discard)
