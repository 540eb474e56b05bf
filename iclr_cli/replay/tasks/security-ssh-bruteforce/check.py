"""Reward: ip 0.4, user 0.3, failed_attempts 0.3 (counted from the original log)."""

import re

from iclr_cli.replay.checks import norm, read_json

_FAILED = re.compile(r"Failed password for (?:invalid user )?\S+ from (\S+)")
_ACCEPTED = re.compile(r"Accepted password for (\S+) from (\S+)")


def expected(task_dir):
    text = (task_dir / "files" / "auth.log").read_text(encoding="utf-8")
    fails = {}
    for ip in _FAILED.findall(text):
        fails[ip] = fails.get(ip, 0) + 1
    logins = dict((ip, user) for user, ip in _ACCEPTED.findall(text))
    ip = max((ip for ip in logins if ip in fails), key=fails.get)
    return ip, logins[ip], fails[ip]


def check(ctx):
    report = read_json(ctx.workspace / "report.json")
    if not isinstance(report, dict):
        return 0.0
    ip, user, count = expected(ctx.task_dir)
    score = 0.4 if norm(report.get("ip", "")) == ip else 0.0
    score += 0.3 if norm(report.get("user", "")) == user else 0.0
    try:
        score += 0.3 if int(str(report.get("failed_attempts", "")).strip()) == count else 0.0
    except ValueError:
        pass
    return round(score, 6)
