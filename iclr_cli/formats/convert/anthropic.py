"""A trajectory as Anthropic Messages (``{"id", "system", "messages"}``), or a refusal.

P: leading ``system`` parts become the top-level ``system``; ``user`` parts become user
messages (an image joins the message of the part before it). Each step: one assistant
message of unsigned ``thinking``, ``text`` and ``tool_use`` blocks (``id`` = the call's id,
``input`` = its arguments, which must be a JSON object), then one user message with the
step's observations in order: a ``tool_result`` block per result (``tool_use_id`` = the call's
id; its text, or a list of text and ``image`` blocks), ``text`` and ``image`` blocks for the
user's own messages. Refused: a call id Anthropic's API rejects (not ``^[a-zA-Z0-9_-]+$``:
Kimi's ``functions.read_file:0``), signed / encrypted / redacted reasoning, images with an OpenAI
``detail``, media other than images, labels with no Anthropic role, and a ``tools`` part:
Anthropic Messages has a top-level ``tools`` list, but the Anthropic adapter does not read it,
so the read-back check could not confirm the definitions (and OpenAI's ``strict`` has no
Anthropic place); the refusal names the tools.
"""

from __future__ import annotations

import json
import re

from iclr_cli.formats import media
from iclr_cli.formats.convert.pairing import describe, describe_tools, is_call, is_result, refuse, results, with_call_ids
from iclr_cli.formats.convert.reasoning import check_reasoning
from iclr_cli.trajectory import Part, Step, Trajectory

TO = "anthropic"
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
"""The pattern Anthropic's Messages API requires of ``tool_use.id`` (and ``tool_use_id``)."""


def _image(traj: Trajectory, where: str, index: int, part: Part) -> dict:
    try:
        return media.to_anthropic(part.media)  # type: ignore[arg-type]
    except media.NoForm as exc:
        raise refuse(traj, where, f"{describe(index, part)}: {exc}", TO) from None


def to_anthropic(traj: Trajectory) -> tuple[dict, Trajectory]:
    """The record and the trajectory it must read back as (``traj`` with generated call ids).

    Raises:
        UsageError: naming the step and part that Anthropic Messages cannot hold.
    """
    system: list[str] = []
    rest = list(enumerate(traj.prompt))
    while rest and rest[0][1].label == "system" and rest[0][1].media is None:
        system.append(rest.pop(0)[1].text)
    messages: list[dict] = []
    joinable = False  # the message before may take an image of the next part
    for i, part in rest:
        if part.label == "tools":
            raise refuse(traj, "prompt", f"{describe_tools(i, part)}: tool definitions are not carried to Anthropic (its adapter does not read a top-level 'tools' list, so they could not be checked); convert to iclr, or to openai for OpenAI definitions", TO)
        if part.label == "system":
            raise refuse(traj, "prompt", "a system part after a user part (Anthropic has one top-level system)", TO)
        if part.label != "user":
            raise refuse(traj, "prompt", f"label {part.label!r} has no Anthropic role", TO)
        if part.media is not None:
            block = _image(traj, "prompt", i, part)
            if joinable:
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})
        else:
            messages.append({"role": "user", "content": [{"type": "text", "text": part.text}]})
        joinable = True
    steps = [with_call_ids(traj, step, TO) for step in traj.steps]
    for step in steps:
        messages.extend(_step(traj, step))
    record: dict = {"id": traj.id}
    if system:
        record["system"] = system[0] if len(system) == 1 else [{"type": "text", "text": t} for t in system]
    record["messages"] = messages
    return record, traj.with_steps(steps)


def _step(traj: Trajectory, step: Step) -> list[dict]:
    where = f"step {step.index}"
    content: list[dict] = []
    answers: list[dict] = []
    grouped = results(traj, step, TO)
    for i, part in enumerate(step.parts):
        if part.kind == "reasoning":
            check_reasoning(traj, step, part, TO)
            content.append({"type": "thinking", "thinking": part.text})
        elif part.kind == "action" and part.label == "assistant":
            content.append(_image(traj, where, i, part) if part.media is not None else {"type": "text", "text": part.text})
        elif is_call(part):
            try:
                arguments = json.loads(part.text)
            except ValueError:
                arguments = None
            if not isinstance(arguments, dict):
                raise refuse(traj, where, "tool call arguments are not a JSON object (Anthropic tool_use input must be one)", TO)
            if not ANTHROPIC_ID.fullmatch(part.call_id or ""):
                # Kimi K2's "functions.read_file:0": the API rejects the request. Renaming it
                # would lose the id the input gave (convert is lossless), so refuse and say so.
                raise refuse(traj, where, f"{describe(i, part)}: tool call id {part.call_id!r} is not a valid Anthropic tool_use id "
                                          f"(the API requires {ANTHROPIC_ID.pattern}); convert to iclr or openai, which keep it", TO)
            content.append({"type": "tool_use", "id": part.call_id, "name": part.label.split(":", 1)[1], "input": arguments})
        elif is_result(part):
            if i in grouped:
                pieces = grouped[i].parts
                if len(pieces) == 1 and pieces[0].media is None:
                    body: object = part.text
                else:
                    body = [_image(traj, where, i + k, p) if p.media is not None else {"type": "text", "text": p.text} for k, p in enumerate(pieces)]
                answers.append({"type": "tool_result", "tool_use_id": grouped[i].call_id, "content": body})
        elif part.kind == "observation" and part.label == "user":
            answers.append(_image(traj, where, i, part) if part.media is not None else {"type": "text", "text": part.text})
        else:
            raise refuse(traj, where, f"{part.kind} part labelled {part.label!r} has no place in Anthropic Messages", TO)
    out = [{"role": "assistant", "content": content}]
    if answers:
        out.append({"role": "user", "content": answers})
    return out
