"""The chat client against a scripted HTTP server: retries, errors, raw provider fields."""

from __future__ import annotations

import pytest

from replay_fixtures import Reply, completion, error, fake_openai, usage

from iclr_cli.replay.client import ApiError, ChatClient, ClientConfig


def _client(url: str, **kw) -> ChatClient:
    kw.setdefault("max_retries", 3)
    kw.setdefault("timeout_s", 5.0)
    return ChatClient(ClientConfig(url, "m", **kw))


def test_retries_429_and_500_then_succeeds():
    script = [error(429, retry_after_ms="1"), error(500, retry_after_ms="1"), error(503, retry_after_ms="1"), completion("hi")]
    with fake_openai(script) as srv:
        resp = _client(srv.url).complete([{"role": "user", "content": "x"}], None)
    assert resp.message["content"] == "hi"
    assert len(srv.requests) == 4
    assert all(r["messages"] == [{"role": "user", "content": "x"}] for r in srv.requests)


def test_gives_up_after_max_retries():
    with fake_openai([error(500, retry_after_ms="1")] * 5) as srv:
        with pytest.raises(ApiError, match="HTTP 500"):
            _client(srv.url, max_retries=2).complete([{"role": "user", "content": "x"}], None)
    assert len(srv.requests) == 3  # first try + 2 retries


def test_client_error_is_not_retried():
    with fake_openai([error(400, "bad field reasoning_content")]) as srv:
        with pytest.raises(ApiError, match="HTTP 400"):
            _client(srv.url).complete([{"role": "user", "content": "x"}], None)
    assert len(srv.requests) == 1


def test_timeout_is_retried():
    slow = completion("late")
    slow.delay_s = 1.5
    with fake_openai([slow, completion("fast")]) as srv:
        resp = _client(srv.url, timeout_s=0.5, max_retries=1).complete([{"role": "user", "content": "x"}], None)
    assert resp.message["content"] == "fast"
    assert len(srv.requests) == 2


def test_provider_fields_and_request_options_survive():
    reply = completion("ok", reasoning_content="why", usage_=usage(50, 5, prompt_cache_hit_tokens=32))
    with fake_openai([reply]) as srv:
        client = _client(srv.url, temperature=0.2, max_output_tokens=64, extra_body={"thinking": {"type": "enabled"}})
        resp = client.complete([{"role": "user", "content": "x"}], [{"type": "function", "function": {"name": "f", "parameters": {}}}])
    assert resp.message["reasoning_content"] == "why"
    assert resp.usage.cache_read_tokens == 32
    sent = srv.requests[0]
    assert (sent["model"], sent["temperature"], sent["max_tokens"], sent["thinking"]) == ("m", 0.2, 64, {"type": "enabled"})
    assert sent["tools"][0]["function"]["name"] == "f"


def test_body_without_choices_is_an_error():
    with fake_openai([Reply({"error": {"message": "quota"}})]) as srv:
        with pytest.raises(ApiError, match="provider error"):
            _client(srv.url).complete([{"role": "user", "content": "x"}], None)
