"""SWE-agent ``.traj`` files: ``{"trajectory": [...], "history": [...], "info": {...}}``.

``trajectory[i]`` is one model call: ``thought``, ``action``, ``observation``, ``response``
(the raw model output: thought text followed by the action, a fenced block in the text-based
variant), ``state``. ``history`` is the message list the model was sent: ``system``, ``user``
(the demonstration has ``is_demo``), and per step an ``assistant`` message (``content`` = the
response, ``thought``, ``action``, and ``tool_calls`` in the function-calling variant)
followed by the observation as a ``user`` or ``tool`` message.

Trajectory: one per file, id ``FILE#0``. Steps: one per ``trajectory`` entry (or, when that
list is empty, one per non-demo assistant message of ``history``). P: the ``history``
messages before the first assistant message.

Step i is paired with the next non-demo assistant ``history`` message whose ``thought``
equals ``trajectory[i].thought`` (or whose content starts with it); the observations of the
step are the history messages after it up to the next assistant message (what the model was
shown, templates included), or ``trajectory[i].observation`` when there is no pair.

Reasoning: ``thought`` only (METHOD.md), edited in place. The same text sits in up to four
places, and again in every later step's ``query`` (SWE-agent 1.x keeps the messages sent for
each step there); it is one part, scored once, and an edit is written into each place that
holds it: ``trajectory[i].thought`` and the paired history ``thought`` (whole strings), and
``trajectory[i].response`` and the history ``content`` (where the thought is their prefix, or
occurs exactly once; otherwise those strings are left as they are, and the write-back engine
refuses the file if one of them holds the edited text), and the same fields of the copies of
the paired message in each ``trajectory[j].query`` (found in order, as the history's). The
paired history message's own reasoning fields (``thinking_blocks`` of Anthropic models,
``reasoning_content``) are reasoning parts before the thought
(:mod:`iclr_cli.formats.chat_reasoning`), with their query copies as sites. A thought that
holds ``<think>`` elements is read as :mod:`iclr_cli.formats.thoughts` says, and an element
holding the text of ``reasoning_content`` is that field's part (counted once, edited in
both places).
"""

from __future__ import annotations

import re

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.chat_reasoning import message_reasoning
from iclr_cli.formats.reading import Where, base_name, field_name, parse_document, text_of, whole
from iclr_cli.formats.thoughts import thought_parts
from iclr_cli.formats.writeback import Site, WriteBackAdapter, join_think_copies, locate
from iclr_cli.trajectory import Part, Step, Trajectory

_SNIFF_TRAJ = re.compile(rb'"trajectory"\s*:\s*\[')
_SNIFF_HIST = re.compile(rb'"(history|thought|action|observation)"\s*:')


def _string(value, source: str, path: tuple, *, optional: bool = True) -> str:
    if value is None and optional:
        return ""
    if not isinstance(value, str):
        raise InputError(source, f"must be a string, not {type(value).__name__}", field=field_name(path))
    return value


def _content_holders(msg: dict, path: tuple, thought: str) -> list[tuple[Site, object]]:
    """Where ``msg``'s content holds ``thought``: ``(site, value)`` of that string, if any."""
    content = msg.get("content")
    if isinstance(content, str):
        how = locate(content, thought)
        return [(Site((0, *path, "content"), how), content)] if how else []
    if isinstance(content, list):
        for k, item in enumerate(content):
            if isinstance(item, dict):
                how = locate(item.get("text"), thought)
                if how:
                    return [(Site((0, *path, "content", k, "text"), how), item["text"])]
    return []


def _message_holders(msg: dict, path: tuple, thought: str) -> list[tuple[Site, object]]:
    """The strings of an assistant message (history, or a copy in a step's ``query``) that
    hold ``thought``: its ``thought`` when equal, and its content."""
    out: list[tuple[Site, object]] = [(Site((0, *path, "thought")), thought)] if "thought" in msg and msg.get("thought") == thought else []
    return out + _content_holders(msg, path, thought)


def _pairs(msg: object, thought: str) -> bool:
    """True when the assistant message ``msg`` is the one that holds step ``thought``."""
    return isinstance(msg, dict) and (msg.get("thought") == thought or bool(thought and text_of(msg.get("content")).startswith(thought)))


class _Queries:
    """The ``query`` of each trajectory entry (SWE-agent 1.x: the messages sent for that
    step, so every earlier assistant message again): each copy of a step's assistant message
    is found in order, as the history's is, and becomes a holder of its texts."""

    def __init__(self, traj: list) -> None:
        self.lists: list[tuple[int, list[tuple[int, dict]]]] = []
        for j, entry in enumerate(traj):
            query = entry.get("query") if isinstance(entry, dict) else None
            if isinstance(query, list):
                msgs = [(k, m) for k, m in enumerate(query) if isinstance(m, dict) and m.get("role") == "assistant" and not m.get("is_demo")]
                self.lists.append((j, msgs))
        self.cursor = [0] * len(self.lists)

    def copies(self, thought: str) -> list[tuple[tuple, dict]]:
        """``(path, message)`` of the next copy of the step's message in each query."""
        out = []
        for n, (j, msgs) in enumerate(self.lists):
            for c in range(self.cursor[n], len(msgs)):
                k, msg = msgs[c]
                if _pairs(msg, thought):
                    out.append((("trajectory", j, "query", k), msg))
                    self.cursor[n] = c + 1
                    break
        return out


class SweAgentAdapter(WriteBackAdapter):
    """SWE-agent ``.traj`` JSON (see module docstring)."""

    name = "swe-agent"
    description = "SWE-agent .traj (trajectory[] thought/action/observation, history[])"
    # Format data with text that no conversion carries (formats/convert/carried.py): the
    # environment ``state`` after each step, run ``info`` (submission, edited files),
    # ``replay_config`` (templates, tool docs), and ``history[i].action``, SWE-agent's parse of
    # the assistant message that history entry holds (the trajectory's action is read).
    not_carried = frozenset({("trajectory", "state"), ("info",), ("replay_config",), ("history", "action")})

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for an object with a ``trajectory`` list and ``history`` / step keys."""
        raw = Head.of(head).raw
        if raw.lstrip()[:1] == b"{" and _SNIFF_TRAJ.search(raw) is not None and _SNIFF_HIST.search(raw) is not None:
            return Match(MARKER, "a 'trajectory' list of thought/action/observation steps")
        return None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        doc = parse_document(data, source)
        if not isinstance(doc, dict):
            raise InputError(source, "a .traj file must hold one JSON object")
        traj = doc.get("trajectory", [])
        history = doc.get("history", [])
        if not isinstance(traj, list):
            raise InputError(source, "must be a list", field="trajectory")
        if not isinstance(history, list):
            raise InputError(source, "must be a list", field="history")
        for i, msg in enumerate(history):
            if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
                raise InputError(source, "history message must be an object with a string 'role'", field=f"history[{i}]")
        assistants = [i for i, m in enumerate(history) if m["role"] == "assistant" and not m.get("is_demo")]
        first = assistants[0] if assistants else len(history)
        prompt = [Part("prompt", text_of(m.get("content")), label=m["role"]) for m in history[:first]]
        where = Where(source)
        if traj:
            steps = self._steps_from_trajectory(traj, history, assistants, where)
        else:
            steps = [self._step_from_history(k, history, assistants, a, where) for k, a in enumerate(assistants)]
        trajectory = Trajectory(f"{base_name(source)}#0", tuple(prompt), tuple(steps), meta={"format": self.name})
        return Document(self.name, source, [trajectory], whole(data, doc), unrecognised=where.unrecognised)

    def _steps_from_trajectory(self, traj: list, history: list, assistants: list[int], where: Where) -> list[Step]:
        source = where.source
        steps = []
        cursor = 0  # position in ``assistants`` of the next unpaired history message
        queries = _Queries(traj)
        for i, entry in enumerate(traj):
            if not isinstance(entry, dict):
                raise InputError(source, "trajectory entry must be an object", field=f"trajectory[{i}]")
            thought = _string(entry.get("thought"), source, ("trajectory", i, "thought"))
            action = _string(entry.get("action"), source, ("trajectory", i, "action"))
            observation = entry.get("observation")
            holders: list[tuple[Site, object]] = [(Site((0, "trajectory", i, "thought")), thought)] if "thought" in entry else []
            how = locate(entry.get("response"), thought)
            if how:
                holders.append((Site((0, "trajectory", i, "response"), how), entry["response"]))
            paired = None
            for k in range(cursor, len(assistants)):
                if _pairs(history[assistants[k]], thought):
                    paired, cursor = assistants[k], k + 1
                    break
            if paired is not None:
                holders += _message_holders(history[paired], ("history", paired), thought)
            copies = queries.copies(thought)
            for path, msg in copies:
                holders += _message_holders(msg, path, thought)
            parts = [] if paired is None else _thinking(history[paired], paired, where, copies)
            parts = join_think_copies(parts + thought_parts(thought, holders)) if thought else parts
            response = entry.get("response")
            rest = response[len(thought) :] if isinstance(response, str) and response.startswith(thought) else None
            parts.extend(_actions(rest, action, history[paired] if paired is not None else {}))
            shown = []
            if paired is not None:
                nxt = next((a for a in assistants if a > paired), len(history))
                shown = [_observation(m) for m in history[paired + 1 : nxt]]
            if shown:
                parts.extend(shown)
            elif observation:  # unpaired, or the run ended before the history recorded it
                label = "tool_result" if any(p.label.startswith("tool_call:") for p in parts) else "user"
                parts.append(Part("observation", observation if isinstance(observation, str) else str(observation), label=label))
            steps.append(Step(i, tuple(parts)))
        return steps

    def _step_from_history(self, k: int, history: list, assistants: list[int], at: int, where: Where) -> Step:
        source = where.source
        msg = history[at]
        thought = _string(msg.get("thought"), source, ("history", at, "thought"))
        holders = [(Site((0, "history", at, "thought")), thought), *_content_holders(msg, ("history", at), thought)]
        parts = _thinking(msg, at, where)
        if thought:
            parts = join_think_copies(parts + thought_parts(thought, holders))
        content = text_of(msg.get("content"))
        rest = content[len(thought) :] if content.startswith(thought) else None
        parts.extend(_actions(rest, _string(msg.get("action"), source, ("history", at, "action")), msg))
        nxt = next((a for a in assistants if a > at), len(history))
        parts.extend(_observation(m) for m in history[at + 1 : nxt])
        return Step(k, tuple(parts))


def _thinking(msg: dict, at: int, where: Where, copies: list[tuple[tuple, dict]] = ()) -> list[Part]:  # type: ignore[assignment]
    """Reasoning the model returned beside its visible thought (``thinking_blocks`` of
    Anthropic models, ``reasoning_content``): history is what SWE-agent sends back. The
    same fields of the message's ``copies`` in later steps' ``query`` are sites too."""
    located = [((0, *path), m) for path, m in copies]
    return [d.part() for d in message_reasoning(msg, (0, "history", at), where, ("history", at), located)]


def _actions(rest: str | None, action: str, msg: dict) -> list[Part]:
    """The visible output of a step: the response after the thought (the fenced command of
    the text-based variant) and the tool calls of the function-calling variant; the parsed
    ``action`` string when neither exists."""
    parts = []
    if rest is not None and rest.strip():
        parts.append(Part("action", rest, label="assistant"))
    calls = msg.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            args = fn.get("arguments")
            parts.append(Part("action", args if isinstance(args, str) else str(args), label=f"tool_call:{fn.get('name', '?')}"))
    if not parts:
        parts.append(Part("action", action, label="assistant"))
    return parts


def _observation(msg: dict) -> Part:
    label = "tool_result" if msg["role"] == "tool" else msg["role"]
    return Part("observation", text_of(msg.get("content")), label=label)


ADAPTER = SweAgentAdapter()
