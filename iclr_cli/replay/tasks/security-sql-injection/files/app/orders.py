"""Orders."""

from app.db import connect

_STATUSES = ("open", "paid", "shipped")


def orders_for(user_id, status="open"):
    """A user's orders in one status."""
    if status not in _STATUSES:
        raise ValueError(f"unknown status {status!r}")
    sql = f"SELECT id, total FROM orders WHERE user_id = ? AND status = '{status}'"
    with connect() as conn:
        return conn.execute(sql, (int(user_id),)).fetchall()
