"""Conversations and the online write-back applied to each request.

METHOD.md, "Select and replace", exactly as ``replay`` applies it
(:class:`iclr_cli.replay.history.History`): the first request of a conversation and the step in
progress are never compressed; a step is complete once any message follows its assistant
message (its tool results, the next user message). Each complete step is compressed once, by
:func:`iclr_cli.compress.compress_step` against P and the already compressed earlier steps, and
stored under its step key (:mod:`iclr_cli.serve.fingerprint`); every later request gets the
stored text in its place. So from request 2 on, request k+1's messages as sent upstream start
with request k's messages as sent upstream, and the provider's prompt cache keeps working.

A scorer failure leaves that step uncompressed, records why, and stores that choice: the step
is never compressed later, so the prefix the upstream has seen stays the prefix it gets.

State is bounded: at most ``max_conversations`` conversations, least recently used evicted
(from the SQLite store too). All methods are called from worker threads; each conversation
has a lock so two requests of one conversation never compress the same step twice.
"""

from __future__ import annotations

import logging
import threading
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import orjson

from iclr_cli.compress import Settings, compress_step
from iclr_cli.errors import IclrError, InputError
from iclr_cli.formats.base import Unrecognised
from iclr_cli.formats.openai_messages import REASONING_FIELDS, read_messages, write_messages
from iclr_cli.scoring.base import Scorer, Tokenizer
from iclr_cli.serve.fingerprint import conversation_id, step_keys
from iclr_cli.serve.stats import Counts, Stats
from iclr_cli.serve.store import MemoryStore, StoredStep
from iclr_cli.token_accounting import ReasoningTokens, account, token_counter
from iclr_cli.trajectory import Part, Step

log = logging.getLogger("iclr.serve")


@dataclass
class Conversation:
    """What the proxy remembers of one conversation.

    ``steps``: step key -> the step as compressed once. ``reasoning``: tool-call id ->
    (field, text) of the reasoning the upstream returned with that call (``--restore-reasoning``).
    """

    id: str
    steps: dict[str, StoredStep] = field(default_factory=dict)
    reasoning: dict[str, tuple[str, str]] = field(default_factory=dict)
    counts: Counts = field(default_factory=Counts)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class Rewrite:
    """A request as it goes upstream.

    ``body``: the bytes to send (the client's own bytes when nothing changed).
    ``conversation``: the conversation id, ``None`` for a first request (known after the reply).
    ``compressed``: steps compressed while handling this request.
    """

    body: bytes
    conversation: str | None
    compressed: int = 0


class ServeState:
    """The proxy's memory (see module docstring).

    Args:
        settings: variant, ratio, seed and splitter, as for ``prune``.
        scorer: the (batching) scorer; ``None`` for variants that do not score.
        tokenizer: the proxy tokenizer that counts reasoning tokens.
        store: :class:`~iclr_cli.serve.store.SqliteStore` or :class:`MemoryStore`.
        stats: where counts go.
        max_conversations: LRU bound.
        restore_reasoning: re-insert stored reasoning into assistant turns with tool calls that
            arrive without any (matched by tool-call id).
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
    ):
        self.settings = settings
        self.scorer = scorer
        self.tokenizer = tokenizer
        self.store = store or MemoryStore()
        self.stats = stats or Stats()
        self.max_conversations = max_conversations
        self.restore_reasoning = restore_reasoning
        self._convs: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()
        self._seq = 0
        for loaded in self.store.load():
            self._convs[loaded.id] = Conversation(loaded.id, loaded.steps, loaded.reasoning)
            self._seq = max(self._seq, loaded.last_used)
        with self._lock:
            self._evict()

    # -- conversations ---------------------------------------------------------------------

    def conversations(self) -> list[Conversation]:
        """Every conversation held, least recently used first."""
        with self._lock:
            return list(self._convs.values())

    def conversation(self, conv_id: str) -> Conversation:
        """The conversation ``conv_id`` (created when new), marked as most recently used."""
        with self._lock:
            conv = self._convs.get(conv_id)
            if conv is None:
                conv = self._convs[conv_id] = Conversation(conv_id)
            else:
                self._convs.move_to_end(conv_id)
            self._seq += 1
            self.store.touch(conv_id, self._seq)
            self._evict()
        return conv

    def find(self, conv_id: str | None) -> Conversation | None:
        """The conversation ``conv_id`` if held, without marking it used."""
        with self._lock:
            return self._convs.get(conv_id) if conv_id else None

    def _evict(self) -> None:
        while len(self._convs) > self.max_conversations:
            old, _ = self._convs.popitem(last=False)
            self.store.delete(old)
        self.stats.metrics.conversations.set(len(self._convs))

    # -- requests --------------------------------------------------------------------------

    def rewrite(self, body: object, raw: bytes, header: str | None = None) -> Rewrite:
        """Apply the online write-back to one chat-completions request body (parsed ``body``,
        client bytes ``raw``). Bodies that are not a chat request are passed on unchanged, so
        the upstream answers them with its own error."""
        if not isinstance(body, dict):
            return Rewrite(raw, None)
        messages, tools = body.get("messages"), body.get("tools")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return Rewrite(raw, None)
        tools = tools if isinstance(tools, list) else None
        conv_id = conversation_id(messages, tools, header)
        if conv_id is None:
            return Rewrite(raw, None)
        conv = self.conversation(conv_id)
        with conv.lock:
            sent = self._restore(conv, messages) if self.restore_reasoning else messages
            try:
                read = read_messages(sent, tools=tools, traj_id=conv_id)
            except (IclrError, KeyError, TypeError, AttributeError, ValueError) as exc:
                log.warning("conversation %s: request not read as chat messages (%s); forwarded unchanged", conv_id, type(exc).__name__)
                return Rewrite(raw, conv_id)
            try:
                out, compressed = self._write_back(conv, sent, tools, read)
            except InputError as exc:  # a copy of the reasoning the reader does not edit: never half-edit
                log.warning("conversation %s: %s; forwarded unchanged", conv_id, exc)
                return Rewrite(raw, conv_id)
        if out is messages or all(a is b for a, b in zip(out, messages)):
            return Rewrite(raw, conv_id, compressed)
        return Rewrite(orjson.dumps({**body, "messages": out}), conv_id, compressed)

    def _write_back(self, conv: Conversation, messages: list[dict], tools, read) -> tuple[list[dict], int]:
        starts = [s for s, _ in read.step_spans]
        keys = step_keys(conv.id, messages, tools, starts)
        prompt = read.prompt
        done: list[Step] = []
        compressed = 0
        for t, step in enumerate(read.steps):
            if starts[t] == len(messages) - 1:  # the step in progress
                done.append(step)
                continue
            stored = conv.steps.get(keys[t])
            if stored is None:
                unread = _unrecognised_in(read.unrecognised, read.step_spans[t])
                for item in unread:  # said once: a step is compressed once
                    log.warning("conversation %s step %d: %s", conv.id, step.index, item.describe("request"))
                stored = self._compress(conv, prompt, done, step, len(unread))
                conv.steps[keys[t]] = stored
                self.store.save_step(conv.id, keys[t], stored)
                compressed += 1
            done.append(step.with_reasoning(stored.texts))
        return write_messages(messages, read, read.with_steps(done)), compressed

    def _compress(self, conv: Conversation, prompt: Sequence[Part], history: Sequence[Step], step: Step, unrecognised: int = 0) -> StoredStep:
        # The accounting is replay's: compress_step's report, i.e. token_accounting.account of
        # (text as generated, text as sent) per part. What write_messages sends is what
        # compress_step returned (serve writes encrypted copies with OpaqueEdits.DROP, and
        # read-only parts are never edited), so the two agree.
        try:
            new_step, report = compress_step(conv.id, prompt, history, step, self.settings, self.scorer, self.tokenizer)
            stored, tokens = StoredStep(tuple(p.text for p in new_step.reasoning), report.tokens.generated, report.tokens.deleted), report.tokens
        except Exception as exc:  # any scorer failure: forward this step uncompressed, for good
            reason = f"{type(exc).__name__}: {exc}"[:500]
            log.warning("conversation %s step %d: compression failed (%s); the step is sent uncompressed from now on", conv.id, step.index, reason)
            texts = tuple(p.text for p in step.reasoning)
            try:
                tokens = account(token_counter(self.tokenizer), zip(texts, texts))
            except Exception:
                tokens = ReasoningTokens()
            stored = StoredStep(texts, tokens.generated, 0, reason)
        self.stats.compressed(conv.counts, tokens, stored.failure is not None, unrecognised)
        return stored

    def _restore(self, conv: Conversation, messages: list[dict]) -> list[dict]:
        out = messages
        for i, msg in enumerate(messages):
            calls = msg.get("tool_calls")
            if msg.get("role") != "assistant" or not isinstance(calls, list) or not calls:
                continue
            if any(isinstance(msg.get(f), str) for f in REASONING_FIELDS):
                continue
            found = next((conv.reasoning[c["id"]] for c in calls if isinstance(c, Mapping) and c.get("id") in conv.reasoning), None)
            if found is not None:
                out = list(out) if out is messages else out
                out[i] = {**msg, found[0]: found[1]}
        return out

    # -- replies ---------------------------------------------------------------------------

    def record_reply(self, conv_id: str | None, messages: object, tools: object, reply: Mapping | None) -> Conversation | None:
        """Note the assistant message the upstream returned: gives a first request its
        conversation, and keeps its reasoning per tool-call id for ``--restore-reasoning``."""
        if conv_id is not None:
            conv = self.find(conv_id)
        else:
            if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages) or not isinstance(reply, Mapping):
                return None
            conv_id = conversation_id([*messages, {**reply, "role": "assistant"}], tools if isinstance(tools, list) else None)
            conv = self.conversation(conv_id) if conv_id is not None else None
        if conv is None:
            return None
        if self.restore_reasoning and isinstance(reply, Mapping):
            name = next((f for f in REASONING_FIELDS if isinstance(reply.get(f), str) and reply[f]), None)
            if name is not None:
                for call in reply.get("tool_calls") or []:
                    if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                        with conv.lock:
                            conv.reasoning[call["id"]] = (name, reply[name])
                        self.store.save_reasoning(conv.id, call["id"], name, reply[name])
        return conv


_MESSAGE_INDEX = re.compile(r"^messages\[(\d+)\]")


def _unrecognised_in(items: Sequence[Unrecognised], span: tuple[int, int]) -> list[Unrecognised]:
    """The items whose field lies in the messages ``span`` (``messages[i]...``, start <= i < end)."""
    out = []
    for item in items:
        m = _MESSAGE_INDEX.match(item.field)
        if m and span[0] <= int(m.group(1)) < span[1]:
            out.append(item)
    return out
