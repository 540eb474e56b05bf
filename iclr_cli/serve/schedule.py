"""What the serve scorer runs next, and what its batches took: the pure rules behind
:class:`iclr_cli.serve.batching.BatchingScorer`.

Work ahead of time runs earliest deadline first (docs/serve.md, "Scoring along the stream"):
each queued call says when its result is wanted (``due``, seconds on ``time.monotonic``), one
stream's calls keep their order (each continues the state the one before left, so a stream is
as urgent as its most urgent call) and calls of several conversations due alike share a batch.
A late step's scoring and a prefill of P never join a batch of steps that can still be on time:
either would hold those steps for its whole length, and a batch is never interrupted.

:class:`BatchTimes` keeps what recent batches took by kind: the measured rates a request's
decision to wait, or not, is made from (:mod:`iclr_cli.serve.budget`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass

from iclr_cli.scoring.base import ScoreRequest

KINDS = ("prefill", "step", "feed")
"""How long a batch runs, by what it reads: P and the history from the start (``prefill``), a
finished step (``step``), pieces fed along the stream (``feed``)."""
WORK = ("prefill", "step", "waited_for", "reply", "context", "late")
"""What a batch was for, for ``/stats`` (:meth:`BatchTimes.work`): a prefill of P (a stream
read from the start), finished steps scored ahead (``step``) or for a waiting request
(``waited_for``), pieces of streaming replies (``reply``), requests' P and history
(``context``), late steps' scoring (``late``)."""
RECENT = 16  # batches per kind a typical time is the median of


@dataclass
class Call:
    """One queued call: its requests, the future of their results, when it was queued
    (``time.monotonic``), when its result is wanted (``due``, the same clock) and whether a
    client waits for it (``waited``)."""

    requests: list[ScoreRequest]
    future: Future
    queued_at: float
    due: float = float("inf")
    waited: bool = False

    @property
    def late(self) -> bool:
        """Work without a deadline nobody waits for: a late step's scoring for a later break."""
        return self.due == float("inf") and not self.waited


@dataclass(frozen=True)
class Where:
    """Where a call stands: ``state`` is ``queued`` (``ahead``: calls before it in its queue,
    ``waited_for``: True in the queue of calls a client waits for), ``running`` (``since``:
    seconds the batch has run, ``prefill``: the batch runs a conversation's first scored step,
    P and its history included, for a scorer that keeps state) or ``done``."""

    state: str
    ahead: int = 0
    waited_for: bool = False
    since: float = 0.0
    prefill: bool = False


def apart(batch: Iterable[Call], call: Call) -> bool:
    """True when ``call`` continues no stream of ``batch``: two requests of one stream in one
    scorer call cannot both start from its kept state (a step fed along the stream, then the
    finished step), so the later one waits for the next batch."""
    streams = {r.stream for c in batch for r in c.requests}
    return not any(r.stream in streams for r in call.requests)


def pick_ahead(eager: Iterable[Call], kind: Callable[[list[ScoreRequest]], str], *, max_batch: int,
               max_calls: int) -> list[Call]:
    """The next batch of work ahead (module docstring), from the queued ``eager`` calls in
    queue order: the most urgent call a stream may run now (none of its stream's calls queued
    before it), then others due alike that fit ``max_batch`` requests and ``max_calls`` calls.
    ``kind(requests)`` is :data:`KINDS`' name of a call's batch. Empty for an empty queue;
    takes nothing out of it."""
    queue = list(eager)
    due: dict[str, float] = {}
    for call in queue:
        for r in call.requests:
            due[r.stream] = min(due.get(r.stream, call.due), call.due)
    heads, seen = [], set()
    for i, call in enumerate(queue):
        streams = {r.stream for r in call.requests}
        if not streams & seen:
            heads.append((min(due[s] for s in streams), i, call))
        seen |= streams
    if not heads:
        return []
    heads.sort(key=lambda h: h[:2])
    first_due, _, first = heads[0]
    if kind(first.requests) == "prefill":
        # alone: several conversations with one system prompt and tools (subagents, a team's
        # agents) would each run P in one batch; one at a time, the first keeps P's state for
        # every later one (scoring/prefix.py), and they run only their own tokens
        return [first]
    batch, size = [first], len(first.requests)
    alone = first_due == float("inf")
    for when, _, call in heads[1:]:
        if size >= max_batch or len(batch) >= max_calls:
            break
        if size + len(call.requests) > max_batch or not apart(batch, call):
            continue
        if alone != (when == float("inf")) or kind(call.requests) == "prefill":
            continue
        batch.append(call)
        size += len(call.requests)
    return batch


def label(batch: Iterable[Call], *, prefill: bool) -> str:
    """What ``batch`` is for (:data:`WORK`); ``prefill``: the batch reads a stream from the start."""
    batch = list(batch)
    requests = [r for call in batch for r in call.requests]
    if prefill:
        return "prefill"
    if all(call.late for call in batch):
        return "late"
    if any(call.waited for call in batch):
        return "waited_for"
    if all(r.partial and not r.step for r in requests):
        return "context"
    return "reply" if all(r.partial for r in requests) else "step"


class BatchTimes:
    """Seconds recent batches took by kind (:data:`KINDS`), and scorer work by what it was for
    (:data:`WORK`). Not thread-safe: the batching scorer holds its lock around every call."""

    def __init__(self):
        self._took: dict[str, deque[float]] = {kind: deque(maxlen=RECENT) for kind in KINDS}
        self._work = {what: {"batches": 0, "seconds": 0.0, "forward_tokens": 0} for what in WORK}

    def record(self, kind: str, what: str, seconds: float, forwarded: int) -> None:
        """A batch of ``kind`` that ran ``seconds`` for ``what`` and forwarded ``forwarded``
        tokens. Late work counts in :meth:`work` only: it reads a step's whole reasoning where
        a finished step fed along the stream runs a word or two, and says nothing of how long
        an on-time batch takes."""
        if what != "late":
            self._took[kind].append(seconds)
        work = self._work[what]
        work["batches"] += 1
        work["seconds"] += seconds
        work["forward_tokens"] += max(forwarded, 0)

    def typical(self, kind: str) -> float | None:
        """Seconds a batch of ``kind`` takes: the median of the last :data:`RECENT` on-time
        ones; ``None`` while none has run."""
        took = sorted(self._took[kind])
        return took[len(took) // 2] if took else None

    def seen(self, kind: str) -> int:
        """On-time batches of ``kind`` among the recent ones."""
        return len(self._took[kind])

    def work(self) -> dict:
        """Per :data:`WORK` entry: batches run, scorer seconds (rounded to ms) and tokens
        forwarded so far (``/stats`` ``scorer_queue.work``)."""
        return {k: {**v, "seconds": round(v["seconds"], 3)} for k, v in self._work.items()}
