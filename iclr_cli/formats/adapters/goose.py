"""Goose sessions (Block's agent, github.com/aaif-goose/goose): three shapes of one message model.

- **Legacy session JSONL** (``~/.local/share/goose/sessions/<id>.jsonl``, Goose before the
  SQLite store): an optional metadata line (``working_dir``, ``description``,
  ``message_count``, token totals; ``crates/goose/src/session/storage.rs`` ``SessionMetadata``)
  then one message per line. One file is one trajectory, id the file's stem (Goose's session
  id). Read and written back.
- **Session export** (``goose session export --session-id ID --format json --output FILE``;
  ``crates/goose-cli/src/commands/session.rs``): one JSON object, the ``Session`` with its
  messages in ``conversation``, ``provider_name`` and ``model_config``. One trajectory, id the
  session's ``id``. Read and written back (``goose session import FILE`` brings it back).
- **Session database** (``~/.local/share/goose/sessions/sessions.db``; tables ``sessions`` and
  ``messages``, a message's content list in ``messages.content_json``;
  ``crates/goose/src/session/session_manager.rs``): one trajectory per session with messages,
  in ``created_timestamp`` order (``meta`` gets the ``sessions`` row's ``created_at`` /
  ``updated_at``, SQLite's UTC text, as ``created`` / ``updated``: the dates ``savings`` gives
  each session). Read for ``score`` and ``savings`` only, opened read-only
  (:mod:`iclr_cli.formats.database`); ``prune`` refuses it and names the export command.

A message (``crates/goose/src/conversation/message.rs``, ``Message``) is ``{id?, role: user |
assistant, created, content: [...], metadata?}``; content items are tagged by ``type``
(camelCase ``MessageContent``). Steps (docs/FORMAT.md): one step per assistant message:
- ``thinking`` (``thinking``, ``signature``) is reasoning; the legacy ``reasoning`` item
  (``text``; Goose migrates it to ``thinking`` on read) too;
- ``redactedThinking`` (``data``) is reasoning with no readable text: ``READ_ONLY``, never
  edited, written back byte for byte;
- ``text`` is an action ``assistant``; ``toolRequest`` / ``frontendToolRequest`` an action
  ``tool_call:NAME`` (``toolCall.value.arguments`` as JSON, the item's ``id`` kept); an image
  a media part;
- ``toolResponse`` (in user messages) an observation ``tool_result`` paired by ``id``: the text
  of ``toolResult.value`` (a list of MCP content, or ``{content: [...], isError}``;
  ``crates/goose/src/conversation/tool_result_serde.rs``), images as media parts; user text is
  ``user`` (P before the first assistant message, observations after it);
- UI items (``toolConfirmationRequest``, ``actionRequired``, ``systemNotification``, older
  ``contextLengthExceeded`` / ``summarizationRequested``) are parts labelled by their type,
  their JSON as text; an assistant item of an unknown type is reported and rendered as JSON.
Messages hidden from the agent (``metadata.agentVisible: false``, history kept after a
compaction) stay in the trajectory, as across a Claude Code compaction.

Thinking signatures (METHOD.md, "Provider rules"; :mod:`iclr_cli.formats.sealing`): a
non-empty ``signature`` is ``WriteBack.SIGNED``; whose rule applies is told by the session's
model and provider (``model_config.model_name``, ``provider_name``; the legacy JSONL names
neither, so its signed thinking stays sealed unless ``--signed-thinking edit``). Anthropic
signed thinking is sealed by default ("Thinking blocks ... must be passed back unmodified",
https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks).
An edited signed block keeps its ``signature`` key with an empty value: Goose's
``ThinkingContent`` requires the field, so a message without it no longer loads. A fully
deleted thinking item is removed from ``content`` unless it is the only item.
Only the records holding an edited item are re-serialised; every other byte is kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from iclr_cli.errors import InputError
from iclr_cli.formats import database, media
from iclr_cli.formats.adapters.anthropic import REDACTED_TEXT
from iclr_cli.formats.base import Document, OpaqueEdits, Unrecognised
from iclr_cli.formats.reading import base_name, read_lines, sealed_warnings, try_document, whole
from iclr_cli.formats.sniff import MARKER, STRUCTURE, Head, Match
from iclr_cli.formats.writeback import (
    Path, Records, Site, TextRef, UnregisteredCopy, WriteResult, apply_edits, copy_error, field_name, register_site_kind,
)
from iclr_cli.jsonio import loads
from iclr_cli.jsonl import BAD_LINE
from iclr_cli.trajectory import Part, PartKind, Step, Trajectory, WriteBack

TOOL_CALLS = frozenset({"toolRequest", "frontendToolRequest"})
UI_ITEMS = frozenset({"toolConfirmationRequest", "actionRequired", "systemNotification", "contextLengthExceeded", "summarizationRequested"})
GOOSE_ITEMS = TOOL_CALLS | UI_ITEMS | {"toolResponse", "redactedThinking"}
"""Content item types only Goose writes (camelCase ``MessageContent`` tags): evidence for sniffing."""

_METADATA_KEYS = ("working_dir", "description", "message_count")

# An edited signed item keeps ``signature`` as "" (module docstring): a site whose edit blanks it.
register_site_kind("cleared", lambda value, _arg, _old, _new: "")


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class _At:
    """Where a message sits, for errors and notes: ``line`` (JSONL), ``fields`` the JSON path
    of its content list as a user would name it (``content``, ``conversation[3].content``,
    ``content_json``), ``row`` a database row's ``table messages, row id N (session S): ``."""

    source: str
    line: int | None
    fields: tuple
    row: str = ""

    def name(self, *keys: object) -> str:
        return field_name((*self.fields, *keys))

    def error(self, problem: str, *keys: object) -> InputError:
        return InputError(self.source, self.row + problem, line=self.line, field=self.name(*keys) or None)


class _Reader:
    """Builds one trajectory from its messages, in order (see module docstring)."""

    def __init__(self, unrecognised: list[Unrecognised], sealed: list[Unrecognised]):
        self.unrecognised = unrecognised
        self.sealed = sealed
        self.prompt: list[Part] = []
        self.steps: list[list[Part]] = []

    def _add(self, part: Part) -> None:
        (self.steps[-1] if self.steps else self.prompt).append(part)

    def message(self, msg: object, path: Path, at: _At, role_field: str = "role") -> None:
        """Read one message at ``path`` (its record path; ``msg["content"]`` is at
        ``path + ("content",)``).

        Raises:
            InputError: for a message that is not an object, a role other than ``user`` /
            ``assistant``, or a content that is not a list of typed items.
        """
        mark = (len(self.prompt), len(self.steps), len(self.steps[-1]) if self.steps else 0, len(self.unrecognised), len(self.sealed))
        try:
            self._message(msg, path, at, role_field)
        except InputError:
            # a message that fails half-read leaves nothing behind (--skip-bad-lines passes it through)
            del self.prompt[mark[0]:], self.steps[mark[1]:], self.unrecognised[mark[3]:], self.sealed[mark[4]:]
            if self.steps:
                del self.steps[-1][mark[2]:]
            raise

    def _message(self, msg: object, path: Path, at: _At, role_field: str) -> None:
        if not isinstance(msg, dict):
            raise at.error("message is not a JSON object")
        role = msg.get("role")
        if role not in ("user", "assistant"):
            raise InputError(at.source, at.row + f"role must be 'user' or 'assistant', not {_json(role)}", line=at.line,
                             field=field_name((*at.fields[:-1], role_field)) or role_field)
        content = msg.get("content")
        if not isinstance(content, list):
            raise at.error("must be a list of content items")
        if role == "assistant":
            self.steps.append([])
        for i, item in enumerate(content):
            if not isinstance(item, dict) or not isinstance(item.get("type"), str):
                raise at.error("content item is not an object with a string 'type'", i)
            self._item(item, role, (*path, "content", i), at, i)

    def _item(self, item: dict, role: str, path: Path, at: _At, i: int) -> None:
        kind = item["type"]
        observed: PartKind = "observation" if self.steps else "prompt"
        if kind == "text":
            if not isinstance(item.get("text"), str):
                raise at.error("text item has no string 'text'", i, "text")
            if role == "assistant":
                if item["text"].strip():
                    self._add(Part("action", item["text"], label="assistant"))
            else:
                self._add(Part(observed, item["text"], label="user"))
        elif kind in ("thinking", "reasoning") and role == "assistant":
            key = "thinking" if kind == "thinking" else "text"
            if not isinstance(item.get(key), str):
                raise at.error(f"{kind} item has no string {key!r}", i, key)
            signature = item.get("signature")
            signed = isinstance(signature, str) and bool(signature.strip())
            ref = TextRef((Site((*path, key)),), strip_keys=((path, "signature"),) if signed else (), remove_when_empty=path)
            self._add(Part("reasoning", item[key], label="reasoning", ref=ref, write_back=WriteBack.SIGNED if signed else WriteBack.IN_PLACE))
        elif kind == "redactedThinking" and role == "assistant":
            self._add(Part("reasoning", REDACTED_TEXT, label="redacted_thinking", write_back=WriteBack.READ_ONLY))
            self.sealed.append(Unrecognised(at.line, at.name(i), "redacted by the provider (redactedThinking)"))
        elif kind in TOOL_CALLS:
            self._add(self._call(item, at, i))
        elif kind == "toolResponse":
            self._result(item, observed, at, i)
        elif kind == "image" and isinstance(item.get("data"), str):
            mime = item.get("mimeType")
            found = media.Media("image", mime=mime if isinstance(mime, str) else None, data=item["data"])
            self._add(Part("action" if role == "assistant" else observed, "", label="assistant" if role == "assistant" else "user", media=found))
        elif kind in UI_ITEMS or role == "user":
            self._add(Part(observed, _json(item), label=kind))
        else:
            self.unrecognised.append(Unrecognised(at.line, at.name(i), f"assistant content item of type {kind!r}"))
            self._add(Part("action", _json(item), label=kind))

    @staticmethod
    def _call(item: dict, at: _At, i: int) -> Part:
        call = item.get("toolCall")
        call_id = item.get("id") if isinstance(item.get("id"), str) else None
        if not isinstance(call, dict) or call.get("status") not in ("success", "error"):
            raise at.error("must be an object with 'status' success or error", i, "toolCall")
        if call["status"] == "error":
            return Part("action", str(call.get("error", "")), label="tool_call:invalid", call_id=call_id)
        value = call.get("value")
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            raise at.error("a successful tool call needs a 'value' with a string 'name'", i, "toolCall", "value")
        return Part("action", _json(value.get("arguments", {})), label=f"tool_call:{value['name']}", call_id=call_id)

    def _result(self, item: dict, kind: PartKind, at: _At, i: int) -> None:
        result = item.get("toolResult")
        call_id = item.get("id") if isinstance(item.get("id"), str) else None
        if not isinstance(result, dict) or result.get("status") not in ("success", "error"):
            raise at.error("must be an object with 'status' success or error", i, "toolResult")
        if result["status"] == "error":
            self._add(Part(kind, str(result.get("error", "")), label="tool_result", call_id=call_id))
            return
        value = result.get("value")
        blocks = value.get("content") if isinstance(value, dict) else value  # CallToolResult, or the older list
        if not isinstance(blocks, list):
            raise at.error("must be a list of content, or an object with a 'content' list", i, "toolResult", "value")
        texts: list[str] = []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif isinstance(block, dict) and block.get("type") == "image" and isinstance(block.get("data"), str):
                mime = block.get("mimeType")
                self._add(Part(kind, "", label="tool_result", call_id=call_id, media=media.Media("image", mime=mime if isinstance(mime, str) else None, data=block["data"])))
            elif isinstance(block, dict) and isinstance((resource := block.get("resource")), dict) and isinstance(resource.get("text"), str):
                texts.append(resource["text"])
            else:
                texts.append(_json(block))
        if texts or not blocks:
            self._add(Part(kind, "\n".join(texts), label="tool_result", call_id=call_id))

    def trajectory(self, traj_id: str, meta: dict[str, object]) -> Trajectory:
        return Trajectory(traj_id, tuple(self.prompt), tuple(Step(k, tuple(p)) for k, p in enumerate(self.steps)), meta=meta)


def _session_meta(provider: object, model_config: object) -> dict[str, object]:
    """``meta`` of a session that records its provider and model (export, database): the
    model and provider the provider rule is told by (:mod:`iclr_cli.formats.sealing`)."""
    meta: dict[str, object] = {"format": "goose"}
    model = model_config.get("model_name") if isinstance(model_config, dict) else None
    if isinstance(model, str) and model:
        meta["model"] = model
    if isinstance(provider, str) and provider:
        meta["provider"] = provider
    return meta


@dataclass
class _Database:
    """``Document.state`` of a session database: the messages as parsed, by record index
    (the paths of the parts' refs), for the reasoning-as-written of ``score``; no bytes."""

    values: list[object]


class GooseAdapter(database.DatabaseAdapter):
    """Goose session JSONL, session export JSON, and ``sessions.db`` (see module docstring)."""

    name = "goose"
    description = "Goose sessions (~/.local/share/goose/sessions: <id>.jsonl, sessions.db read-only; session export JSON)"
    tables = ("sessions", "messages")
    export_hint = ("export one session with Goose's own command, goose session export --session-id ID --format json --output FILE "
                   "(ids: goose session list; goose session import FILE brings it back)")

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for a legacy metadata line (``working_dir`` / ``description`` with
        ``message_count``, no ``role``), a session export (an object with a ``conversation``
        list and ``working_dir``), or messages holding a Goose-only content type
        (``toolRequest``, ``toolResponse``, ``redactedThinking``, ...); messages with
        ``created`` and typed content items alone are weaker evidence."""
        records = Head.of(head).records
        if not records:
            return None
        first = records[0]
        if isinstance(first, dict) and isinstance(first.get("conversation"), list) and "working_dir" in first:
            return Match(MARKER, "a Goose session export (working_dir and a conversation list)")
        if isinstance(first, dict) and "role" not in first and "message_count" in first and ("working_dir" in first or "description" in first):
            return Match(MARKER, "a Goose session metadata line (working_dir, description, message_count)")
        messages = [r for r in records if isinstance(r, dict) and r.get("role") in ("user", "assistant") and isinstance(r.get("content"), list)]
        types = {c.get("type") for m in messages for c in m["content"] if isinstance(c, dict)}
        if types & GOOSE_ITEMS:
            return Match(MARKER, f"Goose message content ({', '.join(sorted(t for t in types & GOOSE_ITEMS))})")
        if messages and all(isinstance(m.get("created"), int) for m in messages) and len(messages) == len(records):
            return Match(STRUCTURE + 2, "one message per line with 'created' and typed content items (Goose)")
        return None

    def sniff_database(self, head: database.DatabaseHead) -> Match | None:
        """A match for Goose's ``sessions`` and ``messages`` tables (``content_json``)."""
        if head.has("sessions", "id", "working_dir") and head.has("messages", "session_id", "role", "content_json"):
            return Match(MARKER, "a Goose sessions.db (tables sessions, messages with content_json)")
        return None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        """The file as trajectories (see module docstring).

        Raises:
            InputError: naming the file and line (JSONL), the field, and for a database the
            table and row, of a record that is not a Goose message.
        """
        if database.is_database(data):
            return self._load_database(data, source, skip_bad_lines)
        value = try_document(data)
        if isinstance(value, dict) and "conversation" in value and "role" not in value:
            return self._load_export(data, value, source)
        return self._load_lines(data, source, skip_bad_lines)

    def _load_lines(self, data: bytes, source: str, skip_bad_lines: bool) -> Document:
        warnings: list[str] = []
        records = read_lines(data, source, skip_bad_lines=skip_bad_lines, warnings=warnings)
        unrecognised: list[Unrecognised] = []
        sealed: list[Unrecognised] = []
        reader = _Reader(unrecognised, sealed)
        first = next((k for k, v in enumerate(records.values) if v is not None and v is not BAD_LINE), None)
        for rec, line in enumerate(records.lines or []):
            value = line.value
            if value is None or value is BAD_LINE:
                continue
            if rec == first and isinstance(value, dict) and "role" not in value and any(k in value for k in _METADATA_KEYS):
                continue  # the session metadata line (Goose reads it as such when it parses as one)
            try:
                reader.message(value, (rec,), _At(source, line.number, ("content",)))
            except InputError as exc:
                if not skip_bad_lines:
                    raise
                warnings.append(f"{source}:{line.number}: passed through unscored: {exc.problem}")
                records.values[rec] = BAD_LINE
        warnings += sealed_warnings(source, sealed)
        name = base_name(source)
        traj_id = name[: -len(".jsonl")] if name.endswith(".jsonl") and len(name) > 6 else f"{name}#0"
        return Document(self.name, source, [reader.trajectory(traj_id, {"format": "goose"})], records, warnings, unrecognised)

    def _load_export(self, data: bytes, value: dict, source: str) -> Document:
        conversation = value["conversation"]
        if not isinstance(conversation, list):
            raise InputError(source, "a Goose session export must be an object with a 'conversation' list of messages", field="conversation")
        unrecognised: list[Unrecognised] = []
        sealed: list[Unrecognised] = []
        reader = _Reader(unrecognised, sealed)
        for k, msg in enumerate(conversation):
            reader.message(msg, (0, "conversation", k), _At(source, None, ("conversation", k, "content")))
        sid = value.get("id")
        traj_id = sid if isinstance(sid, str) and sid else f"{base_name(source)}#0"
        meta = _session_meta(value.get("provider_name"), value.get("model_config"))
        return Document(self.name, source, [reader.trajectory(traj_id, meta)], whole(data, value), sealed_warnings(source, sealed), unrecognised)

    def _load_database(self, data: bytes, source: str, skip_bad_lines: bool) -> Document:
        values: list[object] = []
        warnings: list[str] = []
        unrecognised: list[Unrecognised] = []
        sealed: list[Unrecognised] = []
        readers: dict[str, _Reader] = {}
        with database.connect(data, source) as conn:
            columns = {r[1].lower() for r in database.rows(conn, source, "pragma table_info(messages)")}
            order = "created_timestamp, id" if "created_timestamp" in columns else "id"
            sessions = {r["id"]: r for r in database.rows(conn, source, "select * from sessions order by created_at, id")}
            for row in database.rows(conn, source, f"select id, session_id, role, content_json from messages order by {order}"):
                sid = str(row["session_id"])
                at = _At(source, None, ("content_json",), f"table messages, row id {row['id']} (session {sid}): ")
                raw = row["content_json"]
                problem = None if isinstance(raw, (str, bytes)) else "holds no JSON text (NULL or a number)"
                try:
                    content = loads(raw) if problem is None else None
                except (ValueError, UnicodeDecodeError) as exc:
                    problem = f"not valid JSON ({exc})"
                if problem is not None:
                    if not skip_bad_lines:
                        raise at.error(problem)
                    warnings.append(f"{source}: passed through unscored: {at.row}{problem}")
                    continue
                reader = readers.setdefault(sid, _Reader(unrecognised, sealed))
                values.append({"role": row["role"], "content": content})
                reader.message(values[-1], (len(values) - 1,), at)
            trajectories = []
            for sid in [*(s for s in sessions if s in readers), *(s for s in readers if s not in sessions)]:
                meta = _session_meta(*_row_meta(sessions.get(sid), source)) | database.session_times(sessions.get(sid), "created_at", "updated_at")
                trajectories.append(readers[sid].trajectory(sid, meta))
        warnings += sealed_warnings(source, sealed)
        return Document(self.name, source, trajectories, _Database(values), warnings, unrecognised)

    def write(self, doc: Document, trajectories, *, opaque: OpaqueEdits = OpaqueEdits.DROP) -> WriteResult:
        """``doc`` with the reasoning of ``trajectories`` (the engine of
        :mod:`iclr_cli.formats.writeback`; a signed item's signature is blanked, not removed).
        For a database only the reasoning as written is made: asking for its bytes raises
        :class:`InputError` (iclr never writes a database)."""
        originals = [_blank_signatures(t) for t in doc.trajectories]
        state = doc.state
        values = state.values if isinstance(state, (Records, _Database)) else []
        try:
            applied = apply_edits(values, originals, trajectories, opaque)
        except UnregisteredCopy as exc:
            line = state.lines[exc.path[0]].number if isinstance(state, Records) and state.lines is not None else None
            raise copy_error(doc.source, exc, line) from None
        if isinstance(state, _Database):
            def refuse() -> bytes:
                raise InputError(doc.source, f"a session database: iclr never writes one; {self.export_hint}")
            return WriteResult(refuse, applied.written)
        return WriteResult(lambda: state.dump(applied.edited, applied.dropped), applied.written)

    def dump(self, doc: Document, trajectories, *, opaque: OpaqueEdits = OpaqueEdits.DROP) -> bytes:
        """The bytes of :meth:`write`."""
        return self.write(doc, trajectories, opaque=opaque).data


def _row_meta(row, source: str) -> tuple[object, object]:
    """``(provider_name, model_config)`` of a ``sessions`` row (either None when absent).

    Raises:
        InputError: when ``model_config_json`` is not JSON (naming table, row and field).
    """
    if row is None:
        return None, None
    keys = row.keys()
    provider = row["provider_name"] if "provider_name" in keys else None
    raw = row["model_config_json"] if "model_config_json" in keys else None
    if raw is None:
        return provider, None
    try:
        return provider, loads(raw)
    except ValueError as exc:
        raise InputError(source, f"table sessions, row id {row['id']}: not valid JSON ({exc})", field="model_config_json") from None


def _blank_signatures(traj: Trajectory) -> Trajectory:
    """``traj`` with each signature the write-back would remove (``strip_keys``) turned into
    a ``cleared`` site: an edited signed item keeps ``"signature": ""`` (module docstring)."""
    steps = []
    for step in traj.steps:
        parts = []
        for p in step.parts:
            ref = p.ref
            if isinstance(ref, TextRef) and ref.strip_keys:
                cleared = tuple(Site((*path, key), "cleared") for path, key in ref.strip_keys)
                p = replace(p, ref=replace(ref, sites=(*ref.sites, *cleared), strip_keys=()))
            parts.append(p)
        steps.append(Step(step.index, tuple(parts)))
    return traj.with_steps(steps)


ADAPTER = GooseAdapter()
