"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

One event per line, with a top-level ``type``: ``user``, ``assistant``, ``progress``,
``system``, ``summary``, ``file-history-snapshot``, ``queue-operation``, ``attachment``, and
session bookkeeping (``last-prompt``, ``mode``, ``permission-mode``, ``ai-title``,
``custom-title``), which current releases write before any turn: a file is recognised by its
structure, not its first line. Only ``user`` and ``assistant`` lines carry a ``message`` (Anthropic Messages shape, see
:mod:`iclr_cli.formats.adapters.anthropic`). Every other line passes through byte for byte.

One file is one trajectory, with id ``sessionId`` (of its first conversation line; fallback
``FILE#0``):
- A step is one assistant API message. Claude Code writes a message over several lines that
  share ``message.id``, one content block per line (thinking, text, tool_use, ...); lines are
  grouped by ``message.id`` in file order, whether or not they are consecutive (a tool result
  may be written between two tool_use lines of the same message). An assistant line with no
  ``message.id`` is a step of its own.
- Observations: user lines after the first assistant message (tool_result blocks, the user's
  later text, system reminders, the compaction summary), attached to the latest step.
- A prompt the user typed while the agent worked is written as an ``attachment`` line of type
  ``queued_command`` (no user line) and sent to the model as a user message: it is an
  observation (label ``queued_command``) of the latest step, or part of P before the first.
- P: user lines, and the ``content`` of ``system`` lines, before the first assistant message.
  ``system`` lines after it (local command echoes, ``compact_boundary`` markers) are
  transcript bookkeeping the model is not sent, so they are not parts.

Decisions (this project's own; the Claude Code format documents none of this):
- Sub-agents: lines with ``isSidechain: true`` are kept in the file untouched and are not
  steps of the main trajectory. When every conversation line of the file is a sidechain (a
  sub-agent transcript such as ``agent-*.jsonl``), the sidechain is the trajectory.
- Compaction: the ``isCompactSummary`` user line is an observation (label
  ``compact_summary``) and the trajectory goes on across it; ``summary`` lines and the
  ``compact_boundary`` system line pass through. The scorer may thus see pre-compaction
  history the agent no longer saw (subject to the scorer's own window).
- Write-back: only lines holding an edited thinking block are re-serialised, with
  :func:`~iclr_cli.jsonio.dumps_like` in the line's own style; every other line is
  byte-identical. Whose provider rule applies to a thinking block is told by its own
  message's ``model`` (a session may switch provider; :mod:`iclr_cli.formats.sealing`):
  Anthropic-signed thinking is left sealed unless ``--signed-thinking edit`` (then it loses
  its ``signature``, same rule as Anthropic); DeepSeek's and other plain-text providers'
  blocks are edited in place and keep their ``signature`` key, empty or not.
  A fully deleted thinking block is removed from its line's ``content`` only when the line
  holds other blocks; Claude Code lines hold one block each, so there it stays as
  ``{"type": "thinking", "thinking": ""}``: no line is ever dropped, because later lines
  point at it through ``parentUuid``. All of this goes through the one engine
  (:mod:`iclr_cli.formats.writeback`).
- A file with no user or assistant line (only bookkeeping) is an input error, never a
  silent empty result.
- Recorded usage (``iclr savings``): each step is one request, with the ``message.usage`` of
  its message (Claude Code repeats it on every line of the message; the last one counts) and
  its ``message.model``. Sidechain lines are a sub-agent's own requests and are not counted
  here; sub-agent transcripts in their own files (``<session>/subagents/agent-*.jsonl``)
  are counted with their session by ``iclr savings``.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import replace

from iclr_cli.formats.adapters.anthropic import assistant_parts, note_message_fields, user_parts
from iclr_cli.formats.base import Document
from iclr_cli.formats.adapters.qwen_code import gemini_content
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.reading import Where, base_name, read_lines
from iclr_cli.formats.usage import anthropic_usage
from iclr_cli.formats.writeback import Records, TextRef, WriteBackAdapter
from iclr_cli.jsonio import loads
from iclr_cli.jsonl import BAD_LINE
from iclr_cli.trajectory import Part, Request, Step, Trajectory, Usage

EVENT_TYPES = frozenset(
    {"user", "assistant", "progress", "system", "summary", "file-history-snapshot", "queue-operation", "result", "attachment"}
)
"""Top-level ``type`` values of Claude Code session lines that carry or frame the conversation."""

BOOKKEEPING_TYPES = frozenset(
    {"last-prompt", "mode", "permission-mode", "ai-title", "custom-title", "agent-name", "tag", "pr-link"}
)
"""Session-state lines current Claude Code writes before any turn (and again later). Known here
only so a file that opens with them is recognised; any other line type, known or not, is kept
byte for byte all the same."""

_CONVERSATION = ("user", "assistant")
_SESSION_KEYS = ("sessionId", "uuid", "parentUuid", "message", "messageId", "leafUuid")
# Leading bookkeeping can run to dozens of lines (a resumed session repeats its titles and
# modes); the sniff reads records until it meets a turn, within the 64 KiB head.
_SNIFF_RECORDS = 200
# A Claude Code ``message`` is an Anthropic message (``content``); one opening with ``role``
# and ``parts`` is a Gemini Content, as Qwen Code writes them.
_GEMINI_MESSAGE = re.compile(rb'"message"\s*:\s*\{\s*"role"\s*:\s*"(?:user|model)"\s*,\s*"parts"\s*:')


def _looks_like_turn(value: object) -> bool:
    """A user or assistant line in Claude Code's envelope: a ``message`` object beside the
    line's session keys."""
    return (
        isinstance(value, dict)
        and value.get("type") in _CONVERSATION
        and isinstance(value.get("message"), dict)
        and any(k in value for k in ("sessionId", "uuid", "parentUuid"))
    )


def _looks_like_record(value: object) -> bool:
    """Any line of a session: an object typed with a string, that is a known event or
    bookkeeping type or carries the session's id (a line type added by a later release), or a
    message in the session's envelope whose type is damaged (the loader reports it)."""
    if not isinstance(value, dict):
        return False
    if not isinstance(value.get("type"), str):
        return "sessionId" in value and isinstance(value.get("message"), dict)
    return value["type"] in EVENT_TYPES or value["type"] in BOOKKEEPING_TYPES or "sessionId" in value or "leafUuid" in value


class ClaudeCodeAdapter(WriteBackAdapter):
    """Claude Code session JSONL (see module docstring)."""

    name = "claude_code"
    description = "Claude Code session JSONL (~/.claude/projects/*/*.jsonl; sub-agent transcripts too)"
    # Format data with text that no conversion carries (``iclr convert``, formats/convert/carried.py):
    # ``toolUseResult`` is a structured copy of the tool result ``message.content`` holds,
    # ``data`` the payload of progress and hook events, ``content`` the notice of a ``system``
    # line (a hook's output shown in the UI).
    not_carried = frozenset({("toolUseResult",), ("data",), ("content",)})

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for a session judged by its structure, not its first line: the head's lines
        are Claude Code records (objects typed with a string: events, bookkeeping such as
        ``last-prompt`` or ``permission-mode``, or any type carrying ``sessionId``) and the
        first user or assistant line among them is in Claude Code's envelope (``message`` beside
        ``sessionId`` / ``uuid`` / ``parentUuid``); a head of bookkeeping alone matches when its
        lines carry the session keys. No ``message`` may be a Gemini ``Content`` (``parts``, no
        ``content``: a Qwen Code session, which the qwen_code adapter reads). A first line
        longer than the head is judged by its keys alone."""
        if self._looks(Head.of(head).raw):
            return Match(MARKER, "Claude Code session records (user/assistant lines with sessionId/uuid, bookkeeping before them)")
        return None

    @staticmethod
    def _looks(head: bytes) -> bool:
        parsed = []
        for raw in head.split(b"\n")[:-1] if b"\n" in head else []:
            if not raw.strip():
                continue
            try:
                parsed.append(loads(raw))
            except (ValueError, UnicodeDecodeError):
                return False
            if len(parsed) == _SNIFF_RECORDS or _looks_like_turn(parsed[-1]):
                break
        if not parsed:
            start = head.lstrip()
            return start[:1] == b"{" and b'"sessionId"' in head and b'"parentUuid"' in head and _GEMINI_MESSAGE.search(head) is None
        if any(isinstance(v, dict) and gemini_content(v.get("message")) for v in parsed):
            return False  # Qwen Code's records: the same envelope around a Gemini Content (formats/adapters/qwen_code.py)
        if not all(_looks_like_record(v) for v in parsed):
            return False
        if _looks_like_turn(parsed[-1]):
            return True
        # No turn in the head (a long run of bookkeeping, or a file cut short): the old rule,
        # an event line first and session keys somewhere.
        return parsed[0]["type"] in EVENT_TYPES | BOOKKEEPING_TYPES and any(any(k in v for k in _SESSION_KEYS) for v in parsed)

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        warnings: list[str] = []
        records = read_lines(data, source, skip_bad_lines=skip_bad_lines, warnings=warnings)
        conversation: list[int] = []  # indices of user/assistant lines with a message
        unrecognised: list = []
        for rec, line in enumerate(records.lines):  # type: ignore[arg-type]
            value = line.value
            if value is None or value is BAD_LINE:
                continue
            problem, field = _check(value)
            if problem:
                if not skip_bad_lines:
                    raise Where(source, rec, line.number).error(problem, field)
                warnings.append(f"{source}:{line.number}: passed through unscored: {problem}")
                records.values[rec] = BAD_LINE
                continue
            if value.get("type") in ("user", "assistant"):  # type: ignore[union-attr]
                conversation.append(rec)
            elif (role := _message_role(value)) is not None:
                # a conversation message under another type (or none): reported, never dropped unseen
                Where(source, rec, line.number, unrecognised=unrecognised).note(
                    "type", f"line holds {'an' if role == 'assistant' else 'a'} {role} message but its type is {value.get('type')!r}, not 'user' or 'assistant'")
        if not conversation:
            raise Where(source).error("read as a Claude Code session, but it holds no user or assistant message: nothing to score")
        trajectory = _trajectory(records, conversation, source, unrecognised)
        return Document(self.name, source, [trajectory], records, warnings, unrecognised=unrecognised)


def _message_role(value: dict) -> str | None:
    """The role of the conversation message a line carries (``message.role``: ``user`` or
    ``assistant``), else ``None``: bookkeeping and event lines carry none."""
    message = value.get("message")
    role = message.get("role") if isinstance(message, dict) else None
    return role if role in ("user", "assistant") else None


def _check(value: object) -> tuple[str | None, str | None]:
    """``(problem, field)`` for a line this adapter cannot read, else ``(None, None)``."""
    if not isinstance(value, dict):
        return "line is not a JSON object (expected one Claude Code event per line)", None
    if value.get("type") in ("user", "assistant"):
        message = value.get("message")
        if not isinstance(message, dict):
            return f"{value['type']} line has no 'message' object", "message"
        if "content" not in message:
            return "message has no 'content'", "message.content"
    return None, None


def _trajectory(records: Records, conversation: list[int], source: str, unrecognised: list) -> Trajectory:
    lines, values = records.lines, records.values
    main = [rec for rec in conversation if not values[rec].get("isSidechain")]
    members = set(main or conversation)  # a pure sub-agent transcript is its own trajectory
    sidechain = not main
    first_member = min(members)
    session = values[first_member].get("sessionId")
    traj_id = session if isinstance(session, str) and session else f"{base_name(source)}#0"

    prompt: list[Part] = []
    steps: list[list[Part]] = []
    step_of: dict[Hashable, int] = {}
    usage: dict[int, Usage] = {}
    models: dict[int, str] = {}
    model = None
    for rec, value in enumerate(values):
        if not isinstance(value, dict):
            continue
        where = Where(source, rec, lines[rec].number, unrecognised=unrecognised)  # type: ignore[index]
        kind = value.get("type")
        if kind == "system" and not steps and isinstance(value.get("content"), str) and bool(value.get("isSidechain")) == sidechain:
            prompt.append(Part("prompt", value["content"], label="system"))
            continue
        if kind == "attachment" and bool(value.get("isSidechain")) == sidechain and (queued := _queued_prompt(value)):
            # Claude Code sends a prompt typed while the agent works to the model as a user
            # message, though the file holds it only as this attachment.
            (steps[-1] if steps else prompt).append(Part("observation" if steps else "prompt", queued, label="queued_command"))
            continue
        if rec not in members:
            continue
        message = value["message"]
        if kind == "assistant":
            msg_id = message.get("id")
            key: Hashable = msg_id if isinstance(msg_id, str) else ("line", rec)
            if key not in step_of:
                step_of[key] = len(steps)
                steps.append([])
            model = model or message.get("model")
            if isinstance(message.get("model"), str):
                models[step_of[key]] = message["model"]  # a session can switch models (/model)
            if (reported := anthropic_usage(message.get("usage"), "message.usage")) is not None:
                usage[step_of[key]] = reported
            parts = assistant_parts(message["content"], where, ("message", "content"))
            steps[step_of[key]].extend(_by_model(parts, message.get("model")))
            note_message_fields(message, where, ("message",))
        else:
            label = "compact_summary" if value.get("isCompactSummary") else "user"
            part_kind = "observation" if steps else "prompt"
            parts = user_parts(message["content"], part_kind, where, ("message", "content"), label=label)
            (steps[-1] if steps else prompt).extend(parts)
    meta: dict[str, object] = {"format": "claude_code", "sidechain": sidechain}
    if isinstance(model, str):
        meta["model"] = model
    requests = tuple(Request(i, usage.get(i), models.get(i), "anthropic") for i in range(len(steps)))
    return Trajectory(traj_id, tuple(prompt), tuple(Step(i, tuple(p)) for i, p in enumerate(steps)), meta=meta, requests=requests)


def _queued_prompt(value: dict) -> str:
    """The text of a ``queued_command`` attachment (a prompt typed while the agent worked;
    ``prompt`` a string or a list of content blocks, whose text blocks are joined), ``""``
    for any other attachment."""
    attachment = value.get("attachment")
    if not isinstance(attachment, dict) or attachment.get("type") != "queued_command":
        return ""
    prompt = attachment.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        texts = [b["text"] for b in prompt if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
        return "\n\n".join(texts)
    return ""


def _by_model(parts: list[Part], model: object) -> list[Part]:
    """``parts`` with the message's model on their reasoning refs: a session may switch
    provider (``/model``, a bridge to DeepSeek's Anthropic endpoint), and whose rule applies
    to a thinking block is its own message's (:mod:`iclr_cli.formats.sealing`)."""
    if not isinstance(model, str) or not model:
        return parts
    return [replace(p, ref=replace(p.ref, model=model)) if isinstance(p.ref, TextRef) else p for p in parts]


ADAPTER = ClaudeCodeAdapter()
