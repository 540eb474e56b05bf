"""Conversation state on disk (``--state-dir``): SQLite, so a restarted proxy sends the same bytes.

What is kept per conversation: when it was last used (for the LRU bound), the compressed
reasoning of every step it compressed, keyed by step key (:mod:`iclr_cli.serve.fingerprint`),
whether the step went upstream late (its scores were not ready within the latency budget) and
whether it is still waiting to be compressed (``--late compress-later``), so a restart never
changes a decision (:mod:`iclr_cli.serve.budget`), and, for ``--restore-reasoning``, the reasoning the upstream returned per tool-call id. No
header, API key or whole request is ever written. The settings that decide what a compressed
step looks like (variant, ratio, seed, splitter, proxy model, scorer limits) are written once;
opening the folder with other settings is refused, since stored steps would no longer be what
these settings produce.

Every write is committed at once (WAL journal), so a crash loses at most the step in progress.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from iclr_cli.errors import UsageError

DB_NAME = "serve.sqlite3"
SCHEMA_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS conversations (id TEXT PRIMARY KEY, last_used INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    key TEXT PRIMARY KEY, conversation TEXT NOT NULL, texts BLOB NOT NULL,
    generated INTEGER NOT NULL, removed INTEGER NOT NULL, failure TEXT,
    late INTEGER NOT NULL DEFAULT 0, pending INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS steps_by_conversation ON steps (conversation);
CREATE TABLE IF NOT EXISTS reasoning (
    conversation TEXT NOT NULL, call_id TEXT NOT NULL, field TEXT NOT NULL, text TEXT NOT NULL,
    PRIMARY KEY (conversation, call_id)
);
"""


@dataclass(frozen=True)
class StoredStep:
    """A completed step as decided: the text of each reasoning part as sent upstream, the
    step's reasoning tokens as generated and as removed, and why it was left uncompressed
    when scoring failed (``None`` otherwise).

    ``late``: its scores were not ready within the latency budget, so it went upstream as
    generated. ``pending``: late and still to be compressed once its scores are ready
    (``--late compress-later``); ``texts`` are then the texts as generated, sent until then.
    """

    texts: tuple[str, ...]
    generated: int = 0
    removed: int = 0
    failure: str | None = None
    late: bool = False
    pending: bool = False


@dataclass
class LoadedConversation:
    """One conversation as read back from disk."""

    id: str
    last_used: int
    steps: dict[str, StoredStep] = field(default_factory=dict)
    reasoning: dict[str, tuple[str, str]] = field(default_factory=dict)  # call id -> (field, text)


class MemoryStore:
    """No persistence (no ``--state-dir``): every write is dropped."""

    path: Path | None = None

    def load(self) -> Iterator[LoadedConversation]:
        return iter(())

    def touch(self, conv: str, seq: int) -> None:
        pass

    def save_step(self, conv: str, key: str, step: StoredStep) -> None:
        pass

    def save_reasoning(self, conv: str, call_id: str, field_name: str, text: str) -> None:
        pass

    def delete(self, conv: str) -> None:
        pass

    def close(self) -> None:
        pass


class SqliteStore(MemoryStore):
    """The state in ``DIR/serve.sqlite3`` (see module docstring); thread-safe.

    Raises:
        UsageError: when the folder was written with other ``settings``, or cannot be opened.
    """

    def __init__(self, folder: str | Path, settings: Mapping[str, object]):
        folder = Path(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.path = folder / DB_NAME
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(steps)")}
            for name in ("late", "pending"):  # folders written before the latency budget existed
                if name not in columns:
                    self._db.execute(f"ALTER TABLE steps ADD COLUMN {name} INTEGER NOT NULL DEFAULT 0")
        except (OSError, sqlite3.Error) as exc:
            raise UsageError(f"--state-dir {folder}: cannot open the state database: {exc}") from None
        self._lock = threading.Lock()
        self._check_settings(folder, {"schema": SCHEMA_VERSION, **settings})

    def _check_settings(self, folder: Path, settings: Mapping[str, object]) -> None:
        wanted = orjson.dumps(dict(settings), option=orjson.OPT_SORT_KEYS).decode()
        row = self._db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
        if row is None:
            self._db.execute("INSERT INTO meta VALUES ('settings', ?)", (wanted,))
            return
        before = orjson.loads(row[0])
        changed = [f"{k}={before.get(k)!r} (now {v!r})" for k, v in settings.items() if before.get(k) != v]
        if changed:
            raise UsageError(f"--state-dir {folder} holds steps compressed with other settings: {', '.join(changed)}; use another folder or the same settings")

    def load(self) -> Iterator[LoadedConversation]:
        """Every stored conversation, least recently used first."""
        with self._lock:
            convs = {cid: LoadedConversation(cid, seq) for cid, seq in self._db.execute("SELECT id, last_used FROM conversations ORDER BY last_used")}
            for key, cid, texts, gen, rem, failure, late, pending in self._db.execute(
                    "SELECT key, conversation, texts, generated, removed, failure, late, pending FROM steps"):
                if cid in convs:
                    convs[cid].steps[key] = StoredStep(tuple(orjson.loads(texts)), gen, rem, failure, bool(late), bool(pending))
            for cid, call_id, name, text in self._db.execute("SELECT conversation, call_id, field, text FROM reasoning"):
                if cid in convs:
                    convs[cid].reasoning[call_id] = (name, text)
        return iter(list(convs.values()))

    def touch(self, conv: str, seq: int) -> None:
        with self._lock:
            self._db.execute("INSERT INTO conversations VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET last_used = excluded.last_used", (conv, seq))

    def save_step(self, conv: str, key: str, step: StoredStep) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, conv, orjson.dumps(list(step.texts)), step.generated, step.removed, step.failure, int(step.late), int(step.pending)),
            )

    def save_reasoning(self, conv: str, call_id: str, field_name: str, text: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO reasoning VALUES (?, ?, ?, ?)", (conv, call_id, field_name, text))

    def delete(self, conv: str) -> None:
        """Forget a conversation (LRU eviction)."""
        with self._lock:
            self._db.execute("BEGIN")
            for table, column in (("steps", "conversation"), ("reasoning", "conversation"), ("conversations", "id")):
                self._db.execute(f"DELETE FROM {table} WHERE {column} = ?", (conv,))
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()
