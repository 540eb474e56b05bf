"""OpenAI Codex CLI rollout JSONL (``~/.codex/sessions/.../rollout-*.jsonl``).

Each line is ``{"timestamp", "type", "payload"}`` with ``type`` one of ``session_meta``,
``turn_context``, ``response_item``, ``event_msg`` (and ``compacted``). Only ``response_item``
payloads are what the model saw and wrote; ``event_msg`` lines are UI echoes.

Trajectory: one per file, id ``session_meta.payload.id`` (``FILE#0`` when absent).

P: ``session_meta.payload.instructions`` (when a string) and every user/developer/system
message before the first model item.

Steps (this project's definition, docs/FORMAT.md). Model items are ``reasoning``, the calls
(``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call``,
``tool_search_call``, ... : :data:`iclr_cli.formats.responses_items.MODEL_ITEMS`) and
``message`` with role ``assistant``; their outputs (``function_call_output``,
``tool_search_output``, ...: ``OUTPUT_ITEMS``) are observations. A step starts at a model item whose previous
``response_item`` was not a model item (an observation, a user message, or the start); the
model items that follow it without an observation in between belong to the same step (one
model turn: reasoning, text and parallel calls), and so do the observations
(``function_call_output``, ``custom_tool_call_output``, later user messages) up to the next
model item. ``turn_context`` and ``event_msg`` lines never start or end a step.

Reasoning (METHOD.md): each ``summary_text`` of a reasoning item's ``summary`` is one part;
where a provider returns raw reasoning (``reasoning_text`` entries of ``content``: Codex
``--oss``, local servers) each content entry is one part and the summary is a copy (same
text: a site of that part) or a summary of it (no block of its own; emptied when all of the
item's reasoning is deleted), so one reasoning counts its blocks once.
An item with a non-empty ``encrypted_content`` is :attr:`WriteBack.OPAQUE`: once edited it
cannot be replayed, so ``dump`` with ``OpaqueEdits.DROP`` removes the whole ``response_item``
line, and with ``KEEP`` leaves it untouched. Items without ``encrypted_content`` are edited in
place.

Inline ``<think>...</think>`` in an assistant message's text (models behind a chat-completions
provider that answer that way) is reasoning, paired as :mod:`iclr_cli.formats.think` says; the
rest of the text is the action.

Compaction: a ``compacted`` line (``payload.message``, the summary; ``payload.replacement_history``,
the items Codex re-sends from then on) does not end the trajectory. Its summary is an
observation labelled ``compact_summary``. A reasoning item in ``replacement_history`` follows the
same rules as a live one: when it equals a live item of the file (same summaries, content and
``encrypted_content``) it is that item's copy, so it is edited with it in place, or removed
from the list when the live item is dropped; otherwise its texts are reasoning parts of their
own (of the current step), opaque when encrypted, and an edit removes that list element under
``--encrypted-reasoning drop``. The other replacement items are copies of context already read.

Unrecognised (reported): response items of a type this adapter does not know, and assistant
message content parts without text (a ``refusal``, for example).

Recorded usage (``iclr savings``): each ``event_msg`` of type ``token_count`` with an ``info``
is one model request, counted from ``info.last_token_usage``, else (older CLIs log only the
running sum) from the difference of ``info.total_token_usage`` and the previous event's (the
first event's sum is its own request); an event whose ``info.total_token_usage`` equals the
previous one's is a repeat and is not counted. A request belongs to the step its answer
begins: the step in progress when the event comes after that step's model items with no
observation between (newer CLIs log the event after the answer), else the next step (older
CLIs log it before the answer's items). Every step is the answer of a model request, so a step
no event is counted for is one request with no usage (``iclr savings`` counts it from the last
recorded input plus the proxy count of the steps added since).

Echoes: Codex also logs each item as legacy events (codex-rs/protocol/src/items.rs,
``as_legacy_events``, persisted by codex-rs/core/src/rollout/policy.rs): one ``event_msg`` of
type ``agent_reasoning`` per summary text, one ``agent_reasoning_raw_content`` per raw content
entry (when raw reasoning is shown), one ``agent_message`` per assistant text. An echo is
matched to a part when its text equals the part's text (or adds only whitespace around it)
and it lies between the non-reasoning response items around the item (first unmatched echo
wins; each echo belongs to one part). It is the same text, so it is one block, scored once:
when the part is edited the echo is edited with it (in place), removed with the item
(``DROP``), or left with it (``KEEP``, and the default ``seal``). The ``agent_reasoning`` of a
summary that only summarises raw content is cleared with that summary and removed with the
item; the ``agent_message`` of a text holding ``<think>`` has its elements edited with the
parts. Every echo event in the window is watched by the write-back engine's copy check, so an
echo this reader could not match never keeps the text of an edited part: the file is refused
(exit 2) naming the echo and the item's field.
"""

from __future__ import annotations

import bisect
import json
import re

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.reading import Where, base_name, read_lines, text_of
from iclr_cli.formats.markup import foreign_notes
from iclr_cli.formats.responses_items import MODEL_ITEMS, OUTPUT_ITEMS, call_problem, call_text, item_output
from iclr_cli.formats.think import outside_think, think_elements
from iclr_cli.formats.usage import openai_usage
from iclr_cli.formats.writeback import Draft, Path, Site, WriteBackAdapter, freeze
from iclr_cli.jsonl import BAD_LINE
from iclr_cli.trajectory import Part, Request, Step, Trajectory, Usage, WriteBack

# The item taxonomy of the Responses API, shared with responses_items.py: newer Codex CLIs log
# tool_search_call / tool_search_output, shell_call, apply_patch_call... (an output that is
# not read as an observation would merge the steps around it).
_MODEL_ITEMS = MODEL_ITEMS
_OUTPUT_ITEMS = OUTPUT_ITEMS
_BOOKKEEPING = {"ghost_snapshot", "compaction", "compaction_summary", "other"}
"""Response items the model neither wrote as text nor saw as an observation."""
# Codex's legacy events for a turn item (codex-rs/protocol/src/items.rs, ``as_legacy_events``:
# one ``agent_reasoning`` per summary text, one ``agent_reasoning_raw_content`` per raw content
# entry when raw reasoning is shown, one ``agent_message`` per assistant text), persisted in
# the rollout (codex-rs/core/src/rollout/policy.rs): event type -> (what it echoes, text key).
_ECHOES = {"agent_reasoning": ("summary", "text"), "agent_reasoning_raw_content": ("content", "text"), "agent_message": ("message", "message")}
_SNIFF = re.compile(rb'"type"\s*:\s*"(session_meta|response_item|turn_context)"')


def _is_model_item(item: dict) -> bool:
    kind = item.get("type")
    return kind in _MODEL_ITEMS or (kind == "message" and item.get("role") == "assistant")


def _item(value) -> dict | None:
    if isinstance(value, dict) and value.get("type") == "response_item" and isinstance(value.get("payload"), dict):
        return value["payload"]
    return None


def _echo(value) -> tuple[str, str, str] | None:
    """``(what it echoes, text key, text)`` of an echo event (``_ECHOES``), else None."""
    if isinstance(value, dict) and value.get("type") == "event_msg" and isinstance(value.get("payload"), dict):
        payload = value["payload"]
        kind = payload.get("type")
        found = _ECHOES.get(kind) if isinstance(kind, str) else None
        if found and isinstance(payload.get(found[1]), str):
            return found[0], found[1], payload[found[1]]
    return None


def _identity(item: dict) -> str:
    """What makes two reasoning items the same item (a live one and its compaction copy)."""
    return json.dumps([item.get("summary"), item.get("content"), item.get("encrypted_content")], sort_keys=True)


class CodexAdapter(WriteBackAdapter):
    """Codex CLI rollout JSONL (see module docstring)."""

    name = "codex"
    description = "OpenAI Codex CLI rollout JSONL (session_meta, response_item, event_msg)"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for lines typed ``session_meta``, ``response_item`` or ``turn_context``."""
        raw = Head.of(head).raw
        if raw.lstrip()[:1] == b"{" and _SNIFF.search(raw) is not None:
            return Match(MARKER, "Codex rollout lines (session_meta, response_item)")
        return None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        warnings: list[str] = []
        records = read_lines(data, source, skip_bad_lines=skip_bad_lines, warnings=warnings)
        reader = _Reader(records.values, source)
        for rec, value in enumerate(records.values):
            reader.record(rec, value, records.lines[rec].number)  # type: ignore[index]
        if not reader.items and not reader.has_meta:
            raise InputError(source, "no session_meta or response_item line found: not a Codex rollout")
        traj_id = reader.traj_id or f"{base_name(source)}#0"
        steps = tuple(Step(i, freeze(p)) for i, p in enumerate(reader.steps))
        traj = Trajectory(traj_id, tuple(reader.prompt), steps, meta=reader.meta, requests=_every_step(reader.requests, len(steps)))
        if reader.sealed:
            warnings.append(f"{source}: {reader.sealed} reasoning items hold only encrypted_content (no summary text): nothing there to score or prune")
        return Document(self.name, source, [traj], records, warnings, unrecognised=reader.unrecognised)


def _difference(total: Usage | None, previous: object, earlier: bool) -> Usage | None:
    """One request's usage as the growth of the running sum ``total`` over the ``previous``
    event's ``total_token_usage`` (the sum itself when there is no earlier request); ``None``
    when either sum is unreadable or a count went down."""
    if total is None:
        return None
    if not earlier:
        return total
    before = openai_usage(previous, "token_count total_token_usage")
    if before is None or before.input_tokens is None:
        return None

    def minus(a: int | None, b: int | None) -> int | None:
        return None if a is None or b is None or a < b else a - b

    grown = minus(total.input_tokens, before.input_tokens)
    if grown is None:
        return None
    return Usage(grown, minus(total.output_tokens, before.output_tokens), minus(total.cache_read_tokens, before.cache_read_tokens),
                 minus(total.cache_write_tokens, before.cache_write_tokens), "token_count total_token_usage difference",
                 reasoning_tokens=minus(total.reasoning_tokens, before.reasoning_tokens))


def _every_step(requests: list[Request], steps: int) -> tuple[Request, ...]:
    """``requests`` (in step order) with one usage-less request for each step none answers."""
    answered = {r.step for r in requests}
    return tuple(sorted([*requests, *(Request(k) for k in range(steps) if k not in answered)], key=lambda r: r.step))


class _Reader:
    """Walks the lines of one rollout, building P and the steps (see module docstring)."""

    def __init__(self, values: list, source: str) -> None:
        self.source = source
        self.traj_id: str | None = None
        self.meta: dict[str, object] = {"format": "codex"}
        self.has_meta = False
        self.prompt: list[Part] = []
        self.steps: list[list[Draft | Part]] = []
        self.unrecognised: list = []
        self.echoes = _Echoes(values)
        self.items = [(rec, it) for rec, v in enumerate(values) if (it := _item(v)) is not None]
        # echoes of a reasoning item lie between the non-reasoning response items around it
        self.bounds = [rec for rec, it in self.items if it.get("type") != "reasoning"]
        self.live: dict[str, list[Draft]] = {}  # reasoning item identity -> its parts
        self.sealed = 0  # reasoning items with encrypted_content and no text
        self.prev_model = False
        self.requests: list[Request] = []
        self._last_total: object = None  # info.total_token_usage of the last token_count

    def record(self, rec: int, value: object, line: int) -> None:
        where = Where(self.source, rec, line, unrecognised=self.unrecognised)
        kind = value.get("type") if isinstance(value, dict) else None
        payload = value.get("payload") if isinstance(value, dict) else None
        if kind == "session_meta":
            if not isinstance(payload, dict):
                raise where.error("session_meta has no object 'payload'", "payload")
            self.has_meta = True
            if isinstance(payload.get("id"), str):
                self.traj_id = payload["id"]
            if isinstance(payload.get("instructions"), str) and payload["instructions"].strip():
                self.prompt.append(Part("prompt", payload["instructions"], label="system"))
        elif kind == "turn_context":
            if isinstance(payload, dict) and isinstance(payload.get("model"), str):
                self.meta.setdefault("model", payload["model"])
        elif kind == "compacted":
            if isinstance(payload, dict):
                self.compacted(payload, where)
        elif kind == "response_item":
            if not isinstance(payload, dict):
                raise where.error("response_item has no object 'payload'", "payload")
            self.response_item(payload, where)
        elif kind == "event_msg":
            if isinstance(payload, dict) and payload.get("type") == "token_count":
                self.token_count(payload.get("info"))
        elif not isinstance(kind, str):  # a record that says nothing of what it is: reported, not dropped unseen
            where.note("type", "record has no string 'type' (session_meta, turn_context, response_item, event_msg or compacted)")
        else:
            where.note("type", f"record of type {kind!r}, not one this adapter knows")

    def token_count(self, info: object) -> None:
        """One model request, unless a repeat of the last event (see the module docstring)."""
        if not isinstance(info, dict) or (self._last_total is not None and info.get("total_token_usage") == self._last_total):
            return
        total = info.get("total_token_usage")
        usage = openai_usage(info.get("last_token_usage"), "token_count")
        if usage is None:
            usage = _difference(openai_usage(total, "token_count total_token_usage"), self._last_total, bool(self.requests))
        self._last_total = total
        step = len(self.steps) - 1 if self.prev_model else len(self.steps)
        self.requests.append(Request(step, usage))

    def response_item(self, item: dict, where: Where) -> None:
        kind = item.get("type")
        if not isinstance(kind, str):
            raise where.error("response item has no string 'type'", "payload.type")
        if _is_model_item(item):
            if not self.prev_model:
                self.steps.append([])
            self.prev_model = True
            self.steps[-1].extend(self.model_parts(item, where))
            return
        if kind in _OUTPUT_ITEMS:
            self.observation(item_output(item), "tool_result")
        elif kind == "message":
            self.observation(text_of(item.get("content")), str(item.get("role", "user")))
        elif kind not in _BOOKKEEPING:
            where.note("payload", f"response item of type {kind!r} is not read by this adapter")

    def observation(self, text: str, label: str) -> None:
        self.prev_model = False
        if self.steps:
            self.steps[-1].append(Part("observation", text, label=label))
        else:
            self.prompt.append(Part("prompt", text, label=label))

    def model_parts(self, item: dict, where: Where) -> list[Draft | Part]:
        kind = item["type"]
        if kind == "reasoning":
            drafts = _reasoning(item, (where.rec, "payload"), (where.rec,), where, "payload")
            self.sealed += not drafts and bool(item.get("encrypted_content"))
            self.join_echoes(drafts, item, where.rec)
            self.live.setdefault(_identity(item), drafts)
            return drafts
        if kind == "message":
            parts = _assistant_message(item, where)
            self.join_message_echoes(parts, item, where.rec)
            return parts
        if (bad := call_problem(item)) is not None:
            raise where.error(bad[1], f"payload.{bad[0]}")
        label, text = call_text(item)
        return [Part("action", text, label=label)]

    def window(self, rec: int) -> tuple[float, float]:
        """The records strictly between the non-reasoning response items around ``rec``:
        where Codex logs the item's echoes (after the item in newer CLIs, before it, as the
        stream ran, in older ones)."""
        lo = bisect.bisect_left(self.bounds, rec)
        hi = bisect.bisect_right(self.bounds, rec)
        return (self.bounds[lo - 1] if lo else -1), (self.bounds[hi] if hi < len(self.bounds) else float("inf"))

    def join_echoes(self, drafts: list[Draft], item: dict, rec: int) -> None:
        """Each part's echo (``agent_reasoning`` of a summary, ``agent_reasoning_raw_content``
        of a content entry: the same text, whitespace around it aside, in the item's window)
        becomes a site; the echo of a summary that only summarises the content is cleared
        with that summary. The item's drop takes every echo with it, and every echo event in
        the window is watched, so an echo the reader could not match never keeps the text
        of an edited part (the file is refused instead)."""
        lo, hi = self.window(rec)
        hits = []
        for draft in drafts:
            for where in dict.fromkeys(site.path[2] for site in draft.sites if len(site.path) > 2 and site.path[0] == rec):  # summary, content
                hit = self.echoes.take(lo, hi, where, draft.text)
                if hit is not None:
                    draft.add(Site(*hit))
                    hits.append((hit[0][0],))
        summaries = dict.fromkeys(path for draft in drafts for path in draft.clear_with if path[0] == rec)
        for path in summaries:
            text = _text_at(item, path[2:])
            hit = self.echoes.take(lo, hi, "summary", text) if text is not None else None
            if hit is not None:
                for draft in drafts:
                    draft.clear_with.append(hit[0])
                hits.append((hit[0][0],))
        watched = self.echoes.between(lo, hi)
        for draft in drafts:
            draft.drop.extend(hits)
            draft.watch.extend(watched)

    def join_message_echoes(self, parts: list[Draft | Part], item: dict, rec: int) -> None:
        """The ``agent_message`` echo of each assistant text holding ``<think>`` (the same
        text, in the item's window): its elements are sites of the same parts."""
        drafts = [d for d in parts if isinstance(d, Draft)]
        if not drafts:
            return
        lo, hi = self.window(rec)
        texts: dict[tuple, str] = {}
        for draft in drafts:
            path = draft.sites[0].path
            if path not in texts:
                value = _text_at(item, path[2:])
                if value is not None:
                    texts[path] = value
        echoes = {path: self.echoes.take(lo, hi, "message", value, exact=True) for path, value in texts.items()}
        watched = self.echoes.between(lo, hi)
        for draft in drafts:
            hit = echoes.get(draft.sites[0].path)
            if hit is not None:
                draft.add(Site(hit[0], draft.sites[0].how))
            draft.watch.extend(watched)

    def compacted(self, payload: dict, where: Where) -> None:
        message = payload.get("message")
        if isinstance(message, str) and message.strip():
            self.observation(message, "compact_summary")
        history = payload.get("replacement_history")
        for j, item in enumerate(history if isinstance(history, list) else []):
            if not isinstance(item, dict) or item.get("type") != "reasoning":
                continue
            base: Path = (where.rec, "payload", "replacement_history", j)
            field = f"payload.replacement_history[{j}]"
            copy = _reasoning(item, base, base, where, field)
            live = self.live.get(_identity(item))
            if live is not None and len(live) == len(copy):
                for mine, theirs in zip(live, copy):
                    mine.add(theirs.sites[0])
                    mine.drop.append(base)
                continue
            if not copy:
                continue
            self.live[_identity(item)] = copy  # a later compaction may copy it again
            if not self.steps:
                self.steps.append([])
            self.steps[-1].extend(copy)


def _reasoning(item: dict, base: Path, drop: Path, where: Where, field: str) -> list[Draft]:
    """The summary and content texts of one reasoning item at records path ``base``: opaque
    when the item carries ``encrypted_content`` (an edit then drops ``drop``, the whole item:
    its line, or its element of a replacement history)."""
    opaque = isinstance(item.get("encrypted_content"), str) and bool(item["encrypted_content"])
    mode = WriteBack.OPAQUE if opaque else WriteBack.IN_PLACE
    texts: dict[str, list[tuple[int, str]]] = {}
    for key in ("summary", "content"):
        entries = item.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise where.error("must be a list or null", f"{field}.{key}")
        texts[key] = [(j, e["text"]) for j, e in enumerate(entries) if isinstance(e, dict) and isinstance(e.get("text"), str)]
    if not texts.get("content"):  # summaries only (OpenAI's items): they are the reasoning read
        return [Draft(text, [Site((*base, "summary", j, "text"))], write_back=mode, drop=[drop]) for j, text in texts.get("summary", [])]
    # Raw reasoning (content) with a summary (Codex --oss, local servers): one reasoning, counted
    # once (responses_items.py): a summary entry with the same text is that part's copy, one
    # with other text a summary of it, emptied when all of it is deleted.
    drafts = [Draft(text, [Site((*base, "content", j, "text"))], write_back=mode, drop=[drop]) for j, text in texts["content"]]
    summaries = []
    for j, text in texts.get("summary", []):
        twin = next((d for d in drafts if d.text == text and len(d.sites) == 1), None)
        if twin is not None:
            twin.add(Site((*base, "summary", j, "text")))
        else:
            summaries.append((*base, "summary", j, "text"))
    for draft in drafts:
        draft.clear_with.extend(summaries)
    return drafts


def _assistant_message(item: dict, where: Where) -> list[Draft | Part]:
    """An assistant message: its text is the action, except inline ``<think>`` elements,
    which are reasoning; parts without text are noted."""
    content = item.get("content")
    if isinstance(content, str):
        content = [{"text": content}]
        paths = [(where.rec, "payload", "content")]
    else:
        content = content if isinstance(content, list) else []
        paths = [(where.rec, "payload", "content", i, "text") for i in range(len(content))]
    out: list[Draft | Part] = []
    visible = []
    for i, part in enumerate(content):
        text = part.get("text") if isinstance(part, dict) else None
        if not isinstance(text, str):
            if part not in (None, {}):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                where.note(f"payload.content[{i}]", f"assistant content part of type {kind!r} has no text: not read")
            continue
        elements = think_elements(text)
        for k, el in enumerate(elements):
            if el.inner(text).strip():
                out.append(Draft(el.inner(text), [Site(paths[i], f"think:{k}")]))
        visible.append(outside_think(text, elements) if elements else text)
        for note in foreign_notes(visible[-1]):
            where.note(paths[i][1:], note)
    out.append(Part("action", "\n".join(visible), label="assistant"))
    return out


class _Echoes:
    """The echo events of a file (``_ECHOES``), each matched to at most one part."""

    def __init__(self, values: list) -> None:
        self.text: dict[int, tuple[str, str, str]] = {}
        for rec, value in enumerate(values):
            echo = _echo(value) if value is not BAD_LINE else None
            if echo is not None:
                self.text[rec] = echo
        self.recs = sorted(self.text)
        self.used: set[int] = set()

    def between(self, lo: float, hi: float) -> list[int]:
        """Every echo record strictly between records ``lo`` and ``hi``."""
        return self.recs[bisect.bisect_right(self.recs, lo) : bisect.bisect_left(self.recs, hi)]

    def take(self, lo: float, hi: float, where: str, text: str, *, exact: bool = False) -> tuple[tuple, str] | None:
        """``(path, site kind)`` of the first unused echo strictly between records ``lo``
        and ``hi`` echoing ``where`` with this text: ``whole``, or (unless ``exact``) ``core``
        when the echo adds whitespace around it."""
        for how in ("whole",) if exact else ("whole", "core"):
            for rec in self.between(lo, hi):
                kind, key, said = self.text[rec]
                if rec not in self.used and kind == where and (said == text if how == "whole" else said.strip() == text != ""):
                    self.used.add(rec)
                    return (rec, "payload", key), how
        return None


def _text_at(item: dict, path: tuple) -> str | None:
    """The string at ``path`` inside a response item's payload, or None."""
    value: object = item
    for key in path:
        try:
            value = value[key]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            return None
    return value if isinstance(value, str) else None


ADAPTER = CodexAdapter()
