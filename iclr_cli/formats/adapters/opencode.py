"""OpenCode sessions: the ``opencode export`` JSON file and the ``opencode.db`` database.

OpenCode (github.com/anomalyco/opencode, formerly sst/opencode) keeps every session in one
SQLite database, ``~/.local/share/opencode/opencode.db`` (drizzle schema
``packages/opencode/src/session/session.sql.ts``): tables ``session`` (one row per session;
``parent_id`` for a subagent's), ``message`` (``id``, ``session_id``, ``time_created``,
``data``: the message info as JSON without ``id`` / ``sessionID``) and ``part`` (``id``,
``message_id``, ``session_id``, ``data``: the part as JSON without its ids). Messages are read
in ``time_created``, ``id`` order and parts in ``id`` order, as ``MessageV2`` hydrates them.
The database is read for ``score`` and ``savings``, one trajectory per session with at least
one message (id: the session id; ``meta`` gets the row's ``title``, and its ``time_created``
/ ``time_updated``, epoch milliseconds, as ``created`` / ``updated``), opened read-only
(:mod:`iclr_cli.formats.database`); ``prune`` refuses it and names the export command.

``opencode export <sessionID> > session.json`` (``packages/opencode/src/cli/cmd/export.ts``)
writes one session as ``{"info": SESSION, "messages": [{"info": MESSAGE, "parts": [PART...]}]}``
(newer releases add ``todos``), pretty-printed with two spaces. It is read and written back:
one trajectory, records with no edit byte for byte, an edited file re-serialised in the same
layout with every field kept. ``opencode import session.json`` loads it again; import keeps
the rows of a session id it already holds, so delete the original session first (or import
into another profile) for the pruned copy to take its place.

The messages and parts are read by :mod:`iclr_cli.formats.adapters.opencode_session` (steps, reasoning
and its provider metadata, tool calls and results, recorded usage). Kilo (``kilo.db``, ``kilo
export``), a fork of OpenCode, writes the same shapes: :mod:`iclr_cli.formats.adapters.kilo`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from iclr_cli.errors import InputError
from iclr_cli.formats import database
from iclr_cli.formats.base import Document
from iclr_cli.formats.database import DatabaseAdapter, DatabaseHead
from iclr_cli.formats.adapters.opencode_session import Message, PartError, field_of, read_session
from iclr_cli.formats.reading import base_name, located, parse_document, sealed_warnings, whole
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.writeback import Records, WriteBackAdapter
from iclr_cli.jsonio import loads
from iclr_cli.trajectory import Trajectory

KILO_TABLES = ("kilo_board", "kilo_board_message")
KILO_COLUMNS = ("current_state", "recent_progress")
"""What tells Kilo's database from OpenCode's: tables of its own (``kilo_board``, in the
database ``@kilocode/cli`` 7.7.7 writes) or columns it added to ``session`` in some releases
(Kilo-Org/kilocode ``session.sql.ts``, marked ``kilocode_change``)."""


def is_kilo(head: DatabaseHead) -> bool:
    """Whether ``head`` has Kilo's own tables or ``session`` columns (:data:`KILO_COLUMNS`)."""
    return any(t in head.tables for t in KILO_TABLES) or any(head.has("session", c) for c in KILO_COLUMNS)


class DatabaseRows(Records):
    """The parts of a session database, one record per ``part`` row (``values[k]`` its
    ``data``): the sites of an edit. ``score`` computes the reasoning as written from them;
    nothing ever writes a database back."""

    def dump(self, edited, drops=frozenset()) -> bytes:  # type: ignore[override]
        raise ValueError("a session database is never written back (prune refuses it up front)")


class OpenCodeAdapter(WriteBackAdapter, DatabaseAdapter):
    """OpenCode's export JSON and session database (module docstring)."""

    name = "opencode"
    description = "OpenCode session: `opencode export` JSON, or the database ~/.local/share/opencode/opencode.db"
    agent = "OpenCode"
    tables = ("session", "message", "part")
    export_hint = "export one session as a file with `opencode export <sessionID> > session.json` (Kilo: `kilo export`)"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for an export: one JSON object with an ``info`` object (a ``ses_`` id) and a
        ``messages`` list whose items have ``info`` (a ``role``) and a ``parts`` list."""
        records = Head.of(head).records
        doc = records[0] if len(records) == 1 else None
        if not isinstance(doc, dict) or not isinstance(doc.get("info"), dict) or not isinstance(doc.get("messages"), list):
            return None
        first = next((m for m in doc["messages"] if isinstance(m, dict)), None)
        if first is not None and isinstance(first.get("info"), dict) and "role" in first["info"] and isinstance(first.get("parts"), list):
            return Match(MARKER, "an OpenCode session export (info, and messages with info and parts)")
        if str(doc["info"].get("id", "")).startswith("ses_"):
            return Match(MARKER, "an OpenCode session export (info with a ses_ id, and messages)")
        return None

    def sniff_database(self, head: DatabaseHead) -> Match | None:
        """A match for a database with OpenCode's ``session``, ``message`` and ``part`` tables
        (and none of Kilo's own tables or columns: :func:`is_kilo`)."""
        if not has_session_tables(head) or is_kilo(head):
            return None
        return Match(MARKER, "an SQLite database with OpenCode's session, message and part tables")

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        """The export's session, or every session of the database (module docstring).

        Raises:
            InputError: naming the file and field (the table and row id for a database) of a
            record of the wrong shape, or a ``data`` column that is not JSON.
        """
        if database.is_database(data):
            return self._load_database(data, source)
        return self._load_export(data, source)

    def _load_export(self, data: bytes, source: str) -> Document:
        doc = parse_document(data, source)
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
            raise InputError(source, f"not an {self.agent} session export: no 'messages' list", field="messages")
        info = doc.get("info")
        if not isinstance(info, dict):
            raise InputError(source, f"not an {self.agent} session export: no 'info' object", field="info")
        messages = []
        for i, msg in enumerate(doc["messages"]):
            where = ("messages", i)
            if not isinstance(msg, dict) or not isinstance(msg.get("info"), dict):
                raise located(InputError(source, "message has no 'info' object", field=field_of((*where, "info"))), data)
            if not isinstance(msg.get("parts"), list) or not all(isinstance(p, dict) for p in msg["parts"]):
                raise located(InputError(source, "message has no 'parts' list of objects", field=field_of((*where, "parts"))), data)

            def name(k: int, keys: tuple, i: int = i) -> str:
                return field_of(("messages", i, "info", *keys) if k < 0 else ("messages", i, "parts", k, *keys))

            paths = [(0, "messages", i, "parts", k) for k in range(len(msg["parts"]))]
            messages.append(Message(msg["info"], msg["parts"], paths, name))
        traj_id = info["id"] if isinstance(info.get("id"), str) and info["id"] else f"{base_name(source)}#0"
        try:
            traj, reader = read_session(messages, source, traj_id, {"format": self.name})
        except PartError as exc:
            name = messages[exc.message].name
            raise _located(source, exc.problem, [name(exc.index, exc.keys[:n]) for n in range(len(exc.keys), -1, -1)], data) from None
        warnings = _skipped(source, reader.skipped) + sealed_warnings(source, reader.sealed)
        return Document(self.name, source, [traj], whole(data, doc), warnings, reader.unrecognised)

    def _load_database(self, data: bytes, source: str) -> Document:
        with database.connect(data, source) as conn:
            session_rows = database.rows(conn, source, "select * from session")
            message_rows = database.rows(conn, source, "select id, session_id, data from message order by session_id, time_created, id")
            part_rows = database.rows(conn, source, "select id, message_id, data from part order by message_id, id")
        parts: dict[str, list[tuple[str, dict]]] = {}
        for row in part_rows:
            parts.setdefault(row["message_id"], []).append((row["id"], _data(row, "part", source)))
        by_session: dict[str, list[tuple[str, dict]]] = {}
        for row in message_rows:
            by_session.setdefault(row["session_id"], []).append((row["id"], _data(row, "message", source)))
        facts = {r["id"]: _session_facts(r) for r in session_rows}
        order = [r["id"] for r in sorted(session_rows, key=lambda r: (_key(r, "time_created"), str(r["id"])))]
        order += sorted(set(by_session) - set(order))
        values: list[object] = []
        trajectories: list[Trajectory] = []
        warnings: list[str] = []
        unrecognised = []
        sealed = []
        skipped: list[str] = []
        for session_id in order:
            rows = by_session.get(session_id)
            if not rows:
                continue
            messages = []
            for message_id, info in rows:
                held = parts.get(message_id, [])
                first = len(values)
                values.extend(p for _, p in held)
                ids = [pid for pid, _ in held]

                def name(k: int, keys: tuple, ids: Sequence[str] = ids, message_id: str = message_id) -> str:
                    table, row = ("message", message_id) if k < 0 else ("part", ids[k])
                    return f"{table}[{row}].{field_of(('data', *keys))}"

                messages.append(Message({**info, "id": message_id, "sessionID": session_id}, [p for _, p in held],
                                        [(first + k,) for k in range(len(held))], name))
            try:
                traj, reader = read_session(messages, source, session_id, {"format": self.name, **facts.get(session_id, {})})
            except PartError as exc:
                message_id = rows[exc.message][0]
                table, row = ("message", message_id) if exc.index < 0 else ("part", parts[message_id][exc.index][0])
                raise InputError(source, f"table '{table}', row id {row!r}: {exc.problem}", field=field_of(("data", *exc.keys))) from None
            trajectories.append(traj)
            unrecognised += reader.unrecognised
            sealed += reader.sealed
            skipped += reader.skipped
        warnings += _skipped(source, skipped) + sealed_warnings(source, sealed)
        return Document(self.name, source, trajectories, DatabaseRows(b"", None, values), warnings, unrecognised)


def has_session_tables(head: DatabaseHead) -> bool:
    """Whether ``head`` has OpenCode's ``session``, ``message`` and ``part`` tables with the
    columns read."""
    return head.has("session", "id") and head.has("message", "id", "session_id", "data") and head.has("part", "id", "message_id", "data")


def _session_facts(row) -> dict[str, str]:
    """The ``meta`` a database gives one session from its ``session`` row: its own dates
    (``time_created`` / ``time_updated``, epoch milliseconds, as
    :data:`~iclr_cli.formats.database.SESSION_TIMES`) and its ``title``, where the row holds them."""
    keys = row.keys()
    facts = database.session_times(row, "time_created", "time_updated")
    if "title" in keys and isinstance(row["title"], str) and row["title"].strip():
        facts["title"] = row["title"].strip()
    return facts


def _key(row, column: str) -> int:
    try:
        value = row[column]
    except (IndexError, KeyError):
        return 0
    return value if isinstance(value, int) else 0


def _data(row, table: str, source: str) -> dict:
    """The JSON object of a row's ``data`` column.

    Raises:
        InputError: naming the file, table, row id and the field ``data``.
    """
    raw = row["data"]
    try:
        value = loads(raw.encode() if isinstance(raw, str) else raw)
    except (ValueError, TypeError, UnicodeError) as exc:
        raise InputError(source, f"table '{table}', row id {row['id']!r}: not valid JSON ({exc})", field="data") from None
    if not isinstance(value, dict):
        raise InputError(source, f"table '{table}', row id {row['id']!r}: not a JSON object", field="data")
    return value


def _located(source: str, problem: str, fields: Sequence[str], data: bytes) -> InputError:
    """The error for ``problem`` at ``fields[0]``, on the line of the first of ``fields`` (the
    field, then its parents) found in the document: a missing key is named, its object's line
    shown."""
    for name in fields:
        found = located(InputError(source, problem, field=name), data)
        if found.line is not None:
            return InputError(source, problem, line=found.line, field=fields[0])
    return located(InputError(source, problem, field=fields[0]), data)


def _skipped(source: str, skipped: Sequence[Hashable]) -> list[str]:
    if not skipped:
        return []
    shown = ", ".join(map(str, skipped[:5])) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
    return [f"{source}: not scored, left as written (assistant messages that ended in an error, which OpenCode never sends again): {shown}"]


ADAPTER = OpenCodeAdapter()
