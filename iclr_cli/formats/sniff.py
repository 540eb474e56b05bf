"""What a file is, judged from its first 64 KiB: the head parsed once, and each adapter's evidence.

:func:`iclr_cli.formats.registry.detect` gives every adapter the same :class:`Head`: the
head's JSON values (the whole document, or one per JSONL line; a document or line cut off by
the 64 KiB limit is closed at its last complete element, so a huge file is still judged by
its structure and never read whole). Each adapter's ``sniff`` answers with a :class:`Match`
(how specific its evidence is, and a sentence saying what it saw) or ``None``; the highest
score wins, ties go to the adapter registered first, and when several matched the summary
says which was chosen and why (docs/FORMAT.md, "How a file's format is chosen").

Scores are tiers, not probabilities:

- :data:`MARKER`: a key or value only this format writes (Codex ``session_meta``, the
  ``iclr.trajectory/1`` schema, a LiteLLM spend-log row's ``request_id`` and ``call_type``).
- :data:`STRUCTURE` plus one per distinct feature seen: where roles, tool calls, tool results
  and reasoning live, and which content-part types occur (chat-message families that share
  ``role`` and ``content`` keys: OpenAI, Anthropic, Bedrock Converse, Gemini).
- :data:`PLAIN`: messages with nothing that tells the families apart (string contents).

:class:`Census` is the shared description of a list of messages those sniffs compare.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from iclr_cli.jsonio import BOM, loads

HEAD_BYTES = 64 * 1024
MARKER = 100
STRUCTURE = 10
PLAIN = 5


@dataclass(frozen=True)
class Match:
    """One adapter's answer to a head: ``score`` (a tier above, higher is more specific) and
    ``reason`` (what it saw, for the summary: ``"tool calls in 'tool_calls', results in role
    'tool' messages"``)."""

    score: int
    reason: str


# A JSON string (escapes included) or one structural character: enough to find where a cut
# document can be closed without parsing it character by character.
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{},]|"', re.DOTALL)
_CLOSERS = {ord("["): b"]", ord("{"): b"}"}


def close_cut(text: bytes) -> object | None:
    """The JSON value ``text`` starts, closed at its last complete element when ``text`` is
    cut off (a head of a larger document or line): ``[{"a": 1}, {"b": [2`` reads as
    ``[{"a": 1}]``. None when nothing before the cut parses."""
    stack: list[int] = []
    safe: tuple[int, bytes] | None = None  # (cut position, closers) of the last safe point
    for m in _TOKENS.finditer(text):
        ch = text[m.start()]
        if ch == ord('"') and m.end() - m.start() == 1:
            break  # a string cut off by the head: stop before it
        if ch in _CLOSERS:
            stack.append(ch)
            safe = (m.end(), b"".join(_CLOSERS[c] for c in reversed(stack)))
        elif ch in (ord("]"), ord("}")):
            if not stack:
                return None
            stack.pop()
            if not stack:
                safe = None  # a complete value: the caller parses it whole
                break
            safe = (m.end(), b"".join(_CLOSERS[c] for c in reversed(stack)))
        elif ch == ord(","):
            if stack:
                safe = (m.start(), b"".join(_CLOSERS[c] for c in reversed(stack)))
    if safe is None:
        return None
    try:
        return loads(text[: safe[0]] + safe[1])
    except (ValueError, UnicodeDecodeError):
        return None  # a key with no value before the cut (``{"a"``): nothing to judge by


@dataclass
class Head:
    """The first :data:`HEAD_BYTES` of a file, parsed once for every adapter.

    Attributes:
        raw: the bytes (BOM stripped; complete JSONL lines that are not JSON left out).
        records: the JSON values found: the document (closed where cut), or one per JSONL
            line (the last, cut, line closed too).
        lines: True when the head is JSONL (several values, one per line).
    """

    raw: bytes
    records: list = field(default_factory=list)
    lines: bool = False

    @classmethod
    def of(cls, head: Head | bytes) -> Head:
        """``head`` itself, or the :class:`Head` of raw bytes (BOM stripped)."""
        if isinstance(head, Head):
            return head
        raw = head[len(BOM) :] if head.startswith(BOM) else head
        return cls(raw, *_records(raw))

    @property
    def start(self) -> bytes:
        """The first non-blank byte (``b"{"``, ``b"["``, ...), ``b""`` for a blank head."""
        return self.raw.lstrip()[:1]

    @property
    def objects(self) -> list[dict]:
        """The records that are JSON objects, and the objects of a top-level list (a JSON list
        of rows or events)."""
        out: list[dict] = []
        for rec in self.records:
            if isinstance(rec, dict):
                out.append(rec)
            elif isinstance(rec, list):
                out.extend(v for v in rec if isinstance(v, dict))
        return out


def _records(raw: bytes) -> tuple[list, bool]:
    """The head's JSON values and whether it is JSONL: JSONL when its first line is a JSON
    object or list on its own (a pretty-printed document's first line is not), then every
    line that parses (bad ones are the reader's to report) and the last, cut, line closed.
    Otherwise one document, closed where the head cut it; failing that, whatever lines parse."""
    stripped = raw.strip()
    if not stripped:
        return [], False
    try:
        return [loads(stripped)], False
    except (ValueError, UnicodeDecodeError):
        pass
    lines = [line for line in stripped.split(b"\n") if line.strip()]
    if len(lines) > 1 and isinstance(_value(lines[0]), (dict, list)):
        return _lines(lines), True
    closed = close_cut(stripped)  # one document (or one huge line) cut by the head limit
    if closed is not None:
        return [closed], False
    found = _lines(lines)
    return found, len(found) > 1


def _value(line: bytes) -> object:
    try:
        return loads(line)
    except (ValueError, UnicodeDecodeError):
        return None


def _lines(lines: list[bytes]) -> list:
    values = [v for v in map(_value, lines[:-1]) if isinstance(v, (dict, list))]
    last = _value(lines[-1])
    if last is None:
        last = close_cut(lines[-1].strip())
    return values + ([last] if isinstance(last, (dict, list)) else [])


def is_messages(value: object, *, key: str = "role") -> bool:
    """True for a non-empty list whose first element is an object with a string ``key`` and
    whose elements are all objects (a cut head may close the last one early)."""
    return (
        isinstance(value, list)
        and bool(value)
        and isinstance(value[0], dict)
        and isinstance(value[0].get(key), str)
        and all(isinstance(m, dict) for m in value)
    )


@dataclass
class Census:
    """What a set of chat messages holds: the facts the chat-family sniffs compare.

    Attributes:
        roles: how many messages have each ``role``.
        keys: every message-level key, per role (``{"assistant": {"tool_calls", ...}}``).
        part_types: ``type`` of every typed content part, per role.
        untyped: the keys of content parts that have no ``type`` (Bedrock Converse blocks
            are ``{"text": ...}``, ``{"toolUse": {...}}``), per role.
        thinking_lists: content parts ``{"type": "thinking"}`` whose ``thinking`` is a list
            (Mistral) rather than a string (Anthropic); ``thinking_strings`` the others.
        items: ``type`` of list elements that have no ``role`` (OpenAI Responses input items:
            ``reasoning``, ``function_call``, ``function_call_output``).
    """

    roles: Counter = field(default_factory=Counter)
    keys: dict[str, set[str]] = field(default_factory=dict)
    part_types: dict[str, set[str]] = field(default_factory=dict)
    untyped: dict[str, set[str]] = field(default_factory=dict)
    thinking_lists: int = 0
    thinking_strings: int = 0
    items: set[str] = field(default_factory=set)

    def add(self, msg: dict) -> None:
        """Count one message (an element with no ``role`` counts as an item by its ``type``)."""
        role = msg.get("role")
        if not isinstance(role, str):
            if isinstance(msg.get("type"), str):
                self.items.add(msg["type"])
            return
        self.roles[role] += 1
        self.keys.setdefault(role, set()).update(msg)
        content = msg.get("content")
        for part in content if isinstance(content, list) else ():
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if isinstance(kind, str):
                self.part_types.setdefault(role, set()).add(kind)
                if kind == "thinking":
                    self.thinking_lists += isinstance(part.get("thinking"), list)
                    self.thinking_strings += isinstance(part.get("thinking"), str)
            elif kind is None:
                self.untyped.setdefault(role, set()).update(part)

    @cached_property
    def all_keys(self) -> set[str]:
        """Message-level keys over every role."""
        return set().union(*self.keys.values()) if self.keys else set()

    @cached_property
    def all_part_types(self) -> set[str]:
        """Typed content-part types over every role."""
        return set().union(*self.part_types.values()) if self.part_types else set()

    @cached_property
    def all_untyped(self) -> set[str]:
        """Keys of untyped content parts over every role."""
        return set().union(*self.untyped.values()) if self.untyped else set()


def census(lists: Iterable[list]) -> Census:
    """The :class:`Census` of every message in ``lists``."""
    found = Census()
    for messages in lists:
        for msg in messages:
            if isinstance(msg, dict):
                found.add(msg)
    return found


def chat_lists(head: Head) -> list[list]:
    """Message lists where chat files keep them: a record that is a message list, and a
    record's ``messages`` (and ``request.messages``)."""
    found: list[list] = []
    for rec in head.records:
        if is_messages(rec):
            found.append(rec)
        elif isinstance(rec, dict):
            for holder in (rec, rec.get("request")):
                if isinstance(holder, dict) and is_messages(holder.get("messages")):
                    found.append(holder["messages"])
    return found


def describe(names: Iterable[str]) -> str:
    """``'a', 'b'`` for a reason sentence."""
    return ", ".join(repr(x) for x in sorted(names))


ANTHROPIC_BLOCKS = frozenset({"thinking", "redacted_thinking", "tool_use", "tool_result", "server_tool_use", "mcp_tool_use", "mcp_tool_result"})
"""Content-block types only Anthropic Messages content has (``thinking`` with a string
``thinking``; Mistral's chunk holds a list)."""

CONVERSE_BLOCKS = frozenset(
    {"toolUse", "toolResult", "reasoningContent", "cachePoint", "guardContent", "citationsContent", "searchResult"}
)
"""Keys of untyped Bedrock Converse content blocks that no other chat format has (``text``,
``image`` and ``document`` are shared with others)."""

OPENAI_REASONING = ("reasoning_content", "reasoning", "thinking", "reasoning_details", "thinking_blocks")
"""Message-level reasoning fields of OpenAI-compatible chat messages."""


def openai_evidence(found: Census) -> tuple[list[str], list[str]]:
    """``(for, against)``: what in ``found`` only OpenAI-compatible chat messages have, and
    what they never have (Anthropic blocks, Converse blocks, Gemini ``parts``)."""
    pro: list[str] = []
    con: list[str] = []
    if found.roles.get("tool") or found.roles.get("function"):
        pro.append("tool results in role 'tool' messages")
    if {"tool_calls", "function_call"} & found.all_keys:
        pro.append("tool calls in 'tool_calls'")
    fields = [f for f in OPENAI_REASONING if f in found.keys.get("assistant", ())]
    if fields:
        pro.append(f"reasoning in message field {describe(fields)}")
    if found.thinking_lists:
        pro.append("Mistral 'thinking' content chunks")
    if {"image_url", "input_audio"} & found.all_part_types:
        pro.append("'image_url' content parts")
    anthropic = (ANTHROPIC_BLOCKS - {"thinking"}) & found.all_part_types  # Mistral has string thinking chunks too
    if anthropic:
        con.append(f"Anthropic content blocks {describe(anthropic)}")
    converse = CONVERSE_BLOCKS & found.all_untyped
    if converse:
        con.append(f"Bedrock Converse content blocks {describe(converse)}")
    if "parts" in found.all_keys:
        con.append("Gemini 'parts'")
    if found.items:
        con.append(f"items without a role {describe(found.items)} (OpenAI Responses input items)")
    return pro, con
