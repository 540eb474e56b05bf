"""The gateway hooks over HTTP (``/iclr/hooks/*``, :class:`RemoteHooks`): a gateway that
forwards requests itself gets from one shared ``iclr serve`` the bytes serve would send, for
whole and streamed replies; bad hook calls are refused naming the field; a serve that is down
costs a request at most the timeout, and the request goes as the client sent it."""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
import orjson
import pytest

from serve_fixtures import proxy, scripted_upstream
from test_serve_eager import SYSTEM, reasoning, responder, tool_stream

from iclr_cli.serve.hooks_http import RemoteHooks

STEPS = 4


def _sse(stream) -> list[bytes]:
    return [b"data: " + orjson.dumps(e) + b"\n\n" for e in stream.events] + [b"data: [DONE]\n\n"]


def _whole_reply(i: int) -> bytes:
    body = responder(STEPS)[0]({"messages": [{"role": "assistant"}] * i}, 0).body
    return orjson.dumps(body)


def _after(messages: list[dict], k: int) -> list[dict]:
    """The agent's next history: step ``k``'s reply as a client sends it back, its tool's output."""
    reply = {"role": "assistant", "content": None, "reasoning_content": reasoning(k),
             "tool_calls": [{"id": f"call_{k}", "type": "function", "function": {"name": "bash", "arguments": orjson.dumps({"command": f"ls {k}"}).decode()}}]}
    return [*messages, reply, {"role": "tool", "tool_call_id": f"call_{k}", "content": f"out {k}"}]


async def _gateway_session(hooks: RemoteHooks, streamed: bool) -> list[list[dict]]:
    """A gateway's view of one agent: each request through ``hooks.before``, the 'upstream'
    answer (the test's own, by step) through ``feed``/``reply``; returns what went upstream."""
    messages = [SYSTEM, {"role": "user", "content": "fix the bug"}]
    sent = []
    for k in range(STEPS):
        body = {"model": "fake-model", "messages": messages, "stream": streamed}
        call = f"call-{streamed}-{k}"
        edited = await hooks.before(call, "chat/completions", body, None)
        sent.append((edited or body)["messages"])
        if streamed:
            for piece in _sse(tool_stream(k, reasoning(k))):
                hooks.feed(call, piece)
            await hooks.reply(call, None, True, "ok")
        else:
            await hooks.reply(call, _whole_reply(k), False, "ok")
        messages = _after(messages, k)
    return sent


def _direct_session(streamed: bool) -> list[list[dict]]:
    """The same agent straight through serve (the reference bytes)."""
    with scripted_upstream(responder(STEPS)) as up, proxy(up.url, upstream_kind="local") as (base, _):
        messages = [SYSTEM, {"role": "user", "content": "fix the bug"}]
        for k in range(STEPS):
            answer = httpx.post(base + "/chat/completions", json={"model": "fake-model", "messages": messages, "stream": streamed}, timeout=60)
            assert answer.status_code == 200
            messages = _after(messages, k)
        return [orjson.loads(b)["messages"] for b in up.raw]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_a_gateway_through_the_hooks_sends_what_serve_sends(streamed, caplog):
    with scripted_upstream(responder(STEPS)) as up, proxy(up.url, upstream_kind="local") as (url, state):
        hooks = RemoteHooks(url, timeout_s=30)
        with caplog.at_level(logging.INFO, logger="iclr.serve"):
            through_hooks = asyncio.run(_gateway_session(hooks, streamed))
        total = state.stats.total
        assert up.raw == []  # the gateway forwards; serve only rewrote
    assert through_hooks == _direct_session(streamed)
    assert (total.requests, total.steps_completed, total.steps_late) == (STEPS, STEPS - 1, 0)
    last = [m for m in through_hooks[-1] if m["role"] == "assistant"]
    assert [m["reasoning_content"].count("[SKIP]") for m in last] == [4] * (STEPS - 1)
    assert hooks.errors == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "iclr.serve" and "added" in r.getMessage()]
    assert len(lines) == STEPS and lines[0].startswith("a first request (no step to decide yet)")
    assert all(f"conversation {state.conversations()[0].id}: 1 step decided; 1 compressed, 0 late" in line for line in lines[1:])


def test_bad_hook_calls_are_refused_naming_the_field():
    with scripted_upstream([]) as up, proxy(up.url, upstream_kind="local") as (url, _):
        base = url.removesuffix("/v1")
        answers = [
            httpx.post(base + "/iclr/hooks/before", content=b"{not json"),
            httpx.post(base + "/iclr/hooks/before", json={"route": "embeddings", "body": {}}),
            httpx.post(base + "/iclr/hooks/before", json={"route": "messages", "body": [1]}),
            httpx.post(base + "/iclr/hooks/feed", content=b"x"),
            httpx.post(base + "/iclr/hooks/reply", params={"call": "c", "streamed": "2", "outcome": "ok"}),
        ]
        unknown = httpx.post(base + "/iclr/hooks/reply", params={"call": "never-seen", "streamed": "0", "outcome": "ok"}, content=b"{}")
    assert [a.status_code for a in answers] == [400] * 5
    errors = [a.json()["error"] for a in answers]
    assert errors[0].startswith("/iclr/hooks/before: the body is not JSON")
    assert errors[1] == "/iclr/hooks/before: field 'route' is one of chat/completions, messages, responses, not 'embeddings'"
    assert errors[2] == "/iclr/hooks/before: field 'body' is the client's request object, not list"
    assert errors[3] == "/iclr/hooks/feed: query parameter 'call' is missing"
    assert "'streamed' (0 or 1)" in errors[4]
    assert unknown.status_code == 204  # a reply to a call this serve never rewrote: nothing to record


def test_a_serve_that_is_down_costs_at_most_the_timeout_and_nothing_else():
    hooks = RemoteHooks("http://127.0.0.1:9", timeout_s=1.0)  # the discard port: nothing listens

    async def go():
        start = time.monotonic()
        with pytest.raises(httpx.ConnectError):
            await hooks.before("c1", "chat/completions", {"messages": []}, None)
        hooks.feed("c1", b"data: {}\n\n")  # never taken: nothing is sent or kept
        await hooks.reply("c1", b"{}", False, "ok")
        return time.monotonic() - start

    assert asyncio.run(go()) < 1.0
    assert hooks.route_of("c1") is None and hooks.errors == 1
