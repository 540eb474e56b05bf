"""Session databases: agents that keep their sessions in SQLite rather than in files.

OpenCode and Kilo (``~/.local/share/opencode/opencode.db``) and Goose (``sessions.db``) keep
every session in one SQLite file. ``iclr`` reads them for ``score`` and ``savings`` and never
writes them: the file is opened read-only (``mode=ro``; the agent may be running and own it),
and ``prune`` refuses it up front, naming the agent's own export command that gives a file it
can write (:attr:`DatabaseAdapter.export_hint`).

An adapter that reads a database says so with ``tables``: the tables a file must hold to be
its database. :func:`iclr_cli.formats.registry.detect_why` sees the SQLite header, lists the
file's tables once (:class:`DatabaseHead`) and asks each database adapter; JSON adapters are
never shown a database.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import quote

from iclr_cli.errors import InputError

MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite 3 database (sqlite.org/fileformat.html, 1.3)."""

# What SQLite writes beside a database in WAL mode: never sessions of their own.
SIDE_FILES = ("-wal", "-shm", "-journal")


def is_database(data: bytes) -> bool:
    """Whether ``data`` is an SQLite 3 database (by its header)."""
    return data.startswith(MAGIC)


@dataclass(frozen=True)
class DatabaseHead:
    """What a database adapter's sniff judges: the file's table names, and the columns of
    each (lower case)."""

    tables: dict[str, frozenset[str]]

    def has(self, table: str, *columns: str) -> bool:
        """Whether ``table`` exists with every one of ``columns``."""
        return table in self.tables and all(c in self.tables[table] for c in columns)


@contextmanager
def connect(data: bytes, source: str) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the database ``data`` was read from.

    A regular file is opened in place with ``mode=ro`` so that rows still in its write-ahead
    log (an agent that is running) are seen; where SQLite cannot open it that way (a folder it
    may not write the ``-shm`` file in) it is opened ``immutable``. Standard input and pipes
    are loaded from ``data`` into memory. Rows come back as :class:`sqlite3.Row`.

    Raises:
        InputError: naming ``source`` when SQLite cannot read the file.
    """
    conn = None
    if source != "-" and _regular(source):
        base = "file:" + quote(os.path.abspath(source))
        for query in ("?mode=ro", "?mode=ro&immutable=1"):
            try:
                conn = sqlite3.connect(base + query, uri=True)
                conn.execute("select count(*) from sqlite_master").fetchone()
                break
            except sqlite3.Error:
                if conn is not None:
                    conn.close()
                conn = None
    try:
        if conn is None:
            conn = sqlite3.connect(":memory:")
            conn.deserialize(data)
            conn.execute("select count(*) from sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise InputError(source, f"an SQLite database iclr cannot read: {exc}") from None
    conn.row_factory = sqlite3.Row
    with closing(conn):
        yield conn


def head(data: bytes, source: str) -> DatabaseHead:
    """The tables and columns of the database (see :func:`connect`).

    Raises:
        InputError: when SQLite cannot read it.
    """
    with connect(data, source) as conn:
        try:
            names = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")]
            return DatabaseHead({n: frozenset(r[1].lower() for r in conn.execute(f'pragma table_info("{n}")')) for n in names})
        except sqlite3.Error as exc:
            raise InputError(source, f"an SQLite database iclr cannot read: {exc}") from None


def rows(conn: sqlite3.Connection, source: str, sql: str, *args: object) -> list[sqlite3.Row]:
    """``conn.execute(sql, args).fetchall()``, with SQLite's errors as :class:`InputError`
    naming ``source`` (a database written by another version of the agent)."""
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.Error as exc:
        raise InputError(source, f"cannot read the sessions: {exc}") from None


SESSION_TIMES = ("created", "updated")
"""The ``Trajectory.meta`` keys of a session database's own dates for a session (ISO 8601,
UTC; :func:`row_time`): when its row was created and last updated. A database is written by
every session, so its modification time dates none of them; ``iclr savings`` dates and
filters each session by these instead."""


def row_time(value: object) -> str | None:
    """A session row's time column as ISO 8601 UTC text, or ``None`` when it holds none.

    An integer is Unix time: milliseconds when past 10^11 (OpenCode's and Kilo's
    ``time_created`` / ``time_updated``, ``Date.now()``), else seconds. Text is SQLite's
    ``CURRENT_TIMESTAMP`` (``YYYY-MM-DD HH:MM:SS``, UTC) or ISO 8601.
    """
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            when = datetime.fromtimestamp(value / 1000 if value > 1e11 else value, tz=timezone.utc)
        elif isinstance(value, str) and value.strip():
            when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            when = when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    return when.isoformat()


def session_times(row: sqlite3.Row | None, created: str, updated: str) -> dict[str, str]:
    """The :data:`SESSION_TIMES` of a session row, from its columns ``created`` and
    ``updated`` (:func:`row_time`); a column the row lacks or leaves empty is left out."""
    if row is None:
        return {}
    keys = row.keys()
    times = {key: row_time(row[column]) if column in keys else None for key, column in zip(SESSION_TIMES, (created, updated))}
    return {key: when for key, when in times.items() if when is not None}


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


class DatabaseAdapter:
    """Mixin of an adapter whose input may be a session database.

    ``tables``: the tables that make a database this adapter's (its sniff can ask more of the
    columns); ``export_hint``: how to get a file ``prune`` can write from one session of the
    database (the agent's own export command), said when ``prune`` is given the database.
    """

    tables: tuple[str, ...] = ()
    export_hint: str = ""

    def sniff_database(self, head: DatabaseHead):  # -> Match | None
        """A :class:`~iclr_cli.formats.sniff.Match` when ``head`` holds every table in
        ``tables``; adapters refine it with the columns they read."""
        from iclr_cli.formats.sniff import MARKER, Match

        if self.tables and all(t in head.tables for t in self.tables):
            return Match(MARKER, f"an SQLite database with tables {', '.join(self.tables)}")
        return None
