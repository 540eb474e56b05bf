"""Vercel AI SDK message histories: ``UIMessage[]`` and ``ModelMessage[]``.

Two shapes the AI SDK (github.com/vercel/ai) keeps a conversation in, one trajectory per list:

- **UIMessage** (``packages/ai/src/ui/ui-messages.ts``; what ``useChat`` holds and apps save):
  ``{"id", "role": "system"|"user"|"assistant", "metadata"?, "parts": [...]}``. Assistant parts:
  ``text``, ``reasoning`` (``text``, ``state``, ``providerMetadata``), tool parts ``tool-NAME``
  and ``dynamic-tool`` (``toolCallId``, ``state``, ``input``, ``output`` / ``errorText``),
  ``step-start`` (one model call begins), ``file``, ``source-url``, ``data-NAME``... AI SDK 4's
  ``tool-invocation`` parts and ``reasoning`` parts (``reasoning``, ``details``) are read too.
  As ``convertToModelMessages`` does, an assistant message is cut at each ``step-start``: each
  piece is one step (its reasoning, text and tool calls, then the calls' results).
- **ModelMessage** (``packages/provider-utils/src/types/``; ``response.messages``, what
  ``streamText`` takes): ``{"role": "system"|"user"|"assistant"|"tool", "content": ...}`` with
  assistant parts ``text``, ``reasoning`` (``text``, ``providerOptions``), ``tool-call``
  (``toolCallId``, ``toolName``, ``input``; ``args`` in AI SDK 4) and tool parts ``tool-result``
  (``output``; ``result`` in AI SDK 4). Each assistant message is a step; ``tool`` and ``user``
  messages after it are its observations. Also the versioned envelope Roo Code wrote for a time
  (``{"version": 2, "messages": [...]}``, ``src/core/task-persistence/rooMessage.ts``): AI SDK
  messages with Roo fields (``ts``, ``condenseId``...), and standalone encrypted reasoning items
  ``{"type": "reasoning", "encrypted_content", "summary": [...]}`` read with the next step.

Reasoning and the provider rule (docs/FORMAT.md; :mod:`iclr_cli.formats.sealing`): what a
reasoning part's ``providerMetadata`` / ``providerOptions`` holds, per provider namespace
(:func:`reasoning_mode`), says who can check it. A ``signature`` (``anthropic``, ``bedrock``) is
sealed by default on a provider that checks it; ``--signed-thinking edit`` edits it and removes
the signature from every namespace, after which the Anthropic provider no longer sends the part
(``convert-to-anthropic-prompt.ts``: reasoning without signature metadata is left out); on a
plain provider the text is edited and the signature kept. ``redactedData`` (Anthropic redacted
thinking) and a Gemini ``thoughtSignature`` are never edited; OpenAI's ``itemId`` /
``reasoningEncryptedContent`` mark a summary of an encrypted reasoning item (sealed; ``--encrypted-
reasoning drop`` removes an edited part). A Pydantic AI backend writes ``providerMetadata.pydantic_ai``
(``signature``, ``provider_name``): read with :func:`iclr_cli.formats.adapters.pydantic_ai.thinking_mode`.
Who wrote the reasoning: the namespace of its signature, or ``metadata.model`` of the message.
"""

from __future__ import annotations

import json

from iclr_cli.formats import media
from iclr_cli.formats.adapters.pydantic_ai import thinking_mode
from iclr_cli.formats.reading import ChunkedRecords, Where, base_name, dig
from iclr_cli.formats.sniff import MARKER, STRUCTURE, Head, Match
from iclr_cli.formats.writeback import Path, Site, TextRef, WriteBackAdapter
from iclr_cli.providers import for_model
from iclr_cli.trajectory import Part, PartKind, Step, Trajectory, WriteBack

_NOT_FOUND = ("no AI SDK messages found (expected a list of UIMessages {id, role, parts} or ModelMessages {role, content}, "
              "or {messages: [...]} / {version: 2, messages: [...]})")
_UI_TYPES = frozenset({"text", "reasoning", "step-start", "dynamic-tool", "source-url", "source-document", "file", "reasoning-file", "tool-invocation"})
_MODEL_TYPES = frozenset({"tool-call", "tool-result", "tool-approval-request", "tool-approval-response", "redacted-reasoning", "reasoning-file"})
_MODEL_CONTENT = frozenset({"text", "reasoning", "image", "file", "custom", *_MODEL_TYPES})
"""Every ``type`` of a ModelMessage content part; a list with another (Anthropic's ``tool_use``)
is not judged by its reasoning parts alone."""
_QUIET = frozenset({"source-url", "source-document", "custom", "tool-approval-request", "tool-approval-response", "redacted-reasoning"})
"""Part types that hold no model text: citations, app data, approvals, redacted reasoning."""
_RANK = {WriteBack.IN_PLACE: 0, WriteBack.SIGNED: 1, WriteBack.OPAQUE: 2, WriteBack.READ_ONLY: 3}


def reasoning_mode(options: object, at: Path) -> tuple[WriteBack, tuple[tuple[Path, str], ...], str | None, str | None]:
    """How a reasoning part whose ``providerMetadata`` / ``providerOptions`` is ``options`` (at
    path ``at``) may be written back: ``(mode, signature keys an edit removes, why it is
    read-only, the provider that signed it)``. Per namespace entry (the providers' own
    converters in github.com/vercel/ai):

    - ``redactedData``: Anthropic redacted thinking, read-only;
    - ``thoughtSignature`` (``google``, ``vertex``): read-only, as Gemini requires it back as received;
    - ``itemId`` / ``reasoningEncryptedContent`` (``openai``, ``azure``): :attr:`WriteBack.OPAQUE`;
    - ``signature`` (``anthropic``, ``bedrock``): :attr:`WriteBack.SIGNED`; every namespace's
      ``signature`` is removed by an edit (Roo Code stores it under both);
    - ``pydantic_ai``: its ``signature`` as its ``provider_name`` made it.
    The strictest wins; nothing of these: :attr:`WriteBack.IN_PLACE`.
    """
    mode, strip, why, provider = WriteBack.IN_PLACE, [], None, None
    for ns, entry in options.items() if isinstance(options, dict) else ():
        if not isinstance(entry, dict):
            continue
        found, note, who = WriteBack.IN_PLACE, None, ns
        if ns == "pydantic_ai":
            who = entry.get("provider_name") if isinstance(entry.get("provider_name"), str) else None
            found, note = thinking_mode(entry.get("signature"), who, entry.get("id"))
        elif isinstance(entry.get("redactedData"), str):
            found, note = WriteBack.READ_ONLY, "redacted by Anthropic (redactedData; the text is encrypted)"
        elif isinstance(entry.get("thoughtSignature"), str) and entry["thoughtSignature"]:
            found, note = WriteBack.READ_ONLY, "signed by Gemini (thoughtSignature; a signed part must not change)"
        elif isinstance(entry.get("itemId"), str) or isinstance(entry.get("reasoningEncryptedContent"), str):
            found = WriteBack.OPAQUE
        elif isinstance(entry.get("signature"), str) and entry["signature"]:
            found = WriteBack.SIGNED
        if found is WriteBack.SIGNED:
            strip.append(((*at, ns), "signature"))
        if found is not WriteBack.IN_PLACE:
            provider = provider or who
        if _RANK[found] > _RANK[mode]:
            mode, why = found, note
    return mode, tuple(strip) if mode is WriteBack.SIGNED else (), why, provider


def _id(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _json_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _output_text(output: object) -> str:
    """The text of a ``ToolResultOutput`` (``{type: text|json|error-text|error-json|content|
    execution-denied, value}``), or of any other output value as JSON."""
    if isinstance(output, dict) and isinstance(output.get("type"), str) and ("value" in output or output["type"] == "execution-denied"):
        value = output.get("value")
        if output["type"] == "execution-denied":
            return str(output.get("reason") or "execution denied")
        if output["type"] == "content" and isinstance(value, list):
            return "\n".join(v["text"] if isinstance(v, dict) and isinstance(v.get("text"), str) else _json_text(v) for v in value)
        return _json_text(value)
    return _json_text(output)


def _is_ui(msg: object) -> bool:
    return isinstance(msg, dict) and isinstance(msg.get("role"), str) and isinstance(msg.get("parts"), list)


def _messages(value: object) -> tuple[list, Path] | None:
    """The message list of ``value`` and its path: a list, or ``messages`` of an object."""
    if isinstance(value, list):
        return value, ()
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return value["messages"], ("messages",)
    return None


class _Reader:
    """Builds one trajectory from a UIMessage or ModelMessage list (module docstring)."""

    def __init__(self, where: Where, root: object):
        self.where, self.root = where, root
        self.prompt: list[Part] = []
        self.steps: list[list[Part]] = []
        self.model: str | None = None
        self.provider: str | None = None

    def add(self, text: str, label: str, call_id: str | None = None, found: media.Media | None = None) -> None:
        kind: PartKind = "observation" if self.steps else "prompt"
        (self.steps[-1] if self.steps else self.prompt).append(Part(kind, text, label=label, call_id=call_id, media=found))

    def typed(self, part: object, at: Path) -> str:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise self.where.error("message part has no string 'type'", at)
        return part["type"]

    def reasoning(self, text: object, at: Path, key: str, options_key: str, *, model: str | None, signature: object = None) -> Part:
        """The reasoning part whose text is ``part[key]`` (``part`` at ``at``), under the rule of
        its ``options_key`` (``providerMetadata`` / ``providerOptions``); ``signature``: an AI SDK 4
        part's own ``signature``."""
        if not isinstance(text, str):
            raise self.where.error(f"reasoning part has no string '{key}'", (*at, key))
        full = (self.where.rec, *at)
        mode, strip, why, provider = reasoning_mode(dig(self.value(at), options_key), (*full, options_key))
        if mode is WriteBack.IN_PLACE and isinstance(signature, str) and signature:
            mode, strip = WriteBack.SIGNED, ((full, "signature"),)
        self.provider = self.provider or provider
        if mode is WriteBack.READ_ONLY:
            if text.strip():
                self.where.sealed.append(self.where.at(at, why or "read-only"))
            return Part("reasoning", text, label="reasoning", write_back=mode)
        ref = TextRef((Site((*full, key)),), drop=(full,) if mode is WriteBack.OPAQUE else (), strip_keys=strip, remove_when_empty=full,
                      model=model if model and for_model(model) is not None else None)
        return Part("reasoning", text, label="reasoning", ref=ref, write_back=mode)

    def value(self, at: Path) -> object:
        """The value at ``at`` inside the record being read."""
        return dig(self.root, *at)

    # -- UIMessage -------------------------------------------------------------------------

    def ui(self, messages: list, at: Path) -> None:
        for i, msg in enumerate(messages):
            p = (*at, i)
            if not _is_ui(msg):
                raise self.where.error("not a UIMessage: expected an object with a string 'role' and a 'parts' list", p)
            if msg["role"] != "assistant":
                for k, part in enumerate(msg["parts"]):
                    self.ui_input(part, (*p, "parts", k), msg["role"])
                continue
            model = dig(msg, "metadata", "model")
            model = model if isinstance(model, str) else None
            self.model = self.model or model
            block: list[Part] = []
            results: list[Part] = []
            for k, part in enumerate(msg["parts"]):
                if self.typed(part, (*p, "parts", k)) == "step-start":
                    self.step(block, results)
                    block, results = [], []
                else:
                    self.ui_part(part, (*p, "parts", k), model, block, results)
            self.step(block, results)

    def step(self, parts: list[Part], results: list[Part]) -> None:
        if parts or results:
            self.steps.append(parts + results)

    def ui_input(self, part: object, at: Path, role: str) -> None:
        kind = self.typed(part, at)
        if kind == "text":
            self.add(str(part.get("text", "")), role)
        elif kind == "file" and isinstance(part.get("url"), str):
            found, mime = media.from_url(part["url"]), _id(part.get("mediaType"))
            self.add("", role, found=media.Media(media.kind_of(mime), mime or found.mime, found.data, found.url))
        elif kind != "step-start":
            self.add(_json_text(part), kind)

    def ui_part(self, part: dict, at: Path, model: str | None, block: list[Part], results: list[Part]) -> None:
        kind = part["type"]
        if kind == "text":
            if isinstance(part.get("text"), str) and part["text"].strip():
                block.append(Part("action", part["text"], label="assistant"))
        elif kind == "reasoning":
            if "text" not in part and isinstance(part.get("reasoning"), str):
                block.append(self.v4_reasoning(part, at, model))
            else:
                block.append(self.reasoning(part.get("text"), at, "text", "providerMetadata", model=model))
        elif kind == "tool-invocation" and isinstance(part.get("toolInvocation"), dict):
            inv = part["toolInvocation"]
            self.call(inv, str(inv.get("toolName", "?")), inv.get("args"), block)
            if inv.get("state") == "result":
                results.append(Part("observation", _output_text(inv.get("result")), label="tool_result", call_id=_id(inv.get("toolCallId"))))
        elif kind.startswith("tool-") or kind == "dynamic-tool":
            name = part.get("toolName", "?") if kind == "dynamic-tool" else kind[len("tool-"):]
            self.call(part, name, part.get("input", part.get("rawInput")), block)
            state = part.get("state")
            if state == "output-available":
                results.append(Part("observation", _output_text(part.get("output")), label="tool_result", call_id=_id(part.get("toolCallId"))))
            elif state == "output-error":
                results.append(Part("observation", str(part.get("errorText", "")), label="tool_result", call_id=_id(part.get("toolCallId"))))
            elif state == "output-denied":
                results.append(Part("observation", str(dig(part, "approval", "reason") or "denied"), label="tool_result", call_id=_id(part.get("toolCallId"))))
        elif kind == "file" and isinstance(part.get("url"), str):
            mime = _id(part.get("mediaType"))
            block.append(Part("action", "", label="file", media=media.Media(media.kind_of(mime), mime, url=part["url"])))
        elif kind not in _QUIET and not kind.startswith("data-"):
            self.where.note(at, f"assistant part of type {kind!r}: not scored or pruned")

    def call(self, part: dict, name: str, arguments: object, block: list[Part]) -> None:
        """A tool call: ``tool_call:NAME`` with its arguments as JSON and its ``toolCallId``."""
        call_id = _id(part.get("toolCallId"))
        block.append(Part("action", _json_text(arguments if arguments is not None else {}), label=f"tool_call:{name}", call_id=call_id))

    def v4_reasoning(self, part: dict, at: Path, model: str | None) -> Part:
        """An AI SDK 4 reasoning part: ``reasoning`` and its ``details`` (``{type: "text", text,
        signature}`` / ``{type: "redacted", data}``). One text detail holding the same text is a
        second site of it; several (the text split) are read-only."""
        text, details = part["reasoning"], part.get("details") if isinstance(part.get("details"), list) else []
        texts = [j for j, d in enumerate(details) if isinstance(d, dict) and d.get("type") == "text"]
        if any(isinstance(d, dict) and d.get("type") == "redacted" for d in details) or len(texts) > 1 or (texts and details[texts[0]].get("text") != text):
            if text.strip():
                self.where.sealed.append(self.where.at((*at, "reasoning"), "held apart in AI SDK 4 'details' that do not hold it once"))
            return Part("reasoning", text, label="reasoning", write_back=WriteBack.READ_ONLY)
        read = self.reasoning(text, at, "reasoning", "providerMetadata", model=model)
        if not texts or read.ref is None:
            return read
        j, full = texts[0], (self.where.rec, *at)
        sites = (*read.ref.sites, Site((*full, "details", j, "text")))
        signed = details[j].get("signature")
        if isinstance(signed, str) and signed:
            return Part("reasoning", text, label="reasoning", write_back=WriteBack.SIGNED,
                        ref=TextRef(sites, strip_keys=(((*full, "details", j), "signature"),), remove_when_empty=full, model=read.ref.model))
        return Part("reasoning", text, label="reasoning", write_back=read.write_back, ref=TextRef(sites, strip_keys=read.ref.strip_keys, remove_when_empty=full, model=read.ref.model))

    # -- ModelMessage ----------------------------------------------------------------------

    def model_messages(self, messages: list, at: Path) -> None:
        pending: list[Part] = []  # Roo Code's encrypted reasoning items, read with the next step
        for i, msg in enumerate(messages):
            p = (*at, i)
            if isinstance(msg, dict) and "role" not in msg and msg.get("type") == "reasoning":
                pending += self.roo_reasoning(msg, p)
                continue
            if not isinstance(msg, dict) or not isinstance(msg.get("role"), str) or "content" not in msg:
                raise self.where.error("not a ModelMessage: expected an object with a string 'role' and a 'content'", p)
            role, content = msg["role"], msg["content"]
            if role == "assistant":
                self.steps.append(pending + self.openrouter_copies(self.model_assistant(content, (*p, "content")), msg, p))
                pending = []
            elif isinstance(content, str):
                self.add(content, role)
            elif isinstance(content, list):
                for k, part in enumerate(content):
                    self.model_input(part, (*p, "content", k), role)
            else:
                raise self.where.error("message content must be a string or a list of parts", (*p, "content"))
        if pending:
            self.steps.append(pending)

    def roo_reasoning(self, item: dict, at: Path) -> list[Part]:
        """Roo Code's ``{type: "reasoning", encrypted_content, summary}`` item: each summary text
        is opaque reasoning (the model re-reads the encrypted content); an edit may drop the item."""
        full = (self.where.rec, *at)
        out = []
        for j, entry in enumerate(item.get("summary") if isinstance(item.get("summary"), list) else []):
            if isinstance(entry, dict) and isinstance(entry.get("text"), str):
                ref = TextRef((Site((*full, "summary", j, "text")),), drop=(full,))
                out.append(Part("reasoning", entry["text"], label="reasoning", ref=ref, write_back=WriteBack.OPAQUE))
        self.provider = self.provider or "openai"
        return out

    def openrouter_copies(self, parts: list[Part], msg: dict, at: Path) -> list[Part]:
        """``parts`` with each ``reasoning.text`` entry of the message's
        ``providerOptions.openrouter.reasoning_details`` (Roo Code keeps OpenRouter's details
        there) that holds a reasoning part's text joined to that part as a second site, its
        ``signature`` removed by an edit as the part's own; encrypted entries stay as they are
        (OpenRouter: pass them back unmodified)."""
        details = dig(msg, "providerOptions", "openrouter", "reasoning_details")
        if not isinstance(details, list):
            return parts
        out, used = list(parts), set()
        for i, part in enumerate(out):
            ref = part.ref
            if part.kind != "reasoning" or not isinstance(ref, TextRef):
                continue
            j = next((j for j, d in enumerate(details) if j not in used and isinstance(d, dict) and d.get("type") == "reasoning.text" and d.get("text") == part.text), None)
            if j is None:
                continue
            used.add(j)
            entry = (self.where.rec, *at, "providerOptions", "openrouter", "reasoning_details", j)
            signed = isinstance(details[j].get("signature"), str) and bool(details[j]["signature"])
            mode = WriteBack.SIGNED if signed and part.write_back is WriteBack.IN_PLACE else part.write_back
            strip = (*ref.strip_keys, (entry, "signature")) if signed else ref.strip_keys
            out[i] = Part("reasoning", part.text, label="reasoning", write_back=mode,
                          ref=TextRef((*ref.sites, Site((*entry, "text"))), drop=ref.drop, strip_keys=strip, remove_when_empty=ref.remove_when_empty, model=ref.model))
        return out

    def model_assistant(self, content: object, at: Path) -> list[Part]:
        if isinstance(content, str):
            return [Part("action", content, label="assistant")] if content.strip() else []
        if not isinstance(content, list):
            raise self.where.error("assistant content must be a string or a list of parts", at)
        parts: list[Part] = []
        results: list[Part] = []
        for k, part in enumerate(content):
            where = (*at, k)
            kind = self.typed(part, where)
            if kind == "text":
                if isinstance(part.get("text"), str) and part["text"].strip():
                    parts.append(Part("action", part["text"], label="assistant"))
            elif kind == "reasoning":
                parts.append(self.reasoning(part.get("text"), where, "text", "providerOptions", model=None, signature=part.get("signature")))
            elif kind == "tool-call":
                self.call(part, str(part.get("toolName", "?")), part.get("input", part.get("args")), parts)
            elif kind == "tool-result":
                results.append(Part("observation", _output_text(part.get("output", part.get("result"))), label="tool_result", call_id=_id(part.get("toolCallId"))))
            elif kind == "file":
                parts.append(Part("action", "", label="file"))
            elif kind not in _QUIET:
                self.where.note(where, f"assistant part of type {kind!r}: not scored or pruned")
        return parts + results

    def model_input(self, part: object, at: Path, role: str) -> None:
        kind = self.typed(part, at)
        if kind == "text":
            self.add(str(part.get("text", "")), role)
        elif kind == "tool-result":
            self.add(_output_text(part.get("output", part.get("result"))), "tool_result", _id(part.get("toolCallId")))
        elif kind == "tool_result":  # Roo Code's Anthropic-shaped results kept in user messages
            self.add(_json_text(part.get("content", "")), "tool_result", _id(part.get("tool_use_id")))
        elif kind not in _QUIET:
            self.add(_json_text(part), kind)


def _read(value: object, where: Where) -> list[Trajectory] | None:
    """The trajectory of one AI SDK message list, or None when ``value`` holds none."""
    found = _messages(value)
    if found is None or not found[0] or not isinstance(found[0][0], dict):
        return None
    messages, at = found
    first = messages[0]
    reader = _Reader(where, value)
    if _is_ui(first):
        reader.ui(messages, at)
        shape = "UIMessage"
    elif isinstance(first.get("role"), str) and "content" in first or first.get("type") == "reasoning":
        reader.model_messages(messages, at)
        shape = "ModelMessage"
    else:
        return None
    meta: dict[str, object] = {"format": ADAPTER.name, "shape": shape}
    if reader.model:
        meta["model"] = reader.model
    if reader.provider:
        meta["provider"] = reader.provider
    steps = tuple(Step(i, tuple(p)) for i, p in enumerate(reader.steps))
    traj_id = value["id"] if isinstance(value, dict) and isinstance(value.get("id"), str) else f"{base_name(where.source)}#{where.first_index}"
    return [Trajectory(traj_id, tuple(reader.prompt), steps, meta=meta)]


def _evidence(messages: list, envelope: bool = False) -> tuple[int, str] | None:
    """How specific the AI SDK evidence in ``messages`` is (sniff). Reasoning parts with
    ``text`` alone are weak evidence: Roo Code's Anthropic-shaped history (messages stamped with
    ``ts``) holds the same blocks, so outside the ``{version: 2, messages}`` envelope such a
    history is left to the ``anthropic`` adapter."""
    ui = [m for m in messages if _is_ui(m) and isinstance(m.get("id"), str)]
    ui_types = {p["type"] for m in ui for p in m["parts"] if isinstance(p, dict) and isinstance(p.get("type"), str)
                and not ({"sessionID", "messageID"} & set(p))}  # opencode's parts carry their session and message ids
    if ui and ui_types and all(t in _UI_TYPES or t.startswith(("tool-", "data-")) for t in ui_types):
        return MARKER, f"AI SDK UIMessages (id, role, parts of type {', '.join(sorted(ui_types)[:4])})"
    types = {p["type"] for m in messages if isinstance(m, dict) and isinstance(m.get("content"), list)
             for p in m["content"] if isinstance(p, dict) and isinstance(p.get("type"), str)}
    keys = {k for m in messages if isinstance(m, dict) and isinstance(m.get("content"), list) for p in m["content"] if isinstance(p, dict) for k in p}
    seen = sorted(_MODEL_TYPES & types)
    if "providerOptions" in keys or any(isinstance(m, dict) and "providerOptions" in m for m in messages):
        seen.append("providerOptions")
    if seen:
        return MARKER, f"AI SDK ModelMessages ({', '.join(seen)})"
    roo = not envelope and any(isinstance(m, dict) and "ts" in m for m in messages)
    if types <= _MODEL_CONTENT and not roo and any(isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("content"), list)
           and any(isinstance(p, dict) and p.get("type") == "reasoning" and isinstance(p.get("text"), str) for p in m["content"]) for m in messages):
        return STRUCTURE + 3, "AI SDK ModelMessages (reasoning parts with 'text')"
    return None


class AiSdkAdapter(ChunkedRecords, WriteBackAdapter):
    """Vercel AI SDK UIMessage / ModelMessage histories (see module docstring); write-back is
    the one engine's."""

    name = "ai-sdk"
    description = "Vercel AI SDK history: UIMessage[] (useChat) or ModelMessage[] (Roo Code's {version: 2, messages} too)"
    not_found = _NOT_FOUND
    read_value = staticmethod(_read)

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for UIMessages (``id``, ``role``, ``parts`` whose types are the AI SDK's) or
        ModelMessages (hyphenated ``tool-call`` / ``tool-result`` parts, ``providerOptions``),
        as a list or under ``messages``."""
        best: tuple[int, str] | None = None
        for rec in Head.of(head).records:
            found = _messages(rec)
            if found is None:
                continue
            got = _evidence(found[0], envelope=isinstance(rec, dict) and rec.get("version") == 2)
            if got is not None and (best is None or got[0] > best[0]):
                best = got
        return Match(*best) if best else None


ADAPTER = AiSdkAdapter()
