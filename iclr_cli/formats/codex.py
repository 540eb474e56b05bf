"""OpenAI Codex CLI rollout JSONL (``~/.codex/sessions/.../rollout-*.jsonl``).

Each line is ``{"timestamp", "type", "payload"}`` with ``type`` one of ``session_meta``,
``turn_context``, ``response_item``, ``event_msg`` (and ``compacted``). Only ``response_item``
payloads are what the model saw and wrote; ``event_msg`` lines are UI echoes.

Trajectory: one per file, id ``session_meta.payload.id`` (``FILE#0`` when absent).

P: ``session_meta.payload.instructions`` (when a string) and every user/developer/system
message before the first model item.

Steps (this project's definition, docs/FORMAT.md). Model items are ``reasoning``,
``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call`` and
``message`` with role ``assistant``. A step starts at a model item whose previous
``response_item`` was not a model item (an observation, a user message, or the start); the
model items that follow it without an observation in between belong to the same step (one
model turn: reasoning, text and parallel calls), and so do the observations
(``function_call_output``, ``custom_tool_call_output``, later user messages) up to the next
model item. ``turn_context`` and ``event_msg`` lines never start or end a step.

Reasoning (METHOD.md): each ``summary_text`` of a reasoning item's ``summary`` (and each
``reasoning_text`` of its ``content``, where a provider returns raw reasoning) is one part.
An item with a non-empty ``encrypted_content`` is :attr:`WriteBack.OPAQUE`: once edited it
cannot be replayed, so ``dump`` with ``OpaqueEdits.DROP`` removes the whole ``response_item``
line, and with ``KEEP`` leaves it untouched. Items without ``encrypted_content`` are edited in
place.

Echoes: Codex also logs each summary as an ``event_msg`` of type ``agent_reasoning`` (raw
content as ``agent_reasoning_raw_content``). An echo is matched to a part when its ``text``
equals the part's text and it lies between the non-reasoning response items around the
reasoning item (first unmatched echo wins; each echo belongs to one part). It is the same text, so it is one block, scored once; when the
part is edited the echo is edited with it (in place), removed with the item (``DROP``), or left
with it (``KEEP``).
"""

from __future__ import annotations

import bisect
import re

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document
from iclr_cli.formats.reading import base_name, read_lines, text_of
from iclr_cli.formats.writeback import Site, TextRef, WriteBackAdapter
from iclr_cli.jsonio import BAD_LINE
from iclr_cli.trajectory import Part, Step, Trajectory, WriteBack

_MODEL_ITEMS = {"reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
_OUTPUT_ITEMS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
_ECHOES = {"agent_reasoning": "summary", "agent_reasoning_raw_content": "content"}
_SNIFF = re.compile(rb'"type"\s*:\s*"(session_meta|response_item|turn_context)"')


def _is_model_item(item: dict) -> bool:
    kind = item.get("type")
    return kind in _MODEL_ITEMS or (kind == "message" and item.get("role") == "assistant")


def _item(value) -> dict | None:
    if isinstance(value, dict) and value.get("type") == "response_item" and isinstance(value.get("payload"), dict):
        return value["payload"]
    return None


def _echo(value) -> tuple[str, str] | None:
    """``(where, text)`` of an ``agent_reasoning`` style event, else None."""
    if isinstance(value, dict) and value.get("type") == "event_msg" and isinstance(value.get("payload"), dict):
        payload = value["payload"]
        kind = payload.get("type")
        where = _ECHOES.get(kind) if isinstance(kind, str) else None
        if where and isinstance(payload.get("text"), str):
            return where, payload["text"]
    return None


def _call_text(item: dict) -> tuple[str, str]:
    kind = item.get("type")
    if kind == "function_call":
        return f"tool_call:{item.get('name', '?')}", str(item.get("arguments", ""))
    if kind == "custom_tool_call":
        return f"tool_call:{item.get('name', '?')}", str(item.get("input", ""))
    if kind == "local_shell_call":
        return "tool_call:local_shell", str(item.get("action", ""))
    return f"tool_call:{kind}", str(item.get("action", ""))


def _output_text(output) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return output["content"]
    return text_of(output)


class CodexAdapter(WriteBackAdapter):
    """Codex CLI rollout JSONL (see module docstring)."""

    name = "codex"
    description = "OpenAI Codex CLI rollout JSONL (session_meta, response_item, event_msg)"

    def sniff(self, head: bytes) -> bool:
        return head.lstrip()[:1] == b"{" and _SNIFF.search(head) is not None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        warnings: list[str] = []
        records = read_lines(data, source, skip_bad_lines=skip_bad_lines, warnings=warnings)
        lines, values = records.lines, records.values
        traj_id, meta = f"{base_name(source)}#0", {"format": self.name}
        prompt: list[Part] = []
        steps: list[list[Part]] = []
        echoes = _Echoes(values)
        items = [(rec, _item(v)) for rec, v in enumerate(values)]
        items = [(rec, it) for rec, it in items if it is not None]
        # echoes of a reasoning item lie between the non-reasoning response items around it
        bounds = [rec for rec, it in items if it.get("type") != "reasoning"]
        prev_model = False
        for rec, value in enumerate(values):
            line = lines[rec].number
            if isinstance(value, dict) and value.get("type") == "session_meta":
                payload = value.get("payload")
                if not isinstance(payload, dict):
                    raise InputError(source, "session_meta has no object 'payload'", line=line, field="payload")
                if isinstance(payload.get("id"), str):
                    traj_id = payload["id"]
                if isinstance(payload.get("instructions"), str) and payload["instructions"].strip():
                    prompt.append(Part("prompt", payload["instructions"], label="system"))
            elif isinstance(value, dict) and value.get("type") == "turn_context":
                payload = value.get("payload")
                if isinstance(payload, dict) and isinstance(payload.get("model"), str):
                    meta.setdefault("model", payload["model"])
            item = _item(value)
            if item is None:
                if isinstance(value, dict) and value.get("type") == "response_item":
                    raise InputError(source, "response_item has no object 'payload'", line=line, field="payload")
                continue
            kind = item.get("type")
            if not isinstance(kind, str):
                raise InputError(source, "response item has no string 'type'", line=line, field="payload.type")
            if _is_model_item(item):
                if not prev_model:
                    steps.append([])
                prev_model = True
                steps[-1].extend(_model_parts(item, rec, line, source, bounds, echoes))
                continue
            if kind in _OUTPUT_ITEMS:
                part_label, text = "tool_result", _output_text(item.get("output"))
            elif kind == "message":
                part_label, text = str(item.get("role", "user")), text_of(item.get("content"))
            else:
                continue  # ghost snapshots and other bookkeeping items: no observation, no boundary
            prev_model = False
            if steps:
                steps[-1].append(Part("observation", text, label=part_label))
            else:
                prompt.append(Part("prompt", text, label=part_label))
        if not items and not any(isinstance(v, dict) and v.get("type") == "session_meta" for v in values):
            raise InputError(source, "no session_meta or response_item line found: not a Codex rollout")
        traj = Trajectory(traj_id, tuple(prompt), tuple(Step(i, tuple(p)) for i, p in enumerate(steps)), meta=meta)
        return Document(self.name, source, [traj], records, warnings)


class _Echoes:
    """The ``agent_reasoning`` echo lines of a file, each matched to at most one part."""

    def __init__(self, values: list) -> None:
        self.text: dict[int, tuple[str, str]] = {}
        for rec, value in enumerate(values):
            echo = _echo(value) if value is not BAD_LINE else None
            if echo is not None:
                self.text[rec] = echo
        self.recs = sorted(self.text)
        self.used: set[int] = set()

    def take(self, lo: float, hi: float, where: str, text: str) -> int | None:
        """The first unused echo strictly between records ``lo`` and ``hi`` with this text."""
        for rec in self.recs[bisect.bisect_right(self.recs, lo) : bisect.bisect_left(self.recs, hi)]:
            if rec not in self.used and self.text[rec] == (where, text):
                self.used.add(rec)
                return rec
        return None


def _model_parts(item: dict, rec: int, line: int, source: str, bounds: list[int], echoes: _Echoes) -> list[Part]:
    kind = item["type"]
    if kind == "reasoning":
        return _reasoning_parts(item, rec, line, source, bounds, echoes)
    if kind == "message":
        return [Part("action", text_of(item.get("content")), label="assistant")]
    label, text = _call_text(item)
    return [Part("action", text, label=label)]


def _reasoning_parts(item: dict, rec: int, line: int, source: str, bounds: list[int], echoes: _Echoes) -> list[Part]:
    opaque = isinstance(item.get("encrypted_content"), str) and bool(item["encrypted_content"])
    at = bisect.bisect_left(bounds, rec)
    lo = bounds[at - 1] if at else -1
    hi = bounds[at] if at < len(bounds) else float("inf")
    found: list[tuple[str, int, str]] = []
    for where in ("summary", "content"):
        entries = item.get(where)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise InputError(source, "must be a list or null", line=line, field=f"payload.{where}")
        for j, entry in enumerate(entries):
            if isinstance(entry, dict) and isinstance(entry.get("text"), str):
                found.append((where, j, entry["text"]))
    matched: list[list[int]] = []
    for where, _j, text in found:
        hit = echoes.take(lo, hi, where, text)
        matched.append([] if hit is None else [hit])
    all_echoes = tuple(r for m in matched for r in m)
    parts = []
    for (where, j, text), hits in zip(found, matched):
        sites = (Site((rec, "payload", where, j, "text")),) + tuple(Site((r, "payload", "text")) for r in hits)
        ref = TextRef(sites, drop=((rec,), *((r,) for r in all_echoes)))
        write = WriteBack.OPAQUE if opaque else WriteBack.IN_PLACE
        parts.append(Part("reasoning", text, label="reasoning", ref=ref, write_back=write))
    return parts


ADAPTER = CodexAdapter()
