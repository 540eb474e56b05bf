"""Sessions already estimated, kept by content so a second run over the same folder is instant.

One SQLite file, ``savings.sqlite3`` in the user cache folder (``$ICLR_CACHE_DIR``, else the
platform's, as for the proxy model). A row maps a key to the JSON of every session one file
held; the key is a hash of the file's bytes (and of its replay request log, if any), the
variant and its settings, the scorer settings that change scores, the proxy model and the
estimate's version (:data:`VERSION`). A file whose bytes change gets a new key; rows are never
updated in place. A cache that cannot be opened or written is reported once and the run goes
on without it.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Mapping
from pathlib import Path

import orjson

VERSION = 8
"""Bumped whenever the estimate or the stored fields change, so old rows are never read."""

DB_NAME = "savings.sqlite3"


def cache_key(data: bytes, companion: bytes | None, settings: Mapping[str, object]) -> str:
    """The key of one file's sessions under ``settings`` (JSON-able values)."""
    h = hashlib.sha256()
    h.update(hashlib.sha256(data).digest())
    h.update(hashlib.sha256(companion).digest() if companion is not None else b"-")
    h.update(orjson.dumps({"version": VERSION, **settings}, option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()


class SavingsCache:
    """The cache file (see the module docstring); ``path=None`` is a cache that holds nothing.

    ``hits`` / ``misses`` count lookups; ``problem`` is the first error met (then the cache is
    off for the rest of the run).
    """

    def __init__(self, path: Path | None):
        self.hits = 0
        self.misses = 0
        self.problem: str | None = None
        self._db: sqlite3.Connection | None = None
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), timeout=30, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS sessions (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
        except (OSError, sqlite3.Error) as exc:
            self._off(f"{path}: {exc}")

    def _off(self, problem: str) -> None:
        self.problem = self.problem or problem
        if self._db is not None:
            self._db.close()
        self._db = None

    def get(self, key: str) -> list[dict] | None:
        """The sessions stored under ``key``, or ``None``."""
        row = None
        if self._db is not None:
            try:
                row = self._db.execute("SELECT value FROM sessions WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error as exc:
                self._off(str(exc))
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return orjson.loads(row[0])

    def put(self, key: str, sessions: list[dict]) -> None:
        """Store one file's sessions under ``key``."""
        if self._db is None:
            return
        try:
            self._db.execute("INSERT OR REPLACE INTO sessions (key, value) VALUES (?, ?)", (key, orjson.dumps(sessions)))
        except sqlite3.Error as exc:
            self._off(str(exc))

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def default_path() -> Path:
    """``savings.sqlite3`` in the user cache folder (:func:`iclr_cli.scoring.loading.cache_root`)."""
    from iclr_cli.scoring.loading import cache_root

    return cache_root() / DB_NAME
