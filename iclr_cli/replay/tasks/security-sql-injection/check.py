"""Reward: file 0.4, line 0.3 (the query line, +-1 accepted), CWE-89 0.3.

``orders.py`` formats a status into SQL too, but only after checking it against a fixed
list: a report naming it earns nothing for file and line.
"""

import re

from iclr_cli.replay.checks import norm, read_json

FILE = "app/products.py"
LINE = 19


def check(ctx):
    report = read_json(ctx.workspace / "report.json")
    if not isinstance(report, dict):
        return 0.0
    path = norm(report.get("file", "")).removeprefix("./")
    score = 0.4 if path == FILE else 0.0
    try:
        line = int(str(report.get("line", "")).strip())
    except ValueError:
        line = None
    if score and line is not None and abs(line - LINE) <= 1:
        score += 0.3
    cwe = re.sub(r"[^0-9]", "", str(report.get("cwe", "")))
    score += 0.3 if cwe == "89" else 0.0
    return round(score, 6)
