"""Database connection helper."""

import sqlite3

_DB_PATH = "shop.db"


def connect():
    """A new connection with rows as dicts."""
    conn = sqlite3.connect(_DB_PATH)
    conn.row_factory = sqlite3.Row
    return conn
