"""The latency budget: a request never waits longer than ``--max-wait`` for scores.

METHOD.md's online rule compresses each completed step before the next request goes
upstream. On a CPU the proxy model can take longer than the agent's own turn (a conversation's
first scored step runs all of P, tens of thousands of tokens; a scorer shared by several
conversations queues them), and an agent that waits minutes gives up (Claude Code resends a
request after 300 s). So ``iclr serve`` waits for a step's scores at most ``max_wait`` seconds
from the moment the request arrived, over all the steps it decides and on every path: a step
scored ahead and still running, a call queued behind other conversations, the prefill of P.
A step whose scores are not ready by then goes upstream as generated: it is sent **late**.
What happens to it afterwards is the ``late`` policy (:mod:`iclr_cli.serve.late`):

- ``when-it-pays`` (default): its scoring goes on behind the requests clients wait for, and
  the conversation's late steps whose scores are ready are compressed together, at one
  request, when that prefix break costs nothing (the provider's cache has expired, the client
  changed its history itself) or pays for itself at the provider's cache prices.
- ``as-sent``: it stays as generated for the rest of the conversation, so the prefix the
  provider cached never changes; its scoring is taken out of the queue.
- ``compress-later``: the step is compressed at the first later request that finds its scores
  ready, whatever the cache rewrite costs (one break per late step at worst).

``benchmarks/bench_serve_budget.py`` measured them on scripted Claude-Code-style sessions,
priced by Anthropic's and OpenAI's prompt-cache rules (BENCHMARKS.md, "``iclr serve``: the
latency budget"): ``compress-later``'s rewrites cost more than the tokens they saved, and
``as-sent`` loses every late step for the rest of the session, which on a busy machine is
most of them; ``when-it-pays`` breaks only where the price says so.

What the scorer saw: a step is scored against P and the earlier steps as they stood when its
scoring was queued (when its reply was relayed, or at the request that needed it). A step sent
late is in that history as generated; if it is compressed later, the steps scored meanwhile
keep the scores they got, as the online rule keeps every decision (METHOD.md, "Select and
replace": the compressed text is written back and never restored). Each decision (compressed,
left as generated, sent late, compressed later) is stored with the step, in the state folder
too, so a restart never changes what a step looks like; a step still waiting to be compressed
at a restart is scored again, on the history as it stands then.

A request does not wait at all when the scorer expects the step's scores later than its
deadline (:meth:`BatchingScorer.eta <iclr_cli.serve.batching.BatchingScorer.eta>`: the median
time of recent batches of the same kind, a prefill of P or not, plus what the batch running has
left; a batch of unknown length is expected to run as long again as it has so far): a wait
that cannot end in time would only add to the request's time, and a prefill of P that has run
for seconds then costs the agent nothing.

``max_wait`` ``None`` (``--max-wait inf``) waits for every step however long scoring takes:
the paper's online rule, every step decided before the request goes on.

The default budget is :data:`DEFAULT_MAX_WAIT`: half a second. An agent turn against a hosted
model takes longer than that (time to first token alone is one to a few seconds), and Claude
Code's own turn against an instant upstream took about one second here, so even a session in
which every step goes late stays within 1.5x of its time without the proxy. A step scored
ahead needs the rest of its scoring time minus the agent's tool time; half a second catches
the steps that are nearly done (on two CPU cores a step with kept state scores in 0.5-2 s), and
the waits that cannot end in time are skipped (above).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from iclr_cli.serve.late import DEFAULT, POLICIES, CacheRule, rule_for

log = logging.getLogger("iclr.serve")

DEFAULT_MAX_WAIT = 0.5
LATE_POLICIES = POLICIES
DEFAULT_LATE = DEFAULT
# A request held longer than this before its upstream answer started gets one log line
# saying what it waits on (README promise: serve is never silent for minutes).
WAIT_LOG_S = 5.0


@dataclass(frozen=True)
class Budget:
    """``max_wait``: seconds a request may wait for scores in all (``None``: no limit);
    ``late``: what happens to a step sent late (module docstring, :data:`LATE_POLICIES`);
    ``upstream_kind``: the ``--upstream-kind`` whose prompt-cache rule ``when-it-pays``
    prices a break by (:func:`iclr_cli.serve.late.rule_for`)."""

    max_wait: float | None = DEFAULT_MAX_WAIT
    late: str = DEFAULT_LATE
    upstream_kind: str | None = None

    def cache_rule(self, one_hour: bool = False) -> CacheRule:
        """The upstream's prompt-cache rule (``one_hour``: the request asks for a 1-hour cache)."""
        return rule_for(self.upstream_kind, one_hour)

    @property
    def keeps_late(self) -> bool:
        """True when a late step's scoring goes on so that it can be compressed later."""
        return self.late != "as-sent"

    def __post_init__(self) -> None:
        if self.late not in LATE_POLICIES:
            raise ValueError(f"late policy {self.late!r}: choose one of {', '.join(LATE_POLICIES)}")
        if self.max_wait is not None and not self.max_wait >= 0:
            raise ValueError(f"max_wait {self.max_wait!r}: seconds, 0 or more")

    def deadline(self, start: float) -> float | None:
        """The ``time.monotonic()`` after which a request that arrived at ``start`` waits no
        more (``None``: never)."""
        return None if self.max_wait is None or self.max_wait == float("inf") else start + self.max_wait


def parse_max_wait(value: float) -> float | None:
    """``--max-wait``'s value in seconds (``inf``: no limit, ``None``).

    Raises:
        ValueError: for a negative or NaN value.
    """
    if not value >= 0:
        raise ValueError(f"--max-wait {value}: seconds, 0 or more (inf: wait for every step)")
    return None if value == float("inf") else value


@dataclass
class Waiting:
    """What one request waits on now, written by the thread that handles it and read by the
    event loop for the log line (:func:`describe`). ``scoring_s`` sums the time it waited for
    scores; ``scored`` says whether it had a step to score at all."""

    start: float = field(default_factory=time.monotonic)
    conversation: str | None = None
    future: Future | None = None
    upstream: bool = False
    scoring_s: float = 0.0
    scored: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def wait(self, future: Future, deadline: float | None):
        """``future``'s first result, waiting until ``deadline`` at most; ``None`` when it
        is not ready by then.

        Raises:
            whatever the scoring raised (ScoringCancelled when the scorer was stopped).
        """
        self.scored = True
        with self._lock:
            self.future = future
        began = time.monotonic()
        try:
            timeout = None if deadline is None else max(0.0, deadline - began)
            return future.result(timeout=timeout)[0]
        except TimeoutError:
            return None
        finally:
            self.scoring_s += time.monotonic() - began
            with self._lock:
                self.future = None

    def current(self) -> Future | None:
        with self._lock:
            return self.future


def wait_within(scorer, stats, waiting: Waiting, future: Future, deadline: float | None):
    """(``future``'s result within ``deadline`` or ``None``, and why it was not ready: one of
    :data:`iclr_cli.serve.report.LATE_CAUSES`). Not waited for at all when ``scorer`` expects
    it later than that (a prefill of P or a queue behind one: the wait would only add to the
    request's time); ``stats`` counts the requests waiting now."""
    eta = getattr(scorer, "eta", None)
    predicted = False
    expected = None
    start = time.monotonic()
    if deadline is not None and eta is not None and not future.done():
        expected = eta(future)
        if start + expected > deadline:
            log.debug("conversation %s: scores expected in %.2f s, %.2f s of the budget left: not waited for",
                      waiting.conversation, expected, deadline - start)
            deadline, predicted = start, True
    with stats.lock:
        stats.waiting += 1
    stats.metrics.waiting.inc()
    try:
        result = waiting.wait(future, deadline)
    finally:
        with stats.lock:
            stats.waiting -= 1
        stats.metrics.waiting.dec()
    if expected is not None and not predicted:  # how good the expectation was: the log's calibration
        log.debug("conversation %s: scores expected in %.2f s, %s", waiting.conversation, expected,
                  f"ready in {time.monotonic() - start:.2f} s" if result is not None else "not ready within the budget")
    if result is not None:
        return result, None
    if predicted:
        return None, "predicted"
    where = getattr(scorer, "where", None)
    at = where(future) if where is not None else None
    if at is None or at.state != "running":
        return None, "queue"
    return None, "prefill" if at.prefill else "scorer_busy"


def describe(waiting: Waiting, scorer) -> str:
    """What ``waiting`` waits on, in words, for the log: the scorer queue (and how many calls
    are ahead), the prefill of P (a conversation's first scored step), scoring, the upstream,
    or reading the request."""
    if waiting.upstream:
        return "the upstream (no answer yet)"
    future = waiting.current()
    where = getattr(scorer, "where", None)
    if future is None or where is None:
        return "reading and rewriting the request"
    at = where(future)
    if at.state == "queued":
        return f"the scorer queue ({at.ahead} call{'s' if at.ahead != 1 else ''} ahead of its step)"
    if at.state == "running" and at.prefill:
        return f"the prefill of P and the history (a conversation's first scored step; running for {at.since:.0f} s)"
    if at.state == "running":
        return f"the scorer (its step's batch running for {at.since:.1f} s)"
    return "scoring that has just finished"
