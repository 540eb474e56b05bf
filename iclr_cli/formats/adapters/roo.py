"""Reasoning Roo Code and Kilo Code keep in their Anthropic-shaped task histories.

Roo Code (and Kilo Code, a fork that writes the same file) stores each task's model
conversation as ``api_conversation_history.json`` in VS Code's global storage
(``rooveterinaryinc.roo-cline/tasks/<id>/``, ``kilocode.kilo-code/tasks/<id>/``): a JSON list
of Anthropic ``MessageParam`` objects with extra keys (``ts``, ``id``, ``condenseId``...). The
``anthropic`` adapter reads the list; this module reads what Roo adds to it for reasoning
(Roo-Code ``src/core/task/Task.ts``, ``addToApiConversationHistory``; the message type
``ApiMessage`` in ``src/core/task-persistence/apiMessages.ts``):

- **OpenRouter ``reasoning_details``** beside ``content`` on an assistant message (Gemini 3,
  Claude, o-series through OpenRouter: Roo keeps the list it was sent and passes it back,
  https://openrouter.ai/docs/use-cases/reasoning-tokens#preserving-reasoning-blocks).
  ``reasoning.text`` (``text``) and ``reasoning.summary`` (``summary``) entries are reasoning,
  scored and edited in place; one carrying a non-empty ``signature`` is signed (it loses the
  key when edited). A ``reasoning.encrypted`` entry whose ``id`` is the ``id`` of one of the
  message's ``tool_use`` blocks is that call's thought signature
  (https://ai.google.dev/gemini-api/docs/thought-signatures): it stays value-equal while the
  call stays, is listed in ``Document.signatures`` and makes nothing opaque. Any other
  ``reasoning.encrypted`` entry is the message's reasoning sealed by the provider: the text
  entries become :attr:`WriteBack.OPAQUE` (sealed by default, :mod:`iclr_cli.formats.sealing`;
  with ``--encrypted-reasoning drop`` an edit removes those entries).
- **``reasoning_content``** at the top level of an assistant message (DeepSeek and Z.ai
  interleaved thinking, which must be passed back on tool-call turns,
  https://api-docs.deepseek.com/guides/thinking_mode#tool-calls): Roo copies it beside the
  ``{"type": "reasoning", "text"}`` (or ``thinking``) content block holding the same text
  when it condenses a task. Equal texts are one reasoning with two sites, scored once and
  edited alike; a ``reasoning_content`` that joins several blocks' texts is a ``unique`` site
  of each; one that matches no block is a reasoning part of its own. A fully deleted one is
  written ``""``, never removed.
- **Encrypted reasoning blocks** ``{"type": "reasoning", "encrypted_content", "id"?,
  "summary"?}`` in ``content`` (Roo's OpenAI Responses provider, "OpenAI Native"), and the
  same object as a list element of its own with no ``role`` (Roo builds of November 2025
  stored it before its assistant message). The ``summary_text`` entries of ``summary`` are
  the readable reasoning: :attr:`WriteBack.OPAQUE`, dropped with their block under
  ``--encrypted-reasoning drop``. A block with no summary text has nothing to score: it is
  named in a warning (``sealed``) and written back byte for byte, never read as text.
- **``{"type": "thoughtSignature", "thoughtSignature"}``** blocks (Gemini's own API; Roo
  attaches the signature to the message's first tool call when it sends the history back):
  a signature, listed in ``Document.signatures``, never a part.

Where a field has the wrong JSON type (``reasoning_details`` not a list, an entry not an
object with a string ``type``, ``reasoning_content`` not a string, an entry's text not a
string), the read stops with an :class:`~iclr_cli.errors.InputError` naming the file, line
and field. Entries of unknown types are reported as unrecognised and kept in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from iclr_cli.formats.reading import Where
from iclr_cli.formats.sites import Path, Site, TextRef, merge_refs
from iclr_cli.formats.think import core_span
from iclr_cli.trajectory import Part, WriteBack

MESSAGE_FIELDS = ("reasoning_details", "reasoning_content")
"""Message-level reasoning fields of Roo's ``ApiMessage`` that :func:`message_reasoning` reads."""

_DETAIL_TEXT = {"reasoning.text": "text", "reasoning.summary": "summary"}
_ENCRYPTED = "reasoning.encrypted"
_CALL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
ENCRYPTED_NO_TEXT = "encrypted (encrypted_content, no summary text)"
"""What a sealed-reasoning warning says of an encrypted block with nothing readable."""


def is_reasoning_item(value: object) -> bool:
    """True for an encrypted reasoning item stored as a list element of its own (no ``role``)."""
    return isinstance(value, dict) and "role" not in value and value.get("type") == "reasoning" and "encrypted_content" in value


def encrypted_parts(block: dict, path: Path, where: Where, field: Path) -> list[Part]:
    """The readable reasoning of an encrypted reasoning block (or item) at records path
    ``path`` and message path ``field``: one :attr:`WriteBack.OPAQUE` part per ``summary``
    entry with text (and for a ``text`` beside ``encrypted_content``), each dropped with the
    block. None readable: the block is noted as sealed and ``[]`` returned.

    Raises:
        InputError: when ``encrypted_content`` is not a string, ``summary`` not a list, or
            a ``text`` not a string.
    """
    if not isinstance(block.get("encrypted_content"), str):
        raise where.error("encrypted reasoning block has no string 'encrypted_content'", (*field, "encrypted_content"))
    summary = block.get("summary")
    if summary is not None and not isinstance(summary, list):
        raise where.error("'summary' must be a list of summary_text entries", (*field, "summary"))
    sites: list[Path] = []
    if "text" in block and block["text"] is not None:
        if not isinstance(block["text"], str):
            raise where.error("'text' must be a string", (*field, "text"))
        sites.append((*path, "text"))
    for j, entry in enumerate(summary or ()):
        if isinstance(entry, dict) and isinstance(entry.get("text"), str):
            sites.append((*path, "summary", j, "text"))
        else:
            where.note((*field, "summary", j), "summary entry without a string 'text': not scored or pruned")
    parts = []
    for site in sites:
        text = _get(block, site[len(path):])
        if text.strip():
            ref = TextRef((Site(site),), drop=(path,))
            parts.append(Part("reasoning", text, label="reasoning", ref=ref, write_back=WriteBack.OPAQUE))
    if not parts:
        where.sealed.append(where.at(field, ENCRYPTED_NO_TEXT))
    return parts


def _get(value: object, keys: Sequence) -> str:
    for key in keys:
        value = value[key]  # type: ignore[index]
    return value  # type: ignore[return-value]


def call_ids(content: object) -> set[str]:
    """The ``id`` of every tool-call block in an assistant message's ``content``."""
    if not isinstance(content, list):
        return set()
    return {b["id"] for b in content if isinstance(b, dict) and b.get("type") in _CALL_BLOCKS and isinstance(b.get("id"), str)}


def message_reasoning(msg: dict, parts: Sequence[Part], where: Where, field: Path) -> list[Part]:
    """``parts`` (an assistant message's content, read by
    :func:`iclr_cli.formats.adapters.anthropic.assistant_parts`) with the message's ``reasoning_details``
    and ``reasoning_content`` read into them (module docstring): a text a content block holds
    already becomes another site of that block's part; the rest are parts of their own, placed
    before the content's parts (reasoning comes before what it led to). ``field`` is the
    message's JSON path inside record ``where.rec``.

    Raises:
        InputError: for a field of the wrong type (module docstring), naming it.
    """
    base = (where.rec, *field)
    joined = _Joined([], list(parts))
    sealing, entries = _details(msg, base, where, field)
    for text, ref, write_back in entries:
        joined.add_text(text, ref, write_back)
    if sealing and not entries:
        where.sealed.append(where.at((*field, "reasoning_details", sealing[0][-1]), "encrypted (reasoning.encrypted, no readable text)"))
    value = msg.get("reasoning_content")
    if value is not None and not isinstance(value, str):
        raise where.error(f"reasoning_content must be a string, not {type(value).__name__}", (*field, "reasoning_content"))
    if value and value.strip():
        joined.add_copy(value, (*base, "reasoning_content"))
    return joined.parts()


def _details(msg: dict, base: Path, where: Where, field: Path) -> tuple[list[Path], list[tuple[str, TextRef, WriteBack]]]:
    """``(paths of the encrypted entries that seal the text, [(text, ref, write-back kind)]``
    of each text entry)`` of the message's ``reasoning_details``; call-bound encrypted entries
    go to ``where.signatures``."""
    details = msg.get("reasoning_details")
    if details is None:
        return [], []
    name = (*field, "reasoning_details")
    if not isinstance(details, list):
        raise where.error("reasoning_details must be a list of reasoning entries", name)
    calls = call_ids(msg.get("content"))
    sealing: list[Path] = []
    texts: list[tuple[str, Path, bool]] = []  # (text, path to it, signed)
    for k, entry in enumerate(details):
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            raise where.error("reasoning_details entry is not an object with a string 'type'", (*name, k))
        kind = entry["type"]
        if kind == _ENCRYPTED:
            if entry.get("id") in calls:
                where.signatures.append(where.at((*name, k), f"thought signature of tool call {entry['id']!r} (reasoning.encrypted whose id is the call's id; kept with its call)"))
            else:
                sealing.append((*base, "reasoning_details", k))
            continue
        key = _DETAIL_TEXT.get(kind)
        if key is None:
            where.note((*name, k), f"reasoning_details entry of type {kind!r}: not scored or pruned")
            continue
        value = entry.get(key)
        if value is None:
            where.note((*name, k), f"{kind} entry has no '{key}': not scored or pruned")
            continue
        if not isinstance(value, str):
            raise where.error(f"{kind} entry's '{key}' must be a string", (*name, k, key))
        signed = isinstance(entry.get("signature"), str) and bool(entry["signature"])
        texts.append((value, (*base, "reasoning_details", k, key), signed))
    out = []
    for value, path, signed in texts:
        if not value.strip():
            continue
        ref = TextRef((Site(path),), drop=tuple(sealing), strip_keys=((path[:-1], "signature"),) if signed else ())
        out.append((value, ref, WriteBack.OPAQUE if sealing else WriteBack.SIGNED if signed else WriteBack.IN_PLACE))
    return sealing, out


_STRENGTH = {WriteBack.IN_PLACE: 0, WriteBack.SIGNED: 1, WriteBack.OPAQUE: 2}


class _Joined:
    """The reasoning of one message as it is joined: ``front`` (message-level texts no
    content block holds) and ``content`` (the content's parts)."""

    def __init__(self, front: list[Part], content: list[Part]):
        self.front, self.content = front, content

    def parts(self) -> list[Part]:
        return [*self.front, *self.content]

    def _slots(self) -> list[tuple[list[Part], int]]:
        return [(holder, i) for holder in (self.front, self.content) for i, p in enumerate(holder)
                if p.kind == "reasoning" and isinstance(p.ref, TextRef) and p.ref.sites]

    def _merge(self, holder: list[Part], i: int, ref: TextRef, write_back: WriteBack = WriteBack.IN_PLACE) -> None:
        part = holder[i]
        kind = max(part.write_back, write_back, key=_STRENGTH.__getitem__)
        holder[i] = replace(part, ref=merge_refs(part.ref, ref), write_back=kind)  # type: ignore[arg-type]

    def add_text(self, text: str, ref: TextRef, write_back: WriteBack) -> None:
        """A reasoning_details text: another site of the part holding the same text, or a part."""
        for holder, i in self._slots():
            if holder[i].text == text:
                self._merge(holder, i, ref, write_back)
                return
        self.front.append(Part("reasoning", text, label="reasoning", ref=ref, write_back=write_back))

    def add_copy(self, value: str, path: Path) -> None:
        """``reasoning_content``: a site of the part it copies (whole, or whitespace around it
        aside), of each part it joins (``unique``), or a part of its own."""
        slots = self._slots()
        start, end = core_span(value)
        for how, wanted in (("whole", value), ("core", value[start:end])):
            for holder, i in slots:
                if holder[i].text == wanted:
                    self._merge(holder, i, TextRef((Site(path, how),)))
                    return
        inside = [(holder, i) for holder, i in slots if holder[i].text.strip() and value.count(holder[i].text) == 1]
        rest = value
        for holder, i in inside:
            rest = rest.replace(holder[i].text, "", 1)
        if len(inside) > 1 and not rest.strip():
            for holder, i in inside:
                self._merge(holder, i, TextRef((Site(path, "unique"),)))
            return
        self.front.append(Part("reasoning", value, label="reasoning", ref=TextRef((Site(path),))))
