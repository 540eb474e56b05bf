"""``iclr serve`` over HTTP: the openai SDK, SSE relaying, errors, limits, keys, restart."""

from __future__ import annotations

import threading

import httpx
import orjson
import pytest

from replay_fixtures import call, completion, error, usage
from serve_fixtures import proxy, scripted_upstream, stream_of

from iclr_cli.token_accounting import account, token_counter

pytest.importorskip("starlette")
openai = pytest.importorskip("openai")

REASONING = "Read the task.\n\nList the files.\n\nThe bug is in parse().\n\nRun the tests after."
SYSTEM = {"role": "system", "content": "You are an agent."}
USER = {"role": "user", "content": "Fix the bug."}


def step_reply(i: int):
    return completion(None, [call("bash", {"command": f"ls {i}"}, call_id=f"call_{i}")], reasoning_content=REASONING,
                      usage_=usage(100 + i, 20, prompt_tokens_details={"cached_tokens": 50}))


def as_message(reply) -> dict:
    return reply.body["choices"][0]["message"]


def tool(i: int) -> dict:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": f"out {i}"}


def client(url: str, key: str = "sk-client") -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=30)


def test_openai_sdk_not_streamed_compresses_the_completed_step():
    replies = [step_reply(0), step_reply(1), completion("done")]
    with scripted_upstream(replies) as up, proxy(up.url) as (url, state):
        sdk = client(url)
        messages = [SYSTEM, USER]
        for i in range(2):
            out = sdk.chat.completions.create(model="fake-model", messages=messages)
            msg = out.choices[0].message
            assert msg.tool_calls[0].id == f"call_{i}"
            assert msg.model_extra["reasoning_content"] == REASONING  # the client gets the reply unchanged
            messages = messages + [msg.model_dump(exclude_none=True), tool(i)]
        last = sdk.chat.completions.create(model="fake-model", messages=messages)
        assert last.choices[0].message.content == "done"
        sent = up.requests[2]["messages"]
        assert [m.get("reasoning_content") for m in sent if m["role"] == "assistant"][0].count("[SKIP]") == 3
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    (conv,) = stats["conversations"].values()
    assert conv["requests"] == 3 and conv["steps_compressed"] == 2
    tokens = account(token_counter(state.tokenizer), [(REASONING, s.texts[0]) for s in state.conversations()[-1].steps.values()])
    assert tokens.deleted > 0 and (conv["reasoning_tokens_generated"], conv["reasoning_tokens_removed"], conv["reasoning_tokens_kept"]) == (tokens.generated, tokens.deleted, tokens.kept)
    assert (conv["skip_markers"], conv["skip_marker_tokens"]) == (6, tokens.marker_tokens) and tokens.marker_tokens > 0
    assert conv["input_tokens"] == 100 + 101 + 100 and conv["cache_read_tokens"] == 100
    assert stats["total"]["added_latency_ms"]["samples"] == 3


def test_openai_sdk_streamed():
    replies = [stream_of("Hello there, agent.", reasoning="Think.\n\nThink more.", usage_=usage(7, 5))]
    with scripted_upstream(replies) as up, proxy(up.url) as (url, state):
        chunks = list(client(url).chat.completions.create(model="fake-model", messages=[SYSTEM, USER], stream=True))
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks if c.choices)
    assert text == "Hello there, agent." and reasoning == "Think.\n\nThink more."
    assert stats["total"]["input_tokens"] == 7 and stats["total"]["output_tokens"] == 5
    assert len(stats["conversations"]) == 1  # the first request got its id from the streamed reply


def test_sse_is_relayed_chunk_by_chunk():
    held = stream_of("one two three four", hold=True)
    with scripted_upstream([held]) as up, proxy(up.url) as (url, _):
        body = {"model": "fake-model", "messages": [SYSTEM, USER], "stream": True}
        with httpx.stream("POST", url + "/chat/completions", json=body, timeout=20) as resp:
            assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
            lines = resp.iter_lines()
            first = next(line for line in lines if line)
            # the upstream has not finished (it holds the rest until released): this chunk
            # came through on its own
            assert not held.finished.is_set()
            assert orjson.loads(first.removeprefix("data: "))["choices"][0]["delta"]["role"] == "assistant"
            held.release.set()
            rest = [line for line in lines if line]
    assert rest[-1] == "data: [DONE]" and len(rest) == len(held.events)


@pytest.mark.parametrize("reply", [
    error(429, "slow down", retry_after="7"),
    error(400, "reasoning_content is required"),
    error(503, "overloaded"),
])
def test_upstream_errors_reach_the_client_unchanged(reply):
    with scripted_upstream([reply]) as up, proxy(up.url) as (url, _):
        resp = httpx.post(url + "/chat/completions", json={"model": "m", "messages": [SYSTEM, USER]}, timeout=20)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert resp.status_code == reply.status
    assert resp.json() == reply.body
    for k, v in reply.headers.items():
        assert resp.headers[k] == v
    assert stats["total"]["upstream_errors"] == 1


def test_unreachable_upstream_is_a_502():
    with proxy("http://127.0.0.1:9/v1") as (url, _):
        resp = httpx.post(url + "/chat/completions", json={"model": "m", "messages": [SYSTEM, USER]}, timeout=20)
    assert resp.status_code == 502 and resp.json()["error"]["code"] == "upstream_unreachable"


def test_body_over_the_cap_is_413_and_never_forwarded():
    with scripted_upstream() as up, proxy(up.url, max_body_bytes=2000) as (url, _):
        big = {"model": "m", "messages": [SYSTEM, {"role": "user", "content": "x" * 5000}]}
        resp = httpx.post(url + "/chat/completions", json=big, timeout=20)
        small = httpx.post(url + "/chat/completions", json={"model": "m", "messages": [SYSTEM, USER]}, timeout=20)
        chunked = httpx.post(url + "/chat/completions", content=iter([b"{" + b" " * 1500, b" " * 1500 + b"}"]), timeout=20)
    assert resp.status_code == 413 and resp.json()["error"]["code"] == "request_too_large"
    assert chunked.status_code == 413
    assert small.status_code == 200 and len(up.requests) == 1


def test_models_healthz_and_metrics():
    with scripted_upstream([step_reply(0)]) as up, proxy(up.url) as (url, _):
        models = client(url).models.list()
        root = url.removesuffix("/v1")
        health = httpx.get(root + "/healthz").json()
        httpx.post(url + "/chat/completions", json={"model": "m", "messages": [SYSTEM, USER]}, timeout=20)
        httpx.post(url + "/chat/completions", json={"model": "m", "messages": [SYSTEM, USER, as_message(step_reply(0)), tool(0)]}, timeout=20)
        metrics = httpx.get(root + "/metrics").text
    assert [m.id for m in models.data] == ["fake-model"] and health == {"status": "ok"}
    assert 'iclr_serve_requests_total{outcome="ok"} 2.0' in metrics
    assert "iclr_serve_steps_compressed_total 1.0" in metrics
    assert 'iclr_serve_upstream_tokens_total{kind="input"}' in metrics


def test_authorization_is_forwarded_or_replaced():
    with scripted_upstream() as up, proxy(up.url) as (url, _):
        client(url, key="sk-from-client").chat.completions.create(model="m", messages=[SYSTEM, USER])
        client(url, key="sk-from-client").models.list()
    assert up.headers[0]["authorization"] == "Bearer sk-from-client"
    assert up.get_headers[0]["authorization"] == "Bearer sk-from-client"
    with scripted_upstream() as up, proxy(up.url, api_key="sk-from-proxy") as (url, _):
        client(url, key="sk-from-client").chat.completions.create(model="m", messages=[SYSTEM, USER])
    assert up.headers[0]["authorization"] == "Bearer sk-from-proxy"
    assert "sk-from-client" not in repr(up.headers)


def test_keys_never_reach_state_stats_or_logs(tmp_path, caplog):
    caplog.set_level("DEBUG")
    secret_client, secret_proxy = "sk-CLIENT-SECRET-123", "sk-PROXY-SECRET-456"
    replies = [step_reply(0), step_reply(1)]
    with scripted_upstream(replies) as up, proxy(up.url, api_key=secret_proxy, state_dir=str(tmp_path / "state"), restore_reasoning=True) as (url, state):
        sdk = client(url, key=secret_client)
        sdk.chat.completions.create(model="m", messages=[SYSTEM, USER])
        sdk.chat.completions.create(model="m", messages=[SYSTEM, USER, as_message(step_reply(0)), tool(0)])
        root = url.removesuffix("/v1")
        shown = httpx.get(root + "/stats").text + httpx.get(root + "/metrics").text + repr(state.__dict__)
    on_disk = b"".join(p.read_bytes() for p in (tmp_path / "state").iterdir())
    assert b"call_0" in on_disk  # the state was written
    for secret in (secret_client, secret_proxy):
        assert secret not in shown and secret.encode() not in on_disk and secret not in caplog.text


def test_restart_with_state_dir_sends_identical_bytes(tmp_path):
    history = [SYSTEM, USER, as_message(step_reply(0)), tool(0), as_message(step_reply(1)), tool(1)]
    with scripted_upstream() as up, proxy(up.url, state_dir=str(tmp_path)) as (url, _):
        for n in (2, 4, 6):
            httpx.post(url + "/chat/completions", json={"model": "m", "messages": history[:n]}, timeout=20)
        before = list(up.raw)

    class Broken:
        """A scorer that always fails: after the restart nothing may need scoring."""

        name, max_tokens, overflow = "fake", 42_000, "window"

        def __init__(self):
            from iclr_cli.scoring.fake import RegexTokenizer

            self.tokenizer = RegexTokenizer()

        def score(self, requests):
            raise RuntimeError("not loaded")

    with scripted_upstream() as up, proxy(up.url, state_dir=str(tmp_path), scorer=Broken(), tokenizer=Broken().tokenizer) as (url, state):
        for n in (2, 4, 6):
            httpx.post(url + "/chat/completions", json={"model": "m", "messages": history[:n]}, timeout=20)
        after = list(up.raw)
        assert state.stats.total.scorer_failures == 0
    assert after == before and b"[SKIP]" in before[2]


def test_scoring_never_blocks_the_event_loop():
    from iclr_cli.scoring.fake import FakeScorer

    entered, release = threading.Event(), threading.Event()

    class Slow(FakeScorer):
        def score(self, requests):
            entered.set()
            release.wait(20)
            return super().score(requests)

    slow = Slow()
    with scripted_upstream() as up, proxy(up.url, scorer=slow, tokenizer=slow.tokenizer) as (url, _):
        body = {"model": "m", "messages": [SYSTEM, USER, as_message(step_reply(0)), tool(0)]}
        result = {}
        worker = threading.Thread(target=lambda: result.update(r=httpx.post(url + "/chat/completions", json=body, timeout=30)))
        worker.start()
        assert entered.wait(20)
        health = httpx.get(url.removesuffix("/v1") + "/healthz", timeout=10)  # answered while scoring waits
        assert health.status_code == 200 and not release.is_set()
        release.set()
        worker.join(30)
    assert result["r"].status_code == 200 and "[SKIP]" in up.requests[0]["messages"][2]["reasoning_content"]


def test_client_that_drops_reasoning_gets_it_restored():
    replies = [step_reply(0), step_reply(1)]
    with scripted_upstream(replies) as up, proxy(up.url, restore_reasoning=True) as (url, _):
        sdk = client(url)
        first = sdk.chat.completions.create(model="m", messages=[SYSTEM, USER]).choices[0].message
        dropped = {"role": "assistant", "content": first.content, "tool_calls": [c.model_dump() for c in first.tool_calls]}
        sdk.chat.completions.create(model="m", messages=[SYSTEM, USER, dropped, tool(0)])
    restored = up.requests[1]["messages"][2]
    assert "[SKIP]" in restored["reasoning_content"]


def test_a_failing_write_back_forwards_the_request_as_sent(monkeypatch):
    with scripted_upstream() as up, proxy(up.url) as (url, state):
        def broken(*args):
            raise OSError("disk full")

        monkeypatch.setattr(state, "rewrite", broken)
        raw = orjson.dumps({"model": "m", "messages": [SYSTEM, USER, as_message(step_reply(0)), tool(0)]})
        resp = httpx.post(url + "/chat/completions", content=raw, headers={"content-type": "application/json"}, timeout=20)
    assert resp.status_code == 200 and up.raw == [raw]
