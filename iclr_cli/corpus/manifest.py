"""The record of a dataset run's finished shards (SQLite), so an interrupted run resumes.

A shard counts as finished only once its output file was renamed into place and its row was
committed here, in that order: a crash between the two re-does one shard, never loses one.
The run's settings are stored on first use (and replaced while no shard has finished); a
restart with other settings (or changed data) is refused rather than mixing two runs in one
output.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from iclr_cli.errors import UsageError


@dataclass(frozen=True)
class ShardEntry:
    """A finished shard: its rows ``[first_row, first_row + n_rows)`` and its totals (a
    pickled :class:`~iclr_cli.pipeline.Summary` with the tokenizer's name)."""

    shard: int
    first_row: int
    n_rows: int
    stats: bytes


class Manifest:
    """One SQLite file: the run's settings, finished shards, and whether the run completed.

    Raises:
        UsageError: the file belongs to a run with other settings (the message names them).
    """

    def __init__(self, path: str, settings: Mapping[str, object]):
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS run (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS shards (shard INTEGER PRIMARY KEY, first_row INTEGER NOT NULL, n_rows INTEGER NOT NULL, stats BLOB NOT NULL)"
        )
        wanted = orjson.dumps(dict(settings), option=orjson.OPT_SORT_KEYS).decode()
        row = self._db.execute("SELECT value FROM run WHERE key = 'settings'").fetchone()
        finished = self._db.execute("SELECT COUNT(*) FROM shards").fetchone()[0]
        if row is None:
            self._db.execute("INSERT INTO run VALUES ('settings', ?)", (wanted,))
        elif row[0] != wanted and not finished:
            # A run that failed before finishing a shard (a bad row, a wrong --format) left
            # nothing to resume: the corrected command starts afresh instead of being refused.
            self._db.execute("UPDATE run SET value = ? WHERE key = 'settings'", (wanted,))
        elif row[0] != wanted:
            old = orjson.loads(row[0])
            diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
            self._db.close()
            raise UsageError(
                f"{path} records an earlier run with other settings or data ({', '.join(diff)}); "
                "rerun with the same ones to resume, or remove it to start over"
            )

    @staticmethod
    def recorded(path: str) -> tuple[dict, int] | None:
        """The settings stored in the manifest at ``path`` and its number of finished shards,
        read without changing anything; ``None`` when there is no readable manifest."""
        if not os.path.isfile(path):
            return None
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                row = db.execute("SELECT value FROM run WHERE key = 'settings'").fetchone()
                finished = db.execute("SELECT COUNT(*) FROM shards").fetchone()[0]
            finally:
                db.close()
        except sqlite3.Error:
            return None
        return (orjson.loads(row[0]), finished) if row else None

    def finished(self) -> dict[int, ShardEntry]:
        """Finished shards by number."""
        rows = self._db.execute("SELECT shard, first_row, n_rows, stats FROM shards ORDER BY shard").fetchall()
        return {r[0]: ShardEntry(r[0], r[1], r[2], bytes(r[3])) for r in rows}

    def add(self, entry: ShardEntry) -> None:
        """Record a shard whose output is already in place (committed at once)."""
        self._db.execute("INSERT OR REPLACE INTO shards VALUES (?, ?, ?, ?)", (entry.shard, entry.first_row, entry.n_rows, entry.stats))

    @property
    def complete(self) -> bool:
        return self._db.execute("SELECT 1 FROM run WHERE key = 'complete'").fetchone() is not None

    def mark_complete(self) -> None:
        self._db.execute("INSERT OR REPLACE INTO run VALUES ('complete', '1')")

    def close(self) -> None:
        self._db.close()
