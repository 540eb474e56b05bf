"""The conversation state in PostgreSQL (``--state postgresql://...``), shared across machines.

The database a LiteLLM deployment keeps its keys and spend in (``DATABASE_URL``) is enough:
iclr's tables are prefixed ``iclr_serve_`` and never touch LiteLLM's. A step's decision is one
row holding :func:`~iclr_cli.serve.store.step_record`; first writer wins by ``INSERT ... ON
CONFLICT DO NOTHING``, and the compare-and-set of a pending step is one ``UPDATE ... WHERE
record = old`` (https://www.postgresql.org/docs/current/sql-insert.html#SQL-ON-CONFLICT).
Every statement runs in autocommit on one connection per store, reconnected when it drops;
expired conversations are deleted by a sweep at most every five minutes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import orjson

from iclr_cli.errors import UsageError
from iclr_cli.serve.store import (DEFAULT_TTL_S, Expiring, LoadedConversation, MemoryStore, StoredStep, check_settings, redact,
                                  settings_bytes, step_from_record, step_record)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS iclr_serve_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS iclr_serve_conversations (id TEXT PRIMARY KEY, last_used DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX IF NOT EXISTS iclr_serve_conversations_used ON iclr_serve_conversations (last_used)",
    "CREATE TABLE IF NOT EXISTS iclr_serve_steps (conversation TEXT NOT NULL, key TEXT NOT NULL, record BYTEA NOT NULL, PRIMARY KEY (conversation, key))",
    "CREATE TABLE IF NOT EXISTS iclr_serve_offers (conversation TEXT NOT NULL, key TEXT NOT NULL, record BYTEA, PRIMARY KEY (conversation, key))",
    "CREATE TABLE IF NOT EXISTS iclr_serve_reasoning (conversation TEXT NOT NULL, call_id TEXT NOT NULL, field TEXT NOT NULL, text TEXT NOT NULL, "
    "PRIMARY KEY (conversation, call_id))",
)


class PostgresStore(Expiring, MemoryStore):
    """The state in the PostgreSQL database at ``url`` (module docstring); thread-safe.

    Raises:
        UsageError: psycopg is not installed, the server cannot be reached, or it holds steps
            written with other ``settings``.
    """

    kind = "postgres"
    shared = True

    def __init__(self, url: str, settings: Mapping[str, object], ttl_s: float = DEFAULT_TTL_S):
        super().__init__(ttl_s)
        try:
            import psycopg
        except ImportError:
            raise UsageError("--state postgresql://...: the PostgreSQL client is not installed: pip install 'iclr[fleet]' (or pip install 'psycopg[binary]')") from None
        self._psycopg = psycopg
        self._url = url.replace("postgres://", "postgresql://", 1)
        self._where = redact(url)
        self._lock = threading.Lock()
        self._conn = None
        try:
            with self._lock:
                conn = self._connection()
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(7411)")  # one process creates the tables at a time
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    wanted = settings_bytes(settings).decode()
                    conn.execute("INSERT INTO iclr_serve_meta VALUES ('settings', %s) ON CONFLICT (key) DO NOTHING", (wanted,))
                    before = conn.execute("SELECT value FROM iclr_serve_meta WHERE key = 'settings'").fetchone()[0]
        except psycopg.Error as exc:
            raise UsageError(f"--state {self._where}: cannot use PostgreSQL: {str(exc).strip()}") from None
        check_settings(f"--state {self._where}", orjson.loads(before), orjson.loads(wanted))

    def _connection(self):
        if self._conn is None or self._conn.closed:
            # 2 s to connect and for any statement: a database that hangs holds a request that long at most
            self._conn = self._psycopg.connect(self._url, autocommit=True, connect_timeout=2, options="-c statement_timeout=2000")
        return self._conn

    def _run(self, sql: str, params=(), fetch: str | None = None):
        with self._lock:
            try:
                cur = self._connection().execute(sql, params)
            except self._psycopg.OperationalError:
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                raise
            if fetch == "one":
                return cur.fetchone()
            if fetch == "all":
                return cur.fetchall()
            return cur.rowcount

    @property
    def where(self) -> str:
        return self._where

    def conversation(self, conv: str) -> LoadedConversation | None:
        row = self._run("SELECT last_used FROM iclr_serve_conversations WHERE id = %s", (conv,), "one")
        if row is None:
            return None
        loaded = LoadedConversation(conv, row[0])
        for key, record in self._run("SELECT key, record FROM iclr_serve_steps WHERE conversation = %s", (conv,), "all"):
            loaded.steps[key] = step_from_record(record)
        loaded.reasoning = self.reasoning(conv)
        return loaded

    def step(self, conv: str, key: str) -> StoredStep | None:
        row = self._run("SELECT record FROM iclr_serve_steps WHERE conversation = %s AND key = %s", (conv, key), "one")
        return step_from_record(row[0]) if row is not None else None

    def claim(self, conv: str, key: str, step: StoredStep) -> StoredStep:
        # one statement: insert unless stored, drop the offer, and return what is stored
        row = self._run(
            "WITH ins AS (INSERT INTO iclr_serve_steps VALUES (%s, %s, %s) ON CONFLICT DO NOTHING RETURNING record), "
            "del AS (DELETE FROM iclr_serve_offers WHERE conversation = %s AND key = %s) "
            "SELECT record FROM ins UNION ALL SELECT record FROM iclr_serve_steps WHERE conversation = %s AND key = %s LIMIT 1",
            (conv, key, step_record(step), conv, key, conv, key), "one")
        if row is None:  # lost a race: the winner committed after this statement's snapshot was taken
            row = self._run("SELECT record FROM iclr_serve_steps WHERE conversation = %s AND key = %s", (conv, key), "one")
        return step_from_record(row[0])

    def replace(self, conv: str, key: str, old: StoredStep, new: StoredStep) -> StoredStep:
        record = step_record(new)
        changed = self._run("UPDATE iclr_serve_steps SET record = %s WHERE conversation = %s AND key = %s AND record = %s",
                            (record, conv, key, step_record(old)))
        if changed:
            return new
        return self.claim(conv, key, new)  # none stored: ours; another's: theirs

    def offer(self, conv: str, key: str, step: StoredStep | None) -> None:
        self._run("INSERT INTO iclr_serve_offers VALUES (%s, %s, %s) ON CONFLICT (conversation, key) DO UPDATE SET record = excluded.record",
                  (conv, key, step_record(step) if step is not None else None))

    def offered(self, conv: str, key: str) -> tuple[bool, StoredStep | None]:
        row = self._run("SELECT record FROM iclr_serve_offers WHERE conversation = %s AND key = %s", (conv, key), "one")
        if row is None:
            return False, None
        return True, step_from_record(row[0]) if row[0] is not None else None

    def reasoning(self, conv: str) -> dict[str, tuple[str, str]]:
        rows = self._run("SELECT call_id, field, text FROM iclr_serve_reasoning WHERE conversation = %s", (conv,), "all")
        return {call_id: (name, text) for call_id, name, text in rows}

    def save_reasoning(self, conv: str, call_id: str, field_name: str, text: str) -> None:
        self._run("INSERT INTO iclr_serve_reasoning VALUES (%s, %s, %s, %s) ON CONFLICT (conversation, call_id) "
                  "DO UPDATE SET field = excluded.field, text = excluded.text", (conv, call_id, field_name, text))

    def touch(self, conv: str) -> None:
        self._run("INSERT INTO iclr_serve_conversations VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET last_used = excluded.last_used",
                  (conv, time.time()))
        self._maybe_expire()

    def expire(self, now: float | None = None) -> int:
        cutoff = (now if now is not None else time.time()) - self.ttl_s
        with self._lock:
            conn = self._connection()
            with conn.transaction():
                old = [r[0] for r in conn.execute("DELETE FROM iclr_serve_conversations WHERE last_used < %s RETURNING id", (cutoff,))]
                for table in ("iclr_serve_steps", "iclr_serve_offers", "iclr_serve_reasoning"):
                    conn.execute(f"DELETE FROM {table} WHERE conversation = ANY(%s)", (old,))
        return len(old)

    def ping(self) -> None:
        self._run("SELECT 1", (), "one")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
