"""Scoring a reply's step ahead, while the agent runs its tool (docs/serve.md, "What scoring costs").

A step's block entropies depend only on P, the compressed history and the step's own
reasoning (METHOD.md, "Score": the scorer input is cut after the step's last reasoning block),
not on the tool results that follow. So once a reply has been relayed to the client, the
scorer request that the next request will send for that step is already known: the proxy
builds it (:func:`iclr_cli.serve.replies.prefetch`) and queues it behind the
requests clients are waiting for (:class:`~iclr_cli.serve.batching.BatchingScorer`).

:class:`EagerScorer` keeps the result under the step's key (:mod:`iclr_cli.serve.fingerprint`:
a hash of every item up to the end of the step, reasoning included), one per conversation.
When the next request compresses that step it claims that result (waiting for it, within the
latency budget, if it is still running: :mod:`iclr_cli.serve.budget`). A next request whose
items differ (the client edited its history, dropped the reasoning, ``--restore-reasoning`` put
other text back, the reply was never followed up) has other step keys, finds no match, and is
scored then, as without scoring ahead. The result claimed was scored on the history as it
stood when the reply was relayed; that is the history the next request sends too, unless an
earlier step sent late was compressed in between (``--late compress-later``), and then the
step keeps the scores of the history it was scored on (METHOD.md's online rule: a step is
scored against the history as it stood when it was scored). Without a key (:meth:`score`,
used directly) a result matches only the same request, by a digest of all of it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future

import orjson

from iclr_cli.scoring.base import ScoreRequest, ScoreResult
from iclr_cli.serve.batching import BatchingScorer
from iclr_cli.serve.stats import Stats


# When a finished step's scores are wanted, in seconds after its reply was relayed: its next
# request comes after the agent's tool (median 0.1-0.6 s in public Claude Code and Codex
# traces) and may wait the default half-second budget (:mod:`iclr_cli.serve.budget`).
STEP_DUE_S = 1.0


def request_digest(request: ScoreRequest) -> bytes:
    """SHA-256 of everything a score depends on: stream, P, history, step and block spans."""
    return hashlib.sha256(orjson.dumps([request.stream, request.prompt, request.history, request.step, request.spans])).digest()


class EagerScorer:
    """The serve scorer: a :class:`BatchingScorer` plus results scored ahead (module docstring).

    Args:
        inner: the batching scorer.
        stats: where hits, waits, misses and unused results are counted (:class:`EagerCounts`).
        max_pending: most results kept waiting for their request (one per conversation; the
            oldest is dropped first).
    """

    def __init__(self, inner: BatchingScorer, stats: Stats, *, max_pending: int = 1000):
        self.inner = inner
        self.name, self.max_tokens, self.overflow, self.tokenizer = inner.name, inner.max_tokens, inner.overflow, inner.tokenizer
        self.stats = stats
        self.max_pending = max_pending
        self._pending: OrderedDict[str, tuple[str, Future]] = OrderedDict()  # stream -> (step key, result)
        self._lock = threading.Lock()

    @property
    def batches(self) -> int:
        return self.inner.batches

    @property
    def largest_batch(self) -> int:
        return self.inner.largest_batch

    @property
    def pending(self) -> int:
        """Results scored ahead (or being scored) that no request has asked for yet."""
        return len(self._pending)

    @property
    def in_progress(self) -> int:
        """Results scored ahead that are still queued or being scored."""
        with self._lock:
            return sum(not future.done() for _, future in self._pending.values())

    def cache_info(self) -> dict | None:
        return self.inner.cache_info()

    def prefetch(self, request: ScoreRequest, key: str | None = None) -> bool:
        """Queue ``request`` behind the waited-for ones and keep its result for the request
        that claims it under ``key`` (the step key; default: a digest of ``request``); it
        replaces the stream's earlier one. False when the scorer has stopped or the same
        step is already kept."""
        key = key or request_digest(request).hex()
        with self._lock:
            kept = self._pending.get(request.stream)
            if kept is not None and kept[0] == key:
                return False
        try:
            future = self.inner.submit([request], eager=True, due=STEP_DUE_S)
        except RuntimeError:
            return False
        dropped = 0
        with self._lock:
            dropped += self._pending.pop(request.stream, None) is not None
            self._pending[request.stream] = (key, future)
            while len(self._pending) > self.max_pending:
                self._pending.popitem(last=False)
                dropped += 1
        self.stats.eager_event("scored")
        if dropped:
            self.stats.eager_event("unused", dropped)
        return True

    def claim(self, request: ScoreRequest, key: str | None = None) -> Future | None:
        """The future kept for ``request``'s stream under ``key`` (default: a digest of
        ``request``), taken out of the kept results; ``None`` when there is none."""
        key = key or request_digest(request).hex()
        with self._lock:
            kept = self._pending.get(request.stream)
            if kept is None or kept[0] != key:
                return None
            del self._pending[request.stream]
            return kept[1]

    def kept(self, stream: str, key: str) -> Future | None:
        """The future kept for ``stream`` under step ``key``, left in place; ``None`` when none."""
        with self._lock:
            found = self._pending.get(stream)
        return found[1] if found is not None and found[0] == key else None

    def holds(self, stream: str, key: str) -> bool:
        """True when a result for step ``key`` of ``stream`` is kept (ready or being scored)."""
        return self.kept(stream, key) is not None

    def submit(self, requests: Sequence[ScoreRequest], *, eager: bool = False, due: float | None = None) -> Future:
        """:meth:`BatchingScorer.submit`."""
        return self.inner.submit(requests, eager=eager, due=due)

    def promote(self, future: Future) -> bool:
        return self.inner.promote(future)

    def demote(self, future: Future) -> bool:
        return self.inner.demote(future)

    def drop(self, future: Future) -> bool:
        return self.inner.drop(future)

    def where(self, future: Future):
        return self.inner.where(future)

    def queue_info(self) -> dict:
        return self.inner.queue_info()

    def work(self) -> dict:
        """:meth:`BatchingScorer.work`."""
        return self.inner.work()

    def eta(self, future: Future) -> float:
        return self.inner.eta(future)

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Results in order: the ones scored ahead where a kept result matches the whole
        request, the others scored now (:meth:`BatchingScorer.score`). A result scored
        ahead that failed is scored again now.

        Raises:
            whatever the scorer raised for the requests scored now.
        """
        results: list[ScoreResult | None] = [None] * len(requests)
        now: list[int] = []
        for i, req in enumerate(requests):
            future = self.claim(req)
            if future is None:
                now.append(i)
                continue
            ready = future.done()
            if not ready:
                self.inner.promote(future)
            try:
                results[i] = future.result()[0]
            except Exception:
                now.append(i)
                continue
            self.stats.eager_event("hits" if ready else "waits")
        if now:
            self.stats.eager_event("misses", len(now))
            for i, result in zip(now, self.inner.score([requests[i] for i in now])):
                results[i] = result
        return results  # type: ignore[return-value]

    def stop(self) -> None:
        """Stop scoring without waiting (shutdown): :meth:`BatchingScorer.stop`."""
        self.inner.stop()

    def rename(self, old: str, new: str) -> None:
        """:meth:`BatchingScorer.rename` (a kept result is keyed by its step, never by ``old``)."""
        self.inner.rename(old, new)

    def forget(self, stream: str) -> None:
        """Drop ``stream``'s kept result and its scorer state (its conversation was evicted)."""
        with self._lock:
            dropped = self._pending.pop(stream, None) is not None
        if dropped:
            self.stats.eager_event("unused")
        self.inner.forget(stream)
