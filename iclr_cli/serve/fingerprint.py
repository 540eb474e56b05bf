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
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import orjson

HEADER = "x-iclr-conversation"
_MAX_HEADER = 200


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
