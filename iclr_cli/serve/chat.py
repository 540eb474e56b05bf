"""The ``chat`` dialect: ``POST /v1/chat/completions`` (OpenAI chat messages).

Messages are read and written back by :mod:`iclr_cli.formats.openai_messages`, the same code
as the ``openai`` file adapter and ``replay``, so the proxy scores the same text online and
offline. Items are the ``messages``; the context is ``tools``. A step is one assistant
message and the messages after it; its model output ends with that message. A message's
identity (:mod:`~iclr_cli.serve.fingerprint`) is its role, its visible text (an assistant
message's ``assistant`` action as :func:`~iclr_cli.formats.openai_messages.read_messages` reads
it, so reasoning in any shape it reads is not part of it), its tool calls and tool-call id.

Replies: ``choices[0].message`` of a whole body, or the streamed chunks assembled
(:func:`read_stream`, parsed with ``httpx-sse``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import orjson

from iclr_cli.errors import IclrError
from iclr_cli.formats.openai_messages import REASONING_FIELDS, read_messages, write_messages
from iclr_cli.replay.accounting import parse_usage
from iclr_cli.serve.dialect import Dialect, Reply, Request, Transcript, by_step
from iclr_cli.serve.fingerprint import arguments_value, text_value, without_empty
from iclr_cli.formats.sites import TextRef
from iclr_cli.trajectory import Part, Trajectory, WriteBack


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


class ChatDialect(Dialect):
    """OpenAI chat completions (see module docstring)."""

    name = "chat"
    items_field = "messages"

    def parse(self, body: Mapping) -> Request | None:
        messages, tools = body.get("messages"), body.get("tools")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return None
        return Request(body, messages, tools if isinstance(tools, list) else None)

    def identity(self, msg: Mapping) -> dict:
        content = _visible(msg) if msg.get("role") == "assistant" else _text(msg.get("content"))
        out: dict = {"role": msg.get("role"), "content": content}
        calls = [
            (c.get("id"), (c.get("function") or {}).get("name"), arguments_value((c.get("function") or {}).get("arguments")))
            for c in msg.get("tool_calls") or []
            if isinstance(c, Mapping)
        ]
        if calls:
            out["tool_calls"] = calls
        if msg.get("tool_call_id") is not None:
            out["tool_call_id"] = msg["tool_call_id"]
        return out

    def step_item(self, msg: Mapping) -> object:
        """The message as the provider reads it (:mod:`~iclr_cli.serve.fingerprint`): its
        content's text (``null``, ``""`` and text parts alike), each tool call's arguments as
        a JSON value, without the streaming ``index`` and the default ``type``, and no empty
        field."""
        out = dict(msg)
        if "content" in out:
            out["content"] = text_value(out["content"])
        calls = out.get("tool_calls")
        if isinstance(calls, list):
            out["tool_calls"] = [_call_key(c) if isinstance(c, Mapping) else c for c in calls]
        return without_empty(out)

    def read(self, request: Request, traj_id: str) -> Transcript:
        read = read_messages(request.items, tools=request.context, traj_id=traj_id)
        spans = read.step_spans
        unread = by_step(read.unrecognised, spans, lambda u: _message_index(u.field))
        trajectory, sealed = _seal_signed(read, request.body.get("model"))
        return Transcript(trajectory, tuple(start + 1 for start, _ in spans), unread, sealed, read)

    def write(self, request: Request, transcript: Transcript, edited: Trajectory) -> dict | None:
        out = write_messages(request.items, transcript.trajectory, edited)
        sent = request.body.get("messages")
        if isinstance(sent, list) and len(out) == len(sent) and all(a is b for a, b in zip(out, sent)):
            return None
        return {**request.body, "messages": out}

    def read_reply(self, content: bytes | None, streamed: bool) -> Reply:
        if content is None:
            return Reply()
        message, usage = read_stream(content) if streamed else read_completion(content)
        items = ({**message, "role": "assistant"},) if isinstance(message, Mapping) else ()
        return Reply(items, parse_usage(usage) if usage else None)

    def restore(self, request: Request, memory: Mapping[str, tuple[str, str]]) -> Request:
        """Put back into an assistant turn with tool calls what the client dropped of the
        reply: the reasoning fields (DeepSeek 400s on a tool-call turn without
        ``reasoning_content``), OpenRouter's ``reasoning_details`` (Gemini's thought signatures
        ride there) and a call's ``extra_content`` (Gemini's own thought signature): each only
        where it is missing, so what the client sent is never replaced; a ``reasoning_details``
        entry sent with an empty signature gets the reply's back (:func:`_with_signatures`)."""
        out = messages = request.items
        for i, msg in enumerate(messages):
            calls = msg.get("tool_calls")
            if msg.get("role") != "assistant" or not isinstance(calls, list) or not calls:
                continue
            found = [_recalled(memory[c["id"]]) for c in calls if isinstance(c, Mapping) and c.get("id") in memory]
            if not found:
                continue
            fields, _ = found[0]
            added = {}
            if not any(isinstance(msg.get(f), str) for f in REASONING_FIELDS):
                added.update({f: v for f, v in fields.items() if f in REASONING_FIELDS})
            if msg.get("reasoning_details") in (None, []) and fields.get("reasoning_details"):
                added["reasoning_details"] = fields["reasoning_details"]
            elif (signed := _with_signatures(msg.get("reasoning_details"), fields.get("reasoning_details"))) is not None:
                added["reasoning_details"] = signed
            new_calls = [
                {**c, "extra_content": _recalled(memory[c["id"]])[1]}
                if isinstance(c, Mapping) and c.get("extra_content") is None and c.get("id") in memory and _recalled(memory[c["id"]])[1] is not None else c
                for c in calls
            ]
            if any(a is not b for a, b in zip(new_calls, calls)):
                added["tool_calls"] = new_calls
            if added:
                out = list(out) if out is messages else out
                out[i] = {**msg, **added}
        return request if out is messages else Request({**request.body, "messages": out}, out, request.context)

    def remember(self, reply: Reply) -> list[tuple[str, str, str]]:
        if not reply.items:
            return []
        message = reply.items[0]
        fields = {f: message[f] for f in REASONING_FIELDS if isinstance(message.get(f), str) and message[f]}
        if isinstance(message.get("reasoning_details"), list) and message["reasoning_details"]:
            fields["reasoning_details"] = message["reasoning_details"]
        out = []
        for call in message.get("tool_calls") or []:
            if not (isinstance(call, Mapping) and isinstance(call.get("id"), str)):
                continue
            extra = call.get("extra_content") if isinstance(call.get("extra_content"), Mapping) else None
            if fields or extra:
                out.append((call["id"], _REMEMBERED, orjson.dumps({"fields": fields, "extra_content": extra}).decode()))
        return out


SEALED_SIGNED = "signed reasoning of a model whose provider checks the signature (its text is never edited)"


def _seal_signed(read: Trajectory, model: object) -> tuple[Trajectory, tuple[tuple[str, ...], ...]]:
    """The provider rule of :mod:`iclr_cli.providers` on the chat wire: a routed model whose
    provider checks signatures (``anthropic/claude-*`` through OpenRouter or LiteLLM) has its
    signed reasoning (``reasoning_details`` text with a ``signature``, LiteLLM
    ``thinking_blocks``) sealed, as in files (:mod:`iclr_cli.formats.sealing`); a model of a
    provider named as plain (MiniMax, DeepSeek, ...) has it edited with its ``signature`` key
    kept, as in files; any other model's reasoning is plain on this wire (an edited entry
    loses its signature)."""
    from iclr_cli.providers import for_model

    kind = for_model(model) if isinstance(model, str) else None
    if kind is None:
        return read, ()
    if not kind.checks_signatures:  # a named plain provider (MiniMax, DeepSeek...): edited, its signature key kept, as in files
        return read.with_steps([replace(step, parts=tuple(_keep_signature(p) for p in step.parts)) for step in read.steps]), ()
    steps, why = [], []
    for step in read.steps:
        parts = tuple(replace(p, ref=None, write_back=WriteBack.READ_ONLY) if p.write_back is WriteBack.SIGNED else p for p in step.parts)
        steps.append(replace(step, parts=parts))
        why.append(tuple(SEALED_SIGNED for p in step.parts if p.write_back is WriteBack.SIGNED))
    return read.with_steps(steps), tuple(why)


def _with_signatures(sent: object, kept: object) -> list | None:
    """``sent`` (a turn's ``reasoning_details`` as the client sent it) with the signature put
    back on each entry that came with ``"signature": ""`` or none, where the reply's entry at
    the same place (``kept``) is the same entry, text included, and was signed: an empty
    signature is no signature, and the provider checks the one it issued against that text
    (https://openrouter.ai/docs/use-cases/reasoning-tokens#preserving-reasoning-blocks).
    ``None`` when nothing is put back."""
    if not isinstance(sent, list) or not isinstance(kept, list):
        return None
    out = list(sent)
    for k, (entry, reply) in enumerate(zip(sent, kept)):
        if not (isinstance(entry, Mapping) and isinstance(reply, Mapping)) or entry.get("signature") not in (None, ""):
            continue
        signature = reply.get("signature")
        same = {key: v for key, v in entry.items() if key != "signature"} == {key: v for key, v in reply.items() if key != "signature"}
        if isinstance(signature, str) and signature and same:
            out[k] = {**entry, "signature": signature}
    return out if any(a is not b for a, b in zip(out, sent)) else None


def _keep_signature(part: Part) -> Part:
    if part.write_back is not WriteBack.SIGNED or not isinstance(part.ref, TextRef):
        return part
    return replace(part, ref=replace(part.ref, strip_keys=()), write_back=WriteBack.IN_PLACE)


_REMEMBERED = "chat"
"""The field name ``--restore-reasoning`` stores a chat reply's reasoning under: a JSON object
of its reasoning fields and the call's ``extra_content``. (Older state folders hold one
reasoning field's name and text.)"""


def _recalled(stored: tuple[str, str]) -> tuple[dict, object]:
    """``(reasoning fields, the call's extra_content)`` of one remembered reply."""
    name, text = stored
    if name != _REMEMBERED:
        return {name: text}, None
    value = orjson.loads(text)
    return value.get("fields") or {}, value.get("extra_content")


def _call_key(call: Mapping) -> dict:
    """A tool call in the step keys: what :meth:`ChatDialect.step_item` says."""
    out = {k: v for k, v in call.items() if k != "index" and not (k == "type" and v == "function")}
    fn = out.get("function")
    if isinstance(fn, Mapping):
        out["function"] = without_empty({**fn, "arguments": arguments_value(fn.get("arguments"))})
    return without_empty(out)


def _message_index(field: str) -> int | None:
    """``i`` of a field path ``messages[i]...``."""
    if not field.startswith("messages["):
        return None
    digits = field[len("messages[") :].split("]", 1)[0]
    return int(digits) if digits.isdigit() else None


def read_completion(body: bytes) -> tuple[dict | None, dict | None]:
    """(``choices[0].message``, ``usage``) of a chat.completion body; ``None`` where absent."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
    choices = data.get("choices")
    message = None
    if isinstance(choices, list) and choices and isinstance(choices[0], dict) and isinstance(choices[0].get("message"), dict):
        message = choices[0]["message"]
    return message, usage


def read_stream(body: bytes) -> tuple[dict | None, dict | None]:
    """(assembled ``choices[0]`` message, ``usage``) of a streamed chat completion (SSE bytes,
    parsed with ``httpx-sse``): content, reasoning fields and tool-call arguments are the
    concatenation of their deltas; usage is the last chunk's that carried one."""
    from iclr_cli.serve.sse import events

    message: dict = {"role": "assistant"}
    calls: dict[int, dict] = {}
    details: list[dict] = []
    usage = None
    for _, chunk in events(body):
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        choices = chunk.get("choices")
        if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)):
            continue
        delta = choices[0].get("delta")
        if not isinstance(delta, dict):
            continue
        for name in ("content", "reasoning_content", "reasoning"):
            if isinstance(delta.get(name), str):
                message[name] = message.get(name, "") + delta[name]
        if isinstance(delta.get("extra_content"), dict):  # Gemini: the message's thought signature
            message["extra_content"] = delta["extra_content"]
        for entry in delta.get("reasoning_details") or []:
            if isinstance(entry, dict):
                _merge_detail(details, entry)
        for call in delta.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            slot = calls.setdefault(call.get("index", len(calls)), {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
            if call.get("id"):
                slot["id"] = call["id"]
            if isinstance(call.get("extra_content"), dict):  # Gemini: the call's thought signature
                slot["extra_content"] = call["extra_content"]
            fn = call.get("function") if isinstance(call.get("function"), dict) else {}
            for key in ("name", "arguments"):
                if isinstance(fn.get(key), str):
                    slot["function"][key] += fn[key]
    if details:
        message["reasoning_details"] = details
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message, usage


def _merge_detail(details: list[dict], entry: dict) -> None:
    """One streamed ``reasoning_details`` entry into the assembled list: a piece of the entry
    of the same type and ``index`` has its strings appended, any other entry is a new one
    (https://openrouter.ai/docs/use-cases/reasoning-tokens, streaming)."""
    same = next((d for d in reversed(details) if d.get("type") == entry.get("type") and d.get("index") == entry.get("index")
                 and entry.get("type") != "reasoning.encrypted"), None)
    if same is None:
        details.append(dict(entry))
        return
    for key, value in entry.items():
        if key in ("text", "summary", "signature") and isinstance(value, str) and isinstance(same.get(key), str):
            same[key] += value
        elif same.get(key) is None:
            same[key] = value


CHAT = ChatDialect()
