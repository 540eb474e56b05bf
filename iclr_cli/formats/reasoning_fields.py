"""An assistant message's reasoning fields and their structured copies, read as parts.

The OpenAI chat reader (:mod:`iclr_cli.formats.openai_messages`) reads these, for files, replay
and ``iclr serve``'s chat wire alike (docs/FORMAT.md, "OpenAI chat messages"):

- the string fields ``reasoning_content`` (DeepSeek, vLLM, SGLang), ``reasoning`` (OpenRouter,
  vLLM, LM Studio) and ``thinking`` (gpt-oss on Ollama); fields holding the same text are one
  part, and an edit is written to each of them;
- the structured copies ``reasoning_details`` (OpenRouter) and ``thinking_blocks`` (LiteLLM): a
  structured entry and the plain field that holds the same text are one part, edited together
  (an edited signed entry loses its ``signature``, an emptied ``thinking`` block leaves its
  list); the entries of one streamed block kept per delta are one reasoning
  (:mod:`iclr_cli.formats.fragments`); ``reasoning.encrypted`` entries are never edited and
  make the part ``OPAQUE``; one whose ``id`` is a tool call's is that call's thought signature;
- LiteLLM's ``provider_specific_fields``, which an app on the LiteLLM client sends back with
  ``message.model_dump()``: its reasoning fields and ``thinking_blocks`` are copies of the
  message's own, sites of the same parts.

When the plain field and the structured copy hold different text, neither is edited (the
parts are ``READ_ONLY``) and the message is reported as unrecognised.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from iclr_cli.formats.fragments import streamed_blocks
from iclr_cli.formats.writeback import Site, TextRef
from iclr_cli.trajectory import Part, WriteBack


class _Reader(Protocol):
    """What the chat reader gives this module (``openai_messages._Reader``): the site of keys
    under message ``i``, and the notes it keeps (unrecognised, sealed, signed)."""

    def site(self, i: int, keys: tuple, how: str = "whole") -> Site: ...

    def report(self, i: int, keys: tuple, what: str) -> None: ...

    def seal(self, i: int, keys: tuple, what: str) -> None: ...

    def sign(self, i: int, keys: tuple, what: str) -> None: ...


REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
# (entry type -> key of its text) per structured list; None marks an entry that carries no
# readable text and is never edited.
STRUCTURED: dict[str, dict[str, str | None]] = {
    "reasoning_details": {"reasoning.text": "text", "reasoning.summary": "summary", "reasoning.encrypted": None},
    "thinking_blocks": {"thinking": "thinking", "redacted_thinking": None},
}
_DROPPED_WITH_EDITS = {"reasoning.encrypted"}  # the same reasoning, encrypted: goes when the text is edited


def json_kind(value: object) -> str:
    """``string``, ``number``, ``object``...: a value's JSON type, for a report (by
    ``isinstance``: a parser's dict or list subclass is still an object or a list)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    for kind, name in ((str, "string"), (dict, "object"), (list, "list")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def call_ids(msg: Mapping) -> set[str]:
    """The ids of an assistant message's tool calls."""
    return {c["id"] for c in msg.get("tool_calls") or [] if isinstance(c, Mapping) and isinstance(c.get("id"), str)}


@dataclass
class _Entry:
    """One text-bearing entry of a structured reasoning list."""

    keys: tuple  # from the message to the text
    text: str
    signed: tuple | None  # keys of the entry dict when it carries a signature
    removable: bool  # an emptied entry leaves its list (Anthropic thinking blocks)
    pieces: tuple[tuple, ...] = ()  # one streamed block kept per delta: the keys of each fragment (formats/fragments.py)
    twin: _Entry | None = None  # the same entry in provider_specific_fields (LiteLLM's copy)


def _structured(msg: Mapping, i: int, reader: _Reader, prefix: tuple = ()) -> tuple[list[_Entry], list[tuple]]:
    """Text entries of ``reasoning_details`` / ``thinking_blocks`` and the keys of the entries
    that go when an edit is written (``reasoning.encrypted``); ``prefix``: the keys from the
    message to ``msg`` (LiteLLM's ``provider_specific_fields``)."""
    if prefix:
        entries, dropped = _structured(msg, i, _Prefixed(reader, prefix))
        return [_prefixed(e, prefix) for e in entries], [(*prefix, *keys) for keys in dropped]
    entries: list[_Entry] = []
    dropped: list[tuple] = []
    calls = call_ids(msg)
    for name, kinds in STRUCTURED.items():
        value = msg.get(name)
        if value is None:
            continue
        if not isinstance(value, list):
            reader.report(i, (name,), f"{name} is not a list: not scored or pruned")
            continue
        groups = {g.members[0]: g for g in streamed_blocks(value)} if name == "thinking_blocks" else {}
        grouped = {k for g in groups.values() for k in g.members}
        for k, entry in enumerate(value):
            if (group := groups.get(k)) is not None:
                signed = (name, group.signed) if group.signed is not None else None
                pieces = tuple((name, j, "thinking") for j in group.pieces)
                entries.append(_Entry(pieces[0], group.text, signed, False, pieces))
            if k in grouped:
                continue
            kind = entry.get("type") if isinstance(entry, dict) else None
            if not isinstance(kind, str) or kind not in kinds:
                reader.report(i, (name, k), f"{name} entry of type {kind!r}: not scored or pruned")
                continue
            key = kinds[kind]
            if key is None:
                if kind in _DROPPED_WITH_EDITS and entry.get("id") in calls:
                    # a tool call's thought signature, not a copy of the text (module docstring)
                    reader.sign(i, (name, k), f"thought signature of tool call {entry['id']!r} ({kind} whose id is the call's id; kept with its call)")
                elif kind in _DROPPED_WITH_EDITS:
                    dropped.append((name, k))
                else:  # redacted_thinking: never read, never edited
                    reader.seal(i, (name, k), f"of type {kind} (redacted; its payload cannot be read)")
                continue
            if not isinstance(entry.get(key), str):
                reader.report(i, (name, k, key), f"{kind} entry has no text in {key!r}: not scored or pruned")
                continue
            signed = (name, k) if isinstance(entry.get("signature"), str) and entry["signature"] else None
            entries.append(_Entry((name, k, key), entry[key], signed, name == "thinking_blocks"))
    return entries, dropped


def _prefixed(entry: _Entry, prefix: tuple) -> _Entry:
    return _Entry((*prefix, *entry.keys), entry.text, (*prefix, *entry.signed) if entry.signed else None, entry.removable,
                  tuple((*prefix, *keys) for keys in entry.pieces))


class _Prefixed:
    """A :class:`_Reader` for a dict inside the message (``provider_specific_fields``): the
    keys it is given are prefixed with the path to that dict."""

    def __init__(self, reader: _Reader, prefix: tuple):
        self.reader, self.prefix = reader, prefix

    def __getattr__(self, name: str):
        method = getattr(self.reader, name)
        return lambda i, keys, *rest: method(i, (*self.prefix, *keys), *rest)


_COPIES = "provider_specific_fields"
"""LiteLLM's message field holding copies of the provider's own reasoning fields: an app on the
LiteLLM client that sends ``message.model_dump()`` back sends them too (``reasoning``,
``reasoning_content``, ``thinking_blocks``): sites of the same reasoning, edited alike."""


def _copy_entries(entries: list[_Entry], copies: list[_Entry]) -> list[_Entry]:
    """``entries`` with each copy (the same list entry, the same text, under
    ``provider_specific_fields``) joined to it as extra pieces; copies of no entry are
    entries of their own."""
    by_keys = {(e.keys[-3:], e.text): e for e in copies}
    out, used = [], set()
    for entry in entries:
        twin = by_keys.get((entry.keys[-3:], entry.text))
        if twin is not None and len(twin.pieces) == len(entry.pieces):
            used.add(id(twin))
            entry = _Entry(entry.keys, entry.text, entry.signed, entry.removable, entry.pieces, twin)
        out.append(entry)
    return out + [c for c in copies if id(c) not in used]


def field_reasoning(msg: Mapping, i: int, reader: _Reader) -> list[Part]:
    """Parts of the reasoning fields of assistant message ``i`` and their structured copies
    (module docstring); ``reader`` is the OpenAI chat reader's (sites, reports, seals)."""
    groups: dict[str, list[tuple]] = {}  # text -> the keys of the plain fields holding it
    copies = msg.get(_COPIES) if isinstance(msg.get(_COPIES), Mapping) else {}
    for keys in [(name,) for name in REASONING_FIELDS] + [(_COPIES, name) for name in REASONING_FIELDS]:
        value = copies.get(keys[1]) if len(keys) == 2 else msg.get(keys[0])
        if isinstance(value, str):
            groups.setdefault(value, []).append(keys)
        elif value is not None:
            reader.report(i, keys, f"{keys[-1]} holds a JSON {json_kind(value)}, not text (a string is the documented form; a number would be an input error): not scored or pruned; kept in place by prune")
    entries, dropped = _structured(msg, i, reader)
    if any(name in copies for name in STRUCTURED):
        more, also = _structured(copies, i, reader, (_COPIES,))
        entries, dropped = _copy_entries(entries, more), dropped + also
    if dropped and not entries and not groups:  # encrypted only: nothing readable goes with it
        for keys in dropped:
            reader.seal(i, keys, "encrypted (reasoning.encrypted, no readable text)")
    write = WriteBack.OPAQUE if dropped else WriteBack.IN_PLACE
    drop = tuple(reader.site(i, keys).path for keys in dropped)

    def entry_sites(entry: _Entry) -> list[Site]:
        twin = entry_sites(entry.twin) if entry.twin is not None else []
        if entry.pieces:
            return [reader.site(i, keys, f"fragment:{j}") for j, keys in enumerate(entry.pieces)] + twin
        return [reader.site(i, entry.keys)] + twin

    def signatures(entry: _Entry | None) -> tuple:
        if entry is None:
            return ()
        own = ((reader.site(i, entry.signed).path, "signature"),) if entry.signed else ()
        return own + signatures(entry.twin)

    def part(text: str, sites: list[Site], entry: _Entry | None = None) -> Part:
        strip = signatures(entry)
        empty = reader.site(i, entry.keys[:-1]).path if entry is not None and entry.removable else None
        twin = entry.twin if entry is not None else None
        also = (reader.site(i, twin.keys[:-1]).path,) if twin is not None and twin.removable and empty is not None else ()
        mode = write if write is WriteBack.OPAQUE or not strip else WriteBack.SIGNED
        ref = TextRef(tuple(sites), drop=drop, strip_keys=strip, remove_when_empty=empty, also_empty=also)
        return Part("reasoning", text, label="reasoning", ref=ref, write_back=mode)

    plain = [(text, fields) for text, fields in groups.items()]
    if not entries:
        return [part(text, [reader.site(i, f) for f in fields]) for text, fields in plain]
    if not plain:
        return [part(e.text, entry_sites(e), e) for e in entries]
    found = next(((g, hows) for g, (text, _) in enumerate(plain) if (hows := _match(text, entries)) is not None), None)
    if found is None:
        names = ", ".join(".".join(f) for _, fields in plain for f in fields)
        lists = ", ".join(n for n in STRUCTURED if n in msg) or ", ".join(f"{_COPIES}.{n}" for n in STRUCTURED if n in copies)
        reader.report(i, (), f"{names} and {lists} hold different text: neither is edited")
        return [Part("reasoning", text, label="reasoning", write_back=WriteBack.READ_ONLY) for text, _ in plain]
    parts: list[Part] = []
    for g, (text, fields) in enumerate(plain):
        if g != found[0]:
            parts.append(part(text, [reader.site(i, f) for f in fields]))
            continue
        for entry, how in zip(entries, found[1]):
            # the structured entry first: it is the copy clients send back (the primary site)
            sites = entry_sites(entry) + ([reader.site(i, f, how) for f in fields] if how else [])
            parts.append(part(entry.text, sites, entry))
    return parts


def _match(text: str, entries: list[_Entry]) -> list[str | None] | None:
    """How each entry's text sits in the plain field ``text`` (``whole``, ``unique``, or None
    for an empty entry), or None when the field is not the entries' text."""
    if len(entries) == 1:
        return ["whole"] if entries[0].text == text else None
    rest, pos, hows = text, 0, []
    for entry in entries:
        if not entry.text:
            hows.append(None)
            continue
        at = text.find(entry.text, pos)
        if at == -1 or text.count(entry.text) != 1:
            return None
        rest = rest.replace(entry.text, "", 1)
        pos = at + len(entry.text)
        hows.append("unique")
    return hows if not rest.strip() else None
