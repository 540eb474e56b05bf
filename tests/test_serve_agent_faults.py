"""Upstream faults with the real Claude Code and Codex CLIs through ``iclr serve``.

A scripted upstream on 127.0.0.1 answers each CLI's first request of a one-tool task with a
fault, then as usual, and the CLI must finish the task:

- 529 ``overloaded_error`` and 429 with ``retry-after``: the status and headers reach the CLI
  (the proxy sends nothing before the upstream's status is known), its own retry sends the
  same request again, and the answer to that one finishes the task. ``/stats`` counts the
  fault as one upstream error.
- a silent upstream: after its first event it sends nothing for longer than the CLI's idle
  timeout, shortened here so the test is quick. Claude Code runs on Bun, whose ``fetch``
  drops a response that moves no byte for ``BUN_CONFIG_HTTP_IDLE_TIMEOUT`` seconds (300 by
  default); Claude Code then asks again without streaming. Its own event watchdog
  (``CLAUDE_STREAM_IDLE_TIMEOUT_MS``, at least 300 s) ignores pings, so it is set out of the
  way as a user who raised it for long thinking would. Codex's ``stream_idle_timeout_ms``
  (300 s by default) counts SSE events, and Codex reconnects when it runs out. With
  ``--keepalive 1`` each step is one streamed request; with ``--keepalive 0`` (the control,
  which shows the silence does trip the watchdog) the CLI sends the request again.

Nothing is timed: the silence is only longer than the (shortened) idle timeout, and the
assertions are on the requests the upstream received.
"""

from __future__ import annotations

import json

import httpx
import pytest

from replay_fixtures import Reply
from serve_fixtures import proxy, scripted_upstream
from test_serve_agents import _run_claude, _run_codex, clis, reasoning  # noqa: F401 (clis: the fixture)
from wire_fixtures import anthropic_reply, function_call, output_message, reasoning_item, responses_reply, text, thinking, tool_use

pytestmark = pytest.mark.server
pytest.importorskip("starlette")

PROMPT = "Echo step 0 with one command."
CLAUDE_SILENCE_S, BUN_IDLE_S = 12, 6  # Bun's idle timer ticks in 4 s steps: 6 s fires within 12 s
CODEX_SILENCE_S, CODEX_IDLE_S = 8, 3



def _anthropic_fault(status: int, headers: dict) -> Reply:
    kind = "overloaded_error" if status == 529 else "rate_limit_error"
    return Reply({"type": "error", "error": {"type": kind, "message": "Overloaded" if status == 529 else "Rate limited"}}, status=status, headers=headers)


def _openai_fault(status: int, headers: dict) -> Reply:
    code = "rate_limit_exceeded" if status == 429 else "server_is_overloaded"
    return Reply({"error": {"message": "Please try again in 1s.", "type": "requests", "param": None, "code": code}}, status=status, headers=headers)


def _claude_script(first):
    """One Bash step, then the answer; ``first(reply)`` turns the first streamed main request's
    reply into the fault (or the paused stream)."""
    state = {"done": False}

    def reply(body, index):
        if not body.get("tools"):  # title and topic requests
            return anthropic_reply([text("Echo")], stream=bool(body.get("stream")))
        turns = sum(1 for m in body["messages"] if m.get("role") == "assistant")
        if turns:
            return anthropic_reply([text("Step 0 is done.")], stream=bool(body.get("stream")), message_id="msg_1")
        out = anthropic_reply([thinking(reasoning(0)), tool_use("toolu_0", "Bash", {"command": "echo step 0", "description": "Echo step 0"})],
                              stream=bool(body.get("stream")), message_id="msg_0")
        if not state["done"] and body.get("stream"):
            state["done"] = True
            return first(out)
        return out

    return [reply] * 20


def _codex_script(first):
    state = {"done": False}

    def reply(body, index):
        if any(item.get("type") == "function_call" for item in body.get("input", [])):
            return responses_reply([output_message("Step 0 is done.", "msg_1")], stream=True, response_id="resp_1")
        out = responses_reply([reasoning_item(reasoning(0), "rs_0"), function_call("call_0", "exec_command", {"cmd": "echo step 0"})], stream=True, response_id="resp_0")
        if not state["done"]:
            state["done"] = True
            return first(out)
        return out

    return [reply] * 20


def _paused(seconds: float):
    def first(stream):
        stream.pause_s = seconds
        return stream

    return first


def _stats(url: str) -> dict:
    return httpx.get(url.removesuffix("/v1") + "/stats").json()


def _claude_main(up) -> list[dict]:
    return [json.loads(raw) for raw, path in zip(up.raw, up.paths) if path.startswith("/v1/messages") and "count_tokens" not in path and json.loads(raw).get("tools")]


FAULTS = [
    pytest.param(529, {}, id="529-overloaded"),
    pytest.param(429, {"retry-after": "1"}, id="429-retry-after"),
]


@pytest.mark.parametrize("status, headers", FAULTS)
def test_claude_code_retries_an_upstream_fault_and_finishes(clis, tmp_path, status, headers):
    with scripted_upstream(_claude_script(lambda _: _anthropic_fault(status, headers))) as up, proxy(up.url) as (url, _):
        run = _run_claude(clis, url, tmp_path, timeout=120, prompt=PROMPT)
        stats = _stats(url)
    assert run.returncode == 0, run.stderr[-2000:]
    main = _claude_main(up)
    assert len(main) == 3  # the fault, the same request again, the answer after the tool
    assert main[1]["messages"] == main[0]["messages"] and main[1]["stream"] is True
    assert "step 0" in run.stdout.lower()
    assert stats["total"]["upstream_errors"] == 1


@pytest.mark.parametrize("status, headers", FAULTS)
def test_codex_retries_an_upstream_fault_and_finishes(clis, tmp_path, status, headers):
    with scripted_upstream(_codex_script(lambda _: _openai_fault(status, headers))) as up, proxy(up.url) as (url, _):
        run = _run_codex(clis, url, tmp_path, timeout=120, prompt=PROMPT)
        stats = _stats(url)
    assert run.returncode == 0, run.stderr[-2000:]
    bodies = [json.loads(raw) for raw in up.raw]
    assert len(bodies) == 3 and bodies[1]["input"] == bodies[0]["input"]
    assert "step 0" in run.stdout.lower()
    assert stats["total"]["upstream_errors"] == 1


@pytest.mark.parametrize("keepalive", [1.0, 0.0], ids=["pings", "control-no-pings"])
def test_claude_code_outlasts_a_silent_upstream_with_pings(clis, tmp_path, keepalive):
    env = {"BUN_CONFIG_HTTP_IDLE_TIMEOUT": str(BUN_IDLE_S), "CLAUDE_STREAM_IDLE_TIMEOUT_MS": "900000"}
    with scripted_upstream(_claude_script(_paused(CLAUDE_SILENCE_S))) as up, proxy(up.url, keepalive_s=keepalive) as (url, _):
        run = _run_claude(clis, url, tmp_path, timeout=120, env=env, prompt=PROMPT)
        stats = _stats(url)
    assert run.returncode == 0, run.stderr[-2000:]
    main = _claude_main(up)
    if keepalive:
        assert [b.get("stream") for b in main] == [True, True]  # one streamed request per step, nothing sent again
        assert stats["keepalives_sent"] >= 1
    else:  # Bun dropped the silent stream and Claude Code asked again without streaming
        assert len(main) == 3 and not main[1].get("stream") and main[1]["messages"] == main[0]["messages"]
        assert stats["keepalives_sent"] == 0


@pytest.mark.parametrize("keepalive", [1.0, 0.0], ids=["keepalive-events", "control-no-keepalives"])
def test_codex_outlasts_a_silent_upstream_with_keepalive_events(clis, tmp_path, keepalive):
    with scripted_upstream(_codex_script(_paused(CODEX_SILENCE_S))) as up, proxy(up.url, keepalive_s=keepalive) as (url, _):
        run = _run_codex(clis, url, tmp_path, timeout=120, idle_timeout=CODEX_IDLE_S, prompt=PROMPT)
        stats = _stats(url)
    assert run.returncode == 0, run.stderr[-2000:]
    bodies = [json.loads(raw) for raw in up.raw]
    if keepalive:
        assert len(bodies) == 2 and "Reconnecting" not in run.stderr
        assert stats["keepalives_sent"] >= 1
    else:  # Codex's idle timeout ran out and it reconnected: the same request again
        assert len(bodies) == 3 and bodies[1]["input"] == bodies[0]["input"] and "Reconnecting" in run.stderr
