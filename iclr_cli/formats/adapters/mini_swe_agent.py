"""mini-swe-agent trajectories (``*.traj.json``), both layouts.

- v1: a JSON list of ``{"role", "content"}`` messages (or ``{"messages": [...], "info"}``),
  where every assistant message is free text: a THOUGHT, then one fenced command block
  (```` ```bash ```` or ```` ```mswea_bash_command ````); observations come back as user messages.
- v2 (``"trajectory_format": "mini-swe-agent-1.1"``): ``messages`` in OpenAI chat form with
  ``tool_calls``, ``role: "tool"`` results, a final ``role: "exit"`` message, and the raw
  litellm response of each call under ``extra.response``.

Trajectory: one per file, id ``instance_id`` (v2) or ``FILE#0``. P: the messages before the
first assistant message. Step: one assistant message and the messages after it up to the next
one (tool results, format-error user messages, the exit message).

Reasoning (METHOD.md), all edited in place:
- the message's reasoning fields (``reasoning_content``, ``reasoning``, ``thinking``,
  ``thinking_blocks``), read by :mod:`iclr_cli.formats.chat_reasoning` (one part per distinct
  text; ``reasoning_details`` is reported as unrecognised and leaves them unread);
- in the text of ``content``: the text before the command block (the first fenced block
  opened as ```` ```bash ```` or ```` ```mswea_bash_command ````, else the first fenced block of
  any kind): the THOUGHT. The block and what follows is the action. When the message has
  ``tool_calls``, the whole text is the reasoning that went with the calls. A message with
  neither a block nor calls (a format error) is an action: it is visible output, not reasoning.
- v2 keeps a copy of each message in ``extra.response.choices[0].message``; the copy of a
  reasoning text (same field, same text or the same prefix) is edited with it.
- a THOUGHT holding ``<think>`` elements (a model that writes its reasoning inline) is read
  as :mod:`iclr_cli.formats.thoughts` says: each element's reasoning and each stretch of
  visible words is a part; an element holding the text of a reasoning field
  (``reasoning_content`` from llama.cpp's ``deepseek-legacy`` format) is that field's part,
  scored once and edited in both places (docs/FORMAT.md, "One reasoning, counted once").

Unrecognised (reported): harmony channel markup in ``content``, text in a second content part.

Recorded usage (``iclr savings``, v2): each assistant message is one request, with the
``usage`` of its ``extra.response``.

The real v2 sample (gpt-5-mini through litellm) has ``content: null`` on every assistant
message and its reasoning is hidden (only ``reasoning_tokens`` counts): 0 reasoning blocks
is the right answer there.
"""

from __future__ import annotations

import re

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.chat_reasoning import message_reasoning
from iclr_cli.formats.reading import Where, base_name, dig, field_name, parse_document, text_of, whole
from iclr_cli.formats.usage import openai_usage
from iclr_cli.formats.thoughts import thought_parts
from iclr_cli.formats.writeback import Site, WriteBackAdapter, join_think_copies, locate
from iclr_cli.trajectory import Part, Request, Step, Trajectory

_COMMAND_FENCE = re.compile(r"^```(?:bash|mswea_bash_command)[ \t]*$", re.MULTILINE)
_ANY_FENCE = re.compile(r"^```", re.MULTILINE)
_FORMAT = re.compile(rb'"trajectory_format"\s*:\s*"mini-swe-agent')
_MARKERS = (b"mswea_bash_command", b"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", b"MINI_SWE_AGENT_FINAL_OUTPUT")


def thought_end(text: str) -> int | None:
    """Offset where the command block of a v1 assistant message starts, or None."""
    m = _COMMAND_FENCE.search(text) or _ANY_FENCE.search(text)
    return m.start() if m else None


class MiniSweAgentAdapter(WriteBackAdapter):
    """mini-swe-agent v1 and v2 trajectories (see module docstring)."""

    name = "mini-swe-agent"
    description = "mini-swe-agent .traj.json (v1 message list with fenced bash; v2 mini-swe-agent-1.1 tool calls)"
    # Format data with text that no conversion carries (formats/convert/carried.py): run
    # ``info`` (configuration and its templates, exit status).
    not_carried = frozenset({("info",)})

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for ``trajectory_format: mini-swe-agent-*``, or a message list holding its
        prompt markers (``mswea_bash_command``, ...)."""
        raw = Head.of(head).raw
        if _FORMAT.search(raw):
            return Match(MARKER, "'trajectory_format': 'mini-swe-agent-1.1'")
        if raw.lstrip()[:1] in (b"[", b"{") and b'"role"' in raw and any(m in raw for m in _MARKERS):
            return Match(MARKER, "mini-swe-agent prompt markers (mswea_bash_command) in a message list")
        return None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        doc = parse_document(data, source)
        if isinstance(doc, list):
            messages, root = doc, ()
        elif isinstance(doc, dict) and isinstance(doc.get("messages"), list):
            messages, root = doc["messages"], ("messages",)
        else:
            raise InputError(source, "expected a list of messages or an object with a 'messages' list")
        prompt: list[Part] = []
        steps: list[list[Part]] = []
        hidden = 0  # assistant messages whose reasoning the provider kept back
        requests: list[Request] = []
        where = Where(source)
        for i, msg in enumerate(messages):
            path = (*root, i)
            if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
                raise InputError(source, "message must be an object with a string 'role'", field=field_name(path))
            role = msg["role"]
            if role == "assistant":
                requests.append(Request(len(steps), openai_usage(dig(msg, "extra", "response", "usage"), "extra.response.usage")))
                steps.append(_assistant_parts(msg, path, where))
                tokens = dig(msg, "extra", "response", "usage", "completion_tokens_details", "reasoning_tokens")
                hidden += isinstance(tokens, int) and tokens > 0 and not any(p.kind == "reasoning" for p in steps[-1])
                continue
            content = msg.get("content")
            if content is not None and not isinstance(content, (str, list)):  # as for assistant messages: never read as empty
                raise where.error("must be a string, a list of parts or null", (*path, "content"))
            label = "tool_result" if role == "tool" else role
            if steps:
                steps[-1].append(Part("observation", text_of(msg.get("content")), label=label))
            else:
                prompt.append(Part("prompt", text_of(msg.get("content")), label=label))
        traj_id = doc["instance_id"] if isinstance(doc, dict) and isinstance(doc.get("instance_id"), str) else f"{base_name(source)}#0"
        meta: dict[str, object] = {"format": self.name}
        if isinstance(doc, dict) and isinstance(doc.get("trajectory_format"), str):
            meta["trajectory_format"] = doc["trajectory_format"]
        model = _model_name(doc)
        if model:
            meta["model"] = model
        recorded = tuple(requests) if any(r.usage for r in requests) else ()
        traj = Trajectory(traj_id, tuple(prompt), tuple(Step(i, tuple(p)) for i, p in enumerate(steps)), meta=meta, requests=recorded)
        warnings = [f"{source}: {hidden} assistant messages report reasoning_tokens but hold no reasoning text (the provider hid it): nothing there to score or prune"] if hidden else []
        return Document(self.name, source, [traj], whole(data, doc), warnings, unrecognised=where.unrecognised)


def _model_name(doc) -> str | None:
    name = dig(doc, "info", "config", "model", "model_name")
    return name if isinstance(name, str) else None


def _raw_message(msg: dict, path: tuple) -> tuple[dict, tuple] | None:
    """The copy of ``msg`` inside ``extra.response`` (v2), with its path, if there is one."""
    raw = dig(msg, "extra", "response", "choices", 0, "message")
    return (raw, (*path, "extra", "response", "choices", 0, "message")) if isinstance(raw, dict) else None


def _assistant_parts(msg: dict, path: tuple, where: Where) -> list[Part]:
    raw = _raw_message(msg, path)
    copies = [((0, *raw[1]), raw[0])] if raw is not None else []
    parts = [d.part() for d in message_reasoning(msg, (0, *path), where, path, copies)]
    content = msg.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise where.error("must be a string, a list of parts or null", (*path, "content"))
    text, text_path = (content, (*path, "content")) if isinstance(content, str) else _first_text(content, path, where)
    if "<|channel|>" in text:
        where.note((*path, "content"), "harmony channel markup (<|channel|>) is not read by this adapter: not scored or pruned")
    calls = msg.get("tool_calls") if isinstance(msg.get("tool_calls"), list) else []
    end = thought_end(text) if text else None
    thought = text[:end] if end is not None else (text if calls else "")
    if thought.strip():
        holders: list[tuple[Site, object]] = [(Site((0, *text_path), locate(text, thought) or "prefix"), text)]
        if raw is not None:
            how = locate(text_of(raw[0].get("content")), thought)
            if how and isinstance(raw[0].get("content"), str):
                holders.append((Site((0, *raw[1], "content"), how), raw[0]["content"]))
        parts += thought_parts(thought, holders)
    rest = text[len(thought) :] if thought.strip() else text
    if rest.strip():
        parts.append(Part("action", rest, label="assistant"))
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            args = fn.get("arguments")
            parts.append(Part("action", args if isinstance(args, str) else str(args), label=f"tool_call:{fn.get('name', '?')}"))
    return join_think_copies(parts)


def _first_text(content, path: tuple, where: Where) -> tuple[str, tuple]:
    """The first text part of a content list (the one mini-swe-agent writes); text in later
    parts is noted as unrecognised."""
    found: tuple[str, tuple] | None = None
    for k, item in enumerate(content or []):
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            if found is None:
                found = item["text"], (*path, "content", k, "text")
            elif item["text"].strip():
                where.note((*path, "content", k), "second text part of an assistant message: not read")
    return found or ("", (*path, "content"))


ADAPTER = MiniSweAgentAdapter()
