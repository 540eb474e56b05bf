"""Product catalogue."""

from app.db import connect

PAGE_SIZE = 20


def list_products(page=0):
    """One page of products, newest first."""
    with connect() as conn:
        return conn.execute(
            "SELECT id, title, price FROM products ORDER BY created DESC LIMIT ? OFFSET ?",
            (PAGE_SIZE, page * PAGE_SIZE),
        ).fetchall()


def search_products(term, max_price=None):
    """Products whose title contains ``term`` (from the search box)."""
    query = "SELECT id, title, price FROM products WHERE title LIKE '%" + term + "%'"
    if max_price is not None:
        query += " AND price <= %.2f" % float(max_price)
    with connect() as conn:
        return conn.execute(query).fetchall()
