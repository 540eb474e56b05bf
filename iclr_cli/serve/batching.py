"""One scorer thread that batches the requests of every conversation scoring at the same moment.

The proxy compresses each step in a worker thread (never on the event loop) by calling
:func:`iclr_cli.compress.compress_step`, exactly as replay does. The scorer those calls get is a
:class:`BatchingScorer`: its :meth:`~BatchingScorer.score` queues the requests and waits, while
one thread owns the real scorer (which, with its per-conversation caches, is not thread-safe),
takes everything queued, waits ``wait_s`` for stragglers, and scores it in one batched call. So
steps of several conversations that complete together share one forward pass
(lm-evaluation-harness style batching is inside the scorer; this only gathers the batch).

Two queues: requests a client is waiting for (``score``) go before requests scored ahead of
time (``submit(..., eager=True)``, :mod:`iclr_cli.serve.eager`), and the two never share a
batch, so work done ahead never delays a request in progress by more than the batch already
running. Work ahead runs earliest deadline first, by the rules of :mod:`iclr_cli.serve.schedule`
(a finished step's next request within a tool's time, a streaming reply's pieces by its end, a
request's P and history before its reply streams, a late step's scoring whenever the scorer is
free). :meth:`~BatchingScorer.promote` moves an eager request that a client now waits for to
the front, :meth:`~BatchingScorer.demote` moves one back once its client stopped waiting (the
latency budget ran out: :mod:`iclr_cli.serve.budget`), and :meth:`~BatchingScorer.drop` takes
one out of the queue whose result nobody will read. :meth:`~BatchingScorer.forget` drops a
conversation's cache in the scorer thread. :meth:`~BatchingScorer.queue_info` and
:meth:`~BatchingScorer.where` say what is queued and running (``/stats``, and the log line of
a request that waits).

A batch that raises is scored again one request at a time, so one bad request fails only its
own conversation's step.

Shutdown does not wait for the work in progress (a first step's prefill can take minutes on a
CPU): :meth:`~BatchingScorer.stop` cancels the inner scorer (``cancel()``, checked between
forward chunks) and at once fails everything queued and the batch running with
:class:`~iclr_cli.scoring.base.ScoringCancelled` (a forward chunk can outlast the server's
shutdown grace), which the proxy answers with 503 instead of recording a failed step.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import replace

from iclr_cli.scoring.base import ScoreRequest, ScoreResult, Scorer, ScoringCancelled
from iclr_cli.serve.schedule import BatchTimes, Call, Where, apart, label, pick_ahead


log = logging.getLogger("iclr.serve")
LATE_IDLE_S = 2.0
CONTEXT_PIECE_TOKENS = 256
"""Tokens of a P-and-history feed per batch on a CPU: about 0.7 s of SmolLM2 on two AVX2 cores
(~380 tokens a second), so a step due now waits at most that long behind another
conversation's history; each piece costs one forward call's fixed cost (~0.07 s) more."""


def _settle(future: Future, result=None, error: BaseException | None = None) -> None:
    """Set a future's outcome unless it already has one (failed by :meth:`BatchingScorer.stop`,
    or dropped)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except InvalidStateError:
        pass


class BatchingScorer:
    """A :class:`~iclr_cli.scoring.base.Scorer` that gathers concurrent calls into batches.

    Args:
        inner: the real scorer; only the batching thread ever calls it.
        max_batch: most requests per call of ``inner.score``.
        wait_s: how long to wait for more requests once the first one arrived (seconds).
        max_calls: most calls gathered into one batch (default: 1 when ``inner`` runs on a
            CPU, else unbounded). Every result of a batch arrives when the batch ends, and on a
            CPU a wider batch is no faster per token (BENCHMARKS.md, "Batching": one row
            already keeps the cores busy), so gathering four conversations' steps there only
            makes all four wait for the last: under load every one of them then misses its
            budget, where one at a time the first ones are on time.
        late_idle_s: late work (calls without a deadline: steps sent late, scored for a later
            break) starts only once the scorer has run nothing else for this long, so that in
            a busy stretch it never holds a step that can still be on time; it runs in the
            pauses (a user reading, a long tool), which is when a provider's cache expires.
        context_piece: most tokens a request's P-and-history feed runs in one batch
            (``ScoreRequest.limit``; default :data:`CONTEXT_PIECE_TOKENS` on a CPU, uncut
            elsewhere). The rest goes back to the head of its queue, so a step due now runs
            between the pieces instead of after the whole history (a tool's output of a
            thousand tokens is seconds of a CPU, and a batch is never interrupted).

    ``batches`` counts calls of ``inner.score``; ``largest_batch`` is the most requests one
    call scored. Call :meth:`close` (or :meth:`stop`, which does not wait) to stop the thread.
    """

    def __init__(self, inner: Scorer, *, max_batch: int = 32, wait_s: float = 0.002, max_calls: int | None = None,
                 late_idle_s: float = LATE_IDLE_S, context_piece: int | None = None):
        self.inner = inner
        cpu = getattr(inner, "device_type", None) == "cpu"
        if max_calls is None:
            max_calls = 1 if cpu else max_batch
        self.max_calls = max(1, max_calls)
        self.context_piece = context_piece if context_piece is not None else (CONTEXT_PIECE_TOKENS if cpu else None)
        self.name = inner.name
        self.max_tokens = inner.max_tokens
        self.overflow = inner.overflow
        self.tokenizer = inner.tokenizer
        self.max_batch = max_batch
        self.wait_s = wait_s
        self.batches = 0
        self.largest_batch = 0
        self.on_batch = None  # callable(size) for metrics
        self._cond = threading.Condition()
        self._urgent: deque[Call] = deque()
        self._eager: deque[Call] = deque()
        self._streams: deque[tuple[str, ...]] = deque()  # ("forget", stream) and ("rename", old, new), before the next batch
        self._running: tuple[list[Call], float, str] | None = None  # (batch, started, kind)
        # recent batch seconds by kind (:meth:`_kind`): a step fed along the stream, a finished
        # step, a prefill of P; mixed, the feeds' seconds would say nothing of a step's
        self.times = BatchTimes()
        self.late_idle_s = late_idle_s
        self._last_on_time = float("-inf")  # when the last batch with a deadline ended
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="iclr-scorer", daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        """Calls waiting for a batch (not counting the one running)."""
        return len(self._urgent) + len(self._eager)

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Queue ``requests`` for the next batch and wait for their results (in order).

        Raises:
            whatever ``inner.score`` raised for these requests; ScoringCancelled (a
            RuntimeError) once :meth:`stop` or :meth:`close` was called.
        """
        return self.submit(requests).result()

    def submit(self, requests: Sequence[ScoreRequest], *, eager: bool = False, due: float | None = None) -> Future:
        """Queue ``requests`` and return the future of their results (a list, in order).
        ``eager``: nobody waits for them yet; they run when no waited-for request is queued,
        earliest ``due`` first (seconds from now by which the result is wanted; ``None``:
        whenever the scorer is free).

        Raises:
            ScoringCancelled: after :meth:`stop` or :meth:`close`.
            RuntimeError: when the thread died.
        """
        future: Future = Future()
        with self._cond:
            if self._closed:
                raise ScoringCancelled("the scorer was stopped")
            if not self._thread.is_alive():
                raise RuntimeError("the scorer thread has stopped")
            now = time.monotonic()
            when = now + due if due is not None else float("inf")
            (self._eager if eager else self._urgent).append(Call(list(requests), future, now, when, waited=not eager))
            self._cond.notify_all()
        return future

    def _move(self, future: Future, source: deque, target: deque | None) -> bool:
        with self._cond:
            for call in source:
                if call.future is future:
                    source.remove(call)
                    if target is not None:
                        target.append(call)
                    self._cond.notify_all()
                    return True
        return False

    def promote(self, future: Future) -> bool:
        """Move the eager call of ``future`` to the waited-for queue; False when it is no
        longer queued (running or done)."""
        with self._cond:
            for call in self._eager:
                if call.future is future:
                    call.waited = True
        return self._move(future, self._eager, self._urgent)

    def demote(self, future: Future) -> bool:
        """Move the waited-for call of ``future`` behind the work ahead (nobody waits for it
        any more, its result is still wanted); False when it is not in that queue."""
        with self._cond:
            for call in self._urgent:
                if call.future is future:
                    call.due, call.waited = float("inf"), False
        return self._move(future, self._urgent, self._eager)

    def drop(self, future: Future) -> bool:
        """Take the call of ``future`` out of either queue and cancel the future (nobody will
        read its result); False when it is running or done (it then finishes unread)."""
        if self._move(future, self._urgent, None) or self._move(future, self._eager, None):
            future.cancel()
            return True
        return False

    def where(self, future: Future) -> Where:
        """Where the call of ``future`` stands (:class:`Where`); safe from any thread."""
        with self._cond:
            for queue, waited in ((self._urgent, True), (self._eager, False)):
                for i, call in enumerate(queue):
                    if call.future is future:
                        return Where("queued", ahead=i + (len(self._urgent) if not waited else 0), waited_for=waited)
            running = self._running
            if running is not None and any(call.future is future for call in running[0]):
                return Where("running", since=time.monotonic() - running[1], prefill=running[2] == "prefill")
        return Where("done")

    def _kind(self, requests) -> str:
        """``prefill`` when a request runs P and the history from the start, else ``feed`` when
        every request is partial (a step fed along the stream), else ``step``."""
        prefills = getattr(self.inner, "prefills", None)
        if prefills is not None and any(prefills(r) for r in requests):
            return "prefill"
        return "feed" if all(getattr(r, "partial", False) for r in requests) else "step"

    def eta(self, future: Future) -> float:
        """Seconds until the call of ``future`` is expected to be done: what the batch running
        has left, and for a queued call a batch of its kind (a prefill of P or not: the median
        of recent ones; 0 while none has run). A batch running longer than its kind's median,
        or of a kind none of which has finished, is expected to run as long again as it has
        so far (the best guess when its length is unknown: a CPU prefill of P that has run for
        a minute has minutes left more often than seconds). For a request deciding whether
        a wait can end within its budget; 0 for a call that is done."""
        with self._cond:
            running = self._running
            queued = next((c for q in (self._urgent, self._eager) for c in q if c.future is future), None)
            mine = running is not None and any(c.future is future for c in running[0])
            if queued is None and not mine:
                return 0.0
            left = 0.0
            if running is not None:
                elapsed = time.monotonic() - running[1]
                typical = self.times.typical(running[2])
                left = typical - elapsed if typical is not None and typical > elapsed else elapsed
            if mine:
                return left
            own = self.times.typical(self._kind(queued.requests))
            return left + (own or 0.0)

    def queue_info(self) -> dict:
        """The scorer queue for ``/stats``: ``depth`` (calls queued, not counting the batch
        running), ``waited_for`` and ``ahead`` (of them, calls a client waits for and work
        ahead of time), ``oldest_s`` (seconds the oldest queued call has waited, ``None`` when
        none is), ``running_s`` (seconds the batch in progress has run, ``None`` when idle)
        and ``running_prefill`` (that batch runs a conversation's first scored step)."""
        now = time.monotonic()
        with self._cond:
            queued = [*self._urgent, *self._eager]
            running = self._running
            urgent = len(self._urgent)
        return {
            "depth": len(queued),
            "waited_for": urgent,
            "ahead": len(queued) - urgent,
            "oldest_s": round(now - min(c.queued_at for c in queued), 3) if queued else None,
            "running_s": round(now - running[1], 3) if running is not None else None,
            "running_prefill": running is not None and running[2] == "prefill",
        }

    def forget(self, stream: str) -> None:
        """Drop ``stream``'s cache in the scorer (when it has one) before the next batch."""
        if getattr(self.inner, "forget", None) is None:
            return
        with self._cond:
            self._streams.append(("forget", stream))
            self._cond.notify_all()

    def rename(self, old: str, new: str) -> None:
        """Move ``old``'s cache to ``new`` in the scorer (when it has one) before the next batch,
        and make the calls still queued for ``old`` calls for ``new``: a conversation's first
        reply is fed along the stream before it has its id (:mod:`iclr_cli.serve.along`)."""
        if getattr(self.inner, "rename", None) is None:
            return
        with self._cond:
            for call in (*self._urgent, *self._eager):
                call.requests = [replace(r, stream=new) if r.stream == old else r for r in call.requests]
            self._streams.append(("rename", old, new))
            self._cond.notify_all()

    def cache_info(self) -> dict | None:
        """The inner scorer's :meth:`cache_info`, or ``None`` for a scorer without caches."""
        info = getattr(self.inner, "cache_info", None)
        return info() if info is not None else None

    def stop(self) -> None:
        """Stop without waiting: the batch in progress and every queued call fail at once
        with :class:`ScoringCancelled` (their waiters return now), and the inner scorer is
        cancelled before its next forward chunk when it has ``cancel()``. Safe from any
        thread, the event loop included."""
        with self._cond:
            self._closed = True
            waiting = [*self._urgent, *self._eager, *(self._running[0] if self._running is not None else ())]
            self._urgent.clear()
            self._eager.clear()
            self._cond.notify_all()
        for call in waiting:
            _settle(call.future, error=ScoringCancelled("the scorer was stopped"))
        cancel = getattr(self.inner, "cancel", None)
        if cancel is not None:
            cancel()

    def close(self, timeout: float = 10.0) -> None:
        """:meth:`stop`, then wait up to ``timeout`` seconds for the thread to end (a daemon:
        one still inside a forward chunk does not keep the process alive)."""
        self.stop()
        self._thread.join(timeout=timeout)

    def _next(self) -> tuple[list, list[str]] | None:
        """The next batch and the stream operations to run first (forget, rename); ``None`` once closed."""
        with self._cond:
            while True:
                while not (self._urgent or self._eager or self._streams or self._closed):
                    self._cond.wait()
                quiet = time.monotonic() - self._last_on_time
                if self._urgent or self._streams or self._closed or quiet >= self.late_idle_s or not self._only_late():
                    break
                self._cond.wait(self.late_idle_s - quiet)  # late work waits for a quiet scorer
            ops = list(self._streams)
            self._streams.clear()
            if self._closed:
                return None
            if not (self._urgent or self._eager):
                return [], ops
            if not self._urgent:  # work ahead: what is queued now, no waiting for more
                return self._start(self._pick_ahead()), ops
            batch = [self._urgent.popleft()]
            size = len(batch[0].requests)
            deadline = time.monotonic() + self.wait_s
            while size < self.max_batch and len(batch) < self.max_calls and not self._closed:
                if self._urgent:
                    if not apart(batch, self._urgent[0]):
                        break
                    batch.append(self._urgent.popleft())
                    size += len(batch[-1].requests)
                    continue
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    break
                self._cond.wait(timeout)
            if self._closed:  # stop() came while gathering: these were not failed by it
                for call in batch:
                    _settle(call.future, error=ScoringCancelled("the scorer was stopped"))
                return None
            return self._start(batch), ops

    def _only_late(self) -> bool:
        """True when every call queued is late work (no deadline; called with the lock held)."""
        return not self._urgent and all(call.late for call in self._eager)

    def _pick_ahead(self) -> list[Call]:
        """The next batch of work ahead, taken out of the queue (called with the lock held):
        :func:`~iclr_cli.serve.schedule.pick_ahead`."""
        batch = pick_ahead(self._eager, self._kind, max_batch=self.max_batch, max_calls=self.max_calls)
        for call in batch:
            self._eager.remove(call)
        return batch

    def _start(self, batch: list[Call]) -> list[Call]:
        """Mark ``batch`` as running (called with the lock held, in the scorer thread)."""
        self._running = (batch, time.monotonic(), self._kind([r for call in batch for r in call.requests]))
        return batch

    def _run(self) -> None:
        warm = getattr(self.inner, "warm", None)
        if callable(warm):  # the shared P states of earlier runs, before the first batch
            try:
                warm()
            except Exception:  # a cache that cannot be read is a cold start, not a failure
                pass
        while True:
            step = self._next()
            if step is None:
                self._fail_waiting()
                return
            batch, ops = step
            for op, *streams in ops:
                getattr(self.inner, op)(*streams)  # forget(stream) or rename(old, new)
            if not batch:
                continue
            what, before = label(batch, prefill=self._running is not None and self._running[2] == "prefill"), self._forwarded()
            try:
                self._score(batch)
            finally:
                ran = self._forwarded() - before
                with self._cond:
                    if self._running is not None:
                        _, started, kind = self._running
                        took = time.monotonic() - started
                        self.times.record(kind, what, took, ran)
                        if what != "late":
                            self._last_on_time = time.monotonic()
                        log.debug("scorer: %s batch (%s), %d call(s) of %d stream(s), %d tokens forwarded in %.2f s; queued after it: %d waited for, %d ahead",
                                  what, kind, len(batch), len({r.stream for call in batch for r in call.requests}), max(ran, 0), took,
                                  len(self._urgent), len(self._eager))
                    self._running = None

    def _forwarded(self) -> int:
        """Tokens the inner scorer has run through its model so far (0 when it does not say)."""
        info = self.cache_info()
        return int((info or {}).get("forward_tokens") or 0)

    def work(self) -> dict:
        """Per :data:`~iclr_cli.serve.schedule.WORK` entry: batches run, scorer seconds and tokens forwarded, so far:
        where a serve step's scoring goes (``/stats`` ``scorer_queue.work``)."""
        with self._cond:
            return self.times.work()

    def _piece(self, request: ScoreRequest) -> ScoreRequest:
        """``request`` with the context piece's limit when it is a P-and-history feed."""
        if self.context_piece and request.partial and not request.step and request.limit is None:
            return replace(request, limit=self.context_piece)
        return request

    def _again(self, calls: list[Call]) -> None:
        """Put calls whose feed ran one piece back at the head of their queue, in order (the
        rest of each continues the state the piece left; nothing of their stream runs before)."""
        with self._cond:
            for call in reversed(calls):
                if self._closed:
                    _settle(call.future, error=ScoringCancelled("the scorer was stopped"))
                elif not call.future.done():  # dropped meanwhile: nobody reads the rest
                    (self._urgent if call.waited else self._eager).appendleft(call)
            self._cond.notify_all()

    def _score(self, batch: list[Call]) -> None:
        flat = [self._piece(r) for call in batch for r in call.requests]
        self.batches += 1
        self.largest_batch = max(self.largest_batch, len(flat))
        if self.on_batch is not None:
            self.on_batch(len(flat))
        try:
            results = self.inner.score(flat)
        except ScoringCancelled as exc:
            for call in batch:
                _settle(call.future, error=exc)
        except Exception:
            for call in batch:
                self._score_alone(call)
        else:
            pos, again = 0, []
            for call in batch:
                got = results[pos : pos + len(call.requests)]
                pos += len(call.requests)
                if any(getattr(r, "pending_tokens", 0) for r in got):
                    again.append(call)
                else:
                    _settle(call.future, got)
            if again:
                self._again(again)

    def _fail_waiting(self) -> None:
        with self._cond:
            waiting = [*self._urgent, *self._eager]
            self._urgent.clear()
            self._eager.clear()
        for call in waiting:
            _settle(call.future, error=ScoringCancelled("the scorer was stopped"))

    def _score_alone(self, call: Call) -> None:
        if call.future.done():  # dropped or failed by stop() meanwhile
            return
        try:
            _settle(call.future, self.inner.score(call.requests))
        except Exception as exc:  # the step's conversation records the failure
            _settle(call.future, error=exc)
