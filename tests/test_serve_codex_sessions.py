"""End to end: several Codex sessions at once through one ``iclr serve``.

Two real Codex CLIs (from npm) run the same three-step task at the same time against one
scripted Responses upstream; serve tells the two conversations apart, compresses each step's
reasoning once, and sends each conversation's earlier steps as the same bytes in every later
request (no prefix break). Skipped when npm or the CLI is missing (tests/test_serve_agents.py).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from serve_fixtures import proxy, scripted_upstream
from test_serve_agents import STEPS, _codex_script, _kept, _run_codex, clis  # noqa: F401 (clis is a fixture)

pytestmark = pytest.mark.server
pytest.importorskip("starlette")
SESSIONS = 2


def test_two_codex_sessions_at_once_are_two_conversations_each_compressed_once(clis, tmp_path):
    with scripted_upstream(_codex_script(encrypted=False) * SESSIONS) as up, proxy(up.url) as (url, _):
        with ThreadPoolExecutor(SESSIONS) as pool:
            runs = list(pool.map(lambda n: _run_codex(clis, url, tmp_path / f"s{n}", prompt=f"Session {n}: echo step 0, step 1 and step 2, one command each."),
                                 range(SESSIONS)))
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    bodies = [json.loads(raw) for raw in up.raw]
    sessions: dict[int, list[dict]] = {}
    for body in bodies:
        n = next(k for k in range(SESSIONS) if f"Session {k}:" in json.dumps(body["input"]))
        sessions.setdefault(n, []).append(body)
    assert sorted(sessions) == list(range(SESSIONS)) and all(len(seen) == STEPS + 1 for seen in sessions.values())
    for seen in sessions.values():
        rs = [i for i in seen[-1]["input"] if i["type"] == "reasoning"]
        assert [r["id"] for r in rs] == [f"rs_{i}" for i in range(STEPS)]
        assert all(_kept(r["content"][0]["text"], step) for step, r in enumerate(rs))
        for body in seen:  # each item as first sent, ever after
            for item in (i for i in body["input"] if i["type"] == "reasoning"):
                assert item == next(r for r in rs if r["id"] == item["id"])
    total = stats["total"]
    assert len(stats["conversations"]) == SESSIONS
    assert total["steps_compressed"] == SESSIONS * STEPS and total["prefix_breaks"] == 0
