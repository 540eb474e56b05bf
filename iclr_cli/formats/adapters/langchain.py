"""LangChain message dumps and LangGraph serialized messages.

Shapes accepted (one trajectory per message list), as a JSON file or JSONL with one per line:
a list of messages, ``{"messages": [...]}`` or a LangGraph state ``{"values": {"messages":
[...]}}``, where each message is one of

- ``messages_to_dict`` output: ``{"type": "ai", "data": {"content", "additional_kwargs", ...}}``;
- a LangChain serialized constructor (``dumpd``, LangGraph checkpoints and streams):
  ``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``;
- a message's own fields (``model_dump``, the LangGraph API): ``{"type": "ai", "content", ...}``.

Roles: ``human`` is the user, ``ai`` the assistant (one step each), ``system``, ``tool`` /
``function`` results (``tool_call_id`` as call id), ``chat`` carries its own ``role``.

Reasoning of an AI message (langchain-core ``messages/block_translators``): its
``additional_kwargs.reasoning_content`` (DeepSeek, Groq, Ollama, xAI, OpenAI-compatible
providers; in place); in a content list, ``thinking`` blocks (Anthropic, Google: signed when
they carry a ``signature``, which an edit removes; an emptied block leaves the list unless it
is the last), ``reasoning`` blocks (LangChain v1 ``{"reasoning": ...}``, in place; OpenAI
Responses ``{"summary": [{"text"}], "encrypted_content"}``, each summary one part, opaque
when encrypted: an edit drops the block, as Codex items) and ``redacted_thinking`` (read-only);
``additional_kwargs.reasoning`` (OpenAI Responses, the same item shape) and inline
``<think>`` in text. The same text in a content block and in ``additional_kwargs`` is one
part with a site in each, so both stay equal, and so is a ``<think>`` element of the text
that holds ``reasoning_content`` (whitespace around it aside: llama.cpp's
``deepseek-legacy`` format through an OpenAI-compatible chat model); when they hold
different text, neither is edited and the message is reported. Actions: text, ``tool_calls`` (``args`` as JSON; the
copies in content blocks and ``additional_kwargs.tool_calls`` are read only when
``tool_calls`` is absent), ``invalid_tool_calls``. Content blocks of another type, and
reasoning-named ``additional_kwargs`` this adapter does not read, are reported.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from iclr_cli.formats import media
from iclr_cli.formats.base import Document
from iclr_cli.formats.reading import Where, base_name, dig, load_chunks
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.think import outside_think, think_elements
from iclr_cli.formats.writeback import Draft, Path, Site, WriteBackAdapter, freeze, get, join_think_copies
from iclr_cli.trajectory import Part, PartKind, Step, Trajectory, WriteBack

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool", "chat": None, "developer": "developer"}
_CLASSES = {"HumanMessage": "human", "AIMessage": "ai", "SystemMessage": "system", "ToolMessage": "tool", "FunctionMessage": "function", "ChatMessage": "chat"}
_NOT_FOUND = "no LangChain messages found (expected messages_to_dict dumps, lc constructors or message dicts, in a list, 'messages' or 'values.messages')"
_CALL_COPIES = {"tool_use", "tool_call", "function_call", "tool_call_chunk", "server_tool_call"}
_MEDIA_TYPES = {"image", "image_url", "audio", "video", "file", "input_image", "input_audio", "document", "text-plain"}
_KWARGS_READ = {"reasoning_content", "reasoning", "tool_calls", "function_call", "refusal"}
REDACTED_TEXT = "[redacted thinking]"


def _kind(msg: object) -> tuple[str, Path] | None:
    """``(message type, path to the message's fields)`` of one LangChain message, or None."""
    if not isinstance(msg, dict):
        return None
    if msg.get("lc") == 1 and msg.get("type") == "constructor" and isinstance(msg.get("id"), list) and isinstance(msg.get("kwargs"), dict):
        name = str(msg["id"][-1]).removesuffix("Chunk") if msg["id"] else ""
        return (_CLASSES[name], ("kwargs",)) if name in _CLASSES else None
    kind = msg.get("type")
    if not isinstance(kind, str):
        return None
    base = kind.removesuffix("Chunk")
    base = _CLASSES.get(base, base)
    if isinstance(msg.get("data"), dict) and base in _ROLES:
        return base, ("data",)
    if base in _ROLES and "content" in msg and ("additional_kwargs" in msg or "response_metadata" in msg):
        return base, ()
    return None


def _message_list(value: object) -> Path | None:
    for path in ((), ("messages",), ("values", "messages")):
        msgs = dig(value, *path) if path else value
        if isinstance(msgs, list) and msgs and all(_kind(m) is not None for m in msgs):
            return path
    return None


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


class _Reader:
    """One message list being read (module docstring)."""

    def __init__(self, where: Where):
        self.where = where
        self.prompt: list[Part] = []
        self.steps: list[list[Part]] = []
        self.model: str | None = None

    def message(self, msg: dict, path: Path) -> None:
        found = _kind(msg)
        assert found is not None  # checked by _message_list
        kind, inner = found
        body = get(msg, inner) if inner else msg
        path = (*path, *inner)
        role = _ROLES[kind] or (body.get("role") if isinstance(body.get("role"), str) else "user")
        if kind == "ai" or role == "assistant":
            self.steps.append(self.ai(body, path))
            name = dig(body, "response_metadata", "model_name") or dig(body, "response_metadata", "model")
            self.model = self.model or (name if isinstance(name, str) else None)
            return
        part_kind: PartKind = "observation" if self.steps else "prompt"
        label = "tool_result" if role == "tool" else role
        call_id = body.get("tool_call_id") if isinstance(body.get("tool_call_id"), str) else None
        content = body.get("content")
        if isinstance(content, list):
            found_parts = media.mixed_parts(content, part_kind, label, read_media=media.openai_media, call_id=call_id)
        else:
            found_parts = [Part(part_kind, content if isinstance(content, str) else _json_text(content), label=label, call_id=call_id)]
        (self.steps[-1] if self.steps else self.prompt).extend(found_parts)

    def site(self, path: Path, how: str = "whole") -> Site:
        return Site((self.where.rec, *path), how)

    def ai(self, body: dict, path: Path) -> list[Part]:
        drafts: list[Draft | Part] = []
        actions: list[Part] = []
        content = body.get("content")
        calls = body.get("tool_calls") if isinstance(body.get("tool_calls"), list) else []
        if isinstance(content, str):
            actions += self.text(content, (*path, "content"), drafts)
        elif isinstance(content, list):
            for k, block in enumerate(content):
                actions += self.block(block, (*path, "content", k), drafts, bool(calls))
        kwargs = body.get("additional_kwargs") if isinstance(body.get("additional_kwargs"), dict) else {}
        mismatch = self.kwargs_reasoning(kwargs, (*path, "additional_kwargs"), drafts)
        for call in calls:
            if isinstance(call, dict):
                call_id = call.get("id") if isinstance(call.get("id"), str) else None
                actions.append(Part("action", _json_text(call.get("args", {})), label=f"tool_call:{call.get('name', '?')}", call_id=call_id))
        if not calls:
            for call in kwargs.get("tool_calls") or []:
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict):
                    call_id = call.get("id") if isinstance(call.get("id"), str) else None
                    actions.append(Part("action", str(fn.get("arguments", "")), label=f"tool_call:{fn.get('name', '?')}", call_id=call_id))
        for call in body.get("invalid_tool_calls") or []:
            if isinstance(call, dict):
                actions.append(Part("action", str(call.get("args") or ""), label=f"tool_call:{call.get('name') or '?'}"))
        for key, value in kwargs.items():
            if key not in _KWARGS_READ and any(w in key.lower() for w in ("reason", "think", "thought")) and value not in (None, "", [], {}):
                self.where.note((*path, "additional_kwargs", key), f"additional_kwargs field {key!r}: not read as reasoning; not scored or pruned")
        if mismatch:
            self.where.note((*path, "additional_kwargs"), "additional_kwargs and the content blocks hold different reasoning: neither is edited")
            drafts = [Part("reasoning", d.text, label="reasoning", write_back=WriteBack.READ_ONLY) if isinstance(d, Draft) else d for d in drafts]
        return [*join_think_copies(freeze(drafts)), *actions]

    def text(self, text: str, path: Path, drafts: list) -> list[Part]:
        elements = think_elements(text)
        for k, el in enumerate(elements):
            if el.inner(text).strip():
                drafts.append(Draft(el.inner(text), [self.site(path, f"think:{k}")]))
        visible = outside_think(text, elements) if elements else text
        return [Part("action", visible, label="assistant")] if visible.strip() else []

    def block(self, block: object, path: Path, drafts: list, have_calls: bool) -> list[Part]:
        if not isinstance(block, dict):
            return [Part("action", block, label="assistant")] if isinstance(block, str) and block.strip() else []
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            return self.text(block["text"], (*path, "text"), drafts)
        if kind == "thinking" and isinstance(block.get("thinking"), str):
            signed = isinstance(block.get("signature"), str) and bool(block["signature"])
            draft = Draft(block["thinking"], [self.site((*path, "thinking"))], remove_when_empty=(self.where.rec, *path))
            if signed:
                draft.write_back = WriteBack.SIGNED
                draft.strip_keys.append(((self.where.rec, *path), "signature"))
            drafts.append(draft)
            return []
        if kind == "reasoning":
            if isinstance(block.get("reasoning"), str):
                drafts.append(Draft(block["reasoning"], [self.site((*path, "reasoning"))]))
                return []
            if isinstance(block.get("summary"), list):
                self.item(block, path, drafts, drop=(self.where.rec, *path))
                return []
        if kind == "redacted_thinking":
            self.where.sealed.append(self.where.at(path, "of type redacted_thinking (redacted; its payload cannot be read)"))
            drafts.append(Part("reasoning", REDACTED_TEXT, label="reasoning", write_back=WriteBack.READ_ONLY))
            return []
        if kind in _CALL_COPIES:
            if have_calls:
                return []
            args = block.get("input", block.get("args", {}))
            return [Part("action", _json_text(args), label=f"tool_call:{block.get('name', '?')}", call_id=block.get("id") if isinstance(block.get("id"), str) else None)]
        if kind in _MEDIA_TYPES:
            return [Part("action", _json_text(block), label=str(kind))]
        self.where.note(path, f"AI message content block of type {kind!r}: not scored or pruned")
        return []

    def item(self, item: dict, path: Path, drafts: list, drop: Path) -> None:
        """An OpenAI Responses reasoning item: each summary (and ``content``) text one part;
        opaque, dropped whole on an edit, when it carries ``encrypted_content``."""
        encrypted = bool(item.get("encrypted_content"))
        for key in ("summary", "content"):
            for j, entry in enumerate(item.get(key) or []):
                if isinstance(entry, dict) and isinstance(entry.get("text"), str):
                    draft = Draft(entry["text"], [self.site((*path, key, j, "text"))])
                    if encrypted:
                        draft.write_back = WriteBack.OPAQUE
                        draft.drop.append(drop)
                    self.join(draft, drafts)
        if encrypted and not any(isinstance(e, dict) and e.get("text") for k in ("summary", "content") for e in item.get(k) or []):
            self.where.sealed.append(self.where.at(path, "encrypted (encrypted_content, no summary text)"))

    def join(self, draft: Draft, drafts: list) -> None:
        """``draft`` as a new part, or as more sites of an equal one already read."""
        for other in drafts:
            if isinstance(other, Draft) and other.text == draft.text:
                for site in draft.sites:
                    other.add(site)
                other.drop += [d for d in draft.drop if d not in other.drop]
                if draft.write_back is WriteBack.OPAQUE:
                    other.write_back = WriteBack.OPAQUE
                return
        drafts.append(draft)

    def kwargs_reasoning(self, kwargs: dict, path: Path, drafts: list) -> bool:
        """Read ``reasoning_content`` and ``reasoning`` of ``additional_kwargs`` into
        ``drafts``; True when they differ from reasoning the content blocks hold."""
        before = [d for d in drafts if isinstance(d, Draft)]
        mismatch = False
        text = kwargs.get("reasoning_content")
        if isinstance(text, str) and text:
            known = [d for d in before if d.text == text]
            # a <think> element of the text holding it, whitespace aside: one reasoning
            # stored twice, joined once the parts are made (join_think_copies)
            quoted = [d for d in before if d.sites and all(s.how.startswith("think:") for s in d.sites) and d.text.strip() == text]
            if before and not known and not quoted:
                mismatch = True
            draft = Draft(text, [self.site((*path, "reasoning_content"))])
            if known:
                known[0].add(draft.sites[0])
            else:
                drafts.insert(0, draft)
        elif text not in (None, ""):
            self.where.note((*path, "reasoning_content"), "reasoning_content is not text: not scored or pruned")
        item = kwargs.get("reasoning")
        if isinstance(item, dict):
            self.item(item, (*path, "reasoning"), drafts, drop=(self.where.rec, *path, "reasoning"))
        elif isinstance(item, str) and item:
            self.join(Draft(item, [self.site((*path, "reasoning"))]), drafts)
        return mismatch


def _read(value: object, where: Where) -> list[Trajectory] | None:
    """The trajectory of one record (a reader for :func:`reading.load_chunks`)."""
    path = _message_list(value)
    if path is None:
        if where.line is None:
            raise where.error(_NOT_FOUND)
        return None
    reader = _Reader(where)
    for i, msg in enumerate(dig(value, *path) if path else value):
        reader.message(msg, (*path, i))
    meta: dict[str, object] = {"format": "langchain"}
    if reader.model:
        meta["model"] = reader.model
    steps = tuple(Step(i, tuple(p)) for i, p in enumerate(reader.steps))
    return [Trajectory(f"{base_name(where.source)}#{where.first_index}", tuple(reader.prompt), steps, meta=meta)]


class LangChainAdapter(WriteBackAdapter):
    """LangChain / LangGraph message lists (see module docstring); write-back is the one
    engine's (:mod:`iclr_cli.formats.writeback`)."""

    name = "langchain"
    description = "LangChain messages_to_dict dumps, lc-serialized and LangGraph messages (JSON or JSONL)"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for message lists whose elements are LangChain messages (``{"type",
        "data"}``, ``lc`` constructors, or ``type`` with ``additional_kwargs``)."""
        for rec in Head.of(head).records:
            for path in ((), ("messages",), ("values", "messages")):
                msgs = dig(rec, *path) if path else rec
                if isinstance(msgs, list) and msgs and _kind(msgs[0]) is not None:
                    first = msgs[0]
                    shape = "lc constructors" if "lc" in first else ("messages_to_dict dumps" if "data" in first else "message dicts with additional_kwargs")
                    return Match(MARKER, f"LangChain messages ({shape})")
        return None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        [doc] = self.load_chunks(data, source, skip_bad_lines=skip_bad_lines, chunk_size=None)
        return doc

    def load_chunks(self, data: bytes, source: str, *, skip_bad_lines: bool = False, chunk_size: int | None = 256) -> Iterator[Document]:
        """One Document for a JSON file; chunks of at most ``chunk_size`` lines for JSONL
        (:func:`iclr_cli.formats.reading.load_chunks`).

        Raises:
            InputError: for an empty file, or a file or line holding no message list.
        """
        return load_chunks(data, source, self.name, _read, not_found=_NOT_FOUND, skip_bad_lines=skip_bad_lines, chunk_size=chunk_size)


ADAPTER = LangChainAdapter()
