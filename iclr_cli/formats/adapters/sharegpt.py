"""ShareGPT conversations (``--format sharegpt``), as LLaMA-Factory and its datasets write them.

A record is ``{"conversations": [{"from": ROLE, "value": TEXT}, ...], "system": TEXT,
"tools": TEXT}`` (``system`` and ``tools`` optional; other keys such as ``id`` are kept and
not read); a file is a JSON list of records, one record, or JSONL with one record per line.
One record is one trajectory (id: the record's string ``id``, else ``FILE#INDEX``).
Reference: LLaMA-Factory ``data/README.md`` ("Sharegpt Format": ``human`` and
``observation`` turns at odd positions, ``gpt`` and ``function_call`` at even ones), the
ShareGPT / Vicuna convention (``human``, ``gpt``, ``system``) and its ``user`` / ``assistant``
spellings.

Roles:
- ``system`` turns and the record's ``system`` are P (label ``system``); ``tools`` is P too
  (label ``tools``, the text as written);
- ``human`` / ``user``: the user (P before the first step, an observation after);
- ``gpt`` / ``assistant``: one step. Its ``value`` may hold inline reasoning, read by the one
  markup reader of :mod:`iclr_cli.formats.markup` (``<think>...</think>``, as reasoning
  datasets in this format carry it; harmony channels): the reasoning is scored and edited
  in place inside the string, the rest is the answer;
- ``function_call``: one step whose action is the call (``{"name", "arguments"}`` JSON: label
  ``tool_call:NAME``, the arguments as JSON text; any other text as it is);
- ``observation`` / ``tool`` / ``function``: the tool's result (an observation).
A turn with another ``from`` is read as a message labelled with it and reported. Only
strings holding edited reasoning change on write-back: unedited records come back byte for
byte, edited ones keep every key they had (:mod:`iclr_cli.formats.writeback`).
"""

from __future__ import annotations

import json

from iclr_cli.formats import markup
from iclr_cli.formats.reading import Where, base_name, load_chunks
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.writeback import Site, TextRef, WriteBackAdapter
from iclr_cli.trajectory import Part, PartKind, Step, Trajectory

USER = frozenset({"human", "user"})
ASSISTANT = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing"})
CALL = "function_call"
RESULT = frozenset({"observation", "tool", "function"})
NOT_FOUND = "no ShareGPT conversation found (expected {'conversations': [{'from', 'value'}, ...]}, or a list of them)"


def _is_turns(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(t, dict) and "from" in t and "value" in t for t in value)


def _records(value: object) -> list[tuple[tuple, dict]] | None:
    """``(path, record)`` of each ShareGPT record in one JSON value, or None."""
    if isinstance(value, dict) and _is_turns(value.get("conversations")):
        return [((), value)]
    if isinstance(value, list) and value and all(isinstance(r, dict) and _is_turns(r.get("conversations")) for r in value):
        return [((k,), r) for k, r in enumerate(value)]
    return None


def _call(text: str) -> tuple[str, str]:
    """``(label, text)`` of a ``function_call`` value: ``tool_call:NAME`` and the arguments
    as JSON text when it is ``{"name", "arguments"}`` JSON, else the text as it is."""
    try:
        call = json.loads(text)
    except ValueError:
        return "tool_call:?", text
    if isinstance(call, dict) and isinstance(call.get("name"), str):
        args = call.get("arguments", call.get("parameters", {}))
        return f"tool_call:{call['name']}", args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return "tool_call:?", text


def _read_record(record: dict, path: tuple, where: Where, tid: str) -> Trajectory:
    prompt: list[Part] = []
    steps: list[list[Part]] = []

    def add(kind_after: PartKind, text: str, label: str) -> None:
        kind: PartKind = kind_after if steps else "prompt"
        (steps[-1] if steps else prompt).append(Part(kind, text, label=label))

    if record.get("system") is not None:
        if not isinstance(record["system"], str):
            raise where.error("must be a string", (*path, "system"))
        prompt.append(Part("prompt", record["system"], label="system"))
    if record.get("tools") is not None:
        tools = record["tools"]
        prompt.append(Part("prompt", tools if isinstance(tools, str) else json.dumps(tools, ensure_ascii=False), label="tools"))
    for i, turn in enumerate(record["conversations"]):
        at = (*path, "conversations", i)
        role, value = turn.get("from"), turn.get("value")
        if not isinstance(role, str):
            raise where.error("turn has no string 'from'", (*at, "from"))
        if not isinstance(value, str):
            raise where.error("must be a string", (*at, "value"))
        if role in ASSISTANT:
            parts = []
            for piece in markup.read(value):
                if piece.kind == "reasoning":
                    site = Site((where.rec, *at, "value"), piece.how or "whole")
                    parts.append(Part("reasoning", piece.text, label="reasoning", ref=TextRef((site,))))
                elif piece.kind == "unknown":
                    parts.append(Part("action", piece.text, label=f"channel:{piece.label}"))
                    where.note((*at, "value"), f"harmony channel {piece.label!r}: kept as an action, never scored or pruned")
                else:
                    parts.append(Part("action", piece.text, label="assistant" if piece.kind == "visible" else piece.label))
                    if piece.kind == "visible":
                        for note in markup.foreign_notes(piece.text):
                            where.note((*at, "value"), note)
            steps.append(parts)
        elif role == CALL:
            label, text = _call(value)
            steps.append([Part("action", text, label=label)])
        elif role == "system":
            add("observation", value, "system")
        elif role in USER:
            add("observation", value, "user")
        elif role in RESULT:
            add("observation", value, "tool_result")
        else:
            where.note((*at, "from"), f"ShareGPT role {role!r} is not one this format names; read as a message labelled {role!r}")
            add("observation", value, role)
    meta: dict[str, object] = {"format": "sharegpt"}
    return Trajectory(tid, tuple(prompt), tuple(Step(k, tuple(p)) for k, p in enumerate(steps)), meta=meta)


def _read(value: object, where: Where) -> list[Trajectory] | None:
    found = _records(value)
    if found is None:
        return None
    out = []
    for path, record in found:
        rid = record.get("id")
        tid = rid if isinstance(rid, str) and rid else f"{base_name(where.source)}#{where.first_index + len(out)}"
        out.append(_read_record(record, path, where, tid))
    return out


class ShareGPTAdapter(WriteBackAdapter):
    """ShareGPT conversations (see module docstring)."""

    name = "sharegpt"
    description = "ShareGPT / LLaMA-Factory conversations ({conversations: [{from, value}], system, tools}; JSON list or JSONL)"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match when a record in the head has ``conversations``: a list of turns with
        ``from`` and ``value`` (no other format writes that pair)."""
        for rec in Head.of(head).objects:
            turns = rec.get("conversations")
            if isinstance(turns, list) and turns and all(isinstance(t, dict) and "from" in t and "value" in t for t in turns[:4]):
                return Match(MARKER, "'conversations' turns with 'from' and 'value' (ShareGPT)")
        return None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False):
        return next(iter(self.load_chunks(data, source, skip_bad_lines=skip_bad_lines, chunk_size=None)))

    def load_chunks(self, data: bytes, source: str, *, skip_bad_lines: bool = False, chunk_size: int | None = 256):
        """Documents of at most ``chunk_size`` JSONL lines each (one for a JSON file), as the
        ``openai`` format reads them (:func:`iclr_cli.formats.reading.load_chunks`)."""
        return load_chunks(data, source, self.name, _read, not_found=NOT_FOUND, skip_bad_lines=skip_bad_lines, chunk_size=chunk_size)


ADAPTER = ShareGPTAdapter()
