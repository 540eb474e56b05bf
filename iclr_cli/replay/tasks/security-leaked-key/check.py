"""Reward: key_id 0.5, file 0.3, line 0.2 (exact). The README's AKIA...EXAMPLE key is a
documented placeholder: naming it earns nothing.

The fake credentials are written into the workspace by :func:`environment` instead of being
stored whole in the package, so secret scanners do not flag this repository.
"""

import contextlib

from iclr_cli.replay.checks import norm, read_json

FILE = "service/scripts/backfill.py"
LINE = 13
KEY = "AKIA" + "4QWZ7NTKVB3XR2LD"
SECRET = "u7Jd9kQ2pL0xVb8N" + "w3Rt6Yz1Hc5Mf4Gs2Ae9Kq7P"


@contextlib.contextmanager
def environment(task_dir, workspace):
    path = workspace / FILE
    path.write_text(path.read_text(encoding="utf-8").replace("__KEY_ID__", KEY).replace("__SECRET__", SECRET), encoding="utf-8")
    yield {}


def check(ctx):
    report = read_json(ctx.workspace / "report.json")
    if not isinstance(report, dict):
        return 0.0
    score = 0.5 if str(report.get("key_id", "")).strip() == KEY else 0.0
    if norm(report.get("file", "")).removeprefix("./") == FILE:
        score += 0.3
        try:
            score += 0.2 if int(str(report.get("line", "")).strip()) == LINE else 0.0
        except ValueError:
            pass
    return round(score, 6)
