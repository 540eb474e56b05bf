"""Anthropic Messages API transcripts (``role``, content blocks ``thinking``, ``tool_use``, ...).

Shapes accepted (one trajectory per message list):
- a JSON list of messages, or an object with ``messages`` (and optionally ``system``, a string
  or a list of text blocks);
- JSONL with one such list or object per line.

A message's ``content`` is a string or a list of content blocks. Parts (METHOD.md, "Objects"):
- ``thinking``: reasoning. ``WriteBack.SIGNED`` when the block has a non-empty ``signature``,
  else ``IN_PLACE`` (an empty ``"signature": ""`` key is kept as it is). A ``reasoning`` block with a string ``text`` (the shape some SDKs and
  gateways write) is read the same way.
- ``redacted_thinking``: reasoning with no readable text (opaque ``data``): a ``READ_ONLY``
  part whose text is the placeholder :data:`REDACTED_TEXT`. It is never scored or edited, is
  written back byte for byte, and counts as content (it is not "empty").
- ``text`` in an assistant message (or string ``content``): action (label ``assistant``);
  whitespace-only text blocks (Claude Code writes ``"\\n\\n"`` ones) carry nothing and are
  not parts. Inline ``<think>...</think>`` in it (open models behind an Anthropic-compatible
  endpoint) is reasoning, paired as :mod:`iclr_cli.formats.think` says; the rest is the action.
- ``tool_use``: action labelled ``tool_call:<name>`` whose text is its ``input`` as JSON, with
  the block's ``id`` as ``call_id``.
- ``tool_result``: observation labelled ``tool_result`` with its ``tool_use_id`` as ``call_id``
  (text blocks joined; each image a media part of its own, :mod:`iclr_cli.formats.media`).
  An ``image`` block in a user message is a media part too (text ``""``).
- server tool calls (``server_tool_use``, ``mcp_tool_use``) are actions, their results
  (``*_tool_result``) observations; ``image``, ``document`` and the other known block types are
  actions labelled by type, text as JSON.
- Roo Code / Kilo Code task histories (``api_conversation_history.json``) add
  ``reasoning_details`` and ``reasoning_content`` beside ``content``, encrypted ``reasoning``
  blocks and items, and ``thoughtSignature`` blocks: read as :mod:`iclr_cli.formats.adapters.roo` says.
- Unrecognised (reported, docs/FORMAT.md): an assistant block of an unknown type (rendered as
  a JSON action, never scored), and message-level reasoning fields this format does not have
  (``reasoning``, ``thinking``, ``thinking_blocks``).
A step is one assistant message. User messages after the first assistant message are
observations of the step before them; everything before it, and a top-level ``system``, is P.
Recorded usage (``iclr savings``): where assistant messages are API responses kept whole, each
is one request and its ``usage`` is read; a list with no ``usage`` records none.

Write-back (METHOD.md, "Provider rules"): only records holding an edited thinking block are
re-serialised, in the input's own layout; everything else comes back byte for byte.
Write-back goes through :mod:`iclr_cli.formats.writeback` (the one engine):
- Which blocks a variant may edit is the provider's rule (:mod:`iclr_cli.formats.sealing`,
  the table ``iclr serve`` follows): Anthropic-signed thinking is left sealed unless the user
  asks to edit it (``--signed-thinking edit``); a plain-text provider's block (DeepSeek's
  Anthropic endpoint, MiniMax, Kimi...) is edited in place and keeps its ``signature``.
- An edited block signed by Anthropic (only with ``--signed-thinking edit``) loses its
  ``signature`` key (this project's choice over flagging it): the signature no longer matches
  the text, and without one no tool replays the block as if it were original. Other keys of
  the block are kept.
- A fully deleted thinking (new text ``""``, e.g. ``delete-all``) is removed from ``content``,
  unless that would leave ``content`` empty: then it stays as ``{"type": "thinking",
  "thinking": ""}`` with no signature, because an assistant message must have content.
- ``redacted_thinking``, ``tool_use`` and ``tool_result`` blocks are never removed, added or
  reordered, so tool calls and results stay paired.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

from iclr_cli.formats import media

from iclr_cli.formats.adapters import roo
from iclr_cli.formats.base import Document
from iclr_cli.formats.reading import Where, base_name, load_chunks
from iclr_cli.formats.markup import foreign_notes
from iclr_cli.formats.sniff import ANTHROPIC_BLOCKS, STRUCTURE, Head, Match, census, chat_lists, describe, openai_evidence
from iclr_cli.formats.think import outside_think, think_elements
from iclr_cli.formats.usage import anthropic_usage
from iclr_cli.formats.writeback import Path, Site, TextRef, WriteBackAdapter
from iclr_cli.trajectory import Part, PartKind, Request, Step, Trajectory, Usage, WriteBack

REDACTED_TEXT = "[redacted thinking]"
"""Text of the READ_ONLY part that stands for a ``redacted_thinking`` block in the render."""

_TOOL_CALLS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_RESULTS = frozenset(
    {
        "tool_result",
        "mcp_tool_result",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
    }
)
_OTHER_KNOWN = frozenset({"image", "document", "search_result", "container_upload"})
_MESSAGE_REASONING = ("reasoning_content", "reasoning", "thinking", "thinking_blocks", "reasoning_details")
"""Message-level fields that carry reasoning in other formats; an Anthropic message has none."""


# The Messages API's roles (Anthropic, "Messages": user and assistant; a system prompt is the
# request's ``system``, and logs that keep it as a message with role system are read so).
_ROLES = ("user", "assistant", "system")

def is_message_list(value: object) -> bool:
    """True for a non-empty list of JSON objects that all have a ``role``, but for Roo Code's
    encrypted reasoning items (:func:`iclr_cli.formats.adapters.roo.is_reasoning_item`)."""
    return (isinstance(value, list) and any(isinstance(m, dict) and "role" in m for m in value)
            and all(isinstance(m, dict) and ("role" in m or roo.is_reasoning_item(m)) for m in value))


def _string(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _result_text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for item in content:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                pieces.append(item["text"])
            elif isinstance(item, dict) and item.get("type") == "image":
                pieces.append("[image]")
            else:
                pieces.append(_json_text(item))
        return "\n".join(pieces)
    return _json_text(content)


def _blocks(content: object, where: Where, field: Path) -> list[dict] | None:
    """The content blocks of a message (``None`` for string content), validated."""
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        raise where.error("content must be a string or a list of content blocks", field)
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise where.error("content block is not an object with a string 'type'", (*field, i))
        if block["type"] == "thinking" and not isinstance(block.get("thinking"), str):
            raise where.error("thinking block has no string 'thinking'", (*field, i, "thinking"))
    return content


def _text_parts(text: str, path: Path) -> list[Part]:
    """Visible text at ``path`` (records path of the string): its ``<think>`` elements are
    reasoning, the rest is the ``assistant`` action."""
    elements = think_elements(text)
    parts = [
        Part("reasoning", el.inner(text), label="reasoning", ref=TextRef((Site(path, f"think:{k}"),)))
        for k, el in enumerate(elements)
        if el.inner(text).strip()
    ]
    visible = outside_think(text, elements) if elements else text
    if visible.strip():
        parts.append(Part("action", visible, label="assistant"))
    return parts


def _visible_text(text: str, path: Path, where: Where, field: Path) -> list[Part]:
    """:func:`_text_parts`, with reasoning markup of other models in the visible text noted
    as unrecognised (``[THINK]``, ``<seed:think>``, ...: never silently taken for the answer)."""
    parts = _text_parts(text, path)
    for part in parts:
        if part.kind == "action":
            for note in foreign_notes(part.text):
                where.note(field, note)
    return parts


def has_signature(block: Mapping) -> bool:
    """True when a ``thinking`` block carries a signature: a non-empty ``signature`` string.
    ``"signature": ""`` is no signature (a client that ignores the stream's
    ``signature_delta`` sends the block back so; bridges to plain-text providers add it),
    and neither is a missing key."""
    signature = block.get("signature")
    return isinstance(signature, str) and bool(signature)


def _thinking(block: dict, key: str, path: Path, label: str) -> Part:
    """A ``thinking`` (or ``reasoning``) block at ``path`` as a reasoning part: signed when it
    carries a signature (an edit then strips it, unless the provider rule keeps it:
    :mod:`iclr_cli.formats.sealing`); emptied, the block leaves its list. An empty
    ``"signature": ""`` is kept: bridges to plain-text providers add it because Claude Code
    drops thinking blocks without the key."""
    signed = has_signature(block)
    ref = TextRef((Site((*path, key)),), strip_keys=((path, "signature"),) if signed else (), remove_when_empty=path)
    return Part("reasoning", block[key], label=label, ref=ref, write_back=WriteBack.SIGNED if signed else WriteBack.IN_PLACE)


def assistant_parts(content: object, where: Where, field: Path) -> list[Part]:
    """The parts of one assistant message's ``content`` (at JSON path ``field`` inside record
    ``where.rec``), in block order; unknown block types are noted as unrecognised.

    Raises:
        InputError: for content that is neither a string nor a list of typed blocks, or a
        thinking block without string ``thinking``.
    """
    base = (where.rec, *field)
    blocks = _blocks(content, where, field)
    if blocks is None:
        return _visible_text(content, base, where, field)  # type: ignore[arg-type]
    parts: list[Part] = []
    for i, block in enumerate(blocks):
        kind = block["type"]
        if kind == "thinking":
            parts.append(_thinking(block, "thinking", (*base, i), "reasoning"))
        elif kind == "reasoning" and "encrypted_content" in block:  # Roo's OpenAI Responses reasoning
            parts.extend(roo.encrypted_parts(block, (*base, i), where, (*field, i)))
        elif kind == "reasoning" and isinstance(block.get("text"), str):
            parts.append(_thinking(block, "text", (*base, i), "reasoning"))
        elif kind == "thoughtSignature" and isinstance(block.get("thoughtSignature"), str):
            where.signatures.append(where.at((*field, i), "Gemini thought signature of the message's first tool call (kept as received)"))
        elif kind == "redacted_thinking":
            parts.append(Part("reasoning", REDACTED_TEXT, label="redacted_thinking", write_back=WriteBack.READ_ONLY))
        elif kind == "text":
            if isinstance(block.get("text"), str):
                parts.extend(_visible_text(block["text"], (*base, i, "text"), where, (*field, i, "text")))
        elif kind in _TOOL_CALLS:
            parts.append(Part("action", _json_text(block.get("input")), label=f"tool_call:{block.get('name', '?')}", call_id=_string(block.get("id"))))
        elif kind in _RESULTS:
            parts.append(Part("observation", _result_text(block.get("content")), label="tool_result", call_id=_string(block.get("tool_use_id"))))
        else:
            if kind not in _OTHER_KNOWN:
                where.note((*field, i), f"assistant content block of unknown type {kind!r}: kept as a JSON action, never scored or pruned")
            parts.append(Part("action", _json_text({k: v for k, v in block.items() if k != "type"}), label=kind))
    return parts


def note_message_fields(message: dict, where: Where, field: Path, read: tuple[str, ...] = ()) -> None:
    """Note reasoning fields of other formats on an assistant message (they are not read),
    but for those in ``read``."""
    for key in _MESSAGE_REASONING:
        if key in read:
            continue
        value = message.get(key)
        if value not in (None, "", [], {}):
            where.note((*field, key), f"assistant message field {key!r} is not part of the Anthropic format: not scored or pruned")


def user_parts(content: object, kind: PartKind, where: Where, field: Path, label: str = "user") -> list[Part]:
    """The parts of one user (or system) message, all of ``kind`` (``prompt`` before the
    first assistant message, ``observation`` after): ``tool_result`` blocks labelled
    ``tool_result``, text and other blocks labelled ``label`` (or their block type).

    Raises:
        InputError: for content that is neither a string nor a list of typed blocks.
    """
    blocks = _blocks(content, where, field)
    if blocks is None:
        return [Part(kind, content, label=label)]  # type: ignore[arg-type]
    parts: list[Part] = []
    for block in blocks:
        if block["type"] == "tool_result":
            call_id = _string(block.get("tool_use_id"))
            content = block.get("content")
            if isinstance(content, list):  # text and image blocks, in order (images are kept for convert)
                parts.extend(media.mixed_parts(content, kind, "tool_result", read_media=media.anthropic_media, call_id=call_id))
            else:
                parts.append(Part(kind, _result_text(content), label="tool_result", call_id=call_id))
        elif block["type"] == "text" and isinstance(block.get("text"), str):
            parts.append(Part(kind, block["text"], label=label))
        elif block["type"] == "image" and (image := media.anthropic_image(block)) is not None:
            parts.append(Part(kind, "", label=label, media=image))
        else:
            parts.append(Part(kind, _json_text({k: v for k, v in block.items() if k != "type"}), label=block["type"]))
    return parts


def _message_path_prefix(value: object) -> tuple[Path, object] | None:
    """``(path to the message list, system)`` of one record, or None when it holds none."""
    if is_message_list(value):
        return (), None
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return ("messages",), value.get("system")
    return None


def _read(value: object, where: Where) -> list[Trajectory] | None:
    found = _message_path_prefix(value)
    if found is None:
        return None
    prefix, system = found
    messages = value if not prefix else value[prefix[0]]  # type: ignore[index]
    prompt: list[Part] = []
    if system is not None:
        prompt.extend(user_parts(system, "prompt", where, ("system",), label="system"))
    steps: list[list[Part]] = []
    usage: dict[int, Usage] = {}
    items: list[Part] = []  # Roo's encrypted reasoning items: the reasoning of the next assistant message
    for i, msg in enumerate(messages):  # type: ignore[union-attr]
        path = (*prefix, i)
        if not isinstance(msg, dict):
            raise where.error("message is not a JSON object", path)
        if roo.is_reasoning_item(msg):
            items.extend(roo.encrypted_parts(msg, (where.rec, *path), where, path))
            continue
        role = msg.get("role")
        if not isinstance(role, str):
            raise where.error("message has no string 'role'", (*path, "role"))
        if "content" not in msg:
            raise where.error("message has no 'content'", (*path, "content"))
        if role not in _ROLES:  # a model turn under another name would be read as input: said
            where.note((*path, "role"), f"role {role!r} is not one of the Messages API's (user, assistant): its content is read as input, not as a model turn")
        if role == "assistant":
            if (reported := anthropic_usage(msg.get("usage"), "usage")) is not None:
                usage[len(steps)] = reported
            parts = roo.message_reasoning(msg, assistant_parts(msg["content"], where, (*path, "content")), where, path)
            steps.append([*items, *parts])
            items = []
            note_message_fields(msg, where, path, read=roo.MESSAGE_FIELDS)
        elif steps:
            steps[-1].extend(user_parts(msg["content"], "observation", where, (*path, "content"), label=role))
        else:
            prompt.extend(user_parts(msg["content"], "prompt", where, (*path, "content"), label=role))
    if items:  # reasoning items after the last assistant message: the reasoning of the last step
        steps[-1].extend(items) if steps else steps.append(items)
    meta = {"format": "anthropic"}
    if isinstance(value, dict) and isinstance(value.get("model"), str):
        meta["model"] = value["model"]
    traj_id = f"{base_name(where.source)}#{where.first_index}"
    requests = tuple(Request(i, usage.get(i)) for i in range(len(steps))) if usage else ()
    return [Trajectory(traj_id, tuple(prompt), tuple(Step(i, tuple(p)) for i, p in enumerate(steps)), meta=meta, requests=requests)]


class AnthropicAdapter(WriteBackAdapter):
    """Anthropic Messages transcripts in a JSON file or JSONL (see module docstring)."""

    name = "anthropic"
    description = "Anthropic Messages (JSON list, {system, messages}, JSONL); Cline, Roo Code and Kilo Code task histories"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for message lists (a list, or ``messages``) whose content holds
        Anthropic-only block types (``thinking`` with string text, ``redacted_thinking``,
        ``tool_use``, ``tool_result``), scored against what Messages never have
        (``tool_calls``, role ``tool``, message-level reasoning fields, Mistral thinking
        chunks, Converse blocks)."""
        found = census(chat_lists(Head.of(head)))
        blocks = ANTHROPIC_BLOCKS & found.all_part_types
        if not found.thinking_strings:
            blocks -= {"thinking"}  # Mistral's thinking chunk holds a list: OpenAI chat
        con = openai_evidence(found)[0]
        pro = [f"Anthropic content blocks {describe(blocks)}"] if blocks else []
        weight = len(blocks)  # one point per Anthropic-only block type
        # Roo Code / Kilo Code task histories: Roo stamps every message with 'ts', and its
        # assistant content holds 'reasoning' / 'thoughtSignature' blocks, which no OpenAI chat
        # message has. There the reasoning fields beside the content are Roo's own
        # (roo.MESSAGE_FIELDS), no evidence of OpenAI chat.
        roo_blocks = {"reasoning", "thoughtSignature"} & found.part_types.get("assistant", set())
        stamped = "ts" in found.keys.get("assistant", ())
        if roo_blocks and stamped:
            pro.append(f"Roo Code content blocks {describe(roo_blocks)} on messages with 'ts'")
            weight += 1
        if stamped and weight and set(roo.MESSAGE_FIELDS) >= set(_MESSAGE_REASONING) & found.keys.get("assistant", set()):
            con = [c for c in con if not c.startswith("reasoning in message field")]
        if not weight or len(con) >= weight:
            return None
        return Match(STRUCTURE + weight - len(con), "; ".join(pro))

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        [doc] = self.load_chunks(data, source, skip_bad_lines=skip_bad_lines, chunk_size=None)
        return doc

    def load_chunks(self, data: bytes, source: str, *, skip_bad_lines: bool = False, chunk_size: int | None = 256) -> Iterator[Document]:
        """One Document for a JSON file; chunks of at most ``chunk_size`` lines for JSONL
        (see :func:`iclr_cli.formats.reading.load_chunks`)."""
        not_found = "no message list found (expected a list of messages or an object with 'messages')"
        return load_chunks(data, source, self.name, _read, not_found=not_found, skip_bad_lines=skip_bad_lines, chunk_size=chunk_size)


ADAPTER = AnthropicAdapter()
