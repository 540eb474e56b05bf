"""The canonical ``iclr`` JSONL format: one trajectory per line, schema ``iclr.trajectory/1``.

Full description: docs/FORMAT.md. In short::

    {"schema": "iclr.trajectory/1",
     "id": "run-42",
     "prompt": [{"kind": "prompt", "label": "system", "text": "..."}],
     "steps": [{"index": 0,
                "parts": [{"kind": "reasoning", "label": "reasoning", "text": "...",
                           "write_back": "in_place"},
                          {"kind": "action", "label": "tool_call:bash", "text": "{...}"},
                          {"kind": "observation", "label": "tool_result", "text": "..."}]}],
     "meta": {"format": "codex", "model": "gpt-5-codex"}}

It is the :class:`~iclr_cli.trajectory.Trajectory` model written out: every field the model
has (a part's ``call_id`` and ``media`` only when set), nothing format-specific. Unknown fields (at any level) are kept on a round trip: an edit
rewrites only the ``text`` of reasoning parts, and unedited lines are written byte for byte.
``write_back`` (default ``in_place``) records how the source format allows an edit; in this
format every edit is written as text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document, OpaqueEdits
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.reading import Where, load_chunks
from iclr_cli.formats.writeback import Site, TextRef, WriteBackAdapter, WriteResult
from iclr_cli.trajectory import Media, Part, Step, Trajectory, WriteBack

SCHEMA = "iclr.trajectory/1"
_SNIFF = re.compile(rb'"schema"\s*:\s*"iclr\.trajectory/')
_STEP_KINDS = ("reasoning", "action", "observation")


def to_record(traj: Trajectory) -> dict:
    """The canonical record of ``traj`` (``meta`` values that are not JSON are written as strings)."""

    def part(p: Part) -> dict:
        out: dict = {"kind": p.kind, "label": p.label, "text": p.text}
        if p.kind == "reasoning":
            out["write_back"] = p.write_back.value
        if p.call_id is not None:
            out["call_id"] = p.call_id
        if p.media is not None:
            out["media"] = {k: v for k, v in asdict(p.media).items() if v is not None}
        return out

    return {
        "schema": SCHEMA,
        "id": traj.id,
        "prompt": [part(p) for p in traj.prompt],
        "steps": [{"index": s.index, "parts": [part(p) for p in s.parts]} for s in traj.steps],
        "meta": {str(k): v if isinstance(v, (str, int, float, bool, type(None))) else str(v) for k, v in traj.meta.items()},
    }


def _part(value, source: str, line: int, where: str, kinds: tuple[str, ...], path: tuple) -> Part:
    if not isinstance(value, dict):
        raise InputError(source, "part must be an object", line=line, field=where)
    kind, text, label = value.get("kind"), value.get("text"), value.get("label", "")
    if kind not in kinds:
        raise InputError(source, f"must be one of {', '.join(kinds)}", line=line, field=f"{where}.kind")
    if not isinstance(text, str):
        raise InputError(source, "must be a string", line=line, field=f"{where}.text")
    if not isinstance(label, str):
        raise InputError(source, "must be a string", line=line, field=f"{where}.label")
    write = WriteBack.IN_PLACE
    if "write_back" in value:
        try:
            write = WriteBack(value["write_back"])
        except ValueError:
            known = ", ".join(w.value for w in WriteBack)
            raise InputError(source, f"must be one of {known}", line=line, field=f"{where}.write_back") from None
    call_id = value.get("call_id")
    if call_id is not None and not isinstance(call_id, str):
        raise InputError(source, "must be a string", line=line, field=f"{where}.call_id")
    ref = TextRef((Site((*path, "text")),)) if kind == "reasoning" else None
    return Part(kind, text, label=label, ref=ref, write_back=write, call_id=call_id, media=_media(value.get("media"), source, line, f"{where}.media"))


def _media(value, source: str, line: int, where: str) -> Media | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        raise InputError(source, "must be an object with a string 'kind'", line=line, field=where)
    fields = {k: value.get(k) for k in ("mime", "data", "url", "detail")}
    for k, v in fields.items():
        if v is not None and not isinstance(v, str):
            raise InputError(source, "must be a string", line=line, field=f"{where}.{k}")
    if (fields["data"] is None) == (fields["url"] is None):
        raise InputError(source, "needs exactly one of 'data' (base64) and 'url'", line=line, field=where)
    return Media(value["kind"], **fields)


def _trajectory(value, rec: int, source: str, line: int) -> Trajectory:
    if not isinstance(value, dict):
        raise InputError(source, "line must hold a JSON object", line=line)
    schema = value.get("schema")
    if schema != SCHEMA:
        raise InputError(source, f"unsupported schema {schema!r}; this version reads {SCHEMA!r}", line=line, field="schema")
    if not isinstance(value.get("id"), str):
        raise InputError(source, "must be a string", line=line, field="id")
    prompt, steps, meta = value.get("prompt", []), value.get("steps"), value.get("meta", {})
    if not isinstance(prompt, list):
        raise InputError(source, "must be a list", line=line, field="prompt")
    if not isinstance(steps, list):
        raise InputError(source, "must be a list", line=line, field="steps")
    if not isinstance(meta, dict):
        raise InputError(source, "must be an object", line=line, field="meta")
    p_parts = tuple(_part(p, source, line, f"prompt[{i}]", ("prompt",), (rec, "prompt", i)) for i, p in enumerate(prompt))
    out_steps = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("parts"), list):
            raise InputError(source, "step must be an object with a 'parts' list", line=line, field=f"steps[{i}]")
        if step.get("index", i) != i:
            raise InputError(source, f"must be {i} (steps are numbered from 0 in order)", line=line, field=f"steps[{i}].index")
        parts = tuple(_part(p, source, line, f"steps[{i}].parts[{j}]", _STEP_KINDS, (rec, "steps", i, "parts", j)) for j, p in enumerate(step["parts"]))
        out_steps.append(Step(i, parts))
    return Trajectory(value["id"], p_parts, tuple(out_steps), meta=dict(meta))


class IclrJsonlAdapter(WriteBackAdapter):
    """Canonical ``iclr.trajectory/1`` JSONL (see module docstring and docs/FORMAT.md)."""

    name = "iclr"
    description = f"canonical iclr JSONL ({SCHEMA}), one trajectory per line; see docs/FORMAT.md"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for lines whose ``schema`` is ``iclr.trajectory/...``."""
        raw = Head.of(head).raw
        if raw.lstrip()[:1] == b"{" and _SNIFF.search(raw) is not None:
            return Match(MARKER, "'schema': 'iclr.trajectory/1'")
        return None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        [doc] = self.load_chunks(data, source, skip_bad_lines=skip_bad_lines, chunk_size=None)
        return doc

    def load_chunks(self, data: bytes, source: str, *, skip_bad_lines: bool = False, chunk_size: int | None = 256) -> Iterator[Document]:
        """Yield Documents of at most ``chunk_size`` lines (all lines for ``None``); each
        chunk's :meth:`dump` returns exactly the bytes of its own lines.

        Raises:
            InputError: for an empty file, or the first bad line (unless ``skip_bad_lines``).
        """
        return load_chunks(data, source, self.name, _read, not_found="", documents=False, skip_bad_lines=skip_bad_lines, chunk_size=chunk_size)

    def write(self, doc: Document, trajectories: Sequence[Trajectory], *, opaque: OpaqueEdits = OpaqueEdits.DROP) -> WriteResult:
        # This format has no encrypted payload to protect: every edit is written as text,
        # opaque parts included (``opaque`` does not apply).
        plain = Document(doc.format, doc.source, [_in_place(t) for t in doc.trajectories], doc.state, doc.warnings)
        return super().write(plain, trajectories, opaque=opaque)


def _read(value, where: Where) -> list[Trajectory]:
    return [_trajectory(value, where.rec, where.source, where.line)]


def _in_place(traj: Trajectory) -> Trajectory:
    def fix(p: Part) -> Part:
        return replace(p, write_back=WriteBack.IN_PLACE) if p.write_back is WriteBack.OPAQUE else p

    return traj.with_steps([replace(s, parts=tuple(fix(p) for p in s.parts)) for s in traj.steps])


ADAPTER = IclrJsonlAdapter()
