"""LiteLLM's copies of the reasoning, and counters that match the bytes sent.

Apps on the LiteLLM Python client send ``message.model_dump()`` back, so
``provider_specific_fields`` repeats ``reasoning`` / ``reasoning_content`` / ``thinking_blocks``
beside the message's own field (mini-swe-agent 2.x among them). They are sites of the same
reasoning, edited alike. A copy no reader edits keeps the request as the client sent it, and
``/stats`` then counts the steps as sent: generated, ``steps_unwritten``, nothing removed.
"""

from __future__ import annotations

import httpx
import orjson
import pytest

from serve_fixtures import proxy, scripted_upstream
from test_serve_eager import responder

pytestmark = pytest.mark.server
pytest.importorskip("starlette")

R = "Look at the file first.\n\nMaybe grep for it.\n\nThe answer is in line 3.\n\nCheck the tests too.\n\nThen run them."
SKIPS = 4  # floor(0.8 * 5)


def _history(steps: int, copy) -> dict:
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix the bug."}]
    for i in range(steps):
        msg = {"role": "assistant", "content": None, "reasoning_content": R, "function_call": None,
               "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]}
        msg.update(copy)
        messages += [msg, {"role": "tool", "tool_call_id": f"call_{i}", "content": f"out {i}"}]
    return {"model": "deepseek/deepseek-reasoner", "messages": messages}


def _send(copy, steps=(1, 2, 3)) -> tuple[list[dict], dict]:
    with scripted_upstream(responder(9)) as up, proxy(up.url) as (url, _):
        for n in steps:
            answer = httpx.post(url + "/chat/completions", json=_history(n, copy), timeout=60)
            assert answer.status_code == 200, answer.text
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    return [orjson.loads(raw) for raw in up.raw], stats


def _texts(value) -> list[str]:
    """Every string of ``value`` that holds (a form of) the reasoning."""
    if isinstance(value, str):
        return [value] if value == R or "[SKIP]" in value else []
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


COPIES = {
    "reasoning": {"provider_specific_fields": {"reasoning": R}},
    "reasoning_content": {"provider_specific_fields": {"reasoning_content": R}},
    "thinking_blocks": {"provider_specific_fields": {"thinking_blocks": [{"type": "thinking", "thinking": R, "signature": "sig"}]}},
    "both": {"thinking_blocks": [{"type": "thinking", "thinking": R, "signature": "sig"}],
             "provider_specific_fields": {"reasoning_content": R, "thinking_blocks": [{"type": "thinking", "thinking": R, "signature": "sig"}]}},
}


@pytest.mark.parametrize("name", list(COPIES))
def test_every_copy_is_edited_alike_and_counted_as_sent(name):
    bodies, stats = _send(COPIES[name])
    last = bodies[-1]
    assistants = [m for m in last["messages"] if m["role"] == "assistant"]
    for msg in assistants:
        texts = _texts(msg)
        assert len(texts) >= 2 and len(set(texts)) == 1  # the field and each copy, written alike
        assert texts[0].split("\n\n").count("[SKIP]") == SKIPS
        for block in [*msg.get("thinking_blocks", []), *msg.get("provider_specific_fields", {}).get("thinking_blocks", [])]:
            assert block["signature"] == "sig"  # DeepSeek does not check it (the provider rule, as in files)
    # what was sent: three steps, each compressed once, the same bytes in every later request
    assert stats["total"]["steps_compressed"] == 3 == sum(1 for m in assistants if "[SKIP]" in m["reasoning_content"])
    assert stats["total"]["steps_unwritten"] == 0 and stats["total"]["prefix_breaks"] == 0
    assert stats["total"]["reasoning_tokens_removed"] > 0


def test_a_copy_no_reader_edits_sends_the_request_as_it_came_and_counts_it_so():
    copy = {"metadata": {"raw_response": R}}  # an app's own field holding the reasoning
    bodies, stats = _send(copy)
    for body, n in zip(bodies, (1, 2, 3)):
        assert body["messages"] == _history(n, copy)["messages"]  # never half-edited
    total = stats["total"]
    assert total["steps_completed"] == 3 and total["steps_compressed"] == 0 and total["steps_unwritten"] == 3
    assert total["reasoning_tokens_removed"] == 0 and total["reasoning_tokens_kept"] == total["reasoning_tokens_generated"] > 0
    assert total["prefix_breaks"] == 0  # sent as generated from the first decision on, the same bytes after
