"""``iclr convert``: write trajectories in the canonical ``iclr`` format, OpenAI chat or
Anthropic Messages, only where nothing is lost.

"Lossless" (this project's definition, docs/FORMAT.md): reading the output back with the
target's own adapter gives the same trajectories as the input: the same steps, and in P and
every step the same parts in the same order with the same kind, label, text and write-back
mode. Trajectory ids and ``meta`` are kept as fields of each output record but are not part
of the test; tool-call arguments are compared as JSON values (their whitespace is not data).
Format-specific fields the Trajectory model does not hold (timestamps, tool-call ids,
signatures, ``encrypted_content``) are not carried by any target.

- ``--to iclr`` always works: the canonical format is the Trajectory model written out.
- ``--to openai`` / ``--to anthropic``: refused (exit 2, with the reason) when a part has no
  faithful place there: signed thinking (its signature would be lost), encrypted reasoning
  (only the summary would remain), redacted reasoning (no text), more than one reasoning part
  in a step for OpenAI (one ``reasoning_content`` per message), a label with no role in the
  target, more tool results than tool calls, or anything the read-back check finds changed.

Tool results are paired with the step's tool calls in order (the Trajectory model keeps no
call ids); the ids written are ``call_<step>_<n>`` / ``toolu_<step>_<n>``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated

import typer

from iclr_cli.cli import options as opt

TARGETS = ("iclr", "openai", "anthropic")
_OPENAI_ROLES = {"system", "developer", "user"}


def convert(
    input: Annotated[str, typer.Argument(help="Trajectory file ('-' for stdin).", show_default=False)],
    to: Annotated[str, typer.Option("--to", "-t", help="Target format: iclr (canonical JSONL), openai (chat messages JSONL) or anthropic (Messages JSONL).")] = "iclr",
    output: opt.Output = None,
    fmt: opt.Format = None,
    skip_bad_lines: opt.SkipBadLines = False,
    force: opt.Force = False,
    quiet: opt.Quiet = False,
) -> None:
    """Convert a trajectory file to another format, refusing conversions that would lose data.

    Output is JSONL, one trajectory per line. A refused conversion exits 2 with the first
    reason found and leaves the -o file untouched.
    """
    from iclr_cli.errors import UsageError
    from iclr_cli.pipeline import open_inputs
    from iclr_cli.render.output import Output

    if to not in TARGETS:
        raise UsageError(f"--to must be one of {', '.join(TARGETS)}, not {to!r}")
    out = Output(output, quiet=quiet, force=force)
    [item] = open_inputs([input], fmt)
    trajectories = steps = 0
    with out.stream() as sink:
        for doc in item.documents(skip_bad_lines=skip_bad_lines):
            for w in doc.warnings:
                out.warn(w)
            sink.write(convert_trajectories(doc.trajectories, to))
            trajectories += len(doc.trajectories)
            steps += sum(len(t.steps) for t in doc.trajectories)
    out.info(f"converted {trajectories} trajectories ({steps} steps) from {item.adapter.name} to {to}")


def convert_trajectories(trajectories: Sequence, to: str) -> bytes:
    """JSONL bytes of ``trajectories`` in format ``to`` (``iclr``, ``openai``, ``anthropic``).

    Raises:
        UsageError: naming the trajectory, step and part, when the conversion would lose data.
    """
    import orjson

    from iclr_cli.formats import iclr_jsonl, registry

    build = {"iclr": iclr_jsonl.to_record, "openai": to_openai, "anthropic": to_anthropic}[to]
    data = b"".join(orjson.dumps(build(t), option=orjson.OPT_APPEND_NEWLINE) for t in trajectories)
    target = registry.get({"openai": "openai", "anthropic": "anthropic", "iclr": "iclr"}[to])
    back = target.load(data, f"<{to} output>").trajectories if data else []
    for original, again in zip(trajectories, back, strict=True):
        _check_same(original, again, to)
    return data


def _refuse(traj, where: str, why: str, to: str):
    from iclr_cli.errors import UsageError

    return UsageError(f"cannot convert {traj.id} to {to} without losing data: {where}: {why}")


def _check_reasoning(traj, step, part, to: str) -> None:
    from iclr_cli.trajectory import WriteBack

    reasons = {
        WriteBack.SIGNED: "signed thinking; its signature cannot be carried and the text would pass as unsigned",
        WriteBack.OPAQUE: "encrypted reasoning item; only its summary text would remain, without encrypted_content",
        WriteBack.READ_ONLY: "redacted reasoning has no text to write",
    }
    if part.write_back in reasons:
        raise _refuse(traj, f"step {step.index}", reasons[part.write_back], to)


def to_openai(traj) -> dict:
    """``{"id", "messages"}`` in OpenAI chat form (see module docstring).

    Raises:
        UsageError: for parts OpenAI chat cannot hold.
    """
    messages: list[dict] = []
    tools = None
    for part in traj.prompt:
        if part.label == "tools" and tools is None and isinstance(definitions := _json_list(part.text), list):
            # tool definitions travel beside the messages; the read-back check confirms the place
            tools = definitions
            continue
        if part.label not in _OPENAI_ROLES:
            raise _refuse(traj, "prompt", f"label {part.label!r} has no OpenAI chat role", "openai")
        messages.append({"role": part.label, "content": part.text})
    for step in traj.steps:
        msg: dict = {"role": "assistant", "content": None}
        calls: list[dict] = []
        after: list[dict] = []
        results = 0
        for part in step.parts:
            if part.kind == "reasoning":
                _check_reasoning(traj, step, part, "openai")
                if "reasoning_content" in msg:
                    raise _refuse(traj, f"step {step.index}", "more than one reasoning part; an OpenAI message holds one reasoning_content", "openai")
                msg["reasoning_content"] = part.text
            elif part.kind == "action" and part.label == "assistant" and msg["content"] is None:
                msg["content"] = part.text
            elif part.kind == "action" and part.label.startswith("tool_call:"):
                calls.append({"id": f"call_{step.index}_{len(calls)}", "type": "function", "function": {"name": part.label.split(":", 1)[1], "arguments": part.text}})
            elif part.kind == "observation" and part.label == "tool_result":
                if results >= len(calls):
                    raise _refuse(traj, f"step {step.index}", "a tool result with no tool call to pair it with", "openai")
                after.append({"role": "tool", "tool_call_id": calls[results]["id"], "content": part.text})
                results += 1
            elif part.kind == "observation" and part.label in _OPENAI_ROLES:
                after.append({"role": part.label, "content": part.text})
            else:
                raise _refuse(traj, f"step {step.index}", f"{part.kind} part labelled {part.label!r} has no place in an OpenAI chat message", "openai")
        if calls:
            msg["tool_calls"] = calls
        messages.append(msg)
        messages.extend(after)
    return {"id": traj.id, "messages": messages, **({"tools": tools} if tools is not None else {})}


def _json_list(text: str):
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) and all(isinstance(v, dict) for v in value) else None


def to_anthropic(traj) -> dict:
    """``{"id", "system", "messages"}`` in Anthropic Messages form; reasoning becomes
    unsigned ``thinking`` blocks.

    Raises:
        UsageError: for parts Anthropic Messages cannot hold.
    """
    system = [p.text for p in traj.prompt if p.label == "system"]
    if any(p.label == "system" for p in traj.prompt[len(system) :]):
        raise _refuse(traj, "prompt", "a system part after a user part (Anthropic has one top-level system)", "anthropic")
    messages: list[dict] = []
    for part in traj.prompt[len(system) :]:
        if part.label != "user":
            raise _refuse(traj, "prompt", f"label {part.label!r} has no Anthropic role", "anthropic")
        messages.append({"role": "user", "content": [{"type": "text", "text": part.text}]})
    for step in traj.steps:
        content: list[dict] = []
        answers: list[dict] = []
        ids: list[str] = []
        for part in step.parts:
            if part.kind == "reasoning":
                _check_reasoning(traj, step, part, "anthropic")
                content.append({"type": "thinking", "thinking": part.text})
            elif part.kind == "action" and part.label == "assistant":
                content.append({"type": "text", "text": part.text})
            elif part.kind == "action" and part.label.startswith("tool_call:"):
                try:
                    arguments = json.loads(part.text)
                except ValueError:
                    arguments = None
                if not isinstance(arguments, dict):
                    raise _refuse(traj, f"step {step.index}", "tool call arguments are not a JSON object (Anthropic tool_use input must be one)", "anthropic")
                ids.append(f"toolu_{step.index}_{len(ids)}")
                content.append({"type": "tool_use", "id": ids[-1], "name": part.label.split(":", 1)[1], "input": arguments})
            elif part.kind == "observation" and part.label == "tool_result":
                paired = sum(a["type"] == "tool_result" for a in answers)
                if paired >= len(ids):
                    raise _refuse(traj, f"step {step.index}", "a tool result with no tool call to pair it with", "anthropic")
                answers.append({"type": "tool_result", "tool_use_id": ids[paired], "content": part.text})
            elif part.kind == "observation" and part.label == "user":
                answers.append({"type": "text", "text": part.text})
            else:
                raise _refuse(traj, f"step {step.index}", f"{part.kind} part labelled {part.label!r} has no place in Anthropic Messages", "anthropic")
        messages.append({"role": "assistant", "content": content})
        if answers:
            messages.append({"role": "user", "content": answers})
    record: dict = {"id": traj.id}
    if system:
        record["system"] = system[0] if len(system) == 1 else [{"type": "text", "text": t} for t in system]
    record["messages"] = messages
    return record


def _same_text(a, b) -> bool:
    if a.text == b.text:
        return True
    if a.kind == "action" and a.label.startswith("tool_call:"):
        try:
            return json.loads(a.text) == json.loads(b.text)
        except ValueError:
            return False
    return False


def _check_same(original, again, to: str) -> None:
    """Raise when ``again`` (the output read back) differs from ``original``."""
    pairs = [("prompt", original.prompt, again.prompt)]
    if len(original.steps) != len(again.steps):
        raise _refuse(original, "steps", f"{len(original.steps)} steps would read back as {len(again.steps)}", to)
    pairs += [(f"step {s.index}", s.parts, t.parts) for s, t in zip(original.steps, again.steps)]
    for where, before, after in pairs:
        for i in range(max(len(before), len(after))):
            a = before[i] if i < len(before) else None
            b = after[i] if i < len(after) else None
            if a is None or b is None:
                what = f"part {i} ({(a or b).kind} {(a or b).label!r}) would be {'lost' if b is None else 'added'}"
                raise _refuse(original, where, what, to)
            if (a.kind, a.label, a.write_back) != (b.kind, b.label, b.write_back) or not _same_text(a, b):
                raise _refuse(original, where, f"part {i} ({a.kind} {a.label!r}) would read back changed", to)
