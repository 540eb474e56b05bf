"""Reward: each of the 4 expected items counts 1/4 when an entry has its owner and due date
(the task text is not graded); each extra entry beyond 4 costs 0.1."""

from iclr_cli.replay.checks import norm, read_json

EXPECTED = [("marco", "2024-05-20"), ("priya", "2024-05-15"), ("lena", "2024-05-10"), ("tom", "2024-05-24")]


def check(ctx):
    items = read_json(ctx.workspace / "action_items.json")
    if not isinstance(items, list):
        return 0.0
    got = {(norm(i.get("owner", "")), norm(i.get("due", ""))) for i in items if isinstance(i, dict)}
    score = sum(1 for e in EXPECTED if e in got) / len(EXPECTED)
    score -= 0.1 * max(0, len(items) - len(EXPECTED))
    return round(max(0.0, score), 6)
