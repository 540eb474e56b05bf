"""Anthropic Messages API transcripts (``role``, content blocks ``thinking``, ``tool_use``, ...).

Shapes accepted (one trajectory per message list):
- a JSON list of messages, or an object with ``messages`` (and optionally ``system``, a string
  or a list of text blocks);
- JSONL with one such list or object per line.

A message's ``content`` is a string or a list of content blocks. Parts (METHOD.md, "Objects"):
- ``thinking``: reasoning. ``WriteBack.SIGNED`` when the block has a ``signature`` key, else
  ``IN_PLACE``.
- ``redacted_thinking``: reasoning with no readable text (opaque ``data``): a ``READ_ONLY``
  part whose text is the placeholder :data:`REDACTED_TEXT`. It is never scored or edited, is
  written back byte for byte, and counts as content (it is not "empty").
- ``text`` in an assistant message: action (label ``assistant``); whitespace-only text blocks
  (Claude Code writes ``"\\n\\n"`` ones) carry nothing and are not parts.
- ``tool_use``: action labelled ``tool_call:<name>`` whose text is its ``input`` as JSON.
- ``tool_result``: observation labelled ``tool_result`` (its text blocks; images as ``[image]``).
- other block types: action (assistant) or user text, labelled by type, text as JSON.
A step is one assistant message. User messages after the first assistant message are
observations of the step before them; everything before it, and a top-level ``system``, is P.

Write-back (METHOD.md, "Provider rules"): only records holding an edited thinking block are
re-serialised, in the input's own layout; everything else comes back byte for byte.
- An edited signed block loses its ``signature`` key (this project's choice over flagging it):
  the signature no longer matches the text, and without one no tool replays the block as if
  it were original. Other keys of the block are kept.
- A fully deleted thinking (new text ``""``, e.g. ``delete-all``) is removed from ``content``,
  unless that would leave ``content`` empty: then it stays as ``{"type": "thinking",
  "thinking": ""}`` with no signature, because an assistant message must have content.
- ``redacted_thinking``, ``tool_use`` and ``tool_result`` blocks are never removed, added or
  reordered, so tool calls and results stay paired.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document, OpaqueEdits
from iclr_cli.jsonio import (
    BAD_LINE,
    BOM,
    JsonLine,
    dump_lines,
    dumps_document_like,
    iter_jsonl,
    loads,
)
from iclr_cli.trajectory import Part, PartKind, Step, Trajectory, WriteBack

REDACTED_TEXT = "[redacted thinking]"
"""Text of the READ_ONLY part that stands for a ``redacted_thinking`` block in the render."""

# A typed block only Anthropic-style content has. An escaped quote inside a JSON string
# (``\\"type\\"``) cannot match, so tool arguments that mention these words do not count.
_SNIFF = re.compile(rb'"type"\s*:\s*"(?:thinking|redacted_thinking|tool_use|tool_result)"')

Path = tuple  # keys from a record's root to one message


def is_message_list(value: object) -> bool:
    """True for a non-empty list of JSON objects that all have a ``role``."""
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m for m in value)


def _field_name(path: Sequence) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else (f".{k}" if i else k) for i, k in enumerate(path))


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _result_text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for item in content:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                pieces.append(item["text"])
            elif isinstance(item, dict) and item.get("type") == "image":
                pieces.append("[image]")
            else:
                pieces.append(_json_text(item))
        return "\n".join(pieces)
    return _json_text(content)


def _blocks(content: object, source: str, line: int | None, where: str) -> list[dict] | None:
    """The content blocks of a message (``None`` for string content), validated."""
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        raise InputError(source, "content must be a string or a list of content blocks", line=line, field=where)
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise InputError(source, "content block is not an object with a string 'type'", line=line, field=f"{where}[{i}]")
        if block["type"] == "thinking" and not isinstance(block.get("thinking"), str):
            raise InputError(source, "thinking block has no string 'thinking'", line=line, field=f"{where}[{i}].thinking")
    return content


def assistant_parts(content: object, ref: Callable[[int], Hashable], source: str, line: int | None, where: str) -> list[Part]:
    """The parts of one assistant message's ``content``, in block order.

    ``ref(i)`` makes the locator of the thinking block at index ``i``; ``where`` names the
    content field in errors.

    Raises:
        InputError: for content that is neither a string nor a list of typed blocks, or a
        thinking block without string ``thinking``.
    """
    blocks = _blocks(content, source, line, where)
    if blocks is None:
        return [Part("action", content, label="assistant")] if content.strip() else []  # type: ignore[union-attr]
    parts: list[Part] = []
    for i, block in enumerate(blocks):
        kind = block["type"]
        if kind == "thinking":
            mode = WriteBack.SIGNED if "signature" in block else WriteBack.IN_PLACE
            parts.append(Part("reasoning", block["thinking"], label="reasoning", ref=ref(i), write_back=mode))
        elif kind == "redacted_thinking":
            parts.append(Part("reasoning", REDACTED_TEXT, label="redacted_thinking", ref=ref(i), write_back=WriteBack.READ_ONLY))
        elif kind == "text":
            text = block.get("text")
            if isinstance(text, str) and text.strip():
                parts.append(Part("action", text, label="assistant"))
        elif kind in ("tool_use", "server_tool_use"):
            parts.append(Part("action", _json_text(block.get("input")), label=f"tool_call:{block.get('name', '?')}"))
        elif kind == "tool_result":
            parts.append(Part("observation", _result_text(block.get("content")), label="tool_result"))
        else:
            body = {k: v for k, v in block.items() if k != "type"}
            parts.append(Part("action", _json_text(body), label=kind))
    return parts


def user_parts(content: object, kind: PartKind, source: str, line: int | None, where: str, label: str = "user") -> list[Part]:
    """The parts of one user (or system) message, all of ``kind`` (``prompt`` before the
    first assistant message, ``observation`` after): ``tool_result`` blocks labelled
    ``tool_result``, text and other blocks labelled ``label`` (or their block type).

    Raises:
        InputError: for content that is neither a string nor a list of typed blocks.
    """
    blocks = _blocks(content, source, line, where)
    if blocks is None:
        return [Part(kind, content, label=label)]  # type: ignore[arg-type]
    parts: list[Part] = []
    for block in blocks:
        if block["type"] == "tool_result":
            parts.append(Part(kind, _result_text(block.get("content")), label="tool_result"))
        elif block["type"] == "text" and isinstance(block.get("text"), str):
            parts.append(Part(kind, block["text"], label=label))
        elif block["type"] == "image":
            parts.append(Part(kind, "[image]", label=label))
        else:
            parts.append(Part(kind, _json_text({k: v for k, v in block.items() if k != "type"}), label=block["type"]))
    return parts


def apply_thinking_edits(content: list, edits: Mapping[int, str]) -> list:
    """A new content list with the thinking blocks at the indices of ``edits`` rewritten.

    Edited text: the block's ``thinking`` is replaced and its ``signature`` key removed. Text
    ``""``: the block is removed, unless nothing else would be left in the list, in which
    case the first such block stays as ``{"type": "thinking", "thinking": ""}``. Every other
    block (``redacted_thinking``, ``tool_use``, ``tool_result``, text) keeps its place.
    """
    out: list = []
    deleted: list[int] = []
    for i, block in enumerate(content):
        if i not in edits:
            out.append(block)
            continue
        text = edits[i]
        if text == "":
            deleted.append(i)
            continue
        new = {k: v for k, v in block.items() if k != "signature"}
        new["thinking"] = text
        out.append(new)
    if deleted and not out:
        out.append({"type": "thinking", "thinking": ""})
    return out


@dataclass
class _State:
    original: bytes
    lines: list[JsonLine] | None  # JSONL input; None for one JSON document
    values: list[object]  # parsed record per line (or the single document)


def _message_path_prefix(value: object) -> tuple[Path, object] | None:
    """``(path to the message list, system)`` of one record, or None when it holds none."""
    if is_message_list(value):
        return (), None
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return ("messages",), value.get("system")
    return None


def _trajectory(value: object, rec: int, traj_id: str, source: str, line: int | None) -> Trajectory:
    prefix, system = _message_path_prefix(value)  # type: ignore[misc]
    messages = value if not prefix else value[prefix[0]]  # type: ignore[index]
    prompt: list[Part] = []
    if system is not None:
        prompt.extend(user_parts(system, "prompt", source, line, "system", label="system"))
    steps: list[list[Part]] = []
    for i, msg in enumerate(messages):
        path = (*prefix, i)
        where = _field_name(path)
        if not isinstance(msg, dict):
            raise InputError(source, "message is not a JSON object", line=line, field=where)
        role = msg.get("role")
        if not isinstance(role, str):
            raise InputError(source, "message has no string 'role'", line=line, field=where + ".role")
        if "content" not in msg:
            raise InputError(source, "message has no 'content'", line=line, field=where + ".content")
        if role == "assistant":
            steps.append(assistant_parts(msg["content"], lambda b, p=path: ("thinking", rec, p, b), source, line, where + ".content"))
        elif steps:
            steps[-1].extend(user_parts(msg["content"], "observation", source, line, where + ".content", label=role))
        else:
            prompt.extend(user_parts(msg["content"], "prompt", source, line, where + ".content", label=role))
    meta = {"format": "anthropic"}
    if isinstance(value, dict) and isinstance(value.get("model"), str):
        meta["model"] = value["model"]
    return Trajectory(traj_id, tuple(prompt), tuple(Step(i, tuple(p)) for i, p in enumerate(steps)), meta=meta)


class AnthropicAdapter:
    """Anthropic Messages transcripts in a JSON file or JSONL (see module docstring)."""

    name = "anthropic"
    description = "Anthropic Messages (JSON list, {system, messages}, JSONL) with thinking / tool_use / tool_result blocks"

    def sniff(self, head: bytes) -> bool:
        """A JSON document or JSONL with ``role`` keys and at least one Anthropic-only block
        type (``thinking``, ``redacted_thinking``, ``tool_use``, ``tool_result``)."""
        return head.lstrip()[:1] in (b"[", b"{") and b'"role"' in head and _SNIFF.search(head) is not None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        base = os.path.basename(source) if source != "-" else "stdin"
        body = data[len(BOM) :] if data.startswith(BOM) else data
        whole = None
        try:
            whole = loads(body)
        except (ValueError, UnicodeDecodeError):
            pass
        if whole is not None and _message_path_prefix(whole) is not None:
            trajectory = _trajectory(whole, 0, f"{base}#0", source, None)
            return Document(self.name, source, [trajectory], _State(data, None, [whole]))
        warnings: list[str] = []
        lines = list(iter_jsonl(data, source, skip_bad_lines=skip_bad_lines, warnings=warnings))
        if not any(line.value is not None for line in lines):
            raise InputError(source, "file is empty")
        trajectories: list[Trajectory] = []
        values: list[object] = []
        for rec, line in enumerate(lines):
            values.append(line.value)
            if line.value is None or line.value is BAD_LINE:
                continue
            if _message_path_prefix(line.value) is None:
                problem = "no message list found (expected a list of messages or an object with 'messages')"
                if not skip_bad_lines:
                    raise InputError(source, problem, line=line.number)
                warnings.append(f"{source}:{line.number}: passed through unscored: {problem}")
                values[rec] = BAD_LINE
                continue
            trajectories.append(_trajectory(line.value, rec, f"{base}#{len(trajectories)}", source, line.number))
        return Document(self.name, source, trajectories, _State(data, lines, values), warnings)

    def dump(self, doc: Document, trajectories: Sequence[Trajectory], *, opaque: OpaqueEdits = OpaqueEdits.DROP) -> bytes:
        """Write ``doc`` back; see the module docstring for what happens to edited thinking.
        ``opaque`` is unused: Anthropic has no encrypted reasoning with readable text."""
        state: _State = doc.state  # type: ignore[assignment]
        per_message: dict[tuple[int, Path], dict[int, str]] = {}
        for original, new in zip(doc.trajectories, trajectories):
            for ref, (_part, text) in original.reasoning_edits(new).items():
                _kind, rec, path, block = ref
                per_message.setdefault((rec, path), {})[block] = text
        edited: dict[int, object] = {}
        for (rec, path), edits in per_message.items():
            if rec not in edited:
                edited[rec] = copy.deepcopy(state.values[rec])
            msg = edited[rec]
            for key in path:
                msg = msg[key]  # type: ignore[index]
            msg["content"] = apply_thinking_edits(msg["content"], edits)  # type: ignore[index]
        if state.lines is None:
            return dumps_document_like(edited[0], state.original) if edited else state.original
        return dump_lines(state.lines, edited)


ADAPTER = AnthropicAdapter()
