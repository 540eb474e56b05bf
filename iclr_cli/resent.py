"""Input tokens re-sent over a session's requests, as recorded and with online write-back.

The static estimate of ``iclr savings`` (docs/savings.md) is made per request in
:mod:`iclr_cli.savings.estimate`; ``prune`` and ``score`` print its sum for the file they
pruned (the summary row ``input tokens re-sent, static``). Both layers add requests up the
same way, so the sum lives here, below both: it needs only the numbers of each request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class CountedRequest(Protocol):
    """What :meth:`Totals.of` reads of one request (``savings.estimate.RequestEstimate``)."""

    recorded: bool
    input: float
    reasoning: float
    saved: float
    cache_read: float | None
    cache_saved: float | None
    sealed: float


@dataclass(frozen=True)
class Totals:
    """Sums over requests (of one session or many), in the units of the requests: provider
    tokens where the session recorded usage, else proxy tokens.

    ``input``: the input as recorded; ``reasoning``: of which earlier steps' reasoning;
    ``saved``: what online write-back takes off it; ``sealed``: what it would delete from
    signed or encrypted reasoning, never taken off. ``cache_read`` / ``cache_saved`` sum the
    requests that recorded a cache read, and are ``None`` when none did; ``recorded`` counts
    requests whose input is the provider's count.
    """

    requests: int = 0
    recorded: int = 0
    input: float = 0.0
    reasoning: float = 0.0
    saved: float = 0.0
    cache_read: float | None = None
    cache_saved: float | None = None
    sealed: float = 0.0

    @classmethod
    def of(cls, requests: Sequence[CountedRequest]) -> Totals:
        """The totals of ``requests``."""
        cached = [r for r in requests if r.cache_read is not None]
        return cls(
            requests=len(requests),
            recorded=sum(r.recorded for r in requests),
            input=sum(r.input for r in requests),
            reasoning=sum(r.reasoning for r in requests),
            saved=sum(r.saved for r in requests),
            cache_read=sum(r.cache_read for r in cached) if cached else None,  # type: ignore[misc]
            cache_saved=sum(r.cache_saved or 0.0 for r in cached) if cached else None,
            sealed=sum(r.sealed for r in requests),
        )

    def __add__(self, other: Totals) -> Totals:
        def both(a: float | None, b: float | None) -> float | None:
            return None if a is None and b is None else (a or 0.0) + (b or 0.0)

        return Totals(
            self.requests + other.requests,
            self.recorded + other.recorded,
            self.input + other.input,
            self.reasoning + other.reasoning,
            self.saved + other.saved,
            both(self.cache_read, other.cache_read),
            both(self.cache_saved, other.cache_saved),
            self.sealed + other.sealed,
        )

    @property
    def input_after(self) -> float:
        """The input with online write-back."""
        return self.input - self.saved

    @property
    def cache_read_after(self) -> float | None:
        """The cache read with online write-back (``None`` when none was recorded)."""
        return None if self.cache_read is None else self.cache_read - (self.cache_saved or 0.0)
