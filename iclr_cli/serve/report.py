"""What one request did, said in one INFO line on the ``iclr.serve`` logger.

Every compressing request that reaches the upstream gets a line: its conversation, the steps
it decided (compressed, left as generated, sent late and why), the late steps compressed at it
(and why that break was taken: :mod:`iclr_cli.serve.late`), whether its prompt stopped
extending the previous request's as sent (a prefix break, and whose: the client's own edit or
the proxy's), the time it waited for scores and the latency the proxy added. ``/stats`` and
``/metrics`` count the same events (:mod:`iclr_cli.serve.stats`).

Why a step went late (``late_causes``):

- ``predicted``: the scorer expected its scores after the request's deadline, so the request
  did not wait at all (:meth:`~iclr_cli.serve.batching.BatchingScorer.eta`).
- ``queue``: the deadline came while its scoring was still queued behind other work.
- ``scorer_busy``: the deadline came while its batch was running.
- ``prefill``: the deadline came while the batch running read P and the history from the start
  (a conversation's first scored step).
- ``elsewhere``: another worker or replica relayed the reply and was scoring the step ahead,
  and its result did not come by the deadline (:mod:`iclr_cli.serve.shared`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

LATE_CAUSES = ("predicted", "queue", "scorer_busy", "prefill", "elsewhere")


@dataclass
class RequestReport:
    """The decisions of one request (filled in by :class:`~iclr_cli.serve.state.ServeState`)."""

    conversation: str | None = None
    decided: int = 0
    compressed: int = 0
    late: dict = field(default_factory=dict)  # cause -> steps sent late at this request
    late_compressed: int = 0
    late_break: str | None = None  # why the late steps were compressed here (late.break_now)
    late_waiting: int = 0  # late steps still sent as generated at this request
    prefix_break: str | None = None  # "client" or "proxy": the prompt does not extend the last one
    waited_s: float = 0.0
    note: str | None = None  # a request with nothing to decide: why (a first request, not a request of this API)
    unwritten: int = 0  # steps decided compressed whose edit the request could not carry (sent as generated)
    # the counts of steps decided compressed at this request, kept until the body is written:
    # /stats counts what was sent (ServeState.rewrite)
    pending: list = field(default_factory=list, repr=False)

    def went_late(self, cause: str) -> None:
        self.late[cause] = self.late.get(cause, 0) + 1

    def line(self, added_s: float) -> str:
        """The INFO line (without the logger's prefix)."""
        late = sum(self.late.values())
        if self.note is not None:
            return f"{self.note}; added {added_s * 1000:.0f} ms"
        parts = [f"conversation {self.conversation or '(first request)'}: {self.decided} step{'s' if self.decided != 1 else ''} decided"]
        if self.decided:
            why = ", ".join(f"{n} {c}" for c, n in sorted(self.late.items()))
            parts.append(f"{self.compressed} compressed, {late} late" + (f" ({why})" if why else ""))
        if self.unwritten:
            parts.append(f"{self.unwritten} not written (a copy the reader does not edit), sent as generated")
        if self.late_compressed:
            parts.append(f"{self.late_compressed} late step{'s' if self.late_compressed != 1 else ''} compressed now ({self.late_break})")
        if self.late_waiting:
            parts.append(f"{self.late_waiting} late still as generated")
        if self.prefix_break:
            parts.append(f"prefix break ({self.prefix_break})")
        parts.append(f"waited {self.waited_s * 1000:.0f} ms, added {added_s * 1000:.0f} ms")
        return "; ".join(parts)
