"""OpenHands event streams: V0 (``action`` / ``observation`` events) and V1 (``kind`` events).

Input: a JSON list of events, or JSONL with one event per line. One trajectory per file,
id ``FILE#0``.

V0 (OpenHands <= 0.x, ``tests/runtime/trajs``): each event has ``source`` (``agent``,
``user``, ``environment``) and either ``action`` with ``args`` or ``observation`` with
``content``. Tool-driven events carry ``tool_call_metadata.model_response``, the raw
LiteLLM response; its ``id`` groups the events of one model call (parallel tool calls give
several action events, and each observation copies the metadata).

V1 (OpenHands software-agent-sdk): events have ``kind``: ``SystemPromptEvent``,
``MessageEvent`` (``llm_message``), ``ActionEvent`` (``thought`` text list,
``reasoning_content``, ``thinking_blocks``, ``tool_call``), ``ObservationEvent``,
``AgentErrorEvent``, ``UserRejectObservation``; other kinds are bookkeeping.

Steps (docs/FORMAT.md): a step is one model call: an agent action event (V0: ``source:
"agent"`` with an ``action`` other than ``system``; V1: ``ActionEvent``, or ``MessageEvent``
from the agent), the action events right after it from the same model response (parallel
tool calls: V0 ``model_response.id``, V1 ``llm_response_id``), and the observations and user
messages after them up to the next model call. P is every
system prompt and user message before the first step. State changes, ``null`` events and
``recall`` actions are not shown to the model and are not parts.

Reasoning (METHOD.md), one part per text, scored once:
- V0 ``args.thought``, V1 ``thought`` text: the agent's thought before its action. When it
  holds ``<think>...</think>``, the inside of each element is the reasoning and the rest is
  visible text (an action).
- the reasoning fields of the model's message (V0: ``model_response.choices[0].message``; V1:
  the event, or its ``llm_message``): ``reasoning_content``, ``thinking_blocks`` (signed: an
  edited block loses its ``signature``), ``responses_reasoning_item`` (opaque with
  ``encrypted_content``), read by :mod:`iclr_cli.formats.chat_reasoning`. When a ``<think>``
  element of the thought holds the same text (whitespace around it aside), or the thought is
  that text, it is the same reasoning: one part, and an edit is written into both. A thought
  that holds a reasoning field's text among other words cannot be split so: if the two are
  not written as one compression, the write-back engine refuses the file, naming both
  fields (docs/FORMAT.md, "One reasoning, counted once").
- The copies in the raw model response of every event of the same model call (V0) are
  edited with the part. ``think`` tool calls are actions: tool arguments are never edited.

Recorded usage (``iclr savings``, V0): each step is one model request; its usage is the
``llm_metrics.token_usages`` entry whose ``response_id`` is the step's model response id,
else that response's own ``usage`` (LiteLLM's chat-completions shape). V1 events carry no
usage: a V1 stream records none. The model of each request is its ``model_response.model``.
"""

from __future__ import annotations

import re
from collections import defaultdict

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.chat_reasoning import message_reasoning
from iclr_cli.formats.reading import Where, base_name, dig, document_error, field_name, read_lines, spread_document, text_of, try_document, whole
from iclr_cli.formats.think import outside_think, think_elements
from iclr_cli.formats.usage import count, openai_usage
from iclr_cli.formats.writeback import Draft, Site, TextRef, WriteBackAdapter, join_think_copies, locate
from iclr_cli.jsonl import BAD_LINE
from iclr_cli.trajectory import Part, Request, Step, Trajectory, Usage

_V1_KINDS = re.compile(rb'"kind"\s*:\s*"(ActionEvent|MessageEvent|ObservationEvent|SystemPromptEvent)"')
_V0_SOURCE = re.compile(rb'"source"\s*:\s*"(agent|user|environment)"')
_V0_EVENT = re.compile(rb'"(action|observation)"\s*:\s*"')
_SKIP_ACTIONS = {"change_agent_state", "null", "recall"}
_SKIP_OBSERVATIONS = {"agent_state_changed", "null"}
_V1_OBSERVATIONS = {"ObservationEvent", "AgentErrorEvent", "UserRejectObservation"}


def _think_sites(value, path: tuple, text: str) -> list[Site]:
    """``think:K`` sites of ``text`` inside the string ``value``."""
    if not isinstance(value, str) or "think>" not in value:
        return []
    return [Site(path, f"think:{k}") for k, el in enumerate(think_elements(value)) if el.inner(value) == text]


def _split_think(text: str) -> tuple[list[str], str]:
    """The reasoning of the ``<think>`` elements of ``text``, and the visible text around them."""
    elements = think_elements(text)
    return [el.inner(text) for el in elements], outside_think(text, elements)


class _Builder:
    """Collects P and the steps while walking the events."""

    def __init__(self) -> None:
        self.prompt: list[Part] = []
        self.steps: list[list[Part]] = []
        self.usage: dict[int, Usage] = {}
        self.models: dict[int, str] = {}
        self._call: object = None

    def step(self, parts: list[Part], call: object = None, usage: Usage | None = None, model: str | None = None) -> None:
        """Start a step, or continue the last one when ``call`` (the model response id)
        is the same: parallel tool calls of one model call are one step. ``usage`` is the
        model call's recorded usage, if the event carries it."""
        if not (call is not None and call == self._call and self.steps):
            self._call = call
            self.steps.append([])
        self.steps[-1].extend(parts)
        if usage is not None:
            self.usage.setdefault(len(self.steps) - 1, usage)
        if model:
            self.models.setdefault(len(self.steps) - 1, model)

    def requests(self) -> tuple[Request, ...]:
        """One request per step when any step recorded usage, else none (nothing known)."""
        if not self.usage:
            return ()
        return tuple(Request(i, self.usage.get(i), self.models.get(i)) for i in range(len(self.steps)))

    def seen(self, text: str, label: str) -> None:
        if self.steps:
            self.steps[-1].append(Part("observation", text, label=label))
        else:
            self.prompt.append(Part("prompt", text, label=label))


def _thought_parts(text: str, path: tuple, mirrors: list[tuple[tuple, object]], known: dict[str, Draft]) -> list[Part]:
    """Reasoning (and visible) parts of one thought string at ``path``.

    ``mirrors`` are ``(path, value)`` of strings that may hold a copy (raw model response
    content); ``known`` maps reasoning texts already read from the message's reasoning fields
    to their drafts, so a ``<think>`` copy of ``reasoning_content`` joins that part instead of
    making a new one.
    """
    if not text.strip():
        return []
    if not think_elements(text):
        twin = known.get(text) or known.get(text.strip())
        if twin is not None:  # the thought is the message's reasoning field again: one part
            twin.add(Site(path, "whole" if twin.text == text else "core"))
            for mpath, value in mirrors:
                how = locate(value, twin.text)
                if how:
                    twin.add(Site(mpath, how))
            return []
        sites = [Site(path)]
        for mpath, value in mirrors:
            how = locate(value, text)
            if how:
                sites.append(Site(mpath, how))
        return [Part("reasoning", text, label="reasoning", ref=TextRef(tuple(sites)))]
    inner, visible = _split_think(text)
    parts = []
    for k, segment in enumerate(inner):
        sites = [Site(path, f"think:{k}")] + [s for mpath, value in mirrors for s in _think_sites(value, mpath, segment)]
        if segment in known:
            for site in sites:
                known[segment].add(site)
        elif segment.strip():
            parts.append(Part("reasoning", segment, label="reasoning", ref=TextRef(tuple(sites))))
    if visible.strip():
        parts.append(Part("action", visible, label="assistant"))
    return parts


def _freeze(pending: list[Draft | Part]) -> list[Part]:
    """The finished parts: drafts become parts with their collected sites."""
    return [item.part() if isinstance(item, Draft) else item for item in pending]


class OpenHandsAdapter(WriteBackAdapter):
    """OpenHands V0 / V1 event streams (see module docstring)."""

    name = "openhands"
    description = "OpenHands event stream (V0 action/observation events, V1 kind events; JSON list or JSONL)"
    # Format data with text that no conversion carries (formats/convert/carried.py): each
    # event's ``message`` (the UI's one-line summary), and renderings of what an observation
    # or action holds (``extras.diff``, ``extras.formatted_output_and_error``,
    # ``extras.metadata``, ``args.translated_ipython_code``).
    not_carried = frozenset({("message",), ("extras", "diff"), ("extras", "formatted_output_and_error"),
                             ("extras", "metadata"), ("args", "translated_ipython_code")})

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for V1 ``kind`` events, or V0 events with ``source`` and ``action`` /
        ``observation``."""
        raw = Head.of(head).raw
        if raw.lstrip()[:1] not in (b"[", b"{"):
            return None
        if _V1_KINDS.search(raw) is not None or (_V0_SOURCE.search(raw) is not None and _V0_EVENT.search(raw) is not None):
            return Match(MARKER, "OpenHands events (source with action/observation, or kind)")
        return None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        warnings: list[str] = []
        doc = try_document(data)
        if isinstance(doc, list):
            records = whole(data, doc)
            events = [((0, i), e, None) for i, e in enumerate(doc)]
        elif doc is None and spread_document(data):
            raise document_error(data, source)
        else:
            records = read_lines(data, source, skip_bad_lines=skip_bad_lines, warnings=warnings)
            events = [((r,), line.value, line.number) for r, line in enumerate(records.lines) if line.value is not None and line.value is not BAD_LINE]
        if not events:
            raise InputError(source, "no events found")
        for path, event, line in events:
            if not isinstance(event, dict):
                raise InputError(source, "event must be a JSON object", line=line, field=field_name(path[1:]) or None)
            for key in ("kind",) if "kind" in event else ("action", "observation"):  # V1 actions are objects
                if key in event and not isinstance(event[key], str):
                    raise InputError(source, "must be a string", line=line, field=field_name((*path[1:], key)))
        v1 = any("kind" in e for _p, e, _l in events)
        build = _Builder()
        unrecognised: list = []
        (_walk_v1 if v1 else _walk_v0)(events, build, source, unrecognised)
        meta = {"format": self.name, "version": "v1" if v1 else "v0"}
        if build.models:  # the model the raw responses name (V0 model_response.model), for prices
            meta["model"] = next(iter(build.models.values()))
        steps = tuple(Step(i, tuple(p)) for i, p in enumerate(build.steps))
        trajectory = Trajectory(f"{base_name(source)}#0", tuple(build.prompt), steps, meta=meta, requests=build.requests())
        return Document(self.name, source, [trajectory], records, warnings, unrecognised=unrecognised)


def _walk_v0(events: list, build: _Builder, source: str, unrecognised: list) -> None:
    groups: dict[str, list[tuple]] = defaultdict(list)  # model response id -> event paths
    for path, event, _line in events:
        rid = dig(event, "tool_call_metadata", "model_response", "id")
        if isinstance(rid, str):
            groups[rid].append(path)
    by_path = {path: event for path, event, _l in events}
    reasoned: set[str] = set()
    agent_ids: set = set()
    for path, event, line in events:
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if "action" in event:
            kind = event["action"]
            if kind in _SKIP_ACTIONS:
                continue
            if kind == "system":
                build.prompt.append(Part("prompt", str(args.get("content", "")), label="system"))
            elif event.get("source") == "agent":
                if isinstance(event.get("id"), (int, str)):
                    agent_ids.add(event["id"])
                where = Where(source, path[0], line, unrecognised=unrecognised)
                rid = dig(event, "tool_call_metadata", "model_response", "id")
                rid = rid if isinstance(rid, str) else None
                model = dig(event, "tool_call_metadata", "model_response", "model")
                build.step(_v0_action(path, event, args, groups, by_path, reasoned, where), rid, _v0_usage(event, rid),
                           model if isinstance(model, str) else None)
            elif event.get("source") == "user" and kind == "message":
                build.seen(str(args.get("content", "")), "user")
            continue
        if "observation" in event and event["observation"] not in _SKIP_OBSERVATIONS:
            cause = event.get("cause")
            tool = "tool_call_metadata" in event or (isinstance(cause, (int, str)) and cause in agent_ids)
            content = event.get("content")
            build.seen(content if isinstance(content, str) else text_of(content), "tool_result" if tool else "user")


def _v0_action(path, event, args, groups, by_path, reasoned, where: Where) -> list[Part]:
    meta = event.get("tool_call_metadata") if isinstance(event.get("tool_call_metadata"), dict) else {}
    rid = dig(meta, "model_response", "id")
    rid = rid if isinstance(rid, str) else None
    mkey = ("tool_call_metadata", "model_response", "choices", 0, "message")
    # (event path, its copy of the model's message) for every event of the same model call
    msg_paths = [(p, m) for p in (groups[rid] if rid else [path]) if isinstance(m := dig(by_path[p], *mkey), dict)]
    pending: list = []
    known: dict[str, Draft] = {}
    message = dig(meta, *mkey[1:])
    if isinstance(message, dict) and (rid is None or rid not in reasoned):
        reasoned.add(rid)
        copies = [((*p, *mkey), m) for p, m in msg_paths if p != path]
        drafts = message_reasoning(message, (*path, *mkey), where, (*path[1:], *mkey), copies)
        pending.extend(drafts)
        known.update((d.text, d) for d in drafts)
    kind = event["action"]
    field = "content" if kind == "message" else "thought"
    thought = args.get(field)
    if thought is not None and not isinstance(thought, str):
        raise where.error("must be a string", (*path[1:], "args", field))
    if thought and kind != "think":
        mirrors = [((*p, *mkey, "content"), m.get("content")) for p, m in msg_paths]
        parts = _thought_parts(thought, (*path, "args", field), mirrors, known)
        if kind == "message" and not think_elements(thought):
            parts = [Part("action", thought, label="assistant")]  # a message is the visible answer
        pending.extend(parts)
    if kind != "message":
        pending.append(Part("action", _v0_call_text(meta, message, args), label=f"tool_call:{meta.get('function_name') or kind}"))
    return join_think_copies(_freeze(pending))


def _v0_usage(event: dict, rid: str | None) -> Usage | None:
    """The recorded usage of an agent event's model call (see the module docstring)."""
    entries = dig(event, "llm_metrics", "token_usages") if rid else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("response_id") == rid and count(entry.get("prompt_tokens")) is not None:
            return Usage(entry["prompt_tokens"], count(entry.get("completion_tokens")), count(entry.get("cache_read_tokens")),
                         count(entry.get("cache_write_tokens")), "llm_metrics")
    return openai_usage(dig(event, "tool_call_metadata", "model_response", "usage"), "model_response.usage")


def _v0_call_text(meta: dict, message, args: dict) -> str:
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict) and call.get("id") == meta.get("tool_call_id"):
            arguments = dig(call, "function", "arguments")
            if isinstance(arguments, str):
                return arguments
    return "\n".join(f"{k}: {v}" for k, v in args.items() if k != "thought")


def _walk_v1(events: list, build: _Builder, source: str, unrecognised: list) -> None:
    for path, event, line in events:
        kind = event.get("kind")
        where = Where(source, path[0], line, unrecognised=unrecognised)
        if kind == "SystemPromptEvent":
            prompt = event.get("system_prompt")
            build.prompt.append(Part("prompt", text_of([prompt]) if isinstance(prompt, dict) else str(prompt or ""), label="system"))
        elif kind == "MessageEvent" and event.get("source") != "agent":
            build.seen(text_of(dig(event, "llm_message", "content")), "user")
        elif kind == "MessageEvent":
            build.step(_v1_step(path, event, ("llm_message",), where))
        elif kind == "ActionEvent":
            rid = event.get("llm_response_id")
            build.step(_v1_step(path, event, (), where), rid if isinstance(rid, str) and rid else None)
        elif kind in _V1_OBSERVATIONS:
            obs = event.get("observation")
            text = text_of(obs.get("content")) if isinstance(obs, dict) else ""
            text = text or str(event.get("error") or event.get("rejection_reason") or "")
            build.seen(text, "tool_result")


def _v1_step(path: tuple, event: dict, at: tuple, where: Where) -> list[Part]:
    holder = dig(event, *at) if at else event
    if not isinstance(holder, dict):
        raise where.error("must be an object", (*path[1:], *at))
    base = (*path, *at)
    pending: list = message_reasoning(holder, base, where, base[1:])
    known: dict[str, Draft] = {d.text: d for d in pending}
    texts = holder.get("thought") if not at else holder.get("content")
    if isinstance(texts, str):
        texts = [{"text": texts}]
    for k, item in enumerate(texts if isinstance(texts, list) else []):
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            key = "thought" if not at else "content"
            item_path = (*base, key, k, "text") if isinstance(holder.get(key), list) else (*base, key)
            parts = _thought_parts(item["text"], item_path, [], known)
            if at and not think_elements(item["text"]):
                parts = [Part("action", item["text"], label="assistant")] if item["text"].strip() else []
            pending.extend(parts)
    if not at:
        call = event.get("tool_call") if isinstance(event.get("tool_call"), dict) else {}
        arguments = call.get("arguments")
        pending.append(Part("action", arguments if isinstance(arguments, str) else str(event.get("action", "")), label=f"tool_call:{event.get('tool_name') or call.get('name', '?')}"))
    return join_think_copies(_freeze(pending))


ADAPTER = OpenHandsAdapter()
