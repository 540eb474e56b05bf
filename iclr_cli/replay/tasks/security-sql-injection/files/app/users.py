"""User accounts."""

from app.db import connect


def get_user(user_id):
    """One user by numeric id."""
    with connect() as conn:
        return conn.execute("SELECT id, name, email FROM users WHERE id = ?", (int(user_id),)).fetchone()


def create_user(name, email):
    """Insert a user; returns the new id."""
    with connect() as conn:
        cur = conn.execute("INSERT INTO users (name, email) VALUES (?, ?)", (name, email))
        return cur.lastrowid
