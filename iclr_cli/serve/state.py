"""Conversations and the online write-back applied to each request.

METHOD.md, "Select and replace", exactly as ``replay`` applies it
(:class:`iclr_cli.replay.history.History`): the first request of a conversation and the step in
progress are never compressed; a step is complete once any item follows the model's output
(its tool results, the next user message). Each complete step is compressed once, by
:func:`iclr_cli.compress.compress_step` against P and the already compressed earlier steps, and
stored under its step key (:mod:`iclr_cli.serve.fingerprint`); every later request gets the
stored text in its place. So from request 2 on, request k+1's items as sent upstream start
with request k's items as sent upstream, and the provider's prompt cache keeps working.

This core does not know the wire format: a :class:`~iclr_cli.serve.dialect.Dialect` (chat
completions, Anthropic Messages, OpenAI Responses) reads each body into items and a
trajectory, writes the compressed steps back, and reads the upstream's replies.

A request waits for scores at most the latency budget (:mod:`iclr_cli.serve.budget`): a step
whose scores are not ready by then goes upstream as generated (sent late) and, by the late
policy, stays so or is compressed at the first later request whose arrival finds its scores
ready. The scorer sees P and the earlier steps as they stood when the step's scoring was
queued, a late step among them as generated (see that module).

A scorer failure leaves that step uncompressed, records why, and stores that choice: the step
is never compressed later, so the prefix the upstream has seen stays the prefix it gets. A
scorer stopped by shutdown (:class:`~iclr_cli.scoring.base.ScoringCancelled`) is not a
failure: nothing is stored, the request is not forwarded (the app answers 503), and the
step is compressed when the client sends it again.

State is bounded: at most ``max_conversations`` conversations, least recently used evicted
(from the SQLite store too). All methods are called from worker threads; each conversation
has a lock so two requests of one conversation never compress the same step twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import orjson

from iclr_cli.compress import PreparedStep, Settings, finish_step, prepare_step
from iclr_cli.errors import IclrError, InputError
from iclr_cli.formats.writeback import UnregisteredCopy
from iclr_cli.scoring.base import Scorer, ScoringCancelled, Tokenizer
from iclr_cli.serve import along, shared
from iclr_cli.serve.budget import Budget, Waiting, wait_within
from iclr_cli.serve.chat import CHAT
from iclr_cli.serve.dialect import Dialect, Request, Transcript
from iclr_cli.serve.fingerprint import conversation_id, diverges, item_digest, item_digests, step_keys
from iclr_cli.serve.late_steps import catch_up, settle_group
from iclr_cli.serve.report import RequestReport
from iclr_cli.serve.stats import Counts, Stats
from iclr_cli.serve.store import Guarded, MemoryStore, StoredStep
from iclr_cli.token_accounting import ReasoningTokens, account, token_counter
from iclr_cli.trajectory import Part, Step, Trajectory

log = logging.getLogger("iclr.serve")


def step_texts(step: Step) -> tuple[str, ...]:
    """The text of each of ``step``'s reasoning parts."""
    return tuple(p.text for p in step.reasoning)


@dataclass
class Conversation:
    """What the proxy remembers of one conversation.

    ``steps``: step key -> the step as decided once. ``reasoning``: tool-call id ->
    (field, text) of the reasoning the upstream returned with that call (``--restore-reasoning``).
    ``late``: step key -> the scoring of a step sent late and still to be compressed
    (``--late when-it-pays`` or ``compress-later``), in memory only. ``last_request``: when
    its last request arrived (``time.monotonic``; ``None`` since a restart). ``received`` and
    ``sent``: digests of the last request's items as the client sent them and as they went
    upstream (:func:`~iclr_cli.serve.fingerprint.item_digests`), to tell a prefix break and
    whose it is; ``seen``: requests of it this process has rewritten; ``context_feed``: the
    future of its last request's P-and-history feed (:func:`iclr_cli.serve.along.feed_context`).
    """

    id: str
    steps: dict[str, StoredStep] = field(default_factory=dict)
    reasoning: dict[str, tuple[str, str]] = field(default_factory=dict)
    counts: Counts = field(default_factory=Counts)
    lock: threading.Lock = field(default_factory=threading.Lock)
    late: dict[str, tuple[PreparedStep, Future]] = field(default_factory=dict)
    last_request: float | None = None
    received: list[bytes] | None = None
    sent: list[bytes] | None = None
    seen: int = 0
    context_feed: Future | None = None


@dataclass(frozen=True)
class Rewrite:
    """A request as it goes upstream.

    ``body``: the bytes to send (the client's own bytes when nothing changed).
    ``conversation``: the conversation id, ``None`` for a first request (known after the reply).
    ``compressed``: completed steps decided while handling this request (compressed, left as
    generated, or sent late).
    ``request``: the body as its dialect parsed it (``None`` when it is not a request of
    that API), for :func:`iclr_cli.serve.replies.record_reply`.
    ``stream``: the scorer stream the reply is fed under along the stream
    (:mod:`iclr_cli.serve.along`): the conversation id, or for a first request a provisional
    one that :func:`iclr_cli.serve.replies.record_reply` renames once the reply gives the id.
    ``report``: what the request decided, for its log line (:mod:`iclr_cli.serve.report`).
    """

    body: bytes
    conversation: str | None
    compressed: int = 0
    request: Request | None = None
    stream: str | None = None
    report: RequestReport | None = None


class ServeState:
    """The proxy's memory (see module docstring).

    Args:
        settings: variant, ratio, seed and splitter, as for ``prune``.
        scorer: the (batching) scorer; ``None`` for variants that do not score.
        tokenizer: the proxy tokenizer that counts reasoning tokens.
        store: where decisions outlive this process and are shared with the other processes
            serving the same conversations (:mod:`iclr_cli.serve.store`; default: none).
        stats: where counts go.
        max_conversations: LRU bound.
        restore_reasoning: re-insert stored reasoning into assistant turns with tool calls that
            arrive without any (matched by tool-call id).
        budget: how long a request may wait for scores, and what happens to a step sent late
            (:mod:`iclr_cli.serve.budget`); default: no limit (every step waits for its scores).
    """

    def __init__(
        self,
        settings: Settings,
        scorer: Scorer | None,
        tokenizer: Tokenizer,
        *,
        store=None,
        stats: Stats | None = None,
        max_conversations: int = 1000,
        restore_reasoning: bool = False,
        budget: Budget | None = None,
    ):
        self.settings = settings
        self.budget = budget or Budget(max_wait=None)
        self.stopping = threading.Event()
        self._on_stop: list[Callable[[], None]] = []
        self.scorer = scorer
        self.tokenizer = tokenizer
        self.stats = stats or Stats()
        self.store = Guarded(store or MemoryStore(), self.stats.metrics)
        self.max_conversations = max_conversations
        self.restore_reasoning = restore_reasoning
        self._convs: OrderedDict[str, Conversation] = OrderedDict()
        self._held_said: set[str] = set()
        self._lock = threading.Lock()

    # -- conversations ---------------------------------------------------------------------

    def conversations(self) -> list[Conversation]:
        """Every conversation held, least recently used first."""
        with self._lock:
            return list(self._convs.values())

    def conversation(self, conv_id: str) -> Conversation:
        """The conversation ``conv_id``, marked as most recently used; one this process does
        not hold is read from the store (after a restart, or begun by another process), or
        created."""
        with self._lock:
            conv = self._convs.get(conv_id)
            if conv is not None:
                self._convs.move_to_end(conv_id)
        if conv is None:
            loaded = self.store.conversation(conv_id)  # outside the lock: a remote store takes a round trip
            with self._lock:
                conv = self._convs.get(conv_id)
                if conv is None:
                    conv = self._convs[conv_id] = Conversation(conv_id, dict(loaded.steps), dict(loaded.reasoning)) if loaded else Conversation(conv_id)
                self._evict()
        self.store.touch(conv_id)
        return conv

    def stop(self) -> None:
        """Stop the scorer without waiting for the step it is scoring (shutdown): requests
        waiting for it raise :class:`~iclr_cli.scoring.base.ScoringCancelled`; then call
        every :meth:`when_stopping` callback. Must not block (it runs on the event loop)."""
        self.stopping.set()
        stop = getattr(self.scorer, "stop", None)
        if stop is not None:
            stop()
        for callback in list(self._on_stop):
            callback()

    def when_stopping(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (it must not block) when :meth:`stop` runs, or now if it has."""
        self._on_stop.append(callback)
        if self.stopping.is_set():
            callback()

    @property
    def scores_ahead(self) -> bool:
        """True when the scorer scores a reply's step once it was relayed (:meth:`prefetch`)."""
        return getattr(self.scorer, "prefetch", None) is not None

    def find(self, conv_id: str | None) -> Conversation | None:
        """The conversation ``conv_id`` if held, without marking it used."""
        with self._lock:
            return self._convs.get(conv_id) if conv_id else None

    def _evict(self) -> None:
        forget = getattr(self.scorer, "forget", None)  # its scorer state goes with it
        drop = getattr(self.scorer, "drop", None)
        while len(self._convs) > self.max_conversations:
            old, conv = self._convs.popitem(last=False)
            for _, future in conv.late.values():  # nobody here will compress its late steps
                if drop is not None and future is not None:
                    drop(future)
            # the store keeps it (other processes may serve it) until it expires (--state-ttl)
            if forget is not None:
                forget(old)
        self.stats.metrics.conversations.set(len(self._convs))

    # -- requests --------------------------------------------------------------------------

    def rewrite(self, body: object, raw: bytes, header: str | None = None, dialect: Dialect = CHAT, waiting: Waiting | None = None) -> Rewrite:
        """Apply the online write-back to one request body (parsed ``body``, client bytes
        ``raw``) of ``dialect``. Bodies that are not a request of that API are passed on
        unchanged, so the upstream answers them with its own error. ``waiting`` (made now
        when not given) says when the request arrived, which the latency budget counts from,
        and what it waits on.

        Raises:
            ScoringCancelled: the scorer was stopped (shutdown) before a step was compressed.
        """
        waiting = waiting or Waiting()
        request = dialect.parse(body) if isinstance(body, dict) else None
        if request is None:
            why = "not JSON" if body is None else f"no {dialect.items_field} list"
            return Rewrite(raw, None, report=RequestReport(note=f"a body that is not a {dialect.name} request ({why}): forwarded as sent"))
        if request.held is not None:  # history the proxy cannot see: nothing to rewrite
            self.stats.held(request.held)
            if request.held not in self._held_said:  # said once per reason; /stats counts every one
                self._held_said.add(request.held)
                log.warning("a %s request continues a conversation whose history is held by the upstream (%s): forwarded as sent, "
                            "nothing in it compressed (the proxy sees only the new items); counted in /stats server_history", dialect.name, request.held)
            return Rewrite(raw, None, report=RequestReport(note=f"history held by the upstream ({request.held}): forwarded as sent"))
        conv_id = conversation_id(dialect, request, header)
        if conv_id is None:  # a first request: its P is read while the upstream works
            stream = along.feed_first(self, request, dialect)
            note = "a first request (no step to decide yet)" + ("; P and the task queued for the scorer" if stream else "")
            return Rewrite(raw, None, request=request, stream=stream, report=RequestReport(note=note))
        conv = self.conversation(conv_id)
        waiting.conversation = conv_id
        report = RequestReport(conv_id)
        # Another request of this conversation holding the lock waits for scores until its own
        # deadline, which is before ours (it arrived first): the lock adds nothing to the budget.
        with conv.lock:
            if self.restore_reasoning and self.store.shared:  # another process may have relayed the reply
                conv.reasoning.update(self.store.reasoning(conv_id))
            sent = dialect.restore(request, conv.reasoning) if self.restore_reasoning else request
            received = item_digests(dialect, sent.items)
            try:
                transcript = dialect.read(sent, conv_id)
            except (IclrError, KeyError, TypeError, AttributeError, ValueError) as exc:
                log.warning("conversation %s: request not read as %s (%s); forwarded unchanged", conv_id, dialect.name, type(exc).__name__)
                self._sent(conv, dialect, received, request.items, report, sent.items)
                return Rewrite(raw, conv_id, request=request, report=report)
            try:
                edited, compressed = self._write_back(conv, dialect, sent, transcript, waiting, report, diverges(conv.received, received), raw)
            finally:
                report.waited_s = waiting.scoring_s
                if waiting.scored:
                    self.stats.waited(conv.counts, waiting.scoring_s)
            if not transcript.ends or transcript.ends[-1] < len(sent.items):  # no step in progress
                conv.context_feed = along.feed_context(self, conv_id, edited)
            try:
                out = dialect.write(sent, transcript, edited)
            except (InputError, UnregisteredCopy) as exc:  # a copy of the reasoning the reader does not edit: never half-edit
                log.warning("conversation %s: %s; forwarded unchanged", conv_id, exc)
                self._count_decided(conv, report, str(exc))
                self._sent(conv, dialect, received, request.items, report, sent.items)
                return Rewrite(raw, conv_id, compressed, request, conv_id, report)
            self._count_decided(conv, report)
            if out is None and sent is not request:  # nothing compressed, but --restore-reasoning put back what the client dropped
                out = dict(sent.body)
            self._sent(conv, dialect, received, request.items if out is None else out.get(dialect.items_field) or sent.items, report, sent.items)
        if out is None:
            return Rewrite(raw, conv_id, compressed, request, conv_id, report)
        return Rewrite(orjson.dumps(out), conv_id, compressed, request, conv_id, report)

    def _sent(self, conv: Conversation, dialect: Dialect, received: list[bytes], items: Sequence, report: RequestReport,
              client_items: Sequence = ()) -> None:
        """Note what this request sent: a prefix break when its items as sent do not extend the
        previous request's (the client's, when its own items did not either; else the proxy's),
        counted in ``/stats``; and when it came, for the late policy's cache lifetime. An item
        sent as the client's own object (``client_items``, whose digests are ``received``)
        is not hashed again: only the rewritten ones are."""
        now = [received[i] if i < len(client_items) and item is client_items[i] else item_digest(dialect, item) for i, item in enumerate(items)]
        at = diverges(conv.sent, now)
        if at is not None:
            client = diverges(conv.received, received)
            report.prefix_break = "client" if client is not None and client <= at else "proxy"
            self.stats.prefix_break(conv.counts, report.prefix_break)
        conv.sent, conv.received, conv.last_request = now, received, time.monotonic()
        conv.seen += 1

    def _write_back(self, conv: Conversation, dialect: Dialect, request: Request, transcript: Transcript, waiting: Waiting,
                    report: RequestReport, client_break_at: int | None = None, raw: bytes = b"") -> tuple[Trajectory, int]:
        """The trajectory with every complete step's reasoning as decided once (a step sent
        late and still pending: as generated, unless the late policy compresses it now)."""
        read = transcript.trajectory
        keys = step_keys(conv.id, dialect, request, transcript.ends)
        deadline = self.budget.deadline(waiting.start)
        if self.budget.late == "when-it-pays":
            settle_group(self, conv, request, transcript, keys, client_break_at, raw, report)
        done: list[Step] = []
        decided = 0
        for t, step in enumerate(read.steps):
            if transcript.ends[t] >= len(request.items):  # the step in progress
                done.append(step)
                continue
            stored = shared.known(self, conv, keys[t])
            if stored is None:
                unread = transcript.unrecognised_of(t)
                for item in unread:  # said once: a step is decided once
                    log.warning("conversation %s step %d: %s", conv.id, step.index, item.describe("request"))
                stored = self._decide(conv, keys[t], read.prompt, done, step, deadline, waiting, report, len(unread), transcript.sealed_of(t))
                decided += 1
            elif stored.pending and self.budget.late == "compress-later":
                stored = catch_up(self, conv, keys[t], read.prompt, done, step)
                report.late_compressed += not stored.pending and stored.texts != step_texts(step)
            elif stored.pending and not self.budget.keeps_late:  # the policy changed across a restart: as generated for good
                stored = self.save_step(conv, keys[t], StoredStep(stored.texts, stored.generated, stored.removed, stored.failure, late=True))
            done.append(step.with_reasoning(stored.texts))
        return read.with_steps(done), decided

    def save_step(self, conv: Conversation, key: str, stored: StoredStep) -> StoredStep:
        """Replace the decision of ``conv``'s step ``key`` (a pending late step settled, an edit
        the request could not carry) with ``stored``, in memory and the store, unless another
        process changed it first (compare-and-set: :meth:`~iclr_cli.serve.store.MemoryStore.replace`);
        returns the decision now stored. Call it holding ``conv.lock``."""
        old = conv.steps.get(key)
        won = self.store.replace(conv.id, key, old, stored) if old is not None else self.store.claim(conv.id, key, stored)
        conv.steps[key] = won
        return won

    def accounting(self, old: Sequence[str], new: Sequence[str]) -> ReasoningTokens:
        """Reasoning tokens (proxy tokenizer) of the parts ``old`` sent as ``new``
        (:func:`iclr_cli.token_accounting.account`); zeros when the tokenizer fails."""
        try:
            return account(token_counter(self.tokenizer), zip(old, new))
        except Exception:
            return ReasoningTokens()

    def _decide(self, conv: Conversation, key: str, prompt: Sequence[Part], history: Sequence[Step], step: Step,
                deadline: float | None, waiting: Waiting, decisions: RequestReport, unrecognised: int = 0, sealed: Sequence[str] = ()) -> StoredStep:
        """Compress the just-completed ``step`` against P and ``history`` (the earlier steps
        as they stand), waiting for its scores until ``deadline`` at most; store and count the
        decision. The accounting is replay's: compress_step's report, i.e.
        token_accounting.account of (text as generated, text as sent) per part. What the
        dialect writes is what finish_step returned (opaque copies are written with
        OpaqueEdits.DROP, and read-only parts are never edited), so the two agree."""
        texts = step_texts(step)
        compressible = True
        decisions.decided += 1
        try:
            prepared = prepare_step(conv.id, prompt, history, step, self.settings)
            result, taken = None, None
            if prepared.request is not None and not self._scored_here(conv, key):
                found, taken = shared.take_offer(self, conv, key, deadline, waiting)
                if found and taken is None:  # offered by another process, not in time (or decided there meanwhile)
                    elsewhere = shared.known(self, conv, key)
                    if elsewhere is not None:
                        return elsewhere
                    decisions.went_late("elsewhere")
                    return self._late(conv, key, prepared, None, texts, unrecognised, sealed, "elsewhere")
            if taken is not None:
                stored, tokens = taken, self.accounting(texts, taken.texts)
            else:
                if prepared.request is not None:
                    result, future, cause = self._scores(conv, key, prepared, deadline, waiting)
                    if result is None:
                        decisions.went_late(cause)
                        return self._late(conv, key, prepared, future, texts, unrecognised, sealed, cause)
                new_step, report = finish_step(prepared, result, self.settings, self.tokenizer)
                stored, tokens = StoredStep(step_texts(new_step), report.tokens.generated, report.tokens.deleted), report.tokens
                compressible = bool(report.blocks)  # no candidate block: no reasoning, or all of it sealed
        except ScoringCancelled:
            raise
        except Exception as exc:  # any scorer failure: forward this step uncompressed, for good
            reason = f"{type(exc).__name__}: {exc}"[:500]
            log.warning("conversation %s step %d: compression failed (%s); the step is sent uncompressed from now on", conv.id, step.index, reason)
            tokens = self.accounting(texts, texts)
            stored = StoredStep(texts, tokens.generated, 0, reason)
        won = shared.claim(self, conv, key, stored)
        if won != stored:  # another process decided it first: sent as it decided, and counted there
            return won
        if stored.texts != texts:  # counted once the request carries it (_count_decided)
            decisions.pending.append((key, texts, stored, tokens, unrecognised, tuple(sealed), compressible))
        else:
            self.stats.compressed(conv.counts, tokens, stored.failure is not None, unrecognised, sealed, compressible)
        decisions.compressed += stored.texts != texts
        return won

    def _scored_here(self, conv: Conversation, key: str) -> bool:
        """True when this process holds step ``key`` scored ahead (or being scored ahead)."""
        holds = getattr(self.scorer, "holds", None)
        return holds is not None and holds(conv.id, key)

    def _count_decided(self, conv: Conversation, report: RequestReport, unwritten: str | None = None) -> None:
        """Count the steps this request decided compressed: as compressed when the body carries
        them, or, when it could not (``unwritten`` says why: a copy of the reasoning the reader
        does not edit), as sent as generated, for good (stored so), so ``/stats`` counts what
        went upstream. Call it holding ``conv.lock``."""
        for key, texts, stored, tokens, unrecognised, sealed, compressible in report.pending:
            if unwritten is None:
                self.stats.compressed(conv.counts, tokens, False, unrecognised, sealed, compressible, changed=True)
                continue
            self.save_step(conv, key, StoredStep(texts, stored.generated, 0, f"not written: {unwritten}"[:500]))
            self.stats.compressed(conv.counts, self.accounting(texts, texts), False, unrecognised, sealed, compressible, unwritten=True)
            report.compressed -= 1
            report.unwritten += 1
        report.pending.clear()

    def _scores(self, conv: Conversation, key: str, prepared: PreparedStep, deadline: float | None, waiting: Waiting):
        """(result, future, late cause) for ``prepared.request``: the result is ``None`` when
        it is not ready by ``deadline``, the future is then the scoring still under way and
        the cause says why (:data:`~iclr_cli.serve.report.LATE_CAUSES`). The result scored
        ahead under ``key`` is taken if one is kept (one that failed is scored again);
        otherwise the request is scored now, ahead of work done ahead."""
        submit = getattr(self.scorer, "submit", None)
        if submit is None:  # a plain scorer: no budget to keep
            return self.scorer.score([prepared.request])[0], None, None
        claim = getattr(self.scorer, "claim", None)
        future = claim(prepared.request, key) if claim is not None else None
        if future is not None:
            ready = future.done()
            if not ready:
                self.scorer.promote(future)
            try:
                result, cause = self._wait(waiting, future, deadline)
            except ScoringCancelled:
                raise
            except Exception:  # failed ahead: scored again now, below
                pass
            else:
                self.stats.eager_event("hits" if ready else "waits")
                return result, future, cause
        if claim is not None:
            self.stats.eager_event("misses")
        future = submit([prepared.request])
        result, cause = self._wait(waiting, future, deadline)
        return result, future, cause

    def _wait(self, waiting: Waiting, future: Future, deadline: float | None):
        return wait_within(self.scorer, self.stats, waiting, future, deadline)

    def _late(self, conv: Conversation, key: str, prepared: PreparedStep, future: Future, texts: tuple[str, ...],
              unrecognised: int, sealed: Sequence[str], cause: str) -> StoredStep:
        """Send ``prepared``'s step as generated: its scores were not ready within the budget
        (``cause``). ``when-it-pays`` and ``compress-later`` keep ``future`` (moved behind the
        waited-for calls; ``None``: another process's offer did not come, so it is queued here)
        for a later request; ``as-sent`` takes it out of the queue. A step another process
        decided first is sent as it decided."""
        pending = self.budget.keeps_late
        tokens = self.accounting(texts, texts)
        stored = StoredStep(texts, tokens.generated, 0, late=True, pending=pending)
        won = shared.claim(self, conv, key, stored)
        if won != stored or not pending:  # decided elsewhere first, or sent as generated for good
            if future is not None:
                self.scorer.drop(future)
            if won != stored:
                return won
        elif future is None:  # the offer of another process did not come: scored here, behind the waited-for work
            try:
                conv.late[key] = (prepared, self.scorer.submit([prepared.request], eager=True))
            except RuntimeError:  # stopped: the next process queues it again (late_steps._requeue)
                pass
        else:
            conv.late[key] = (prepared, future)
            self.scorer.demote(future)
        self.stats.compressed(conv.counts, tokens, False, unrecognised, sealed, late=cause)
        return won
