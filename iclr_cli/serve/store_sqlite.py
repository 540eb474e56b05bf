"""The conversation state in one SQLite file, ``DIR/serve.sqlite3`` (``--state-dir``).

Every process of a machine (``iclr serve`` replicas, LiteLLM's ``--num_workers``) opens the same
file: WAL journal, so readers never wait for the writer, and a 5-second busy timeout for the
rare moment two processes write at once. First writer wins by ``INSERT ... ON CONFLICT DO
NOTHING``; the compare-and-set of a pending step is one ``UPDATE ... WHERE`` every column
still holds the old decision (:mod:`iclr_cli.serve.store`). Every write commits at once, so a
crash loses at most the step in progress. A file on a network share is not supported: SQLite's
WAL needs shared memory between its processes (https://sqlite.org/wal.html, "Disadvantages").
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import orjson

from iclr_cli.errors import UsageError
from iclr_cli.serve.store import DEFAULT_TTL_S, Expiring, LoadedConversation, MemoryStore, StoredStep, check_settings, step_from_record, step_record

DB_NAME = "serve.sqlite3"
# 2: conversations.last_used is a wall-clock time (seconds since the epoch) shared by every
# process, where 1 kept one process's request counter; offers added.
SCHEMA_VERSION = "2"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS conversations (id TEXT PRIMARY KEY, last_used REAL NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    key TEXT PRIMARY KEY, conversation TEXT NOT NULL, texts BLOB NOT NULL,
    generated INTEGER NOT NULL, removed INTEGER NOT NULL, failure TEXT,
    late INTEGER NOT NULL DEFAULT 0, pending INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS steps_by_conversation ON steps (conversation);
CREATE TABLE IF NOT EXISTS offers (key TEXT PRIMARY KEY, conversation TEXT NOT NULL, step BLOB);
CREATE INDEX IF NOT EXISTS offers_by_conversation ON offers (conversation);
CREATE TABLE IF NOT EXISTS reasoning (
    conversation TEXT NOT NULL, call_id TEXT NOT NULL, field TEXT NOT NULL, text TEXT NOT NULL,
    PRIMARY KEY (conversation, call_id)
);
"""
_COLUMNS = "texts, generated, removed, failure, late, pending"


def _row(step: StoredStep) -> tuple:
    return (orjson.dumps(list(step.texts)), step.generated, step.removed, step.failure, int(step.late), int(step.pending))


def _step(row) -> StoredStep:
    texts, gen, rem, failure, late, pending = row
    return StoredStep(tuple(orjson.loads(texts)), gen, rem, failure, bool(late), bool(pending))


class SqliteStore(Expiring, MemoryStore):
    """The state in ``folder/serve.sqlite3`` (module docstring); thread- and process-safe.

    Raises:
        UsageError: when the folder was written with other ``settings``, or cannot be opened.
    """

    kind = "sqlite"
    shared = True

    def __init__(self, folder: str | Path, settings: Mapping[str, object], ttl_s: float = DEFAULT_TTL_S):
        super().__init__(ttl_s)
        folder = Path(folder)
        self._folder = folder
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.path = folder / DB_NAME
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=5.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            self._db.execute("BEGIN IMMEDIATE")  # one process migrates and writes the settings at a time
            self._migrate()
            before = self._db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
            check_settings(f"--state-dir {folder}", orjson.loads(before[0]) if before else None, dict(settings))
            if before is None:
                self._db.execute("INSERT INTO meta VALUES ('settings', ?)", (orjson.dumps(dict(settings), option=orjson.OPT_SORT_KEYS).decode(),))
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            self._db.execute("COMMIT")
        except (OSError, sqlite3.Error) as exc:
            raise UsageError(f"--state-dir {folder}: cannot open the state database: {exc}") from None
        except UsageError:
            self._db.execute("ROLLBACK")
            self._db.close()
            raise
        self._lock = threading.Lock()

    def _migrate(self) -> None:
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(steps)")}
        for name in ("late", "pending"):  # folders written before the latency budget existed
            if name not in columns:
                self._db.execute(f"ALTER TABLE steps ADD COLUMN {name} INTEGER NOT NULL DEFAULT 0")
        schema = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if schema is None:  # schema 1 kept the settings with a "schema" key and a request counter as last_used
            self._db.execute("UPDATE conversations SET last_used = ?", (time.time(),))

    @property
    def where(self) -> str:
        return str(self.path)

    def conversation(self, conv: str) -> LoadedConversation | None:
        with self._lock:
            row = self._db.execute("SELECT last_used FROM conversations WHERE id = ?", (conv,)).fetchone()
            if row is None:
                return None
            loaded = LoadedConversation(conv, row[0])
            for key, *rest in self._db.execute(f"SELECT key, {_COLUMNS} FROM steps WHERE conversation = ?", (conv,)):
                loaded.steps[key] = _step(rest)
            for call_id, name, text in self._db.execute("SELECT call_id, field, text FROM reasoning WHERE conversation = ?", (conv,)):
                loaded.reasoning[call_id] = (name, text)
        return loaded

    def step(self, conv: str, key: str) -> StoredStep | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM steps WHERE key = ?", (key,)).fetchone()
        return _step(row) if row is not None else None

    def claim(self, conv: str, key: str, step: StoredStep) -> StoredStep:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(f"INSERT INTO steps (key, conversation, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
                                 (key, conv, *_row(step)))
                self._db.execute("DELETE FROM offers WHERE key = ?", (key,))
                row = self._db.execute(f"SELECT {_COLUMNS} FROM steps WHERE key = ?", (key,)).fetchone()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return _step(row)

    def replace(self, conv: str, key: str, old: StoredStep, new: StoredStep) -> StoredStep:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(f"SELECT {_COLUMNS} FROM steps WHERE key = ?", (key,)).fetchone()
                if row is None or _step(row) == old:
                    self._db.execute(f"INSERT OR REPLACE INTO steps (key, conversation, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (key, conv, *_row(new)))
                    row = _row(new)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return _step(row)

    def offer(self, conv: str, key: str, step: StoredStep | None) -> None:
        record = step_record(step) if step is not None else None
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO offers VALUES (?, ?, ?)", (key, conv, record))

    def offered(self, conv: str, key: str) -> tuple[bool, StoredStep | None]:
        with self._lock:
            row = self._db.execute("SELECT step FROM offers WHERE key = ?", (key,)).fetchone()
        if row is None:
            return False, None
        if row[0] is None:
            return True, None
        return True, step_from_record(row[0])

    def reasoning(self, conv: str) -> dict[str, tuple[str, str]]:
        with self._lock:
            rows = self._db.execute("SELECT call_id, field, text FROM reasoning WHERE conversation = ?", (conv,)).fetchall()
        return {call_id: (name, text) for call_id, name, text in rows}

    def save_reasoning(self, conv: str, call_id: str, field_name: str, text: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO reasoning VALUES (?, ?, ?, ?)", (conv, call_id, field_name, text))

    def touch(self, conv: str) -> None:
        with self._lock:
            self._db.execute("INSERT INTO conversations VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET last_used = excluded.last_used", (conv, time.time()))
        self._maybe_expire()

    def expire(self, now: float | None = None) -> int:
        cutoff = (now if now is not None else time.time()) - self.ttl_s
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                old = [r[0] for r in self._db.execute("SELECT id FROM conversations WHERE last_used < ?", (cutoff,))]
                for conv in old:
                    for table, column in (("steps", "conversation"), ("offers", "conversation"), ("reasoning", "conversation"), ("conversations", "id")):
                        self._db.execute(f"DELETE FROM {table} WHERE {column} = ?", (conv,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return len(old)

    def ping(self) -> None:
        with self._lock:
            self._db.execute("SELECT 1").fetchone()

    def close(self) -> None:
        with self._lock:
            self._db.close()
