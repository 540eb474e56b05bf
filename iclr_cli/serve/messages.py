"""The ``messages`` dialect: ``POST /v1/messages`` (Anthropic Messages, as Claude Code sends it).

A request is read with the ``anthropic`` file adapter's own block reading
(:func:`iclr_cli.formats.adapters.anthropic.assistant_parts` / :func:`~iclr_cli.formats.adapters.anthropic.user_parts`),
so ``thinking`` blocks, ``<think>`` in text, ``redacted_thinking``, ``tool_use`` and
``tool_result`` mean here what they mean in a transcript file. Items are the ``messages``
(Claude Code also sends ``role: system`` messages mid-conversation: read as what they are, an
observation). The context is ``system`` and ``tools``: part of P, never changed.
``cache_control`` markers are never changed either, but clients move them (Claude Code marks
the last message of each request), so fingerprints leave them out.

What happens to a ``thinking`` block depends on the upstream (:mod:`iclr_cli.providers`):

- **plain** (DeepSeek's and the other Anthropic-compatible endpoints, vLLM, SGLang, llama.cpp,
  LiteLLM to open models): the text is the model's plain reasoning, compressed in place. The
  block keeps every other key, its ``signature`` included: the wire format requires one
  (Anthropic's ``ThinkingBlockParam``) and a plain upstream does not check it against the text;
  the edited copy goes only upstream, the client keeps the block as generated. A fully deleted
  block stays as ``thinking: ""`` (DeepSeek requires thinking blocks passed back on tool turns).
- **sealed** (Anthropic's own API: signatures checked, the latest assistant turn's blocks may
  not change, preserved-thinking models bind them to the prefix): never scored or edited, and
  neither is inline ``<think>`` in an assistant text block; each is counted in ``/stats`` as
  sealed with the reason. With ``drop_previous_turns``
  (``--sealed drop-previous-turns``) the thinking and ``redacted_thinking`` blocks of assistant
  turns before the current tool loop are left out, which Anthropic's docs allow ("you can omit
  thinking blocks from prior assistant role turns"; only the current tool-use cycle must be sent
  back): https://platform.claude.com/docs/en/build-with-claude/extended-thinking.

A ``thinking`` block whose ``signature`` is ``""`` or missing is unsigned
(:func:`~iclr_cli.formats.adapters.anthropic.has_signature`): on a sealed upstream it is left as sent
and counted as :data:`UNSIGNED_THINKING`, never as signed; ``--restore-reasoning`` puts back
the signature the reply carried (:meth:`MessagesDialect.restore`, :func:`resign`).

``redacted_thinking``, and the summary of an encrypted ``reasoning`` block (Roo Code keeps
OpenAI Responses reasoning that way), are never touched on any upstream. Replies are read from the whole
``message`` body or from the relayed SSE events (``message_start``, ``content_block_start``,
``content_block_delta`` with ``text_delta`` / ``thinking_delta`` / ``signature_delta`` /
``input_json_delta``, ``message_delta``). Errors the proxy answers itself use Anthropic's
error shape (https://platform.claude.com/docs/en/api/errors).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import replace

import orjson

from iclr_cli.blocks import SKIP
from iclr_cli.formats.adapters.anthropic import assistant_parts, has_signature, note_message_fields, user_parts
from iclr_cli.formats.reading import Where
from iclr_cli.formats.openai_messages import render_tools
from iclr_cli.formats.writeback import TextRef, apply_edits
from iclr_cli.replay.accounting import Usage
from iclr_cli.serve.dialect import Dialect, Reply, Request, Transcript, by_step
from iclr_cli.serve.fingerprint import text_value, without_empty
from iclr_cli.trajectory import Part, Step, Trajectory, WriteBack

SEALED_THINKING = "thinking block signed for a sealed upstream (its signature is checked against the text)"
UNSIGNED_THINKING = ("thinking block without a signature on a sealed upstream (sent as the client sent it; the upstream rejects it, "
                     "--restore-reasoning puts back the signature the proxy saw)")
SEALED_INLINE = "inline <think> on a sealed upstream (the signatures may bind the whole prefix)"
REDACTED = "redacted_thinking (encrypted data, no text)"
ENCRYPTED = "reasoning block beside encrypted_content (only the provider can read what it re-reads)"
THINKING_BLOCKS = "thinking_blocks"
"""The field name ``--restore-reasoning`` stores a Messages reply's thinking blocks under (JSON)."""
_THINKING = ("thinking", "redacted_thinking")
log = logging.getLogger("iclr.serve")
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}


def without_cache_control(value):
    """``value`` with every ``cache_control`` key removed (for fingerprints only)."""
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(v) for v in value]
    return value


class MessagesDialect(Dialect):
    """Anthropic Messages (see module docstring).

    Args:
        sealed: the upstream checks thinking signatures (:mod:`iclr_cli.providers`).
        drop_previous_turns: on a sealed upstream, leave out the thinking blocks of turns
            before the current tool loop.
    """

    name = "messages"
    items_field = "messages"

    def __init__(self, *, sealed: bool = False, drop_previous_turns: bool = False):
        self.sealed = sealed
        self.drop_previous_turns = drop_previous_turns
        self._unsigned_said = False

    def parse(self, body: Mapping) -> Request | None:
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return None
        context = without_cache_control({"system": body.get("system"), "tools": body.get("tools")})
        return Request(body, messages, context)

    def identity(self, msg: Mapping) -> object:
        where = Where("fingerprint")
        content = without_cache_control(msg.get("content"))
        try:
            if msg.get("role") == "assistant":
                parts = assistant_parts(content, where, ("content",))
            else:
                parts = user_parts(content, "prompt", where, ("content",))
        except Exception:  # unreadable: the request is forwarded as sent anyway
            return {"role": msg.get("role"), "content": content}
        return {"role": msg.get("role"), "parts": [(p.label, p.text, p.call_id) for p in parts if p.kind != "reasoning"]}

    def step_item(self, item: Mapping) -> object:
        """The message as the provider reads it (:mod:`~iclr_cli.serve.fingerprint`): no cache
        markers (clients move them), no empty field or block (the API rejects empty text
        blocks, so clients drop them), a content of text blocks alone as its text."""
        out = without_empty(without_cache_control(dict(item)))
        content = out.get("content")
        if isinstance(content, list):
            blocks = [without_empty(b) if isinstance(b, dict) else b for b in content]
            content = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "text" and "text" not in b)]
        out["content"] = text_value(content)
        return out

    def read(self, request: Request, traj_id: str) -> Transcript:
        body, messages = request.body, request.items
        where = Where("request")
        prompt: list[Part] = []
        if body.get("system") is not None:
            prompt += user_parts(body["system"], "prompt", where, ("system",), label="system")
        if isinstance(body.get("tools"), list) and body["tools"]:
            prompt.append(Part("prompt", render_tools(without_cache_control(body["tools"])), label="tools"))
        steps: list[list[Part]] = []
        starts: list[int] = []
        sealed: list[list[str]] = []
        for i, msg in enumerate(messages):
            if not isinstance(msg.get("role"), str):
                raise where.error("message has no string 'role'", ("messages", i, "role"))
            if "content" not in msg:
                raise where.error("message has no 'content'", ("messages", i, "content"))
            if msg["role"] == "assistant":
                parts, why = self._assistant(assistant_parts(msg["content"], where, ("messages", i, "content")))
                note_message_fields(msg, where, ("messages", i))
                steps.append(parts)
                starts.append(i)
                sealed.append(why)
            elif steps:
                steps[-1] += user_parts(msg["content"], "observation", where, ("messages", i, "content"), label=msg["role"])
            else:
                prompt += user_parts(msg["content"], "prompt", where, ("messages", i, "content"), label=msg["role"])
        trajectory = Trajectory(traj_id, tuple(prompt), tuple(Step(k, tuple(p)) for k, p in enumerate(steps)), meta={"format": "anthropic"})
        spans = list(zip(starts, [*starts[1:], len(messages)]))
        unread = by_step(where.unrecognised, spans, lambda u: _message_index(u.field))
        return Transcript(trajectory, tuple(s + 1 for s in starts), unread, tuple(tuple(w) for w in sealed))

    def _assistant(self, parts: list[Part]) -> tuple[list[Part], list[str]]:
        """The wire rule for one assistant message's parts (module docstring)."""
        out, why = [], []
        for part in parts:
            if part.label == "redacted_thinking":
                why.append(REDACTED)
            elif part.write_back is WriteBack.OPAQUE:  # a summary beside encrypted_content: sealed on every upstream
                why.append(ENCRYPTED)
                part = replace(part, ref=None, write_back=WriteBack.READ_ONLY)
            elif part.kind == "reasoning" and part.label == "reasoning" and isinstance(part.ref, TextRef):
                thinking_block = not part.ref.sites[0].how.startswith("think:")
                if self.sealed:
                    # "signature": "" is no signature: not counted as signed (has_signature)
                    unsigned = thinking_block and part.write_back is not WriteBack.SIGNED
                    why.append(UNSIGNED_THINKING if unsigned else SEALED_THINKING if thinking_block else SEALED_INLINE)
                    if unsigned and not self._unsigned_said:  # said once; /stats counts every one
                        self._unsigned_said = True
                        log.warning("a thinking block arrives with an empty or no signature (a client that ignores the stream's signature_delta); "
                                    "the upstream checks signatures and will reject it. --restore-reasoning puts back the signature of a reply "
                                    "the proxy relayed; counted in /stats sealed")
                    part = replace(part, ref=None, write_back=WriteBack.READ_ONLY)
                elif thinking_block:
                    part = replace(part, ref=TextRef(part.ref.sites), write_back=WriteBack.IN_PLACE)
            out.append(part)
        return out, why

    def write(self, request: Request, transcript: Transcript, edited: Trajectory) -> dict | None:
        applied = apply_edits([request.body], [transcript.trajectory], [edited])
        body = applied.edited.get(0)
        if self.sealed and self.drop_previous_turns:
            dropped = drop_previous_turns(body if body is not None else request.body)
            body = dropped if dropped is not None else body
        return body  # type: ignore[return-value]

    def remember(self, reply: Reply) -> list[tuple[str, str, str]]:
        """The reply's ``thinking`` and ``redacted_thinking`` blocks (signatures included),
        under each of its ``tool_use`` ids."""
        if not reply.items or not isinstance(reply.items[0].get("content"), list):
            return []
        content = [b for b in reply.items[0]["content"] if isinstance(b, Mapping)]
        thinking = [b for b in content if b.get("type") in _THINKING]
        if not thinking:
            return []
        text = orjson.dumps(thinking).decode()
        return [(b["id"], THINKING_BLOCKS, text) for b in content if b.get("type") == "tool_use" and isinstance(b.get("id"), str)]

    def restore(self, request: Request, memory: Mapping[str, tuple[str, str]]) -> Request:
        """``--restore-reasoning``, for an assistant message with ``tool_use`` blocks whose
        reply the proxy saw (matched by tool-use id):

        - it arrives with no thinking block: the reply's thinking blocks are put back,
          first, as generated. Claude Code drops thinking blocks Anthropic did not sign, and
          DeepSeek's Anthropic-compatible API then answers 400 (Alishahryar1/free-claude-code
          PR #599; DeepSeek: thinking must be passed back on tool-call turns,
          https://api-docs.deepseek.com/guides/thinking_mode).
        - a thinking block arrives with ``"signature": ""`` or none (a client that assembles
          the stream but ignores ``signature_delta``, nextlevelbuilder/goclaw #566): the
          signature the reply carried is put back (:func:`resign`). Anthropic requires the
          blocks of a tool-use turn passed back unmodified, signature included
          (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking), and
          answers 400 otherwise.
        """
        out = messages = request.items
        for i, msg in enumerate(messages):
            content = msg.get("content")
            if msg.get("role") != "assistant" or not isinstance(content, list):
                continue
            blocks = [b for b in content if isinstance(b, Mapping)]
            found = next((memory[b["id"]] for b in blocks if b.get("type") == "tool_use" and b.get("id") in memory), None)
            if found is None or found[0] != THINKING_BLOCKS:
                continue
            stored = orjson.loads(found[1])
            if any(b.get("type") in _THINKING for b in blocks):
                new = resign(content, stored, edited_keep_signature=not self.sealed)
                if new is None:
                    continue
            else:
                new = [*stored, *content]
            out = list(out) if out is messages else out
            out[i] = {**msg, "content": new}
        if out is messages:
            return request
        return Request({**request.body, "messages": out}, out, request.context)

    def error_body(self, status: int, message: str, kind: str, code: str | None = None) -> bytes:
        """Anthropic's error shape: ``{"type": "error", "error": {"type", "message"}}`` with
        the error type Anthropic uses for ``status`` (``api_error`` for 502 and 504)."""
        return orjson.dumps({"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": message}})

    def read_reply(self, content: bytes | None, streamed: bool) -> Reply:
        if content is None:
            return Reply()
        message = read_stream(content) if streamed else _loads(content)
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            return Reply()
        return Reply(({"role": "assistant", "content": message["content"]},), usage_of(message.get("usage")))


def _loads(content: bytes):
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return None


def _message_index(field: str) -> int | None:
    if not field.startswith("messages["):
        return None
    digits = field[len("messages[") :].split("]", 1)[0]
    return int(digits) if digits.isdigit() else None


def _is_tool_results(msg: Mapping) -> bool:
    content = msg.get("content")
    return isinstance(content, list) and bool(content) and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def drop_previous_turns(body: Mapping) -> dict | None:
    """``body`` without the thinking and redacted_thinking blocks of assistant messages before
    the last user message that is not only tool results (the start of the current tool loop);
    an assistant message keeps one block when it would be left empty. ``None`` when there was
    nothing to drop."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    loop = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user" and not _is_tool_results(m)), default=None)
    if loop is None:
        return None
    out, changed = list(messages), False
    for i, msg in enumerate(messages[:loop]):
        content = msg.get("content") if isinstance(msg, dict) else None
        if msg.get("role") != "assistant" or not isinstance(content, list):
            continue
        kept = [b for b in content if not (isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking"))]
        if kept and len(kept) < len(content):
            out[i] = {**msg, "content": kept}
            changed = True
    return {**body, "messages": out} if changed else None


def usage_of(usage: object) -> Usage | None:
    """Anthropic ``usage`` as replay counts it: input tokens include the cache reads and
    writes (Anthropic reports them apart), cache-read tokens are ``cache_read_input_tokens``."""
    if not isinstance(usage, Mapping):
        return None

    def num(name: str) -> int | None:
        value = usage.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    parts = [num("input_tokens"), num("cache_read_input_tokens"), num("cache_creation_input_tokens")]
    present = [p for p in parts if p is not None]
    return Usage(input_tokens=sum(present) if present else None, output_tokens=num("output_tokens"), cache_read_tokens=num("cache_read_input_tokens"))


def read_stream(body: bytes) -> dict | None:
    """The ``message`` a streamed Messages answer (SSE bytes) spells out: ``message_start``'s
    message with each content block assembled from its deltas (``input_json_delta`` pieces
    parsed as the tool input) and ``message_delta``'s stop reason and usage merged in."""
    from iclr_cli.serve.sse import events

    message: dict | None = None
    blocks: dict[int, dict] = {}
    partial: dict[int, str] = {}
    for _, event in events(body):
        kind = event.get("type")
        if kind == "error":  # the answer broke off: nothing to record
            return None
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = dict(event["message"])
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[event.get("index", len(blocks))] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            block = blocks.setdefault(event.get("index", 0), {})
            delta = event["delta"]
            for key, name in (("text", "text"), ("thinking", "thinking"), ("signature", "signature")):
                if delta.get("type") == f"{name}_delta" and isinstance(delta.get(key), str):
                    block[key] = block.get(key, "") + delta[key]
            if delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                partial[event.get("index", 0)] = partial.get(event.get("index", 0), "") + delta["partial_json"]
        elif kind == "message_delta" and message is not None:
            if isinstance(event.get("delta"), dict):
                message.update({k: v for k, v in event["delta"].items() if k in ("stop_reason", "stop_sequence")})
            if isinstance(event.get("usage"), dict):
                message["usage"] = {**(message.get("usage") or {}), **{k: v for k, v in event["usage"].items() if v is not None}}
    if message is None:
        return None
    for index, text in partial.items():
        try:
            blocks[index]["input"] = json.loads(text) if text.strip() else {}
        except (ValueError, KeyError):
            continue
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def resign(content: list, stored: list, *, edited_keep_signature: bool) -> list | None:
    """``content`` (one assistant message's blocks as the client sent them) with the
    signature put back on each ``thinking`` block that arrives without one, taken from the
    signed block of ``stored`` (the same turn's blocks as the upstream returned them) that it
    matches; ``None`` when none was put back. A signature is only ever one the upstream
    issued, and only on the text it was issued for: the same ``thinking`` text. With
    ``edited_keep_signature`` (a plain upstream, where an edited block keeps its signature:
    :mod:`iclr_cli.formats.sealing`) also on an edit of that text iclr could have made
    (:func:`is_edit_of`) by the block in the same place, the k-th thinking block of the turn
    when the turn has as many as the reply had."""
    thinking = [b for b in stored if isinstance(b, Mapping) and b.get("type") == "thinking"]
    signed = {j for j, b in enumerate(thinking) if has_signature(b) and isinstance(b.get("thinking"), str)}
    sent = [k for k, b in enumerate(content) if isinstance(b, Mapping) and b.get("type") == "thinking"]
    out = None
    for ordinal, k in enumerate(sent):
        block = content[k]
        if has_signature(block) or not isinstance(block.get("thinking"), str):
            continue
        match = next((j for j in sorted(signed) if thinking[j]["thinking"] == block["thinking"]), None)
        if match is None and edited_keep_signature and len(sent) == len(thinking) and ordinal in signed:
            match = ordinal if is_edit_of(block["thinking"], thinking[ordinal]["thinking"]) else None
        if match is None:
            continue
        signed.discard(match)  # one signature, one block
        out = list(content) if out is None else out
        out[k] = {**block, "signature": thinking[match]["signature"]}
    return out


def is_edit_of(edited: str, original: str) -> bool:
    """True when ``edited`` is ``original`` as an iclr variant could leave it: words removed
    (whole blocks, or tokens: ``delete-all``, ``random-R``) and ``[SKIP]`` markers where
    blocks were (``iclr``); i.e. the words of ``edited`` other than ``[SKIP]`` are the words
    of ``original`` in order, some left out. A reasoning deleted in full (``""``) is an edit
    of any text. A token cut inside a word is not recognised (the check is by whole words)."""
    words = iter(original.split())
    return all(word == SKIP or any(word == w for w in words) for word in edited.split())
