"""End to end: Goose and the Vercel AI SDK (real clients from npm) through ``iclr serve``.

As tests/test_serve_agents_opencode_qwen.py does for OpenCode and Qwen Code: each client runs a
task of three tool-calling steps and a final answer against a scripted upstream on 127.0.0.1
with the proxy in between, and the test reads the request bodies the upstream received.

- Goose 1.52.0 with docs/serve.md's recipe (its ``openai`` provider) against a DeepSeek-style
  upstream that streams ``content: null`` and spaced JSON arguments. Goose sends each turn back
  re-serialised (``tool_calls`` before ``content``, the arguments re-encoded without spaces):
  each step is still the one scored ahead, compressed once, no prefix break.
- The AI SDK (``ai`` 7, ``tests/aisdk_agent.mjs``: ``streamText`` with one tool):
  ``@ai-sdk/openai-compatible`` (``reasoning_content`` sent back, compressed once a step);
  ``@ai-sdk/anthropic`` (``thinking`` sent back with its signature: compressed on a plain
  upstream, untouched on a sealed one); ``@ai-sdk/openai``'s Responses model with
  ``store: false`` sends a reasoning item back only with its ``encrypted_content``: without it
  the item is not sent back at all (nothing compressed, none counted as compressed), with it
  the item goes back sealed (OpenAI's reasoning guide: encrypted reasoning items are passed
  back as returned).

The clients come from ``scripts/install_agent_clis.sh`` (:mod:`agent_cli_fixtures`; skipped
with the install line when missing, failed where ``ICLR_REQUIRE_AGENT_CLIS=1``).
"""

from __future__ import annotations

import json

import pytest

from agent_cli_fixtures import GOOSE, aisdk_folder, missing, run_aisdk, run_goose, unavailable
from serve_fixtures import proxy, scripted_upstream
from test_serve_agents import STEPS, _assert_prefixes, reasoning, thinking_compressed_once
from test_serve_agents_opencode_qwen import PROMPT, _assert_chat, _chat_main, _chat_script, _messages_main, _messages_script, _stats
from wire_fixtures import function_call, output_message, reasoning_item, responses_reply, thinking

from iclr_cli.serve.budget import DEFAULT_MAX_WAIT

pytestmark = pytest.mark.server
pytest.importorskip("starlette")


def _need_goose() -> None:
    reason = missing(GOOSE)
    if reason:
        unavailable(reason)


def _need_aisdk() -> None:
    if aisdk_folder() is None:
        unavailable("the AI SDK (ai, @ai-sdk/*) is missing: bash scripts/install_agent_clis.sh")


def test_goose_through_serve_chat_completions(tmp_path):
    _need_goose()
    with scripted_upstream(_chat_script("shell")) as up, proxy(up.url, max_wait=DEFAULT_MAX_WAIT) as (url, _):
        run = run_goose(url, tmp_path, PROMPT)
        stats = _stats(url)
    assert run.process.returncode == 0, run.process.stderr[-2000:]
    bodies = _chat_main(up)
    # Goose's title request first, without tools; then the loop, each turn sent back in Goose's own form
    assert len(up.raw) == STEPS + 2 and "tools" not in json.loads(up.raw[0])
    sent_back = bodies[1]["messages"][2]
    assert list(sent_back)[:2] == ["role", "tool_calls"] and sent_back["content"] is None
    assert sent_back["tool_calls"][0]["function"]["arguments"] == '{"command":"echo step 0","description":"Echo step 0"}'
    _assert_chat(bodies, "shell", stats)


def test_aisdk_openai_compatible_through_serve(tmp_path):
    _need_aisdk()
    with scripted_upstream(_chat_script("shell")) as up, proxy(up.url, max_wait=DEFAULT_MAX_WAIT) as (url, _):
        done = run_aisdk("chat", url, "shell", PROMPT)
        stats = _stats(url)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"text": "All three steps are done.", "steps": STEPS + 1}
    _assert_chat(_chat_main(up), "shell", stats)


def _aisdk_call(step: int, call: dict) -> None:
    assert (call["id"], call["name"], call["input"]) == (f"toolu_{step}", "bash", {"command": f"echo step {step}", "description": f"Echo step {step}"})


@pytest.mark.parametrize("kind", ["local", "anthropic"])
def test_aisdk_anthropic_through_serve(tmp_path, kind):
    _need_aisdk()
    with scripted_upstream(_messages_script()) as up, proxy(up.url, upstream_kind=kind, max_wait=DEFAULT_MAX_WAIT) as (url, _):
        done = run_aisdk("anthropic", url, "bash", PROMPT)
        stats = _stats(url)
    assert done.returncode == 0, done.stderr[-2000:]
    bodies = _messages_main(up)
    assert len(bodies) == STEPS + 1 and all(b["thinking"] == {"type": "enabled", "budget_tokens": 2048} for b in bodies)
    _assert_prefixes(bodies, "messages", tuple(k for k in bodies[0] if k != "messages"))
    total = stats["total"]
    if kind == "local":
        thinking_compressed_once(bodies, _aisdk_call)
        assert total["steps_compressed"] == STEPS and stats["eager_scoring"]["misses"] == 0 and total["steps_late"] == 0
    else:  # Anthropic checks the signature: the thinking goes back as the client sent it
        sent = [b for m in bodies[-1]["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "thinking"]
        assert sent == [thinking(reasoning(i)) for i in range(STEPS)]
        assert total["sealed_blocks"] == STEPS and total["steps_compressed"] == 0 and total["reasoning_tokens_removed"] == 0


def _responses_script(encrypted: bool):
    def reply(body, index):
        calls = sum(1 for item in body.get("input", []) if item.get("type") == "function_call")
        if calls >= STEPS:
            return responses_reply([output_message("All three steps are done.", f"msg_{calls}")], stream=True, response_id=f"resp_{calls}")
        item = reasoning_item(reasoning(calls), f"rs_{calls}", summary=True, encrypted=f"gAAAAB-opaque-{calls}" if encrypted else None)
        # OpenAI's function_call output items carry their `status`; the AI SDK's stream schema requires it
        call = {**function_call(f"call_{calls}", "exec_command", {"cmd": f"echo step {calls}"}), "status": "completed"}
        return responses_reply([item, call], stream=True, response_id=f"resp_{calls}")

    return [reply] * 20


@pytest.mark.parametrize("encrypted", [False, True])
def test_aisdk_responses_store_false_sends_back_only_encrypted_reasoning(tmp_path, encrypted):
    _need_aisdk()
    with scripted_upstream(_responses_script(encrypted)) as up, proxy(up.url, max_wait=DEFAULT_MAX_WAIT) as (url, _):
        done = run_aisdk("responses", url, "exec_command", PROMPT)
        stats = _stats(url)
    assert done.returncode == 0, done.stderr[-2000:]
    bodies = [json.loads(raw) for raw in up.raw]
    assert len(bodies) == STEPS + 1 and all(b["store"] is False for b in bodies)
    _assert_prefixes(bodies, "input", tuple(k for k in bodies[0] if k != "input"))
    sent = [i for i in bodies[-1]["input"] if i.get("type") == "reasoning"]
    calls = [i for i in bodies[-1]["input"] if i.get("type") == "function_call"]
    assert [json.loads(c["arguments"]) for c in calls] == [{"cmd": f"echo step {i}"} for i in range(STEPS)]
    total = stats["total"]
    if encrypted:  # the encrypted item and its summary, as returned: sealed, never edited
        assert [(r["id"], r["encrypted_content"]) for r in sent] == [(f"rs_{i}", f"gAAAAB-opaque-{i}") for i in range(STEPS)]
        assert [r["summary"] for r in sent] == [[{"type": "summary_text", "text": reasoning(i)}] for i in range(STEPS)]
    else:  # no encrypted_content: the SDK does not send the item back, so there is nothing to compress
        assert sent == []
    assert total["steps_compressed"] == 0 and total["reasoning_tokens_removed"] == 0 and total["prefix_breaks"] == 0
