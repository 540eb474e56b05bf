"""Conversation state that outlives a process and is shared by every process serving it.

What is kept per conversation: when it was last used (retention), the decision of every
completed step (its reasoning as sent upstream, keyed by step key:
:mod:`iclr_cli.serve.fingerprint`), whether the step went upstream late and whether it is
still waiting to be compressed (:mod:`iclr_cli.serve.budget`), steps scored ahead by the
process that relayed their reply (*offers*, see below), and, for ``--restore-reasoning``, the
reasoning the upstream returned per tool-call id. No header, API key or whole request is ever
written. The settings that decide what a compressed step looks like (variant, ratio, seed,
splitter, proxy model, scorer limits) are written once; opening a store written with other
settings is refused, since its steps would no longer be what these settings produce.

One contract for every store, so any worker or replica sends the same bytes for a
conversation's earlier steps (the provider's prompt cache needs request k+1 to extend request
k byte for byte, whichever process sent k):

- **First writer wins** (:meth:`MemoryStore.claim`): a step's decision is written once; a
  process that decided the same step at the same moment gets the one stored first and sends
  that. A decision changes only from a *pending* late step to its final form, by
  compare-and-set (:meth:`MemoryStore.replace`), so two processes never settle it two ways.
- **Offers**: the process that relayed a reply scores its step ahead while the agent runs its
  tool; it writes what the step becomes (or that it is being scored) as an offer, so the
  replica that gets the next request uses it instead of scoring again on a cold scorer.
- **Retention**: a conversation not used for ``ttl`` seconds is removed (its provider
  prompt cache expired long before: Anthropic keeps one 5 minutes or 1 hour), so nothing grows
  without bound.

The stores: :class:`MemoryStore` (no ``--state``: one process, nothing kept), SQLite
(:mod:`iclr_cli.serve.store_sqlite`; one machine, every worker on one file), Redis
(:mod:`iclr_cli.serve.store_redis`) and PostgreSQL (:mod:`iclr_cli.serve.store_postgres`)
across machines. :func:`iclr_cli.serve.state_url.open_store` picks one from ``--state``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from iclr_cli.errors import UsageError

log = logging.getLogger("iclr.serve")

# A week: a resumed session (Claude Code's --resume, a Codex session picked up the next day)
# still gets its steps as they were sent; its prompt cache has expired long before, so a
# conversation forgotten after that costs at most one cache write (docs/serve.md, "State").
DEFAULT_TTL_S = 7 * 24 * 3600
SETTINGS_VERSION = "1"


@dataclass(frozen=True)
class StoredStep:
    """A completed step as decided: the text of each reasoning part as sent upstream, the
    step's reasoning tokens as generated and as removed, and why it was left uncompressed
    when scoring failed (``None`` otherwise).

    ``late``: its scores were not ready within the latency budget, so it went upstream as
    generated. ``pending``: late and still to be compressed once its scores are ready
    (``--late compress-later``/``when-it-pays``); ``texts`` are then the texts as generated,
    sent until then.
    """

    texts: tuple[str, ...]
    generated: int = 0
    removed: int = 0
    failure: str | None = None
    late: bool = False
    pending: bool = False


def step_record(step: StoredStep) -> bytes:
    """``step`` as canonical JSON bytes (sorted keys): what Redis and PostgreSQL store, and
    what their compare-and-set compares."""
    return orjson.dumps({"texts": list(step.texts), "generated": step.generated, "removed": step.removed,
                         "failure": step.failure, "late": step.late, "pending": step.pending}, option=orjson.OPT_SORT_KEYS)


def step_from_record(raw: bytes | str) -> StoredStep:
    """The :class:`StoredStep` of :func:`step_record`'s bytes."""
    d = orjson.loads(raw)
    return StoredStep(tuple(d["texts"]), int(d["generated"]), int(d["removed"]), d["failure"], bool(d["late"]), bool(d["pending"]))


@dataclass
class LoadedConversation:
    """One conversation as read back from a store."""

    id: str
    last_used: float
    steps: dict[str, StoredStep] = field(default_factory=dict)
    reasoning: dict[str, tuple[str, str]] = field(default_factory=dict)  # call id -> (field, text)


class MemoryStore:
    """No ``--state``: nothing outlives the process and nothing is shared. Every method has the
    contract of the shared stores (module docstring), trivially: nothing is ever found, and a
    claim is always won."""

    kind = "memory"
    shared = False  # another process may write what this one reads
    path: Path | None = None

    def __init__(self, ttl_s: float = DEFAULT_TTL_S):
        self.ttl_s = ttl_s

    @property
    def where(self) -> str | None:
        """Where the state lives, for ``/stats`` and logs (credentials left out)."""
        return None

    def conversation(self, conv: str) -> LoadedConversation | None:
        """``conv``'s steps and reasoning, ``None`` when the store holds none of it."""
        return None

    def step(self, conv: str, key: str) -> StoredStep | None:
        """The decision stored for step ``key`` of ``conv``, ``None`` when there is none."""
        return None

    def claim(self, conv: str, key: str, step: StoredStep) -> StoredStep:
        """Store ``step`` as the decision of ``key`` unless one is stored already (first writer
        wins); returns the decision stored, ours or the earlier one. Removes the key's offer."""
        return step

    def replace(self, conv: str, key: str, old: StoredStep, new: StoredStep) -> StoredStep:
        """Compare-and-set: ``new`` when the stored decision is still ``old`` (or there is
        none); returns the decision stored after the call."""
        return new

    def offer(self, conv: str, key: str, step: StoredStep | None) -> None:
        """Say that step ``key`` is being scored ahead (``step`` ``None``) or what it becomes."""

    def offered(self, conv: str, key: str) -> tuple[bool, StoredStep | None]:
        """(an offer exists, what the step becomes or ``None`` while it is being scored)."""
        return False, None

    def reasoning(self, conv: str) -> dict[str, tuple[str, str]]:
        """``conv``'s reasoning per tool-call id (``--restore-reasoning``)."""
        return {}

    def save_reasoning(self, conv: str, call_id: str, field_name: str, text: str) -> None:
        """Keep the reasoning the upstream returned with tool call ``call_id``."""

    def touch(self, conv: str) -> None:
        """Mark ``conv`` used now (it expires ``ttl_s`` after its last use)."""

    def expire(self, now: float | None = None) -> int:
        """Remove the conversations not used for ``ttl_s``; returns how many."""
        return 0

    def ping(self) -> None:
        """Raise when the store cannot be reached (readiness)."""

    def close(self) -> None:
        """Release connections."""


class Expiring:
    """Runs :meth:`expire` at most once per ``every_s`` from :meth:`touch` (SQLite and
    PostgreSQL have no expiry of their own; Redis expires keys itself)."""

    every_s = 300.0

    def _maybe_expire(self) -> None:
        now = time.time()
        last = getattr(self, "_expired_at", 0.0)
        if now - last < self.every_s:
            return
        self._expired_at = now
        try:
            removed = self.expire(now)
        except Exception as exc:  # retention is housekeeping: a failed sweep is tried again later
            log.warning("state store %s: removing expired conversations failed (%s)", getattr(self, "where", "?"), exc)
            return
        if removed:
            log.info("state store %s: %d conversations unused for %.0f s removed", getattr(self, "where", "?"), removed, self.ttl_s)


def check_settings(where: str, before: Mapping | None, wanted: Mapping) -> None:
    """Refuse a store written with other settings (module docstring).

    Raises:
        UsageError: naming each setting that differs, and ``where``.
    """
    if before is None:
        return
    changed = [f"{k}={before.get(k)!r} (now {v!r})" for k, v in wanted.items() if k != "schema" and before.get(k) != v]
    if changed:
        raise UsageError(f"{where} holds steps compressed with other settings: {', '.join(changed)}; use another store or the same settings")


def settings_bytes(settings: Mapping) -> bytes:
    return orjson.dumps({"settings_version": SETTINGS_VERSION, **settings}, option=orjson.OPT_SORT_KEYS)


def redact(url: str) -> str:
    """``url`` without its password (for logs, ``/stats`` and errors)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


class Guarded:
    """A store whose every call is timed (``/metrics`` ``iclr_serve_state_store_seconds`` by
    operation) and never fails a request: a store that cannot be reached or answers with an
    error is logged (at most once a minute), counted (``iclr_serve_state_store_errors``), and
    answered as :class:`MemoryStore` would (nothing found, a claim won), so the proxy goes on
    with what this process holds; readiness reports the store unhealthy meanwhile
    (:mod:`iclr_cli.serve.health`), for a balancer to send traffic elsewhere."""

    _FALLBACK = MemoryStore()

    def __init__(self, store: MemoryStore, metrics=None):
        self.inner = store
        self.metrics = metrics
        self.errors = 0
        self.last_error: str | None = None
        self._said_at = 0.0

    def __getattr__(self, name: str):  # attributes (kind, shared, where, path, ttl_s) pass through
        return getattr(self.inner, name)

    def _call(self, op: str, *args):
        start = time.perf_counter()
        try:
            return getattr(self.inner, op)(*args)
        except Exception as exc:
            self.errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}"[:300]
            if self.metrics is not None:
                self.metrics.store_errors.labels(op).inc()
            if time.monotonic() - self._said_at > 60:
                self._said_at = time.monotonic()
                log.warning("state store %s: %s failed (%s); going on with this process's own state", self.inner.where, op, self.last_error)
            return getattr(self._FALLBACK, op)(*args)
        finally:
            if self.metrics is not None:
                self.metrics.store_seconds.labels(op).observe(time.perf_counter() - start)

    def conversation(self, conv):
        return self._call("conversation", conv)

    def step(self, conv, key):
        return self._call("step", conv, key)

    def claim(self, conv, key, step):
        return self._call("claim", conv, key, step)

    def replace(self, conv, key, old, new):
        return self._call("replace", conv, key, old, new)

    def offer(self, conv, key, step):
        return self._call("offer", conv, key, step)

    def offered(self, conv, key):
        return self._call("offered", conv, key)

    def reasoning(self, conv):
        return self._call("reasoning", conv)

    def save_reasoning(self, conv, call_id, field_name, text):
        return self._call("save_reasoning", conv, call_id, field_name, text)

    def touch(self, conv):
        return self._call("touch", conv)

    def ping(self) -> None:
        """Unguarded: readiness wants the error."""
        start = time.perf_counter()
        try:
            self.inner.ping()
        finally:
            if self.metrics is not None:
                self.metrics.store_seconds.labels("ping").observe(time.perf_counter() - start)

    def expire(self, now=None):
        return self._call("expire", now)

    def close(self) -> None:
        self.inner.close()
