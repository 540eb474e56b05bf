"""The ``responses`` dialect: ``POST /v1/responses`` (OpenAI Responses, as Codex sends it).

Items are the ``input`` list, read by :mod:`iclr_cli.formats.responses_items` (the same reading
as the ``openai-responses`` file adapter); the context is ``instructions`` and ``tools``, part
of P and never changed. An item's identity leaves reasoning items out (clients may drop them)
and ids and statuses (clients may strip them); a call is its ``call_id``, name and arguments.

What happens to a ``reasoning`` item depends on the upstream (:mod:`iclr_cli.providers`):

- **plain** (vLLM, SGLang, llama.cpp, Ollama, LM Studio, LiteLLM to open models; Codex with
  ``--oss`` or a custom provider): the ``reasoning_text`` entries of ``content`` are the
  model's plain reasoning, compressed in place; a ``summary_text`` entry holding the same text
  is edited with it. An item with ``encrypted_content`` is never edited (sealed).
- **sealed** (OpenAI's API: ``encrypted_content`` with ``store: false``, or items held by id):
  never edited; counted in ``/stats``. With ``drop_previous_turns`` (``--sealed
  drop-previous-turns``) the reasoning items before the last user message are left out, as
  OpenAI documents the API itself does ("reasoning items from previous turns are ignored and
  removed": https://cookbook.openai.com/examples/responses_api/reasoning_items), and the ids of
  the items of the same model turn go with them (an ``fc_`` item without its ``rs_`` item is
  rejected; the ``call_id`` still pairs each call with its output).

A request whose history lives on the server (``previous_response_id``, ``conversation``,
``store: true``, or ``item_reference`` items) holds items the proxy cannot see: it is passed
through as sent and counted in ``/stats`` (``server_history``). ``store`` left out is not
counted: such a request carries its own history. Replies are read from the whole response
body or from the relayed events (``response.completed``'s response, else the
``response.output_item.done`` items).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson

from iclr_cli.formats.openai_messages import render_tools
from iclr_cli.formats.reading import text_of
from iclr_cli.formats.responses_items import call_text, is_model_item, item_type, output_text, read_items
from iclr_cli.formats.think import outside_think, think_elements
from iclr_cli.formats.writeback import apply_edits
from iclr_cli.replay.accounting import Usage
from iclr_cli.serve.dialect import Dialect, Reply, Request, Transcript, by_step
from iclr_cli.serve.fingerprint import arguments_value, without_empty
from iclr_cli.trajectory import Part, Trajectory


REASONING_ITEMS = "reasoning_items"
"""The field name ``--restore-reasoning`` stores a Responses turn's reasoning items under (JSON)."""


def held_by_server(body: Mapping) -> str | None:
    """Why a request's history is (partly) on the server, or ``None``."""
    if body.get("previous_response_id"):
        return "previous_response_id"
    if body.get("conversation"):
        return "conversation"
    if body.get("store") is True:
        return "store: true"
    items = body.get("input")
    if isinstance(items, list) and any(isinstance(i, dict) and i.get("type") == "item_reference" for i in items):
        return "item_reference"
    return None


class ResponsesDialect(Dialect):
    """OpenAI Responses (see module docstring).

    Args:
        sealed: the upstream encrypts or holds its reasoning (:mod:`iclr_cli.providers`).
        drop_previous_turns: on a sealed upstream, leave out reasoning items before the last
            user message.
    """

    name = "responses"
    items_field = "input"

    def __init__(self, *, sealed: bool = False, drop_previous_turns: bool = False):
        self.sealed = sealed
        self.drop_previous_turns = drop_previous_turns

    def parse(self, body: Mapping) -> Request | None:
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            return None
        return Request(body, items, {"instructions": body.get("instructions"), "tools": body.get("tools")}, held_by_server(body))

    def step_item(self, item: Mapping) -> object:
        """The item as the provider reads it (:mod:`~iclr_cli.serve.fingerprint`): a call's
        JSON ``arguments`` as a value, without ``status`` (an output field the API ignores
        on input) and empty fields."""
        out = {k: v for k, v in item.items() if k != "status"}
        if isinstance(out.get("arguments"), str):
            out["arguments"] = arguments_value(out["arguments"])
        return without_empty(out)

    def first_model_item(self, items: Sequence[Mapping]) -> int | None:
        return next((i for i, item in enumerate(items) if is_model_item(item) and item_type(item) != "reasoning"), None)

    def identity(self, item: Mapping) -> object:
        kind = item_type(item)
        if kind == "reasoning":
            return None
        if kind == "message":
            text = text_of(item.get("content"))
            if item.get("role") == "assistant":
                text = outside_think(text, think_elements(text))
            return {"role": item.get("role"), "text": text}
        if is_model_item(item):
            label, args = call_text(item)
            return {"call": item.get("call_id"), "tool": (label, arguments_value(args))}
        if "output" in item:
            return {"output": item.get("call_id"), "text": output_text(item.get("output"))}
        return {k: v for k, v in item.items() if k not in ("id", "status") and v is not None}

    def read(self, request: Request, traj_id: str) -> Transcript:
        body, items = request.body, request.items
        prompt: list[Part] = []
        instructions = body.get("instructions")
        if instructions:
            prompt.append(Part("prompt", text_of(instructions), label="system"))
        if isinstance(body.get("tools"), list) and body["tools"]:
            prompt.append(Part("prompt", render_tools(body["tools"]), label="tools"))
        read = read_items(
            items,
            traj_id=traj_id,
            where=[f"input[{i}]" for i in range(len(items))],
            refs=[(0, "input", i) for i in range(len(items))],
            prompt=prompt,
            encrypted="sealed",
            sealed=self.sealed,
            source="request",
        )
        unread = by_step(read.unrecognised, read.spans, lambda u: _input_index(u.field))
        return Transcript(read.trajectory, read.ends, unread, read.sealed)

    def write(self, request: Request, transcript: Transcript, edited: Trajectory) -> dict | None:
        body = apply_edits([request.body], [transcript.trajectory], [edited]).edited.get(0)
        if self.sealed and self.drop_previous_turns:
            dropped = drop_previous_turns(body if body is not None else request.body)
            body = dropped if dropped is not None else body
        return body  # type: ignore[return-value]

    def remember(self, reply: Reply) -> list[tuple[str, str, str]]:
        """The reasoning items of each model turn of the reply, under the ``call_id`` of
        each call in that turn."""
        out = []
        turn: list[Mapping] = []
        for item in reply.items:
            if not is_model_item(item):
                turn = []
                continue
            if item_type(item) == "reasoning":
                turn.append(item)
            elif turn and isinstance(item.get("call_id"), str):
                out.append((item["call_id"], REASONING_ITEMS, orjson.dumps(turn).decode()))
        return out

    def restore(self, request: Request, memory: Mapping[str, tuple[str, str]]) -> Request:
        """``--restore-reasoning``: a model turn whose calls arrive without the reasoning
        items the upstream returned with them gets those items back, before the turn's first
        item, as generated (a local server renders the reasoning from them; OpenAI rejects an
        ``fc_`` item sent without its ``rs_`` item)."""
        items = request.items
        out: list = []
        changed = False
        i = 0
        while i < len(items):
            if not is_model_item(items[i]):
                out.append(items[i])
                i += 1
                continue
            end = i
            while end < len(items) and is_model_item(items[end]):
                end += 1
            turn = items[i:end]
            if not any(item_type(t) == "reasoning" for t in turn):
                found = next((memory[t["call_id"]] for t in turn if t.get("call_id") in memory), None)
                if found is not None and found[0] == REASONING_ITEMS:
                    out.extend(orjson.loads(found[1]))
                    changed = True
            out.extend(turn)
            i = end
        if not changed:
            return request
        return Request({**request.body, "input": out}, out, request.context, request.held)

    def read_partial(self, content: bytes) -> Reply:
        """The output items as far as they have streamed (:func:`read_partial_stream`)."""
        return Reply(tuple(read_partial_stream(content)))

    def read_reply(self, content: bytes | None, streamed: bool) -> Reply:
        if content is None:
            return Reply()
        response = read_stream(content) if streamed else _loads(content)
        if not isinstance(response, dict) or not isinstance(response.get("output"), list):
            return Reply()
        items = tuple(i for i in response["output"] if isinstance(i, dict))
        return Reply(items, usage_of(response.get("usage")))


def _loads(content: bytes):
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return None


def _input_index(field: str) -> int | None:
    if not field.startswith("input["):
        return None
    digits = field[len("input[") :].split("]", 1)[0]
    return int(digits) if digits.isdigit() else None


def drop_previous_turns(body: Mapping) -> dict | None:
    """``body`` without the reasoning items before its last user message, and without the
    ``id`` of the other model items of each model turn that lost one; ``None`` when there was
    nothing to drop."""
    items = body.get("input")
    if not isinstance(items, list):
        return None
    last_user = max((i for i, it in enumerate(items) if isinstance(it, dict) and item_type(it) == "message" and it.get("role") == "user"), default=None)
    if last_user is None:
        return None
    out: list = []
    turn: list[int] = []  # positions in out of the current model turn's items
    lost = False
    changed = False

    def close() -> None:
        nonlocal lost
        if lost:
            for at in turn:
                if "id" in out[at]:
                    out[at] = {k: v for k, v in out[at].items() if k != "id"}
        turn.clear()
        lost = False

    for i, item in enumerate(items):
        model = isinstance(item, dict) and is_model_item(item)
        if not model:
            close()
            out.append(item)
            continue
        if i < last_user and item_type(item) == "reasoning":
            lost = changed = True
            continue
        turn.append(len(out))
        out.append(item)
    close()
    return {**body, "input": out} if changed else None


def usage_of(usage: object) -> Usage | None:
    """Responses ``usage`` (``input_tokens`` includes the cached ones)."""
    if not isinstance(usage, Mapping):
        return None

    def num(value) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    cached = usage.get("input_tokens_details")
    reasoning = usage.get("output_tokens_details")
    return Usage(
        input_tokens=num(usage.get("input_tokens")),
        output_tokens=num(usage.get("output_tokens")),
        cache_read_tokens=num(cached.get("cached_tokens")) if isinstance(cached, Mapping) else None,
        reasoning_tokens=num(reasoning.get("reasoning_tokens")) if isinstance(reasoning, Mapping) else None,
    )


def read_stream(body: bytes) -> dict | None:
    """The response a streamed Responses answer (SSE bytes) ends with: the ``response`` of
    ``response.completed`` (or ``.incomplete``), its ``output`` taken from the
    ``response.output_item.done`` events when it holds none; ``None`` after an ``error`` or
    ``response.failed`` event."""
    from iclr_cli.serve.sse import events

    done: dict[int, dict] = {}
    final: dict | None = None
    for _, event in events(body):
        kind = event.get("type")
        if kind in ("error", "response.failed"):  # the answer broke off: nothing to record
            return None
        if kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            done[event.get("output_index", len(done))] = event["item"]
        elif kind in ("response.completed", "response.incomplete", "response.done") and isinstance(event.get("response"), dict):
            final = dict(event["response"])
    if final is None and not done:
        return None
    final = final or {}
    if not final.get("output"):
        final["output"] = [done[i] for i in sorted(done)]
    return final


def read_partial_stream(body: bytes) -> list[dict]:
    """The output items of a Responses stream cut anywhere: each item from its
    ``response.output_item.added`` event, a reasoning item's ``summary`` and ``content`` grown
    by ``response.reasoning_summary_text.delta`` and ``response.reasoning_text.delta`` (OpenAI,
    "Streaming events": the deltas carry ``output_index`` and ``summary_index`` /
    ``content_index``), replaced whole by ``response.output_item.done``. Empty after an
    ``error`` or ``response.failed`` event."""
    from iclr_cli.serve.sse import events

    items: dict[int, dict] = {}
    for _, event in events(body):
        kind = event.get("type")
        if kind in ("error", "response.failed"):
            return []
        index = event.get("output_index")
        if kind in ("response.output_item.added", "response.output_item.done") and isinstance(event.get("item"), dict):
            items[index if isinstance(index, int) else len(items)] = dict(event["item"])
            continue
        item = items.get(index) if isinstance(index, int) else None
        delta = event.get("delta")
        if item is None or not isinstance(delta, str):
            continue
        if kind == "response.reasoning_summary_text.delta":
            _grow(item, "summary", event.get("summary_index"), "summary_text", delta)
        elif kind == "response.reasoning_text.delta":
            _grow(item, "content", event.get("content_index"), "reasoning_text", delta)
    return [items[i] for i in sorted(items)]


def _grow(item: dict, field: str, index, kind: str, delta: str) -> None:
    """Append ``delta`` to ``item[field][index]["text"]`` (entries made as needed, copied, never
    the event's own lists)."""
    if not isinstance(index, int) or index < 0:
        return
    parts = [dict(p) if isinstance(p, dict) else p for p in item.get(field) or []]
    while len(parts) <= index:
        parts.append({"type": kind, "text": ""})
    if isinstance(parts[index], dict):
        parts[index]["text"] = (parts[index].get("text") or "") + delta
    item[field] = parts
