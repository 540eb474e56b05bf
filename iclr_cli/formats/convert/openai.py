"""A trajectory as OpenAI chat messages (``{"id", "messages"}``), or a refusal.

P: one message per part, role = the part's label (``system``, ``developer``, ``user``); a
``tools`` part holding OpenAI tool definitions becomes the record's ``tools`` (any other
``tools`` part is refused, naming the tools). Each step: one assistant message (reasoning as
``reasoning_content``, at most one; visible text as ``content``, at most one; tool calls as
``tool_calls`` with their ids), then its observations: ``tool`` messages (``tool_call_id`` = the call's id) and ``user`` messages.
An image part joins the user message of the part before it (``content`` becomes a list of
``text`` and ``image_url`` parts) or opens one. Refused: images anywhere but user messages
(OpenAI chat tool and assistant messages hold text), audio or documents, signed / encrypted /
redacted reasoning, and labels with no chat role.
"""

from __future__ import annotations

import json

from iclr_cli.formats import media
from iclr_cli.formats.convert.pairing import describe, describe_tools, is_call, is_result, refuse, results, with_call_ids
from iclr_cli.formats.convert.reasoning import check_reasoning
from iclr_cli.trajectory import Part, Step, Trajectory

ROLES = frozenset({"system", "developer", "user"})
TO = "openai"


class _Messages:
    """Message list under construction; knows which message an image may join."""

    def __init__(self, traj: Trajectory):
        self.traj = traj
        self.list: list[dict] = []
        self.open: dict | None = None  # the message the part before made (an image may join it)

    def text(self, role: str, text: str, **extra) -> None:
        self.list.append({"role": role, **extra, "content": text})
        self.open = self.list[-1]

    def image(self, where: str, index: int, part: Part) -> None:
        if part.label != "user":
            raise refuse(self.traj, where, f"{describe(index, part)}: OpenAI chat takes images in user messages only", TO)
        try:
            item = media.to_openai(part.media)  # type: ignore[arg-type]
        except media.NoForm as exc:
            raise refuse(self.traj, where, f"{describe(index, part)}: {exc}", TO) from None
        if self.open is not None and self.open["role"] == "user":
            if isinstance(self.open["content"], str):
                self.open["content"] = [{"type": "text", "text": self.open["content"]}]
            self.open["content"].append(item)
        else:
            self.list.append({"role": "user", "content": [item]})
            self.open = self.list[-1]

    def close(self) -> None:
        self.open = None


def to_openai(traj: Trajectory) -> tuple[dict, Trajectory]:
    """The record ``{"id", "messages"}`` and the trajectory it must read back as (``traj``
    with generated call ids filled in).

    Raises:
        UsageError: naming the step and part that OpenAI chat cannot hold.
    """
    out = _Messages(traj)
    tools = None
    for i, part in enumerate(traj.prompt):
        if part.label == "tools" and tools is None and (definitions := _openai_tools(part.text)) is not None:
            tools = definitions  # beside the messages; the read-back check confirms its place in P
            continue
        if part.label == "tools":
            why = "a second tools part has" if tools is not None else "tool definitions not in OpenAI's form (a list of {\"type\": ...} objects) have"
            raise refuse(traj, "prompt", f"{describe_tools(i, part)}: {why} no place in an OpenAI chat record", TO)
        if part.label not in ROLES:
            raise refuse(traj, "prompt", f"label {part.label!r} has no OpenAI chat role", TO)
        if part.media is not None:
            out.image("prompt", i, part)
        else:
            out.text(part.label, part.text)
    steps = [with_call_ids(traj, step, TO) for step in traj.steps]
    for step in steps:
        _step(out, traj, step)
    record = {"id": traj.id, "messages": out.list, **({"tools": tools} if tools is not None else {})}
    return record, traj.with_steps(steps)


def _openai_tools(text: str) -> list | None:
    """The tool definitions of a ``tools`` part when they are in OpenAI's form (a list of
    objects with a ``type``, e.g. ``{"type": "function", "function": {...}}``), else None:
    other vendors' definitions (Gemini ``functionDeclarations``) have no OpenAI place."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, list) and value and all(isinstance(v, dict) and isinstance(v.get("type"), str) for v in value):
        return value
    return None


def _step(out: _Messages, traj: Trajectory, step: Step) -> None:
    where = f"step {step.index}"
    msg: dict = {"role": "assistant", "content": None}
    out.list.append(msg)
    out.close()
    calls: list[dict] = []
    grouped = results(traj, step, TO)
    for i, part in enumerate(step.parts):
        if part.kind == "reasoning":
            check_reasoning(traj, step, part, TO)
            if "reasoning_content" in msg:
                raise refuse(traj, where, "more than one reasoning part; an OpenAI message holds one reasoning_content", TO)
            msg["reasoning_content"] = part.text
        elif part.kind == "action" and part.media is not None:
            raise refuse(traj, where, f"{describe(i, part)}: OpenAI chat assistant messages hold no images", TO)
        elif part.kind == "action" and part.label == "assistant" and msg["content"] is None:
            msg["content"] = part.text
        elif is_call(part):
            calls.append({"id": part.call_id, "type": "function", "function": {"name": part.label.split(":", 1)[1], "arguments": part.text}})
        elif is_result(part):
            if i not in grouped:
                continue  # a later piece of the result opened before it
            result = grouped[i]
            if len(result.parts) > 1 or part.media is not None:
                bad = next((j for j in range(i, i + len(result.parts)) if step.parts[j].media is not None), i)
                raise refuse(traj, where, f"{describe(bad, step.parts[bad])}: OpenAI chat tool messages hold text only", TO)
            out.text("tool", part.text, tool_call_id=result.call_id)
            out.close()
        elif part.kind == "observation" and part.label in ROLES:
            if part.media is not None:
                out.image(where, i, part)
            else:
                out.text(part.label, part.text)
        else:
            raise refuse(traj, where, f"{part.kind} part labelled {part.label!r} has no place in an OpenAI chat message", TO)
    if calls:
        msg["tool_calls"] = calls
