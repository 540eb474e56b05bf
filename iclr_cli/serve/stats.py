"""What the proxy did, for ``/stats`` (JSON) and ``/metrics`` (Prometheus text).

Per conversation and in total: requests, upstream errors, requests whose client went away before
they were forwarded (``client_gone``: never sent upstream), completed steps, steps compressed (the
text sent upstream differs from the text generated: a step with nothing to remove is not
counted), steps sent late (their scores were not ready within the latency budget,
:mod:`iclr_cli.serve.budget`; by cause, :mod:`iclr_cli.serve.report`) and, of those, steps
compressed later (:mod:`iclr_cli.serve.late`), prefix breaks (requests whose items as sent do
not extend the conversation's previous request's, by whose change: the client's or the
proxy's), scorer failures,
reasoning blocks left sealed (by reason: signed or encrypted for the upstream, redacted), requests
whose history lives on the server (in total only, by the field that says so), the reasoning-token accounting of the compressed steps (the one definition of
:mod:`iclr_cli.token_accounting`, in the proxy tokenizer's tokens, with the field names of
replay's ``results.jsonl``: ``reasoning_tokens_generated``, ``reasoning_tokens_removed`` =
deleted, ``reasoning_tokens_kept``, ``skip_markers``, ``skip_marker_tokens``), the upstream's own usage (input, output and cache-read tokens, as replay reads them:
:func:`iclr_cli.replay.accounting.parse_usage`; ``None`` while the upstream never reported the
field) and the latency the proxy added: the time from receiving a request to sending it
upstream (parsing, conversation lookup, compression and scoring), as p50/p95 over the most
recent requests, and of it the time spent waiting for scores (``scoring_wait_ms``, over the
requests that had a step to score: the part the latency budget bounds). Nothing here holds a
header, a key or message text.

In total only: the scorer state kept per conversation (memory, conversations held, evictions;
read from the scorer at each scrape), the scorer queue (depth, age of the oldest call, requests
waiting for scores now; read at each scrape) and what scoring ahead (:mod:`iclr_cli.serve.eager`) did.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from iclr_cli.replay.accounting import Usage
from iclr_cli.token_accounting import ReasoningTokens

LATENCY_WINDOW = 1024  # most recent requests kept per conversation for p50/p95


def percentile(values, q: float) -> float | None:
    """Nearest-rank percentile (``q`` in [0, 1]) of ``values``; ``None`` when empty."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass
class Counts:
    """Counters of one conversation, or of all of them."""

    requests: int = 0
    upstream_errors: int = 0
    client_gone: int = 0
    steps_completed: int = 0
    steps_compressed: int = 0
    steps_nothing_to_compress: int = 0  # completed steps without a block a variant may edit
    steps_late: int = 0
    steps_late_compressed: int = 0
    steps_unwritten: int = 0  # decided compressed, but the request could not carry the edit: sent as generated
    late_causes: dict = field(default_factory=dict)  # cause -> steps sent late
    prefix_breaks: dict = field(default_factory=dict)  # "client" | "proxy" -> requests
    scorer_failures: int = 0
    unrecognised: int = 0
    sealed: dict = field(default_factory=dict)  # why -> reasoning blocks left sealed
    server_history: dict = field(default_factory=dict)  # why -> requests passed through
    reasoning: ReasoningTokens = ReasoningTokens()
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    added_s: deque = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))
    scoring_wait_s: deque = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))

    def add_usage(self, usage: Usage) -> None:
        for name in ("input_tokens", "output_tokens", "cache_read_tokens"):
            value = getattr(usage, name)
            if value is not None:
                setattr(self, name, (getattr(self, name) or 0) + value)

    def to_record(self) -> dict:
        """Plain JSON: counters, and ``added_latency_ms`` and ``scoring_wait_ms`` p50/p95 over
        the last requests."""
        return {
            "requests": self.requests,
            "upstream_errors": self.upstream_errors,
            "client_gone": self.client_gone,
            "steps_completed": self.steps_completed,
            "steps_compressed": self.steps_compressed,
            "steps_nothing_to_compress": self.steps_nothing_to_compress,
            "steps_late": self.steps_late,
            "steps_late_compressed": self.steps_late_compressed,
            "steps_unwritten": self.steps_unwritten,
            "steps_late_by_cause": dict(sorted(self.late_causes.items())),
            "prefix_breaks": sum(self.prefix_breaks.values()),
            "prefix_breaks_by_cause": dict(sorted(self.prefix_breaks.items())),
            "scorer_failures": self.scorer_failures,
            "unrecognised": self.unrecognised,
            "sealed_blocks": sum(self.sealed.values()),
            "sealed": dict(sorted(self.sealed.items())),
            "server_history_requests": sum(self.server_history.values()),
            "server_history": dict(sorted(self.server_history.items())),
            "reasoning_tokens_generated": self.reasoning.generated,
            "reasoning_tokens_removed": self.reasoning.deleted,
            "reasoning_tokens_kept": self.reasoning.kept,
            "skip_markers": self.reasoning.markers,
            "skip_marker_tokens": self.reasoning.marker_tokens,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "added_latency_ms": _ms(self.added_s),
            "scoring_wait_ms": _ms(self.scoring_wait_s),
        }


def _ms(seconds) -> dict:
    """p50/p95 in milliseconds of a window of durations in seconds, and how many there are."""
    values = list(seconds)
    p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
    return {
        "p50": None if p50 is None else round(p50 * 1000, 3),
        "p95": None if p95 is None else round(p95 * 1000, 3),
        "samples": len(values),
    }


def _minus(a: ReasoningTokens, b: ReasoningTokens) -> ReasoningTokens:
    """``a - b`` field by field: what a later compression changed in a step's accounting."""
    return ReasoningTokens(*(getattr(a, f) - getattr(b, f) for f in ("generated", "written", "kept", "deleted", "markers", "marker_tokens")))


EAGER_OUTCOMES = ("scored", "hits", "waits", "misses", "unused", "fed_context", "fed_reasoning", "fed_context_dropped")


@dataclass
class EagerCounts:
    """Scoring ahead (:mod:`iclr_cli.serve.eager`): ``scored``: replies whose step was sent to
    the scorer once relayed; of the steps the next requests compressed, ``hits`` found that
    result done, ``waits`` found it still running and waited for it, ``misses`` found none that
    matched (scored then, as without scoring ahead); ``unused``: results dropped unused (the
    reply was never followed up, or the next request differed). Scoring along the stream
    (:mod:`iclr_cli.serve.along`): ``fed_context``, requests whose P and history were queued
    while the upstream worked; ``fed_reasoning``, pieces of streaming replies queued;
    ``fed_context_dropped``, of those P-and-history feeds, ones taken out of the queue unrun because
    their reply ended with no step to score (a final answer): under load they would run ahead
    of every conversation's current step for nothing."""

    scored: int = 0
    hits: int = 0
    waits: int = 0
    misses: int = 0
    unused: int = 0
    fed_context: int = 0
    fed_reasoning: int = 0
    fed_context_dropped: int = 0

    def to_record(self) -> dict:
        return {name: getattr(self, name) for name in EAGER_OUTCOMES}


class _ScorerState:
    """Prometheus view of the scorer's per-conversation state, read at each scrape."""

    def __init__(self, info):
        self.info = info

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        data = self.info()
        if not data:
            return
        yield GaugeMetricFamily("iclr_serve_scorer_state_bytes", "Key/value memory the scorer keeps for live conversations", value=data.get("bytes") or 0)
        yield GaugeMetricFamily("iclr_serve_scorer_state_budget_bytes", "Memory budget of the kept scorer state", value=data.get("budget_bytes") or 0)
        yield GaugeMetricFamily("iclr_serve_scorer_state_conversations", "Conversations whose scorer state is kept", value=data["streams"])
        yield CounterMetricFamily("iclr_serve_scorer_state_evictions", "Scorer states evicted (least recently used) to stay within the budget", value=data["evictions"])


class _ScorerQueue:
    """Prometheus view of the scorer queue (:meth:`BatchingScorer.queue_info
    <iclr_cli.serve.batching.BatchingScorer.queue_info>`), read at each scrape."""

    def __init__(self, info):
        self.info = info

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        data = self.info()
        depth = GaugeMetricFamily("iclr_serve_scorer_queue_depth", "Scoring calls queued (not counting the batch running), by whether a client waits for them", labels=["kind"])
        depth.add_metric(["waited_for"], data["waited_for"])
        depth.add_metric(["ahead"], data["ahead"])
        yield depth
        yield GaugeMetricFamily("iclr_serve_scorer_queue_oldest_seconds", "Seconds the oldest queued scoring call has waited (0 when none is queued)", value=data["oldest_s"] or 0)
        yield GaugeMetricFamily("iclr_serve_scorer_running_seconds", "Seconds the scoring batch in progress has run (0 when idle)", value=data["running_s"] or 0)


class Metrics:
    """Prometheus counters in a registry of their own (several apps may live in one process)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("iclr_serve_requests", "Compressing requests (chat completions, messages, responses), by how they ended", ["outcome"], registry=r)
        self.completed = Counter("iclr_serve_steps_completed", "Completed steps decided (once each): compressed, left as generated, or sent late", registry=r)
        self.steps = Counter("iclr_serve_steps_compressed", "Completed steps whose reasoning went upstream compressed (once each; late ones when compressed)", registry=r)
        self.late = Counter("iclr_serve_steps_late", "Completed steps sent as generated because their scores were not ready within --max-wait, by cause", ["cause"], registry=r)
        self.late_compressed = Counter("iclr_serve_steps_late_compressed", "Steps sent late and compressed at a later request (--late when-it-pays or compress-later)", registry=r)
        self.prefix_breaks = Counter("iclr_serve_prefix_breaks", "Requests whose items as sent do not extend their conversation's previous request, by whose change", ["cause"], registry=r)
        self.unwritten = Counter("iclr_serve_steps_unwritten", "Steps decided compressed whose edit the request could not carry (a copy the reader does not edit): sent as generated", registry=r)
        self.scorer_failures = Counter("iclr_serve_scorer_failures", "Steps forwarded uncompressed because scoring failed", registry=r)
        self.sealed = Counter("iclr_serve_sealed_blocks", "Reasoning blocks of completed steps left sealed (signed or encrypted for the upstream)", registry=r)
        self.reasoning = Counter("iclr_serve_reasoning_tokens", "Reasoning tokens of compressed steps (proxy tokenizer)", ["kind"], registry=r)
        self.upstream_tokens = Counter("iclr_serve_upstream_tokens", "Tokens the upstream reported in usage", ["kind"], registry=r)
        self.added = Histogram(
            "iclr_serve_added_latency_seconds",
            "Time from receiving a request to sending it upstream",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.scoring_wait = Histogram(
            "iclr_serve_scoring_wait_seconds",
            "Time a request waited for scores (requests with a step to score; at most --max-wait)",
            buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
            registry=r,
        )
        self.batch = Histogram("iclr_serve_scorer_batch_size", "Scoring requests per scorer call", buckets=(1, 2, 4, 8, 16, 32, 64), registry=r)
        self.conversations = Gauge("iclr_serve_conversations", "Conversations held in state", registry=r)
        self.waiting = Gauge("iclr_serve_requests_waiting_for_scores", "Requests waiting for their steps' scores now (each at most --max-wait)", registry=r)
        self.eager = Counter("iclr_serve_eager_scoring", "Steps scored ahead, once the reply was relayed, by outcome", ["outcome"], registry=r)
        self.keepalives = Counter("iclr_serve_keepalives", "Keep-alives sent on relayed streams while the upstream was silent", registry=r)
        self.bodies = Counter("iclr_serve_request_bodies", "Compressed request bodies (Content-Encoding), by coding and outcome: decoded, passed_through, corrupt, too_large", ["encoding", "outcome"], registry=r)
        self.store_seconds = Histogram("iclr_serve_state_store_seconds", "Time of each call to the conversation state store (--state), by operation", ["op"],
                                       buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 2.5), registry=r)
        self.store_errors = Counter("iclr_serve_state_store_errors", "Calls to the state store that failed (the request went on with this process's state), by operation", ["op"], registry=r)
        self.offers = Counter("iclr_serve_steps_offered", "Steps scored ahead here and offered to the other replicas, and offers taken from them, by outcome", ["outcome"], registry=r)
        self.unauthorized = Counter("iclr_serve_unauthorized_requests", "Requests answered 401: no client key, or one that is not a client key", registry=r)

    def watch_scorer(self, info) -> None:
        """Export ``info()`` (a scorer's ``cache_info``: a dict, or ``None``) at each scrape."""
        self.registry.register(_ScorerState(info))

    def watch_queue(self, info) -> None:
        """Export ``info()`` (:meth:`BatchingScorer.queue_info`) at each scrape."""
        self.registry.register(_ScorerQueue(info))

    def render(self) -> tuple[bytes, str]:
        """(body, content type) of the Prometheus text exposition."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class Stats:
    """Totals plus the Prometheus view; per-conversation counts live on each conversation."""

    def __init__(self) -> None:
        self.total = Counts()
        self.eager = EagerCounts()
        self.waiting = 0  # requests waiting for scores right now
        self.metrics = Metrics()
        self.lock = threading.Lock()
        self.keepalives = 0  # in total only: keep-alives sent on silent relayed streams
        self.unauthorized = 0  # in total only: requests refused for their client key
        self.bodies: dict[tuple[str, str], int] = {}  # in total only: (content coding, outcome) -> request bodies

    def eager_event(self, outcome: str, n: int = 1) -> None:
        """Count ``n`` of one :class:`EagerCounts` outcome."""
        with self.lock:
            setattr(self.eager, outcome, getattr(self.eager, outcome) + n)
        self.metrics.eager.labels(outcome).inc(n)

    def compressed(self, conv: Counts, tokens: ReasoningTokens, failed: bool, unrecognised: int = 0, sealed: Sequence[str] = (),
                   compressible: bool = True, *, changed: bool = False, late: str | None = None, unwritten: bool = False) -> None:
        """Record one completed step decided once; ``tokens`` is its accounting
        (:func:`iclr_cli.token_accounting.account` of the texts as generated and as sent);
        ``changed``: the text sent differs from the text generated (a compressed step);
        ``late``: why it was sent as generated, its scores not ready within the budget
        (:data:`~iclr_cli.serve.report.LATE_CAUSES`; ``None``: it was not);
        ``unrecognised`` counts the step's texts read neither as reasoning nor as action;
        ``sealed`` gives, per reasoning block left sealed, why (``/stats`` counts them by reason).
        A step with no block a variant may edit (``compressible`` False: no reasoning, or all
        of it sealed) counts in ``steps_nothing_to_compress``, not as compressed. ``unwritten``:
        it was decided compressed, but the request could not carry the edit (a copy of the
        reasoning the reader does not edit), so it went as generated (``tokens`` say so)."""
        with self.lock:
            for c in (conv, self.total):
                c.steps_completed += 1
                c.steps_compressed += changed
                c.steps_unwritten += unwritten
                c.steps_nothing_to_compress += not compressible
                if late:
                    c.steps_late += 1
                    c.late_causes[late] = c.late_causes.get(late, 0) + 1
                c.reasoning = c.reasoning + tokens
                c.scorer_failures += failed
                c.unrecognised += unrecognised
                for why in sealed:
                    c.sealed[why] = c.sealed.get(why, 0) + 1
        self.metrics.completed.inc()
        if changed:
            self.metrics.steps.inc()
        if unwritten:
            self.metrics.unwritten.inc()
        if late:
            self.metrics.late.labels(late).inc()
        self.metrics.reasoning.labels("generated").inc(tokens.generated)
        self.metrics.reasoning.labels("removed").inc(tokens.deleted)
        self.metrics.reasoning.labels("skip_marker").inc(tokens.marker_tokens)
        if failed:
            self.metrics.scorer_failures.inc()
        if sealed:
            self.metrics.sealed.inc(len(sealed))

    def compressed_late(self, conv: Counts, before: ReasoningTokens, after: ReasoningTokens, *, changed: bool, failed: bool = False) -> None:
        """Record a step sent late and decided at a later request (``--late compress-later``):
        its accounting goes from ``before`` (as generated) to ``after``; ``changed``: it is
        compressed from now on; ``failed``: scoring it failed, so it stays as generated."""
        delta = _minus(after, before)
        with self.lock:
            for c in (conv, self.total):
                c.steps_compressed += changed
                c.steps_late_compressed += changed
                c.scorer_failures += failed
                c.reasoning = c.reasoning + delta
        if changed:
            self.metrics.steps.inc()
            self.metrics.late_compressed.inc()
        if failed:
            self.metrics.scorer_failures.inc()
        self.metrics.reasoning.labels("removed").inc(delta.deleted)
        self.metrics.reasoning.labels("skip_marker").inc(delta.marker_tokens)

    def prefix_break(self, conv: Counts, cause: str) -> None:
        """Count one request whose items as sent do not extend its conversation's previous
        request's (``cause``: ``client``, the client changed its own history there, or
        ``proxy``, the proxy sent an earlier step otherwise than before)."""
        with self.lock:
            for c in (conv, self.total):
                c.prefix_breaks[cause] = c.prefix_breaks.get(cause, 0) + 1
        self.metrics.prefix_breaks.labels(cause).inc()

    def waited(self, conv: Counts, seconds: float) -> None:
        """Record how long one request waited for scores (it had a step to score)."""
        with self.lock:
            for c in (conv, self.total):
                c.scoring_wait_s.append(seconds)
        self.metrics.scoring_wait.observe(seconds)

    def held(self, why: str) -> None:
        """Record a request whose history lives on the server (``why``: the field that says
        so): forwarded as sent, nothing of it compressed."""
        with self.lock:
            self.total.server_history[why] = self.total.server_history.get(why, 0) + 1

    def keepalive(self) -> None:
        """Count one keep-alive sent while an upstream stream was silent (in total only:
        ``keepalives_sent`` in ``/stats``, :mod:`iclr_cli.serve.keepalive`)."""
        with self.lock:
            self.keepalives += 1
        self.metrics.keepalives.inc()

    def body_encoding(self, coding: str, outcome: str) -> None:
        """Count one compressed request body (:mod:`iclr_cli.serve.encoding`): ``coding`` as
        the client's ``Content-Encoding`` said, ``outcome`` ``decoded``, ``passed_through``
        (no decoder here: forwarded as sent, not compressed), ``corrupt`` (answered 400) or
        ``too_large`` (413)."""
        key = (coding.strip().lower(), outcome)
        with self.lock:
            self.bodies[key] = self.bodies.get(key, 0) + 1
        self.metrics.bodies.labels(*key).inc()

    def bodies_record(self) -> dict:
        """``/stats`` ``request_bodies``: ``{coding: {outcome: n}}``."""
        out: dict = {}
        with self.lock:
            for (coding, outcome), n in sorted(self.bodies.items()):
                out.setdefault(coding, {})[outcome] = n
        return out

    def refused(self) -> None:
        """Count one request answered 401 for its client key (:mod:`iclr_cli.serve.auth`;
        ``unauthorized_requests`` in ``/stats``)."""
        with self.lock:
            self.unauthorized += 1
        self.metrics.unauthorized.inc()

    def request(self, conv: Counts | None, added_s: float, usage: Usage | None, outcome: str) -> None:
        """Record one finished request. ``outcome``: ``ok``, ``upstream_error`` (an error
        status, or no answer at all), ``upstream_dropped`` (the answer broke off: the
        upstream closed or stalled mid-body), ``client_gone`` (the client went away before
        the request was forwarded: it never went upstream) or ``shutting_down`` (answered 503
        while the proxy stopped); ``upstream_error`` and ``upstream_dropped`` count as
        upstream errors. ``added_s`` (the time to forward it) is recorded for forwarded
        requests only."""
        forwarded = outcome not in ("client_gone", "shutting_down")
        with self.lock:
            for c in (conv, self.total):
                if c is None:
                    continue
                c.requests += 1
                c.upstream_errors += outcome in ("upstream_error", "upstream_dropped")
                c.client_gone += outcome == "client_gone"
                if forwarded:
                    c.added_s.append(added_s)
                if usage is not None:
                    c.add_usage(usage)
        self.metrics.requests.labels(outcome).inc()
        if forwarded:
            self.metrics.added.observe(added_s)
        if usage is not None:
            for kind in ("input", "output", "cache_read"):
                value = getattr(usage, f"{kind}_tokens")
                if value:
                    self.metrics.upstream_tokens.labels(kind).inc(value)
