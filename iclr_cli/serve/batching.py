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
running. :meth:`~BatchingScorer.promote` moves an eager request that a client now waits for to
the front. :meth:`~BatchingScorer.forget` drops a conversation's cache in the scorer thread.

A batch that raises is scored again one request at a time, so one bad request fails only its
own conversation's step.

Shutdown does not wait for the work in progress (a first step's prefill can take minutes on a
CPU): :meth:`~BatchingScorer.stop` cancels the inner scorer (``cancel()``, checked between
forward chunks) and fails everything queued with
:class:`~iclr_cli.scoring.base.ScoringCancelled`, which the proxy answers with 503 instead of
recording a failed step.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future

from iclr_cli.scoring.base import ScoreRequest, ScoreResult, Scorer, ScoringCancelled


class BatchingScorer:
    """A :class:`~iclr_cli.scoring.base.Scorer` that gathers concurrent calls into batches.

    Args:
        inner: the real scorer; only the batching thread ever calls it.
        max_batch: most requests per call of ``inner.score``.
        wait_s: how long to wait for more requests once the first one arrived (seconds).

    ``batches`` counts calls of ``inner.score``; ``largest_batch`` is the most requests one
    call scored. Call :meth:`close` (or :meth:`stop`, which does not wait) to stop the thread.
    """

    def __init__(self, inner: Scorer, *, max_batch: int = 32, wait_s: float = 0.002):
        self.inner = inner
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
        self._urgent: deque[tuple[list[ScoreRequest], Future]] = deque()
        self._eager: deque[tuple[list[ScoreRequest], Future]] = deque()
        self._forget: deque[str] = deque()
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

    def submit(self, requests: Sequence[ScoreRequest], *, eager: bool = False) -> Future:
        """Queue ``requests`` and return the future of their results (a list, in order).
        ``eager``: nobody waits for them yet; they run when no waited-for request is queued.

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
            (self._eager if eager else self._urgent).append((list(requests), future))
            self._cond.notify_all()
        return future

    def promote(self, future: Future) -> bool:
        """Move the eager call of ``future`` to the waited-for queue; False when it is no
        longer queued (running or done)."""
        with self._cond:
            for item in self._eager:
                if item[1] is future:
                    self._eager.remove(item)
                    self._urgent.append(item)
                    self._cond.notify_all()
                    return True
        return False

    def forget(self, stream: str) -> None:
        """Drop ``stream``'s cache in the scorer (when it has one) before the next batch."""
        if getattr(self.inner, "forget", None) is None:
            return
        with self._cond:
            self._forget.append(stream)
            self._cond.notify_all()

    def cache_info(self) -> dict | None:
        """The inner scorer's :meth:`cache_info`, or ``None`` for a scorer without caches."""
        info = getattr(self.inner, "cache_info", None)
        return info() if info is not None else None

    def stop(self) -> None:
        """Stop without waiting: the batch in progress is cancelled before its next forward
        chunk when the inner scorer has ``cancel()`` (the fake one finishes its batch), and
        it and every queued call fail with :class:`ScoringCancelled`. Safe from any thread,
        the event loop included."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        cancel = getattr(self.inner, "cancel", None)
        if cancel is not None:
            cancel()

    def close(self, timeout: float = 10.0) -> None:
        """:meth:`stop`, then wait up to ``timeout`` seconds for the thread to end (a daemon:
        one still inside a forward chunk does not keep the process alive)."""
        self.stop()
        self._thread.join(timeout=timeout)

    def _next(self) -> tuple[list, list[str]] | None:
        """The next batch and the streams to forget first; ``None`` once closed."""
        with self._cond:
            while not (self._urgent or self._eager or self._forget or self._closed):
                self._cond.wait()
            forget = list(self._forget)
            self._forget.clear()
            if self._closed:
                return None
            if not (self._urgent or self._eager):
                return [], forget
            if not self._urgent:  # work ahead: what is queued now, no waiting for more
                batch = [self._eager.popleft()]
                size = len(batch[0][0])
                while self._eager and size < self.max_batch:
                    batch.append(self._eager.popleft())
                    size += len(batch[-1][0])
                return batch, forget
            batch = [self._urgent.popleft()]
            size = len(batch[0][0])
            deadline = time.monotonic() + self.wait_s
            while size < self.max_batch and not self._closed:
                if self._urgent:
                    batch.append(self._urgent.popleft())
                    size += len(batch[-1][0])
                    continue
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    break
                self._cond.wait(timeout)
            return batch, forget

    def _run(self) -> None:
        while True:
            step = self._next()
            if step is None:
                self._fail_waiting()
                return
            batch, forget = step
            for stream in forget:
                self.inner.forget(stream)  # type: ignore[attr-defined]
            if not batch:
                continue
            flat = [r for reqs, _ in batch for r in reqs]
            self.batches += 1
            self.largest_batch = max(self.largest_batch, len(flat))
            if self.on_batch is not None:
                self.on_batch(len(flat))
            try:
                results = self.inner.score(flat)
            except ScoringCancelled as exc:
                for _, future in batch:
                    future.set_exception(exc)
            except Exception:
                for reqs, future in batch:
                    self._score_alone(reqs, future)
            else:
                pos = 0
                for reqs, future in batch:
                    future.set_result(results[pos : pos + len(reqs)])
                    pos += len(reqs)

    def _fail_waiting(self) -> None:
        with self._cond:
            waiting = [*self._urgent, *self._eager]
            self._urgent.clear()
            self._eager.clear()
        for _, future in waiting:
            future.set_exception(ScoringCancelled("the scorer was stopped"))

    def _score_alone(self, reqs: list, future: Future) -> None:
        try:
            future.set_result(self.inner.score(reqs))
        except Exception as exc:  # the step's conversation records the failure
            future.set_exception(exc)
