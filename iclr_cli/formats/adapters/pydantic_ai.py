"""Pydantic AI message histories: what ``ModelMessagesTypeAdapter`` dumps
(``result.all_messages_json()``, ``to_jsonable_python(result.all_messages())``), the form apps on
Pydantic AI save a conversation in to pass it back as ``message_history``.

Shape (pydantic-ai ``pydantic_ai_slim/pydantic_ai/messages.py``): a JSON list of messages, each
``{"kind": "request", "parts": [...], "instructions"?, "timestamp"?, ...}`` or ``{"kind":
"response", "parts": [...], "model_name", "provider_name", "usage", "timestamp", ...}``; every part
has a ``part_kind``:

- request parts: ``system-prompt`` / ``instruction`` (``content``), ``user-prompt`` (``content``: a
  string, or strings and ``{"kind": "image-url" | "binary" | ...}`` items), ``tool-return``
  (``tool_name``, ``content``, ``tool_call_id``), ``retry-prompt`` (``content``: a string or a list
  of validation errors);
- response parts: ``text``, ``tool-call`` (``tool_name``, ``args`` as a JSON string or an object,
  ``tool_call_id``), ``builtin-tool-call`` / ``builtin-tool-return``, ``thinking`` (``content``,
  ``id``, ``signature``, ``provider_name``), ``file``, ``compaction``.

One file is one trajectory (``FILE#0``): request parts before the first response are P (the
request's ``instructions`` too), each response is a step, and the request parts after it are
that step's observations. Usage (``iclr savings``): each response is one request; its
``usage.input_tokens`` already includes ``cache_read_tokens`` and ``cache_write_tokens``
(pydantic-ai ``usage.py``; ``request_tokens`` / ``response_tokens`` in older dumps).

A ``thinking`` part's ``signature`` means what its ``provider_name`` made it (the ``ThinkingPart``
docstring; :func:`thinking_mode`), and the provider rule table decides the rest
(:mod:`iclr_cli.formats.sealing`): Anthropic and Bedrock signatures are sealed by default, and
``--signed-thinking edit`` removes the key, after which pydantic-ai sends the text as plain
text; OpenAI's ``encrypted_content`` (and a reasoning item held by its ``rs_`` id) is encrypted;
Gemini's thought signature and Anthropic's redacted thinking are never edited. Unedited files
come back byte for byte; an edited one is re-serialised in its own layout with every field kept.
"""

from __future__ import annotations

import json

from iclr_cli.formats.reading import ChunkedRecords, Where, base_name
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.usage import count
from iclr_cli.formats.writeback import Path, Site, TextRef, WriteBackAdapter
from iclr_cli.providers import for_model
from iclr_cli.trajectory import Part, PartKind, Request, Step, Trajectory, Usage, WriteBack

_NOT_FOUND = "no Pydantic AI messages found (expected a list of {kind: request|response, parts: [{part_kind, ...}]})"
_OPENAI = frozenset({"openai", "azure", "openai-responses"})
"""``provider_name`` values of OpenAI's Responses models: their thinking ``signature`` is the
reasoning item's ``encrypted_content``."""
_REQUEST_LABELS = {"system-prompt": "system", "instruction": "instructions", "user-prompt": "user", "tool-return": "tool_result",
                   "builtin-tool-return": "tool_result", "retry-prompt": "retry_prompt"}


def thinking_mode(signature: object, provider: object, item_id: object) -> tuple[WriteBack, str | None]:
    """How a thinking text signed by ``provider`` may be written back, and why it is read-only
    (None when it is not). The meaning of ``signature`` per provider is pydantic-ai's
    (``ThinkingPart.signature``: Anthropic and Bedrock ``signature``, Google
    ``thought_signature``, OpenAI ``encrypted_content``); ``item_id`` is the part's ``id``.

    - no signature: plain text, :attr:`WriteBack.IN_PLACE` (an OpenAI Responses summary whose
      item is held by its ``rs_`` id: :attr:`WriteBack.OPAQUE`, the text is not what the model
      re-reads);
    - ``id == "redacted_thinking"``: Anthropic's redacted thinking, whose payload is the
      signature: read-only;
    - Google (``google-gla``, ``google-vertex``): a Gemini thought signature, read-only as in
      the ``gemini`` adapter ("return signatures exactly as received",
      https://ai.google.dev/gemini-api/docs/thought-signatures);
    - OpenAI: ``encrypted_content``, :attr:`WriteBack.OPAQUE`
      (https://platform.openai.com/docs/guides/reasoning);
    - any other provider (Anthropic, Bedrock, one not named): :attr:`WriteBack.SIGNED`, sealed or
      edited by the provider rule table (https://platform.claude.com/docs/en/build-with-claude/extended-thinking).
    """
    name = provider.lower() if isinstance(provider, str) else ""
    if not isinstance(signature, str) or not signature:
        if name in _OPENAI and isinstance(item_id, str) and item_id.startswith("rs_"):
            return WriteBack.OPAQUE, None
        return WriteBack.IN_PLACE, None
    if item_id == "redacted_thinking":
        return WriteBack.READ_ONLY, "redacted by Anthropic (the signature holds the encrypted thinking)"
    if name.startswith(("google", "vertex")):
        return WriteBack.READ_ONLY, "signed by Gemini (a thought signature; a signed part must not change)"
    if name in _OPENAI:
        return WriteBack.OPAQUE, None
    return WriteBack.SIGNED, None


def _is_message(value: object) -> bool:
    return isinstance(value, dict) and value.get("kind") in ("request", "response") and isinstance(value.get("parts"), list)


def _json_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _usage(obj: object) -> Usage | None:
    """A ``RequestUsage`` dump: ``input_tokens`` includes the cache reads and writes."""
    if not isinstance(obj, dict):
        return None
    inp = count(obj.get("input_tokens", obj.get("request_tokens")))
    if inp is None:
        return None
    return Usage(inp, count(obj.get("output_tokens", obj.get("response_tokens"))), count(obj.get("cache_read_tokens")),
                 count(obj.get("cache_write_tokens")), "usage")


class _Reader:
    """Builds one trajectory from a message list (module docstring)."""

    def __init__(self, where: Where):
        self.where = where
        self.prompt: list[Part] = []
        self.steps: list[list[Part]] = []
        self.requests: list[Request] = []
        self.instructions: str | None = None
        self.model: str | None = None
        self.provider: str | None = None

    def add(self, text: str, label: str, call_id: str | None = None) -> None:
        kind: PartKind = "observation" if self.steps else "prompt"
        (self.steps[-1] if self.steps else self.prompt).append(Part(kind, text, label=label, call_id=call_id))

    def request(self, msg: dict, at: Path) -> None:
        if isinstance(msg.get("instructions"), str) and msg["instructions"] != self.instructions:
            self.instructions = msg["instructions"]  # repeated on every request: read when it changes
            self.add(msg["instructions"], "instructions")
        for k, part in enumerate(msg["parts"]):
            kind = self.part_kind(part, (*at, "parts", k))
            call_id = part.get("tool_call_id") if isinstance(part.get("tool_call_id"), str) else None
            if kind == "tool-availability-delta":
                continue
            if kind == "user-prompt" and isinstance(part.get("content"), list):
                for item in part["content"]:
                    if isinstance(item, dict):  # image-url, binary, document-url...: its URL, or the item
                        self.add(item["url"] if isinstance(item.get("url"), str) else _json_text(item), str(item.get("kind", "user")))
                    else:
                        self.add(_json_text(item), "user")
                continue
            self.add(_json_text(part.get("content", "")), _REQUEST_LABELS.get(kind, kind), call_id)

    def part_kind(self, part: object, at: Path) -> str:
        if not isinstance(part, dict) or not isinstance(part.get("part_kind"), str):
            raise self.where.error("message part has no string 'part_kind'", at)
        return part["part_kind"]

    def response(self, msg: dict, at: Path) -> None:
        model = msg.get("model_name") if isinstance(msg.get("model_name"), str) else None
        provider = msg.get("provider_name") if isinstance(msg.get("provider_name"), str) else None
        self.model, self.provider = self.model or model, self.provider or provider
        self.requests.append(Request(len(self.steps), _usage(msg.get("usage")), model, provider))
        items = [self.part_kind(p, (*at, "parts", k)) for k, p in enumerate(msg["parts"])]
        # one OpenAI reasoning item is split into one part per summary, all with its id: dropped together
        by_id: dict[str, list[Path]] = {}
        for k, part in enumerate(msg["parts"]):
            if items[k] == "thinking" and isinstance(part.get("id"), str):
                by_id.setdefault(part["id"], []).append((self.where.rec, *at, "parts", k))
        parts: list[Part] = []
        tail: list[Part] = []
        for k, part in enumerate(msg["parts"]):
            path = (*at, "parts", k)
            kind = items[k]
            call_id = part.get("tool_call_id") if isinstance(part.get("tool_call_id"), str) else None
            if kind == "thinking":
                parts.append(self.thinking(part, path, provider, model, by_id))
            elif kind == "text":
                if not isinstance(part.get("content"), str):
                    raise self.where.error("text part has no string 'content'", (*path, "content"))
                if part["content"].strip():
                    parts.append(Part("action", part["content"], label="assistant"))
            elif kind in ("tool-call", "builtin-tool-call"):
                parts.append(Part("action", _json_text(part.get("args") or {}), label=f"tool_call:{part.get('tool_name', '?')}", call_id=call_id))
            elif kind == "builtin-tool-return":
                tail.append(Part("observation", _json_text(part.get("content", "")), label="tool_result", call_id=call_id))
            elif kind == "compaction":
                tail.append(Part("observation", _json_text(part.get("content") or ""), label="compaction_summary"))
            elif kind == "file":
                parts.append(Part("action", "", label="file"))
            else:
                self.where.note(path, f"response part of part_kind {kind!r}: not scored or pruned")
        self.steps.append(parts + tail)

    def thinking(self, part: dict, path: Path, provider: str | None, model: str | None, by_id: dict[str, list[Path]]) -> Part:
        text = part.get("content")
        if not isinstance(text, str):
            raise self.where.error("thinking part has no string 'content'", (*path, "content"))
        who = part.get("provider_name") if isinstance(part.get("provider_name"), str) else provider
        mode, why = thinking_mode(part.get("signature"), who, part.get("id"))
        if mode is WriteBack.READ_ONLY:
            if text.strip():
                self.where.sealed.append(self.where.at(path, why or "read-only"))
            return Part("reasoning", text, label="reasoning", write_back=mode)
        full = (self.where.rec, *path)
        ref = TextRef(
            (Site((*full, "content")),),
            strip_keys=((full, "signature"),) if mode is WriteBack.SIGNED else (),
            drop=tuple(by_id.get(part.get("id"), [full])) if mode is WriteBack.OPAQUE else (),
            remove_when_empty=full,
            # a history that switched models: the rule of this response's model (formats/sealing.py)
            model=model if model and for_model(model) is not None else None,
        )
        return Part("reasoning", text, label="reasoning", ref=ref, write_back=mode)


def _read(value: object, where: Where) -> list[Trajectory] | None:
    """The trajectory of one Pydantic AI message list, or None when ``value`` is none."""
    if not isinstance(value, list) or not value or not _is_message(value[0]):
        return None
    reader = _Reader(where)
    for i, msg in enumerate(value):
        if not _is_message(msg):
            raise where.error("not a Pydantic AI message: expected an object with 'kind' ('request' or 'response') and a 'parts' list", (i,))
        if msg["kind"] == "request":
            reader.request(msg, (i,))
        else:
            reader.response(msg, (i,))
    meta: dict[str, object] = {"format": ADAPTER.name}
    if reader.model:
        meta["model"] = reader.model
    if reader.provider:
        meta["provider"] = reader.provider
    steps = tuple(Step(i, tuple(p)) for i, p in enumerate(reader.steps))
    return [Trajectory(f"{base_name(where.source)}#{where.first_index}", tuple(reader.prompt), steps, meta=meta, requests=tuple(reader.requests))]


class PydanticAiAdapter(ChunkedRecords, WriteBackAdapter):
    """Pydantic AI message histories (see module docstring); write-back is the one engine's."""

    name = "pydantic-ai"
    description = "Pydantic AI message history (ModelMessagesTypeAdapter JSON: request/response messages with part_kind parts)"
    not_found = _NOT_FOUND
    read_value = staticmethod(_read)

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for a list whose first message has ``kind`` ``request`` or ``response`` and
        parts carrying a string ``part_kind`` (no other format writes that key)."""
        for rec in Head.of(head).records:
            first = rec[0] if isinstance(rec, list) and rec else None
            if _is_message(first) and any(isinstance(p, dict) and isinstance(p.get("part_kind"), str) for p in first["parts"]):
                return Match(MARKER, "Pydantic AI messages (kind request/response, parts with part_kind)")
        return None


ADAPTER = PydanticAiAdapter()
