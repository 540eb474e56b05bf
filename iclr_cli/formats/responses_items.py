"""OpenAI Responses items <-> :class:`Trajectory`, on plain item dicts (no bytes).

The one reading of a Responses ``input`` / ``output`` item list, shared by the
``openai-responses`` file adapter and ``iclr serve``'s ``/v1/responses`` (the item taxonomy is
the one the ``codex`` rollout adapter reads inside its ``response_item`` lines).

Items (https://platform.openai.com/docs/api-reference/responses/create, ``input``):

- ``message`` (``type`` may be absent: ``{"role", "content"}``): ``user`` / ``system`` /
  ``developer`` text is P before the first model item and an observation after it;
  ``assistant`` text (``output_text`` parts or a string) is an action, except inline
  ``<think>...</think>`` (models behind a local server), which is reasoning.
- ``reasoning``: each ``reasoning_text`` entry of ``content`` (the raw reasoning a local
  server returns) is one reasoning part; a ``summary_text`` entry of ``summary`` holding the
  same text is the same part (edited with it). A summary entry with other text beside
  ``content`` is the provider's summary of that reasoning, not more of it (vLLM renders a
  reasoning item from its ``content``): it is no block, so one reasoning counts its blocks
  once; it is kept while any of the item's reasoning is, and emptied when all of it is
  deleted. An item with ``summary`` alone (OpenAI's) has its summary entries as its parts.
  An item with ``encrypted_content`` holds reasoning only its provider can read: with
  ``encrypted="opaque"`` (files) its texts are :attr:`WriteBack.OPAQUE` and an edit removes
  the whole item under ``--encrypted-reasoning drop``; with ``encrypted="sealed"`` (the wire)
  they are never edited. ``sealed=True`` (an upstream that verifies reasoning,
  :mod:`iclr_cli.providers`) seals every reasoning item.
- tool calls (``function_call``, ``custom_tool_call``, ``local_shell_call``, hosted tool
  calls) are actions labelled ``tool_call:NAME`` with their ``call_id``; their outputs
  (``function_call_output`` ...) are observations with the same ``call_id``.
- ``item_reference`` points at an item stored on the server: counted in
  :attr:`ItemsRead.references` (history the reader cannot see). Item types this module does
  not know are kept as they are and reported in ``unrecognised``.

Steps: a step starts at a model item (reasoning, a call, an assistant message) whose previous
item was not one; the model items that follow without an observation in between are the same
model turn (:attr:`ItemsRead.ends`), and the observations up to the next model item belong to
the step.

The ``fc_`` rule: the API rejects a ``function_call`` (or ``message``) whose ``id`` belongs to
a response whose ``reasoning`` item is missing ("Item 'fc_...' of type 'function_call' was
provided without its required 'reasoning' item": mastra-ai/mastra #8738; laravel/ai PR #1052
sends the id only beside its reasoning; the ``call_id`` is what pairs a call with its output).
So an opaque reasoning item carries, as keys stripped when it is dropped, the ``id`` of every
other model item of its model turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Unrecognised
from iclr_cli.formats.reading import text_of
from iclr_cli.formats.think import outside_think, think_elements
from iclr_cli.formats.writeback import Draft, Site, freeze
from iclr_cli.trajectory import Part, Step, Trajectory, WriteBack

MODEL_ITEMS = frozenset({
    "reasoning", "function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call",
    "web_search_call", "file_search_call", "computer_call", "code_interpreter_call", "image_generation_call",
    "mcp_call", "mcp_list_tools", "mcp_approval_request", "tool_search_call",
})
"""Item types the model writes (an assistant ``message`` is one too)."""
OUTPUT_ITEMS = frozenset({
    "function_call_output", "custom_tool_call_output", "local_shell_call_output", "shell_call_output",
    "apply_patch_call_output", "computer_call_output", "mcp_approval_response", "tool_search_output",
})
"""Item types that answer a call (observations)."""
ENCRYPTED = "encrypted_content (only the provider can read it)"
VERIFIED = "reasoning item for a sealed upstream (encrypted or held by id; never edited)"


def item_type(item: Mapping) -> str | None:
    """An item's type (``message`` for the typeless ``{"role", "content"}`` shape)."""
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind if isinstance(kind, str) else None


def is_model_item(item: Mapping) -> bool:
    kind = item_type(item)
    return kind in MODEL_ITEMS or (kind == "message" and item.get("role") == "assistant")


# The fields a tool-call item cannot be read without (OpenAI Responses API reference, "function
# call": ``arguments``, ``call_id`` and ``name`` required; "custom tool call": ``call_id``,
# ``input`` and ``name``): without them the action loses its tool or its arguments, and its
# output cannot be paired with it.
_CALL_FIELDS = {"function_call": ("name", "arguments", "call_id"), "custom_tool_call": ("name", "input", "call_id")}
_WHAT = {"name": "tool name", "arguments": "arguments as JSON", "input": "input", "call_id": "id its output answers"}


def call_problem(item: Mapping) -> tuple[str, str] | None:
    """``(field, problem)`` of a malformed tool-call item, or None: a ``function_call`` has
    its ``name``, ``call_id`` and ``arguments``, a JSON string (OpenAI Responses API reference,
    "function_call": "A JSON string of the arguments to pass to the function"); a
    ``custom_tool_call`` its ``name``, ``call_id`` and ``input``, a string."""
    kind = item.get("type")
    fields = _CALL_FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        return None
    for field in fields:
        if item.get(field) is None:
            return field, f"a {kind} item has no {field!r} (the API requires it: the call's {_WHAT[field]})"
    key = fields[1]
    value = item[key]
    if not isinstance(value, str):
        what = "a boolean" if isinstance(value, bool) else "a number" if isinstance(value, (int, float)) else "a list" if isinstance(value, list) else "an object"
        return key, f"must be a string (the call's {'arguments as JSON' if key == 'arguments' else 'input'}), not {what}"
    for field in (fields[0], fields[2]):
        if not isinstance(item[field], str):
            return field, f"must be a string (the call's {_WHAT[field]}), not {type(item[field]).__name__}"
    return None


def call_text(item: Mapping) -> tuple[str, str]:
    """(label, text) of a tool-call item: ``tool_call:NAME`` and its arguments as sent."""
    kind = item.get("type")
    if kind == "function_call":
        return f"tool_call:{item.get('name', '?')}", str(item.get("arguments", ""))
    if kind == "custom_tool_call":
        return f"tool_call:{item.get('name', '?')}", str(item.get("input", ""))
    if kind == "local_shell_call":
        return "tool_call:local_shell", json.dumps(item.get("action"), ensure_ascii=False)
    name = item.get("name") if isinstance(item.get("name"), str) else kind
    body = {k: v for k, v in item.items() if k not in ("type", "id", "status", "call_id")}
    return f"tool_call:{name}", json.dumps(body, ensure_ascii=False)


def item_output(item: Mapping) -> str:
    """The text of an output item: its ``output``, or the ``tools`` a ``tool_search_output``
    returns (as JSON)."""
    if "output" not in item and item.get("tools") is not None:
        return json.dumps(item["tools"], ensure_ascii=False)
    return output_text(item.get("output"))


def output_text(output: object) -> str:
    """The text of a call output (a string, or the text of its content parts)."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return output["content"]
    return text_of(output)


@dataclass(frozen=True)
class ItemsRead:
    """An item list read as a trajectory.

    Attributes:
        trajectory: P and the steps; reasoning parts carry refs into the items.
        ends: per step, the index after its first run of model items (its model turn).
        spans: per step, ``(start, stop)`` item indices.
        unrecognised: items and content this module reads neither as reasoning nor as action.
        sealed: per step, one reason per reasoning text never edited (sealed or encrypted).
        sealed_at: where each sealed reasoning item is (for file warnings).
        references: ``item_reference`` items (history held by the server).
    """

    trajectory: Trajectory
    ends: tuple[int, ...]
    spans: tuple[tuple[int, int], ...]
    unrecognised: tuple[Unrecognised, ...] = ()
    sealed: tuple[tuple[str, ...], ...] = ()
    sealed_at: tuple[Unrecognised, ...] = ()
    references: int = 0


class _Reader:
    def __init__(self, items, where, refs, line, source, encrypted, sealed):
        self.items, self.where, self.refs, self.line, self.source = items, where, refs, line, source
        self.encrypted, self.sealed = encrypted, sealed
        self.unrecognised: list[Unrecognised] = []
        self.sealed_at: list[Unrecognised] = []
        self.references = 0

    def name(self, i: int, *keys) -> str:
        return self.where[i] + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys)

    def note(self, i: int, keys: tuple, what: str) -> None:
        self.unrecognised.append(Unrecognised(self.line, self.name(i, *keys), what))

    def error(self, i: int, keys: tuple, problem: str) -> InputError:
        return InputError(self.source, problem, line=self.line, field=self.name(i, *keys))


def read_items(
    items: Sequence[object],
    *,
    traj_id: str,
    where: Sequence[str],
    refs: Sequence[tuple],
    prompt: Sequence[Part] = (),
    encrypted: Literal["opaque", "sealed"] = "opaque",
    sealed: bool = False,
    line: int | None = None,
    source: str = "input",
    meta: Mapping | None = None,
) -> ItemsRead:
    """Read a Responses item list (see module docstring).

    ``where[i]`` names item i in messages (``input[3]``), ``refs[i]`` is the path its part
    refs start with (for :func:`iclr_cli.formats.writeback.apply_edits`); ``prompt`` holds P
    read from elsewhere (``instructions``, ``tools``).

    Raises:
        InputError: for an item that is not an object, or a field of the wrong type, naming it.
    """
    reader = _Reader(items, where, refs, line, source, encrypted, sealed)
    head: list[Part] = list(prompt)
    steps: list[list[Draft | Part]] = []
    reasons: list[list[str]] = []
    starts: list[int] = []
    ends: list[int] = []
    run: list[tuple[Draft, ...]] = []  # opaque drafts of the current model turn
    run_ids: list[tuple] = []  # paths of the turn's other model items that carry an id
    previous_model = False
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise reader.error(i, (), "item is not a JSON object")
        kind = item_type(item)
        if is_model_item(item):
            if not previous_model:
                _close_run(run, run_ids)
                steps.append([])
                reasons.append([])
                starts.append(i)
                ends.append(i + 1)
            previous_model = True
            ends[-1] = i + 1
            if kind == "reasoning":
                drafts, why = _reasoning(item, i, reader)
                steps[-1].extend(drafts)
                reasons[-1].extend(why)
                run.append(tuple(d for d in drafts if d.write_back is WriteBack.OPAQUE))
            else:
                if isinstance(item.get("id"), str):
                    run_ids.append((*refs[i],))
                if kind == "message":
                    steps[-1].extend(_assistant(item, i, reader))
                else:
                    if (bad := call_problem(item)) is not None:
                        raise reader.error(i, (bad[0],), bad[1])
                    label, text = call_text(item)
                    steps[-1].append(Part("action", text, label=label, call_id=_call_id(item)))
            continue
        previous_model = False
        part = _observation(item, kind, i, reader, "observation" if steps else "prompt")
        if part is not None:
            (steps[-1] if steps else head).append(part)
    _close_run(run, run_ids)
    trajectory = Trajectory(traj_id, tuple(head), tuple(Step(k, freeze(p)) for k, p in enumerate(steps)), meta=dict(meta) if meta is not None else {"format": "openai-responses"})
    spans = tuple(zip(starts, [*starts[1:], len(items)]))
    return ItemsRead(trajectory, tuple(ends), spans, tuple(reader.unrecognised), tuple(tuple(r) for r in reasons), tuple(reader.sealed_at), reader.references)


def _close_run(run: list[tuple[Draft, ...]], run_ids: list[tuple]) -> None:
    """The fc_ rule (module docstring): dropping an opaque reasoning item of this model turn
    strips the ids of the turn's other model items."""
    for drafts in run:
        for draft in drafts:
            draft.strip_keys.extend((path, "id") for path in run_ids)
    run.clear()
    run_ids.clear()


def _call_id(item: Mapping) -> str | None:
    value = item.get("call_id")
    return value if isinstance(value, str) else None


def _observation(item: Mapping, kind: str | None, i: int, reader: _Reader, part_kind) -> Part | None:
    if kind == "message":
        content = item.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise reader.error(i, ("content",), f"must be a string or a list of content parts, not {type(content).__name__}")
        return Part(part_kind, text_of(content), label=str(item.get("role", "user")))
    if kind in OUTPUT_ITEMS:
        return Part(part_kind, item_output(item), label="tool_result", call_id=_call_id(item))
    if kind == "item_reference":
        reader.references += 1
        return None
    reader.note(i, (), f"item of type {kind!r} is not read by this reader: kept as it is")
    return None


def _assistant(item: Mapping, i: int, reader: _Reader) -> list[Draft | Part]:
    """An assistant message: its text is the action, except inline ``<think>`` elements."""
    content = item.get("content")
    if isinstance(content, str):
        entries, keys = [content], [("content",)]
    elif isinstance(content, list):
        entries, keys = [], []
        for k, part in enumerate(content):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                entries.append(part["text"])
                keys.append(("content", k, "text"))
            elif isinstance(part, dict) and isinstance(part.get("refusal"), str):
                entries.append(part["refusal"])
                keys.append(None)
            elif part not in (None, {}):
                reader.note(i, ("content", k), f"assistant content part of type {part.get('type') if isinstance(part, dict) else type(part).__name__!r} has no text: not read")
    elif content is None:
        entries, keys = [], []
    else:
        raise reader.error(i, ("content",), f"must be a string or a list of content parts, not {type(content).__name__}")
    out: list[Draft | Part] = []
    visible = []
    for text, key in zip(entries, keys):
        elements = think_elements(text) if key is not None else []
        for k, element in enumerate(elements):
            if element.inner(text).strip():
                out.append(Draft(element.inner(text), [Site((*reader.refs[i], *key), f"think:{k}")]))
        visible.append(outside_think(text, elements) if elements else text)
    out.append(Part("action", "\n".join(visible), label="assistant"))
    return out


def _reasoning(item: Mapping, i: int, reader: _Reader) -> tuple[list[Draft], list[str]]:
    """The texts of one reasoning item (module docstring) and, per sealed text, why."""
    base = reader.refs[i]
    lists: dict[str, list] = {}
    for key in ("content", "summary"):
        value = item.get(key)
        if value is not None and not isinstance(value, list):
            raise reader.error(i, (key,), "must be a list or null")
        lists[key] = value or []
    encrypted = isinstance(item.get("encrypted_content"), str) and bool(item["encrypted_content"])
    why = VERIFIED if reader.sealed else ENCRYPTED if encrypted and reader.encrypted == "sealed" else None
    mode = WriteBack.READ_ONLY if why else WriteBack.OPAQUE if encrypted else WriteBack.IN_PLACE
    drafts: list[Draft] = []
    summaries: list = []  # summary entries beside content: the same reasoning, summarised
    for key in ("content", "summary"):
        for j, entry in enumerate(lists[key]):
            if not (isinstance(entry, dict) and isinstance(entry.get("text"), str)):
                if entry not in (None, {}):
                    reader.note(i, (key, j), f"reasoning {key} entry without text: not read")
                continue
            site = Site((*base, key, j, "text"))
            twin = next((d for d in drafts if key == "summary" and d.text == entry["text"] and len(d.sites) == 1), None)
            if twin is not None:  # the summary holds the same text: one part, edited together
                twin.add(site)
                continue
            if key == "summary" and drafts:  # a summary of the content read above: no block of its own
                summaries.append(site.path)
                continue
            drafts.append(Draft(entry["text"], [site], write_back=mode, drop=[base] if mode is WriteBack.OPAQUE else []))
    for draft in drafts:
        draft.clear_with.extend(summaries)
    if why:
        reader.sealed_at.append(Unrecognised(reader.line, reader.name(i), why))
        return drafts, [why] * max(1, len(drafts))
    if encrypted and not drafts:
        reader.sealed_at.append(Unrecognised(reader.line, reader.name(i), ENCRYPTED))
        return drafts, [ENCRYPTED]
    return drafts, []
