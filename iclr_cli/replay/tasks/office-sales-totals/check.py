"""Reward: 0.2 for the header, 0.8 shared by the region rows (value within 0.01, right
order); 0 when totals.csv is missing."""

import csv
from collections import defaultdict

from iclr_cli.replay.checks import read_csv


def expected(task_dir):
    totals = defaultdict(float)
    with open(task_dir / "files" / "sales.csv", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            totals[row["region"]] += float(row["amount"])
    return sorted((region, round(total, 2)) for region, total in totals.items())


def check(ctx):
    rows = read_csv(ctx.workspace / "totals.csv")
    if not rows:
        return 0.0
    want = expected(ctx.task_dir)
    score = 0.2 if [c.lower() for c in rows[0]] == ["region", "total"] else 0.0
    body = rows[1:] if score else rows
    for i, (region, total) in enumerate(want):
        if i < len(body) and len(body[i]) >= 2 and body[i][0] == region:
            try:
                if abs(float(body[i][1]) - total) <= 0.01:
                    score += 0.8 / len(want)
            except ValueError:
                pass
    return round(min(score, 1.0), 6)
