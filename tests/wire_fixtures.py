"""Replies in the Anthropic Messages and OpenAI Responses wire formats, whole or streamed.

For the scripted upstream of :mod:`serve_fixtures`: :func:`anthropic_reply` /
:func:`responses_reply` build a whole answer (a :class:`replay_fixtures.Reply`) or, with
``stream=True``, the events the real APIs send (a named :class:`serve_fixtures.Stream`):
Anthropic's ``message_start`` / ``content_block_*`` (``thinking_delta``, ``signature_delta``,
``input_json_delta``, ``text_delta``) / ``message_delta`` / ``message_stop``, and the
Responses API's ``response.created`` / ``response.output_item.*`` / ``response.completed``.
"""

from __future__ import annotations

import base64
import json

from replay_fixtures import Reply
from serve_fixtures import Stream

# Claude Code keeps thinking blocks only with a signature shaped like Anthropic's (long base64)
SIGNATURE = base64.b64encode(bytes(range(256)) * 2).decode()


def thinking(text: str, signature: str = SIGNATURE) -> dict:
    return {"type": "thinking", "thinking": text, "signature": signature}


def tool_use(call_id: str, name: str, arguments: dict) -> dict:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def anthropic_message(blocks: list[dict], *, stop_reason: str | None = None, usage: dict | None = None, model: str = "claude-opus-4-8", message_id: str = "msg_01") -> dict:
    stop = stop_reason or ("tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn")
    return {
        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": blocks,
        "stop_reason": stop, "stop_sequence": None,
        "usage": usage or {"input_tokens": 100, "cache_read_input_tokens": 40, "cache_creation_input_tokens": 0, "output_tokens": 30},
    }


def anthropic_events(message: dict, pieces: int = 2) -> list[dict]:
    """The SSE events Anthropic streams for ``message`` (deltas cut in ``pieces``)."""
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    events: list[dict] = [{"type": "message_start", "message": start}]
    for i, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "thinking":
            events.append({"type": "content_block_start", "index": i, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
            events += [{"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": p}} for p in _cut(block["thinking"], pieces)]
            events.append({"type": "content_block_delta", "index": i, "delta": {"type": "signature_delta", "signature": block["signature"]}})
        elif kind == "tool_use":
            events.append({"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}})
            events += [{"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": p}} for p in _cut(json.dumps(block["input"]), pieces)]
        elif kind == "text":
            events.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
            events += [{"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": p}} for p in _cut(block["text"], pieces)]
        else:
            events.append({"type": "content_block_start", "index": i, "content_block": block})
        events.append({"type": "content_block_stop", "index": i})
        if i == 0:
            events.append({"type": "ping"})
    events.append({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None}, "usage": {"output_tokens": message["usage"]["output_tokens"]}})
    events.append({"type": "message_stop"})
    return events


def anthropic_reply(blocks: list[dict], *, stream: bool = False, **kw) -> Reply | Stream:
    message = anthropic_message(blocks, **kw)
    return Stream(anthropic_events(message), named=True) if stream else Reply(message)


def reasoning_item(text_value: str, item_id: str = "rs_1", *, summary: bool = False, encrypted: str | None = None) -> dict:
    """A Responses reasoning item with raw ``reasoning_text`` (a local server's shape)."""
    item = {"type": "reasoning", "id": item_id, "summary": [], "content": [{"type": "reasoning_text", "text": text_value}]}
    if summary:
        item["summary"] = [{"type": "summary_text", "text": text_value}]
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def function_call(call_id: str, name: str, arguments: dict, item_id: str | None = None) -> dict:
    return {"type": "function_call", "id": item_id or f"fc_{call_id}", "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}


def output_message(value: str, item_id: str = "msg_1") -> dict:
    return {"type": "message", "id": item_id, "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": value, "annotations": []}]}


def response(output: list[dict], *, usage: dict | None = None, response_id: str = "resp_1") -> dict:
    # `created_at` (Unix seconds) is in every Response object OpenAI returns; the AI SDK rejects a stream without it
    return {
        "id": response_id, "object": "response", "created_at": 1765000000, "status": "completed", "model": "gpt-test", "output": output,
        "usage": usage or {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 64}, "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 150},
    }


def responses_events(resp: dict, pieces: int = 2) -> list[dict]:
    events: list[dict] = [{"type": "response.created", "sequence_number": 0, "response": {**resp, "status": "in_progress", "output": []}}]
    for i, item in enumerate(resp["output"]):
        if item["type"] != "reasoning":
            events.append({"type": "response.output_item.added", "output_index": i, "item": item})
            events.append({"type": "response.output_item.done", "output_index": i, "item": item})
            continue
        # as OpenAI streams it: the item added empty, its text in deltas, then done whole
        events.append({"type": "response.output_item.added", "output_index": i, "item": {**item, "summary": [], "content": []}})
        at = {"item_id": item["id"], "output_index": i}
        for k, part in enumerate(item.get("summary") or []):
            events.append({"type": "response.reasoning_summary_part.added", **at, "summary_index": k, "part": {"type": "summary_text", "text": ""}})
            events += [{"type": "response.reasoning_summary_text.delta", **at, "summary_index": k, "delta": p} for p in _cut(part["text"], pieces)]
        for k, part in enumerate(item.get("content") or []):
            events += [{"type": "response.reasoning_text.delta", **at, "content_index": k, "delta": p} for p in _cut(part["text"], pieces)]
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": "response.completed", "response": resp})
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


def responses_reply(output: list[dict], *, stream: bool = False, **kw) -> Reply | Stream:
    resp = response(output, **kw)
    return Stream(responses_events(resp), named=True) if stream else Reply(resp)


def _cut(value: str, pieces: int) -> list[str]:
    size = max(1, -(-len(value) // pieces))
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]
