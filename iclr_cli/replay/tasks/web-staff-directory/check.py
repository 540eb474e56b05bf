"""Reward: 0.1 for the header, 0.9 * (right rows - extra rows) / expected rows, at least 0."""

import contextlib

from iclr_cli.replay.checks import norm, pages_handler, read_csv, serve

STAFF = [
    ("Amina Yusuf", "Research", "amina.yusuf@acme.test"),
    ("Ben Carter", "Sales", "ben.carter@acme.test"),
    ("Chloe Martin", "Research", "chloe.martin@acme.test"),
    ("Diego Alvarez", "Support", "diego.alvarez@acme.test"),
    ("Elif Demir", "Finance", "elif.demir@acme.test"),
    ("Farah Haddad", "Research", "farah.haddad@acme.test"),
    ("Gustav Berg", "Sales", "gustav.berg@acme.test"),
    ("Hana Novak", "Research", "hana.novak@acme.test"),
    ("Ivan Petrov", "Support", "ivan.petrov@acme.test"),
    ("Julia Rossi", "Research Operations", "julia.rossi@acme.test"),
]
PER_PAGE = 4


def _pages():
    pages = {}
    chunks = [STAFF[i : i + PER_PAGE] for i in range(0, len(STAFF), PER_PAGE)]
    for n, chunk in enumerate(chunks, start=1):
        rows = "".join(f"<tr><td>{name}</td><td>{dept}</td><td><a href='mailto:{mail}'>{mail}</a></td></tr>" for name, dept, mail in chunk)
        nav = f"<a href='/staff/{n + 1}'>Next</a>" if n < len(chunks) else ""
        pages[f"/staff/{n}"] = (
            f"<html><body><h1>Staff directory (page {n} of {len(chunks)})</h1><table>"
            f"<tr><th>Name</th><th>Department</th><th>Email</th></tr>{rows}</table>{nav}</body></html>"
        )
    return pages


@contextlib.contextmanager
def environment(task_dir, workspace):
    with serve(pages_handler(_pages())) as url:
        yield {"url": url}


def check(ctx):
    rows = read_csv(ctx.workspace / "research.csv")
    if not rows:
        return 0.0
    want = [(norm(n), m) for n, d, m in STAFF if d == "Research"]
    header = [norm(c) for c in rows[0]] == ["name", "email"]
    body = [(norm(r[0]), norm(r[1])) for r in (rows[1:] if header else rows) if len(r) >= 2]
    right = sum(1 for a, b in zip(want, body) if a == b)
    extra = max(0, len(body) - len(want))
    return round(0.1 * header + 0.9 * max(0, right - extra) / len(want), 6)
