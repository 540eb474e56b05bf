"""End to end: Claude Code's parallel subagents (two ``Agent`` tool calls in one reply) through
``iclr serve``.

The real Claude Code CLI (from npm) gets a task whose first reply starts two subagents at once;
each subagent runs one Bash step and reports, then the parent runs one more step. Each of the
three conversations is told apart by serve, and every step's thinking goes upstream compressed
once (BottomK at rho = 0.8 of 5 blocks), the same bytes in every later request of its own
conversation, with no prefix break and every step found as scored ahead. Skipped when npm or
the CLI is missing (tests/test_serve_agents.py).
"""

from __future__ import annotations

import json

import httpx
import pytest

from serve_fixtures import proxy, scripted_upstream
from test_serve_agents import _run_claude, clis  # noqa: F401 (clis is a fixture)
from wire_fixtures import anthropic_reply, text, thinking, tool_use

pytestmark = pytest.mark.server
pytest.importorskip("starlette")

AGENTS = ("SUB-A", "SUB-B")


def reasoning(who: str, step: int) -> str:
    return "\n\n".join([f"{who} step {step}: the task asks for an echo.", f"I could list the files first for {who}.",
                        "Maybe check the shell works.", f"The command is echo {who} {step}.", "After it, report back."])


def _reply(body, index):
    messages, stream = body.get("messages", []), bool(body.get("stream"))
    if not body.get("tools"):  # Claude Code's own side requests (titles, summaries)
        return anthropic_reply([text("ok")], stream=stream)
    first = json.dumps(messages[0]) if messages else ""
    turns = sum(1 for m in messages if m.get("role") == "assistant")
    for who in AGENTS:
        if who in first and "PARENT-TASK" not in first:
            if turns == 0:
                blocks = [thinking(reasoning(who, 0)), tool_use(f"toolu_{who}", "Bash", {"command": f"echo {who}", "description": "Echo"})]
                return anthropic_reply(blocks, stream=stream, message_id=f"msg_{who}_0")
            return anthropic_reply([text(f"{who} done.")], stream=stream, message_id=f"msg_{who}_1")
    if turns == 0:
        calls = [tool_use(f"toolu_{who}_agent", "Agent", {"description": f"Echo {who}", "prompt": f"{who}: run echo {who} and report.",
                                                           "subagent_type": "general-purpose"}) for who in AGENTS]
        return anthropic_reply([thinking(reasoning("parent", 0)), *calls], stream=stream, message_id="msg_parent_0")
    if turns == 1:
        blocks = [thinking(reasoning("parent", 1)), tool_use("toolu_parent_1", "Bash", {"command": "echo parent", "description": "Echo"})]
        return anthropic_reply(blocks, stream=stream, message_id="msg_parent_1")
    return anthropic_reply([text("All done.")], stream=stream, message_id="msg_parent_2")


def _thinking(body: dict) -> list[str]:
    return [b["thinking"] for m in body["messages"] if m["role"] == "assistant" for b in m["content"] if b.get("type") == "thinking"]


def _compressed(sent: str, who: str, step: int) -> bool:
    blocks = sent.split("\n\n")
    kept = [b for b in blocks if b != "[SKIP]"]
    return len(blocks) == 5 and len(kept) == 1 and kept[0] in reasoning(who, step).split("\n\n")


def test_parallel_subagents_are_three_conversations_each_compressed_once(clis, tmp_path):
    with scripted_upstream([_reply] * 60) as up, proxy(up.url) as (url, _):
        run = _run_claude(clis, url, tmp_path, prompt="PARENT-TASK: start two agents at once, then echo parent.")
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert run.returncode == 0, run.stderr[-2000:]
    bodies = [json.loads(raw) for raw, path in zip(up.raw, up.paths)
              if path.startswith("/v1/messages") and "count_tokens" not in path and json.loads(raw).get("tools")]
    by_who: dict[str, list[dict]] = {}
    for body in bodies:
        first = json.dumps(body["messages"][0])
        who = next((w for w in AGENTS if w in first and "PARENT-TASK" not in first), "parent")
        by_who.setdefault(who, []).append(body)
    assert sorted(by_who) == ["SUB-A", "SUB-B", "parent"] and [len(by_who[w]) for w in AGENTS] == [2, 2] and len(by_who["parent"]) == 3
    for who, seen in by_who.items():
        steps = 2 if who == "parent" else 1
        last = _thinking(seen[-1])
        assert len(last) == steps and all(_compressed(t, who, k) for k, t in enumerate(last))
        for body in seen[1:]:  # compressed once: every later request carries the same text
            assert _thinking(body) == last[: len(_thinking(body))]
    total = stats["total"]
    assert len(stats["conversations"]) == 3
    assert total["steps_compressed"] == 4 and total["prefix_breaks"] == 0 and total["steps_late"] == 0
    assert stats["eager_scoring"]["misses"] == 0
