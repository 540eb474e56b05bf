"""OpenAI chat-completions messages (``role``, ``content``, ``tool_calls``, ``role: "tool"``).

Shapes accepted (one trajectory per message list):
- a JSON list of messages, or an object with ``messages``;
- JSONL with one such list or object per line;
- a list of benchmark results, each with a ``traj`` message list (tau-bench);
- API traffic logs, one ``{"request": {"messages": [...]}, "response": {"choices": [...]}}``
  per line: a trajectory is the request's messages plus the message its response returned.

Reasoning (METHOD.md, "Objects"): ``reasoning_content``, ``reasoning`` (when a string; when
both hold the same text they are one part and both are edited), and inline
``<think>...</think>`` in ``content``. Everything else is an action (visible content, tool
calls) or an observation (tool results, later user messages). Messages before the first
assistant message form P.

Write-back: only edited records are re-serialised (in the input's own layout); a fully deleted
``reasoning_content`` becomes ``""``, never a missing field (DeepSeek thinking mode requires
the field on assistant turns with tool calls).
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Sequence
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
from iclr_cli.trajectory import Part, Step, Trajectory

_THINK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL)
_REASONING_FIELDS = ("reasoning_content", "reasoning")

Path = tuple  # keys from a record's root to one message


@dataclass
class _State:
    original: bytes
    lines: list[JsonLine] | None  # JSONL input; None for one JSON document
    values: list[object]  # parsed record per line (or the single document)
    trajectories: list[tuple[int, list[Path]]]  # (record index, message paths)


def _get(value, path: Path):
    for key in path:
        value = value[key]
    return value


def _message_paths(value, source: str, line: int | None) -> list[list[Path]] | None:
    """The message lists inside one JSON value, or None when it holds none."""

    def is_messages(x) -> bool:
        return isinstance(x, list) and bool(x) and all(isinstance(m, dict) and "role" in m for m in x)

    if is_messages(value):
        return [[(i,) for i in range(len(value))]]
    if isinstance(value, dict):
        req, resp = value.get("request"), value.get("response")
        if isinstance(req, dict) and isinstance(req.get("messages"), list):
            paths = [("request", "messages", i) for i in range(len(req["messages"]))]
            choices = resp.get("choices") if isinstance(resp, dict) else None
            if isinstance(choices, list) and choices and isinstance(choices[0], dict) and isinstance(choices[0].get("message"), dict):
                paths.append(("response", "choices", 0, "message"))
            return [paths]
        for key in ("messages", "traj"):
            if isinstance(value.get(key), list):
                return [[(key, i) for i in range(len(value[key]))]]
    if isinstance(value, list) and value and all(isinstance(r, dict) and isinstance(r.get("traj"), list) for r in value):
        return [[(k, "traj", i) for i in range(len(r["traj"]))] for k, r in enumerate(value)]
    return None


def _field_name(path: Path) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else (f".{k}" if i else k) for i, k in enumerate(path))


def _text_of(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _check_types(msg: dict, path: Path, source: str, line: int | None) -> None:
    """Fields this adapter reads must have the types the chat format gives them."""
    where = _field_name(path)
    content = msg.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise InputError(source, f"must be a string, a list of parts or null, not {type(content).__name__}", line=line, field=f"{where}.content")
    for name in _REASONING_FIELDS:
        value = msg.get(name)
        if value is not None and not isinstance(value, (str, dict, list)):
            raise InputError(source, f"must be a string, not {type(value).__name__}", line=line, field=f"{where}.{name}")
    calls = msg.get("tool_calls")
    if calls is not None and not (isinstance(calls, list) and all(isinstance(c, dict) for c in calls)):
        raise InputError(source, "must be a list of tool-call objects or null", line=line, field=f"{where}.tool_calls")


def _assistant_parts(msg: dict, rec: int, path: Path) -> list[Part]:
    parts: list[Part] = []
    fields = [f for f in _REASONING_FIELDS if isinstance(msg.get(f), str)]
    if len(fields) == 2 and msg[fields[0]] != msg[fields[1]]:
        groups = [(f,) for f in fields]
    else:
        groups = [tuple(fields)] if fields else []
    for group in groups:
        parts.append(Part("reasoning", msg[group[0]], label="reasoning", ref=("field", rec, path, group)))
    content = msg.get("content")
    if isinstance(content, str):
        items = [(None, content)]
    elif isinstance(content, list):
        items = [(i, p["text"]) for i, p in enumerate(content) if isinstance(p, dict) and isinstance(p.get("text"), str)]
    else:
        items = []
    for idx, text in items:
        visible = text
        for k, m in enumerate(_THINK.finditer(text)):
            parts.append(Part("reasoning", m.group(1), label="reasoning", ref=("think", rec, path, idx, k)))
        if "<think>" in text:
            visible = _THINK.sub("", text)
        if visible.strip():
            parts.append(Part("action", visible, label="assistant"))
    for call in msg.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            args = fn.get("arguments")
            parts.append(Part("action", args if isinstance(args, str) else str(args), label=f"tool_call:{fn.get('name', '?')}"))
    fc = msg.get("function_call")
    if isinstance(fc, dict):
        parts.append(Part("action", str(fc.get("arguments", "")), label=f"tool_call:{fc.get('name', '?')}"))
    return parts


def _trajectory(value, paths: list[Path], rec: int, traj_id: str, source: str, line: int | None) -> Trajectory:
    prompt: list[Part] = []
    steps: list[tuple[int, list[Part]]] = []
    for path in paths:
        msg = _get(value, path)
        if not isinstance(msg, dict):
            raise InputError(source, "message is not a JSON object", line=line, field=_field_name(path))
        role = msg.get("role")
        if not isinstance(role, str):
            raise InputError(source, "message has no string 'role'", line=line, field=_field_name(path) + ".role")
        _check_types(msg, path, source, line)
        if role == "assistant":
            steps.append((len(steps), _assistant_parts(msg, rec, path)))
            continue
        label = "tool_result" if role in ("tool", "function") else role
        part_kind = "prompt" if not steps else "observation"
        part = Part(part_kind, _text_of(msg.get("content")), label=label)
        (prompt if not steps else steps[-1][1]).append(part)
    return Trajectory(traj_id, tuple(prompt), tuple(Step(i, tuple(p)) for i, p in steps), meta={"format": "openai"})


class OpenAIChatAdapter:
    """OpenAI chat messages in a JSON file or JSONL (see module docstring)."""

    name = "openai"
    description = "OpenAI chat messages (JSON list, {messages}, JSONL, tau-bench traj, request/response logs)"

    def sniff(self, head: bytes) -> bool:
        stripped = head.lstrip()
        return stripped[:1] in (b"[", b"{") and b'"role"' in head

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        docs = list(self.load_chunks(data, source, skip_bad_lines=skip_bad_lines, chunk_size=None))
        if len(docs) == 1:
            return docs[0]
        lines = [line for d in docs for line in d.state.lines]  # type: ignore[union-attr]
        values = [v for d in docs for v in d.state.values]  # type: ignore[union-attr]
        spans, offset = [], 0
        for d in docs:
            spans.extend((rec + offset, paths) for rec, paths in d.state.trajectories)  # type: ignore[union-attr]
            offset += len(d.state.lines)  # type: ignore[union-attr]
        return Document(self.name, source, [t for d in docs for t in d.trajectories], _State(data, lines, values, spans), [w for d in docs for w in d.warnings])

    def load_chunks(self, data: bytes, source: str, *, skip_bad_lines: bool = False, chunk_size: int | None = 256):
        """Yield Documents of at most ``chunk_size`` JSONL lines each (one for a JSON file), so
        a file of one trajectory per line is processed with flat memory. Each chunk's
        :meth:`dump` returns exactly the bytes of its own lines."""
        base = os.path.basename(source) if source != "-" else "stdin"
        body = data[len(BOM) :] if data.startswith(BOM) else data
        # A JSONL file fails this parse at the end of its first line, so the attempt is cheap.
        if body.lstrip()[:1] in (b"[", b"{"):
            whole = None
            try:
                whole = loads(body)
            except (ValueError, UnicodeDecodeError):
                pass
            found = _message_paths(whole, source, None) if whole is not None else None
            if found is not None:
                spans = [(0, paths) for paths in found]
                trajs = [_trajectory(whole, paths, 0, f"{base}#{i}", source, None) for i, paths in enumerate(found)]
                yield Document(self.name, source, trajs, _State(data, None, [whole], spans), [])
                return
        count = 0
        seen_any = False
        chunk: list[JsonLine] = []
        for line in iter_jsonl(data, source, skip_bad_lines=skip_bad_lines, warnings=None):
            seen_any = True
            chunk.append(line)
            if chunk_size is not None and len(chunk) >= chunk_size:
                doc = self._chunk(chunk, data, source, base, count, skip_bad_lines)
                count += len(doc.trajectories)
                yield doc
                chunk = []
        if not seen_any:
            raise InputError(source, "file is empty")
        if chunk:
            yield self._chunk(chunk, data, source, base, count, skip_bad_lines)

    def _chunk(self, lines: list[JsonLine], data: bytes, source: str, base: str, first_id: int, skip_bad_lines: bool) -> Document:
        warnings: list[str] = []
        values: list[object] = []
        trajectories: list[Trajectory] = []
        spans: list[tuple[int, list[Path]]] = []
        for rec, line in enumerate(lines):
            values.append(line.value)
            if line.value is BAD_LINE:
                warnings.append(f"{source}:{line.number}: skipped: {line.problem}")
                continue
            if line.value is None:
                continue
            found = _message_paths(line.value, source, line.number)
            if found is None:
                problem = "no message list found (expected a list of messages, 'messages', 'traj', or request/response)"
                if not skip_bad_lines:
                    raise InputError(source, problem, line=line.number)
                warnings.append(f"{source}:{line.number}: passed through unscored: {problem}")
                continue
            for paths in found:
                spans.append((rec, paths))
                tid = f"{base}#{first_id + len(trajectories)}"
                trajectories.append(_trajectory(line.value, paths, rec, tid, source, line.number))
        return Document(self.name, source, trajectories, _State(data, lines, values, spans), warnings)

    def dump(self, doc: Document, trajectories: Sequence[Trajectory], *, opaque: OpaqueEdits = OpaqueEdits.DROP) -> bytes:
        state: _State = doc.state  # type: ignore[assignment]
        edited: dict[int, object] = {}
        for original, new in zip(doc.trajectories, trajectories):
            for ref, (_part, text) in original.reasoning_edits(new).items():
                rec = ref[1]
                if rec not in edited:
                    edited[rec] = copy.deepcopy(state.values[rec])
                _apply(edited[rec], ref, text)
        if state.lines is None:
            return dumps_document_like(edited[0], state.original) if edited else state.original
        return dump_lines(state.lines, edited)


def _apply(value, ref, text: str) -> None:
    kind, _rec, path, *rest = ref
    msg = _get(value, path)
    if kind == "field":
        for field in rest[0]:
            msg[field] = text
        return
    idx, k = rest
    holder, key = (msg, "content") if idx is None else (msg["content"][idx], "text")
    original = holder[key]
    match = list(_THINK.finditer(original))[k]
    holder[key] = original[: match.start(1)] + text + original[match.end(1) :]


ADAPTER = OpenAIChatAdapter()
