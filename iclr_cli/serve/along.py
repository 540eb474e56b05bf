"""Scoring along the stream: the proxy works while the upstream does (docs/serve.md, "Scoring
along the stream").

Most of an agent's turn is the upstream working: 1.5-3 s to the first token, then ~250 output
tokens at 50-80 tokens a second, against a tool call of a fraction of a second. A step whose
scoring started only once its reply was relayed had the tool's time plus ``--max-wait`` to
finish, and went late. So the scorer is fed as early as each piece of its input is known, in
the scorer's one path (partial requests, ``ScoreRequest.partial``: the stream's kept state
grows by the settled tokens, with their entropies):

1. **When a request arrives**, once its completed steps are decided: P and the history as it
   will be sent (:func:`feed_context`), the tokens every scorer input of the next step starts
   with. A first request has no conversation id yet (the id covers the first reply): it is fed
   under a provisional stream (:func:`feed_first`), renamed once the reply gives the id
   (:func:`rename`), so P is read at the first request, beside the upstream.
2. **While the reply streams**, its step as far as it has come (:class:`Feeder`): the relayed
   bytes are read as a reply (every carrier the dialects read: Anthropic ``thinking_delta``,
   Responses reasoning text and summary deltas, chat ``reasoning_content`` / ``reasoning`` and
   ``<think>`` in content), continued onto the request as the next request will send it, and
   the step's scorer request is queued as a partial request. One feed per reply is queued or
   running at a time; the next starts at the first chunk after it finished and at least
   :data:`MIN_INTERVAL_S` after the last, so a fast scorer follows the stream closely and a slow
   one takes bigger pieces.
3. **Once the reply has been relayed**, the finished step is scored ahead as before
   (:mod:`iclr_cli.serve.eager`): the same request the next request will claim, which now runs
   only the last word held back and finds every other entropy kept.

The bytes sent upstream never depend on feeds: a feed changes only what the scorer has
already run, never a score (the equality tests: ``tests/test_scoring_along_stream.py``).
Feeds are work ahead: they queue behind every request a client waits for, so one
conversation's stream never holds up another's waiting request beyond the batch running. A
client that goes away mid-stream has its reply's queued feeds dropped (:meth:`Feeder.close`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from concurrent.futures import Future
from dataclasses import replace

from iclr_cli.compress import context_request, prepare_step
from iclr_cli.errors import IclrError
from iclr_cli.serve import shared
from iclr_cli.serve.dialect import Dialect, Reply, Request
from iclr_cli.serve.fingerprint import step_keys

# Least time between two feeds of one reply, and least new bytes of SSE before the next: a feed
# reads the whole request again (tens of milliseconds for a large P), and a scorer call has a
# fixed cost; a quarter second is 12-20 tokens of a reply at 50-80 tokens a second.
MIN_INTERVAL_S = 0.25
MIN_NEW_BYTES = 200
# When the scorer should have run each feed (seconds after it was queued), for its earliest-
# deadline-first queue (:mod:`iclr_cli.serve.batching`): a streaming reply's piece by the time
# the reply ends (a provider streams ~250 tokens at 50-80 a second); a request's P and history
# by the time its reply's reasoning starts to stream (1.5-3 s to the first token). A finished
# step (:data:`iclr_cli.serve.eager.STEP_DUE_S`) goes before both.
REPLY_DUE_S = 2.0
CONTEXT_DUE_S = 3.0


def _submit(state, request, due: float) -> Future | None:
    submit = getattr(state.scorer, "submit", None)
    if submit is None or not state.scores_ahead or request is None:
        return None
    try:
        return submit([request], eager=True, due=due)
    except RuntimeError:  # stopped
        return None


def feed_context(state, stream: str, trajectory) -> Future | None:
    """Queue P and ``trajectory``'s steps (the completed steps as the request sends them) for
    ``stream`` as a partial request (:func:`iclr_cli.compress.context_request`); the future of
    that work, or ``None`` when nothing was queued (the scorer does not score ahead, or the
    variant's scorer input holds no history)."""
    future = _submit(state, context_request(stream, trajectory.prompt, trajectory.steps, state.settings), CONTEXT_DUE_S)
    if future is not None:
        state.stats.eager_event("fed_context")
    return future


def feed_first(state, request: Request, dialect: Dialect) -> str | None:
    """For a first request (no conversation id before its reply): a provisional stream, with
    its P and task queued under it (:func:`feed_context`); ``None`` when nothing was queued."""
    if not state.scores_ahead:
        return None
    stream = f"first:{uuid.uuid4().hex}"
    try:
        trajectory = dialect.read(request, stream).trajectory
    except (IclrError, KeyError, TypeError, AttributeError, ValueError):
        return None
    return stream if feed_context(state, stream, trajectory) is not None else None


def rename(state, old: str, new: str) -> None:
    """The scorer state fed under ``old`` (a first request's provisional stream) is ``new``'s."""
    move = getattr(state.scorer, "rename", None)
    if move is not None:
        move(old, new)


def forget(state, stream: str) -> None:
    """Drop the scorer state fed under ``stream`` (a first request whose reply started no
    conversation), so that it never takes the room of a live conversation's."""
    drop = getattr(state.scorer, "forget", None)
    if drop is not None:
        drop(stream)


def feed_reply(state, conv_id: str | None, stream: str, request: Request, content: bytes, dialect: Dialect) -> Future | None:
    """Queue the step of a reply still streaming (``content``: the SSE bytes relayed so far) as
    a partial request under ``stream``; its future, or ``None`` when nothing was queued (no
    reasoning yet, an earlier step undecided, nothing to score). Runs in a worker thread."""
    reply = dialect.read_partial(content)
    if not reply.items:
        return None
    conv = state.find(conv_id)
    with conv.lock if conv is not None else contextlib.nullcontext():
        found = ahead_request(state, conv, stream, request, reply, dialect)
    if found is None:
        return None
    future = _submit(state, replace(found[0], partial=True), REPLY_DUE_S)
    if future is not None:
        state.stats.eager_event("fed_reasoning")
    return future


class Feeder:
    """Feeds one relayed reply to the scorer while it streams (module docstring, step 2).

    Args:
        state: the :class:`~iclr_cli.serve.state.ServeState`.
        rewrite: the request as it went upstream (its conversation, parsed request and stream).
        dialect: the route's dialect.
        in_thread: ``async (fn, *args) -> result``, running ``fn`` in a worker thread.

    Call :meth:`chunk` from the event loop with the bytes relayed so far after each chunk, and
    :meth:`close` once the reply has ended (or the client went away).
    """

    def __init__(self, state, rewrite, dialect: Dialect, in_thread):
        self.state, self.dialect, self.in_thread = state, dialect, in_thread
        self.conversation, self.request, self.stream = rewrite.conversation, rewrite.request, rewrite.stream
        self.enabled = state.scores_ahead and self.request is not None and self.stream is not None
        self._busy = False
        self._closed = False
        self._fed_bytes = 0
        self._fed_at = 0.0
        self._futures: list[Future] = []
        self._task: asyncio.Task | None = None  # the feed in flight (held: the event loop keeps only weak references)

    def chunk(self, relayed: bytearray | None) -> None:
        """The reply has grown to ``relayed`` (``None``: too long to keep; nothing more is fed)."""
        if not self.enabled or self._closed or self._busy or relayed is None:
            return
        now = time.monotonic()
        if len(relayed) - self._fed_bytes < MIN_NEW_BYTES or now - self._fed_at < MIN_INTERVAL_S:
            return
        self._busy, self._fed_bytes, self._fed_at = True, len(relayed), now
        self._task = asyncio.ensure_future(self._feed(bytes(relayed)))

    async def _feed(self, content: bytes) -> None:
        try:
            future = await self.in_thread(feed_reply, self.state, self.conversation, self.stream, self.request, content, self.dialect)
            if future is not None and not self._closed:
                self._futures.append(future)
                with contextlib.suppress(Exception):
                    await asyncio.wrap_future(future)
        except Exception:  # a feed is only work saved: the finished step is scored anyway
            pass
        finally:
            self._busy = False

    def close(self) -> None:
        """The reply has ended or its client went away: feeds still queued are dropped (the
        finished step's request supersedes them, or nobody will send it)."""
        self._closed = True
        drop = getattr(self.state.scorer, "drop", None)
        for future in self._futures:
            if drop is not None and not future.done():
                drop(future)
        self._futures.clear()


def ahead_request(state, conv, stream: str, request: Request, reply: Reply, dialect: Dialect):
    """``(scorer request, step key, prepared step)`` of ``reply``'s step as the next request will send it:
    ``request`` continued by ``reply`` (whose step is then the last one), the earlier
    steps as they stand (a step sent late and not yet compressed: as generated), under
    ``stream``; ``None`` when the reply was not read, an earlier step is not decided yet,
    the step is decided already, or it has nothing to score. ``reply`` may be a reply
    still streaming (its step as far as it has come). Call it holding ``conv.lock``
    (``conv`` is ``None`` for a first request: no earlier step)."""
    continued = dialect.continued(request, reply)
    memory = conv.reasoning if conv is not None else {}
    sent = dialect.restore(continued, memory) if state.restore_reasoning else continued
    try:
        transcript = dialect.read(sent, stream)
    except (IclrError, KeyError, TypeError, AttributeError, ValueError):
        return None
    read = transcript.trajectory
    if not read.steps:
        return None
    last = len(read.steps) - 1
    keys = step_keys(conv.id if conv is not None else stream, dialect, sent, transcript.ends)
    steps = conv.steps if conv is not None else {}
    if keys[last] in steps:
        return None
    done = []
    for step, key in zip(read.steps[:last], keys):
        stored = shared.known(state, conv, key) if conv is not None else None
        if stored is None:
            return None
        done.append(step.with_reasoning(stored.texts))
    prepared = prepare_step(stream, read.prompt, done, read.steps[last], state.settings)
    return (prepared.request, keys[last], prepared) if prepared.request is not None else None
