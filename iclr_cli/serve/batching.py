"""One scorer thread that batches the requests of every conversation scoring at the same moment.

The proxy compresses each step in a worker thread (never on the event loop) by calling
:func:`iclr_cli.compress.compress_step`, exactly as replay does. The scorer those calls get is a
:class:`BatchingScorer`: its :meth:`~BatchingScorer.score` queues the requests and waits, while
one thread owns the real scorer (which, with its prefix cache, is not thread-safe), takes
everything queued, waits ``wait_s`` for stragglers, and scores it in one batched call. So steps
of several conversations that complete together share one forward pass (lm-evaluation-harness
style batching is inside the scorer; this only gathers the batch).

A batch that raises is scored again one request at a time, so one bad request fails only its
own conversation's step.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

from iclr_cli.scoring.base import ScoreRequest, ScoreResult, Scorer


class BatchingScorer:
    """A :class:`~iclr_cli.scoring.base.Scorer` that gathers concurrent calls into batches.

    Args:
        inner: the real scorer; only the batching thread ever calls it.
        max_batch: most requests per call of ``inner.score``.
        wait_s: how long to wait for more requests once the first one arrived (seconds).

    ``batches`` counts calls of ``inner.score``; ``largest_batch`` is the most requests one
    call scored. Call :meth:`close` to stop the thread.
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
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="iclr-scorer", daemon=True)
        self._thread.start()

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Queue ``requests`` for the next batch and wait for their results (in order).

        Raises:
            whatever ``inner.score`` raised for these requests; RuntimeError after :meth:`close`.
        """
        if not self._thread.is_alive():
            raise RuntimeError("the scorer thread has stopped")
        future: Future = Future()
        self._queue.put((list(requests), future))
        return future.result()

    def close(self) -> None:
        """Stop the batching thread after the batch in progress."""
        self._queue.put(None)
        self._thread.join(timeout=60)

    def _gather(self, first) -> tuple[list, bool]:
        batch, size, stop = [first], len(first[0]), False
        deadline = time.monotonic() + self.wait_s
        while size < self.max_batch:
            timeout = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                stop = True
                break
            batch.append(item)
            size += len(item[0])
        return batch, stop

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                self._fail_waiting()
                return
            batch, stop = self._gather(first)
            flat = [r for reqs, _ in batch for r in reqs]
            self.batches += 1
            self.largest_batch = max(self.largest_batch, len(flat))
            if self.on_batch is not None:
                self.on_batch(len(flat))
            try:
                results = self.inner.score(flat)
            except Exception:
                for reqs, future in batch:
                    self._score_alone(reqs, future)
            else:
                pos = 0
                for reqs, future in batch:
                    future.set_result(results[pos : pos + len(reqs)])
                    pos += len(reqs)
            if stop:
                self._fail_waiting()
                return

    def _fail_waiting(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                item[1].set_exception(RuntimeError("the scorer thread has stopped"))

    def _score_alone(self, reqs: list, future: Future) -> None:
        try:
            future.set_result(self.inner.score(reqs))
        except Exception as exc:  # the step's conversation records the failure
            future.set_exception(exc)
