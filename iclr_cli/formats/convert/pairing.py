"""What every conversion shares: the refusal and how it names a part, and tool results paired
with their calls by id.

A step's tool calls and results carry ``call_id`` (docs/FORMAT.md, "convert"). Results pair
with calls by that id, never by position: parallel results come back in any order. Only a
format that has no ids at all (SWE-agent, mini-swe-agent) pairs by order, and there the k-th
id-less result answers the k-th id-less call, as in the source format itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from iclr_cli.errors import UsageError
from iclr_cli.formats import media
from iclr_cli.trajectory import Part, Step, Trajectory


def refuse(traj: Trajectory, where: str, why: str, to: str) -> UsageError:
    """The error for a conversion that would lose data (exit 2): names trajectory, place, reason."""
    return UsageError(f"cannot convert {traj.id} to {to} without losing data: {where}: {why}")


def describe(index: int, part: Part) -> str:
    """``part 3 (observation 'tool_result', image/png)``: a part named in a refusal."""
    what = f", {media.describe(part.media)}" if part.media is not None else ""
    return f"part {index} ({part.kind} {part.label!r}{what})"


def tool_names(text: str) -> list[str]:
    """The tool names in a ``tools`` part (OpenAI ``function.name``, Anthropic ``name``, Gemini
    ``functionDeclarations[].name``), in order; empty when the text is not such a list."""
    try:
        value = json.loads(text)
    except ValueError:
        return []
    names: list[str] = []
    for tool in value if isinstance(value, list) else []:
        if not isinstance(tool, dict):
            continue
        declared = tool.get("functionDeclarations", tool.get("function_declarations"))
        for item in declared if isinstance(declared, list) else [tool.get("function", tool)]:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                names.append(item["name"])
    return names


def describe_tools(index: int, part: Part) -> str:
    """``part 1 (prompt 'tools': get_weather, search)``: a tools part named in a refusal."""
    names = tool_names(part.text)
    return f"part {index} ({part.kind} 'tools': {', '.join(names) if names else 'tool definitions'})"


def is_call(part: Part) -> bool:
    """A tool call: an action labelled ``tool_call:NAME``."""
    return part.kind == "action" and part.label.startswith("tool_call:")


def is_result(part: Part) -> bool:
    """A tool result (or one of its media pieces)."""
    return part.kind == "observation" and part.label == "tool_result"


@dataclass(frozen=True)
class Result:
    """One tool result: the id of the call it answers and its parts (text, then any media,
    in the order the source gave them). ``start`` is the index of its first part."""

    call_id: str
    start: int
    parts: tuple[Part, ...]


def with_call_ids(traj: Trajectory, step: Step, to: str) -> Step:
    """``step`` with every tool call and tool result carrying the id that pairs them.

    Calls without an id get ``call_<step>_<k>`` (k: the call's index in the step); an id-less
    result takes the id of the next id-less call, in order.

    Raises:
        UsageError: for two calls with one id, a result naming a call the step does not
        make, or an id-less result with no id-less call left to answer.
    """
    parts = list(step.parts)
    calls = [i for i, p in enumerate(parts) if is_call(p)]
    given = [parts[i].call_id for i in calls if parts[i].call_id is not None]
    if len(set(given)) != len(given):
        dup = next(x for x in given if given.count(x) > 1)
        raise refuse(traj, f"step {step.index}", f"two tool calls share the id {dup!r}; results could not be paired", to)
    idless: list[str] = []
    for k, i in enumerate(calls):
        if parts[i].call_id is None:
            new_id = f"call_{step.index}_{k}"
            if new_id in given:
                raise refuse(traj, f"step {step.index}", f"generated call id {new_id!r} is already taken", to)
            parts[i] = replace(parts[i], call_id=new_id)
            idless.append(new_id)
    known = {parts[i].call_id for i in calls}
    previous: Part | None = None
    for i, part in enumerate(parts):
        if is_result(part):
            if part.call_id is None:
                if part.media is not None and previous is not None and is_result(previous):
                    parts[i] = replace(part, call_id=previous.call_id)  # an image of the result before it
                elif not idless:
                    raise refuse(traj, f"step {step.index}", f"{describe(i, part)}: a tool result with no tool call to pair it with", to)
                else:
                    parts[i] = replace(part, call_id=idless.pop(0))
            elif part.call_id not in known:
                raise refuse(traj, f"step {step.index}", f"{describe(i, part)}: a tool result for call {part.call_id!r}, which this step does not make", to)
        previous = parts[i]
    return replace(step, parts=tuple(parts))


def results(traj: Trajectory, step: Step, to: str) -> dict[int, Result]:
    """The step's tool results by the index of their first part (``step`` already paired by
    :func:`with_call_ids`): consecutive result parts with one call id are one result.

    Raises:
        UsageError: when a call is answered by two separate results.
    """
    found: dict[int, Result] = {}
    seen: set[str] = set()
    current: Result | None = None
    for i, part in enumerate(step.parts):
        if not is_result(part):
            current = None
            continue
        if current is not None and current.call_id == part.call_id:
            current = found[current.start] = replace(current, parts=(*current.parts, part))
            continue
        if part.call_id in seen:
            raise refuse(traj, f"step {step.index}", f"{describe(i, part)}: call {part.call_id!r} has a second result", to)
        seen.add(part.call_id)  # type: ignore[arg-type]
        current = found[i] = Result(part.call_id, i, (part,))  # type: ignore[arg-type]
    return found
