"""Recognising conversations and steps without the client's help.

Two hashes, both SHA-256 over orjson with sorted keys:

- The **conversation id** hashes the tool definitions, P and the first assistant message as
  the proxy returned it, each message reduced to what a client keeps when it sends the message
  back (role, visible text, tool calls, tool-call id): reasoning is left out because some
  clients drop it (an assistant message's visible text is its ``assistant`` action text as
  :func:`iclr_cli.formats.openai_messages.read_messages` reads it, so reasoning in any shape the
  proxy reads, inline ``<think>`` and harmony channels included, is not part of it), ``None``
  fields because some SDKs add them. A first request (no
  assistant message yet) gets its id from the reply. ``X-Iclr-Conversation`` overrides it.
- A **step key** hashes everything the step's compression depends on: the conversation id,
  the tools and every message up to and including the step's assistant message, reasoning
  included (``None`` fields dropped). It is the key under which the compressed reasoning is
  stored, so a step is compressed once and every later request that holds the same prefix gets
  the same text back, after a restart too. Messages after the step (its observations) are not
  part of the key: the scorer input is cut after the step's last reasoning block.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import orjson

from iclr_cli.errors import IclrError
from iclr_cli.formats.openai_messages import read_messages

HEADER = "x-iclr-conversation"
_MAX_HEADER = 200


def _dump(value) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _visible(msg: Mapping) -> str:
    """An assistant message's text without its reasoning (the one reading of every shape)."""
    try:
        (step,) = read_messages([msg], traj_id="fingerprint").steps
    except (IclrError, ValueError, TypeError, AttributeError):  # unreadable: the request is forwarded as sent anyway
        return _text(msg.get("content"))
    return "".join(p.text for p in step.parts if p.kind == "action" and p.label == "assistant")


def _identity(msg: Mapping) -> dict:
    content = _visible(msg) if msg.get("role") == "assistant" else _text(msg.get("content"))
    out: dict = {"role": msg.get("role"), "content": content}
    calls = [
        (c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
        for c in msg.get("tool_calls") or []
        if isinstance(c, Mapping)
    ]
    if calls:
        out["tool_calls"] = calls
    if msg.get("tool_call_id") is not None:
        out["tool_call_id"] = msg["tool_call_id"]
    return out


def conversation_id(messages: Sequence[Mapping], tools: Sequence[Mapping] | None, header: str | None = None) -> str | None:
    """The conversation a request belongs to (see module docstring); ``None`` for a first
    request without the header (the id then comes from the reply)."""
    if header:
        return "h:" + header.strip()[:_MAX_HEADER]
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), None)
    if first is None:
        return None
    h = hashlib.sha256(_dump(tools or []))
    for msg in messages[: first + 1]:
        h.update(_dump(_identity(msg)))
    return h.hexdigest()[:24]


def _normal(msg: Mapping) -> dict:
    return {k: v for k, v in msg.items() if v is not None}


def step_keys(conv_id: str, messages: Sequence[Mapping], tools: Sequence[Mapping] | None, starts: Sequence[int]) -> list[str]:
    """One key per step: the chained hash of every message up to the step's assistant message
    ``starts[t]`` (see module docstring)."""
    h = hashlib.sha256(conv_id.encode() + b"\0" + _dump(tools or []))
    keys, pos = [], 0
    for start in starts:
        for msg in messages[pos : start + 1]:
            h.update(_dump(_normal(msg)))
        pos = start + 1
        keys.append(h.copy().hexdigest())
    return keys
