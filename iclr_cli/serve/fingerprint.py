"""Recognising conversations and steps without the client's help.

Two hashes, both SHA-256 over orjson with sorted keys, over a request as its dialect reads it
(:class:`iclr_cli.serve.dialect.Request`: history items and a context):

- The **conversation id** hashes the context (tool definitions, a top-level ``system`` or
  ``instructions``) and the items up to and including the first one the model wrote, each
  reduced by :meth:`~iclr_cli.serve.dialect.Dialect.identity` to what a client keeps when it
  sends the item back (role, visible text, tool calls, tool-call ids): reasoning is left out
  because some clients drop it, ``None`` fields because some SDKs add them, cache markers
  because clients move them. A first request (no model item yet) gets its id from the reply.
  ``X-Iclr-Conversation`` overrides it.
- A **step key** hashes everything the step's compression depends on: the conversation id,
  the context and every item up to the end of the step's model output, reasoning included
  (:meth:`~iclr_cli.serve.dialect.Dialect.step_item`). It is the key under which the
  compressed reasoning is stored, so a step is compressed once and every later request that
  holds the same prefix gets the same text back, after a restart too. Items after the step
  (its observations) are not part of the key: the scorer input is cut after the step's last
  reasoning block.

Both hash an item as the provider reads it, not as the client happened to serialise it
(:func:`canonical`): clients send the reply back re-serialised (OpenCode and Qwen Code send
``content: null`` back as ``""`` and a tool call's JSON arguments re-encoded, ``{"command":
"ls"}`` as ``{"command":"ls"}``; SDKs add ``null`` fields and drop empty ones), and a step the
proxy scored ahead from the reply as it streamed must still be found under the key the
client's next request gives it. The provider reads JSON arguments as a value and an empty
content as no content, so the hash does too. What goes upstream is always the client's own
form with only the reasoning text replaced (:meth:`~iclr_cli.serve.dialect.Dialect.write`),
so a client's next request still extends this one byte for byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import orjson

HEADER = "x-iclr-conversation"
_MAX_HEADER = 200


_EMPTY = (None, "", [], {})


def arguments_value(arguments: object) -> object:
    """A tool call's JSON ``arguments`` string as the value it encodes (the provider parses
    it: the spacing and key order a client re-encodes it with mean nothing); the string itself
    when it is not JSON (a call cut short, a custom tool's free text)."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return ("json", orjson.loads(arguments))
    except orjson.JSONDecodeError:
        return arguments


def text_value(content: object) -> object:
    """A message ``content`` as the provider reads it: a list of text parts (optionally with
    cache markers, which clients move) is its text, ``None`` and ``""`` and ``[]`` are no
    content (``""``); anything else as it is."""
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content):
        return "".join(p["text"] for p in content)
    return "" if content in _EMPTY else content


def without_empty(item: dict) -> dict:
    """``item`` without the fields that hold nothing (``None``, ``""``, ``[]``, ``{}``): SDKs
    add them as ``null`` or leave them out, and a provider reads both alike."""
    return {k: v for k, v in item.items() if v not in _EMPTY}


def dump(value) -> bytes:
    """Canonical JSON bytes of ``value`` (sorted keys) for hashing."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def conversation_id(dialect, request, header: str | None = None) -> str | None:
    """The conversation ``request`` (:class:`~iclr_cli.serve.dialect.Request`) belongs to (see
    module docstring); ``None`` for a first request without the header (the id then comes
    from the reply)."""
    if header:
        return "h:" + header.strip()[:_MAX_HEADER]
    items = request.items
    first = dialect.first_model_item(items)
    if first is None:
        return None
    h = hashlib.sha256(dump(request.context if request.context is not None else []))
    for item in items[: first + 1]:
        identity = dialect.identity(item)
        if identity is not None:
            h.update(dump(identity))
    return h.hexdigest()[:24]


def step_keys(conv_id: str, dialect, request, ends: Sequence[int]) -> list[str]:
    """One key per step: the chained hash of every item before ``ends[t]`` (see module
    docstring)."""
    h = hashlib.sha256(conv_id.encode() + b"\0" + dump(request.context if request.context is not None else []))
    keys, pos = [], 0
    for end in ends:
        for item in request.items[pos:end]:
            h.update(dump(dialect.step_item(item)))
        pos = max(pos, end)
        keys.append(h.copy().hexdigest())
    return keys


def item_digest(dialect, item) -> bytes:
    """A short digest of ``item`` as the provider reads it
    (:meth:`~iclr_cli.serve.dialect.Dialect.step_item`): what a prefix is compared by."""
    return hashlib.blake2b(dump(dialect.step_item(item)), digest_size=12).digest()


def item_digests(dialect, items: Sequence) -> list[bytes]:
    """:func:`item_digest` of each of ``items``."""
    return [item_digest(dialect, item) for item in items]


def diverges(before: Sequence[bytes] | None, now: Sequence[bytes]) -> int | None:
    """The first item index at which ``now`` stops extending ``before`` (both
    :func:`item_digests`), or ``None`` when ``before`` is a prefix of ``now`` (or unknown): a
    provider's prompt cache is read up to that item and written again from it."""
    if before is None:
        return None
    for i, (a, b) in enumerate(zip(before, now)):
        if a != b:
            return i
    return None if len(now) >= len(before) else len(now)
