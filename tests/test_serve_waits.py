"""What a request waiting in ``iclr serve`` meets over HTTP: its client going away, the proxy
stopping (in process and by SIGTERM to the real process), the log line of a long wait, the
scorer queue in ``/stats`` and ``/metrics``, and two conversations sharing one scorer.

Scores are held back with a gated fake scorer; every wait below is for an event, never a
bound on time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import orjson
import pytest

from replay_fixtures import REPO, call, completion
from serve_fixtures import proxy, scripted_upstream
from wire_fixtures import anthropic_reply, thinking, tool_use

from iclr_cli.scoring.fake import FakeScorer

pytest.importorskip("starlette")

REASONING = "Look at the file first.\n\nMaybe grep for it.\n\nThe answer is in line 3.\n\nCheck the tests too."
FIRST = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix the bug."}]


def until(predicate, limit: float = 60) -> bool:
    """Wait (not an assertion on time) until ``predicate()`` holds; its last value."""
    deadline = time.monotonic() + limit
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def script(n: int = 3):
    return [completion(None, [call("bash", {"command": f"ls {i}"}, call_id=f"call_{i}")], reasoning_content=REASONING) for i in range(n)] + [completion("done")]


def second_request(url: str) -> list[dict]:
    """The first request, then the messages of the second (the first step is complete)."""
    resp = httpx.post(url + "/chat/completions", json={"model": "m", "messages": FIRST}, timeout=60)
    assert resp.status_code == 200
    message = resp.json()["choices"][0]["message"]
    return [*FIRST, message, {"role": "tool", "tool_call_id": "call_0", "content": "out"}]


def stats(url: str) -> dict:
    return httpx.get(url.removesuffix("/v1") + "/stats", timeout=30).json()


def gated(**kw):
    gate = threading.Event()
    scorer = FakeScorer(gate=gate, **kw)
    return gate, {"scorer": scorer, "tokenizer": scorer.tokenizer}


def test_a_client_that_has_gone_is_never_forwarded_and_is_counted(caplog):
    gate, fake = gated()
    with scripted_upstream(script()) as up, proxy(up.url, **fake) as (url, state):
        messages = second_request(url)
        with pytest.raises(httpx.ReadTimeout):  # the client gives up while its step is scored
            httpx.post(url + "/chat/completions", json={"model": "m", "messages": messages}, timeout=1)
        assert until(lambda: stats(url)["total"]["client_gone"] == 1)
        gate.set()  # the scoring ends; the abandoned request must still not go upstream
        resent = httpx.post(url + "/chat/completions", json={"model": "m", "messages": messages}, timeout=60)
        assert resent.status_code == 200
        total = stats(url)["total"]
    assert len(up.requests) == 2  # the first request and the resend, never the abandoned copy
    assert "[SKIP]" in orjson.dumps(up.requests[1]).decode()
    assert total["client_gone"] == 1 and total["requests"] == 3 and total["upstream_errors"] == 0
    assert any("went away" in r.getMessage() and "not forwarded" in r.getMessage() for r in caplog.records)


class Stubborn(FakeScorer):
    """Ignores cancel(): a forward chunk that outlasts the server's shutdown grace."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Event()

    def score(self, requests):
        if any(r.history or r.prompt for r in requests):
            self.entered.set()
            self.release.wait(120)
        return super().score(requests)


def test_stopping_answers_a_request_waiting_for_a_chunk_that_will_not_end_with_503(caplog):
    stubborn = Stubborn()
    answer: dict = {}
    try:
        with scripted_upstream(script()) as up, proxy(up.url, scorer=stubborn, tokenizer=stubborn.tokenizer) as (url, state):
            messages = second_request(url)
            assert stubborn.entered.wait(60)  # scored ahead, inside its endless chunk

            def agent():
                answer["resp"] = httpx.post(url + "/chat/completions", content=orjson.dumps({"model": "m", "messages": messages}), timeout=120)

            client = threading.Thread(target=agent)
            client.start()
            assert until(lambda: state.stats.waiting == 1)  # the request waits for that chunk
        client.join(60)
    finally:
        stubborn.release.set()
    resp = answer["resp"]
    assert resp.status_code == 503 and resp.json()["error"]["code"] == "shutting_down"
    assert len(up.requests) == 1
    lines = [r for r in caplog.records if "shutting_down" in r.getMessage()]
    assert len(lines) == 1 and not any(r.exc_info for r in caplog.records)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sigterm_while_a_request_waits_for_scoring_is_a_503_and_one_log_line():
    """The real process, stopped by SIGTERM as systemd or a container runtime stops it, with a
    request of Anthropic's API waiting for the prefill of a paced fake (1 token a second)."""
    steps = [anthropic_reply([thinking(REASONING), tool_use("toolu_0", "Bash", {"command": "ls"})]), anthropic_reply([{"type": "text", "text": "done"}])]
    port = _free_port()
    with scripted_upstream(steps) as up:
        cmd = [sys.executable, "-m", "iclr_cli", "serve", "--upstream", up.url, "--port", str(port), "--proxy-model", "fake:1", "--max-wait", "inf"]
        proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        base = f"http://127.0.0.1:{port}"
        answer: dict = {}
        try:
            assert until(lambda: _up(base), 120), "iclr serve did not start"
            body = {"model": "claude-x", "max_tokens": 100, "system": "You are an agent.", "messages": [{"role": "user", "content": "Fix the bug."}]}
            first = httpx.post(base + "/v1/messages", json=body, headers={"x-api-key": "sk-ant"}, timeout=60).json()
            body["messages"] += [{"role": "assistant", "content": first["content"]},
                                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0", "content": "out"}]}]

            def agent():
                answer["resp"] = httpx.post(base + "/v1/messages", json=body, headers={"x-api-key": "sk-ant"}, timeout=120)

            client = threading.Thread(target=agent)
            client.start()
            assert until(lambda: httpx.get(base + "/stats", timeout=10).json()["scorer_queue"]["requests_waiting"] == 1)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        client.join(60)
    resp = answer["resp"]
    assert resp.status_code == 503 and resp.json() == {"type": "error", "error": {"type": "api_error", "message": "iclr serve is shutting down; send the request again"}}
    assert len(up.requests) == 1
    assert "Traceback" not in err and "CancelledError" not in err, err
    assert len([line for line in err.splitlines() if "shutting_down" in line]) == 1, err
    assert proc.returncode == -signal.SIGTERM  # uvicorn ends by the signal it got, as systemd expects


def _up(base: str) -> bool:
    try:
        return httpx.get(base + "/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_long_wait_gets_one_log_line_saying_on_what(caplog, monkeypatch):
    import iclr_cli.serve.app as app

    gate, fake = gated(tokens_per_s=1e9)
    upstream_gate = threading.Event()

    def slow(body, index):  # the upstream holds its answer (before any header) until released
        upstream_gate.wait(60)
        return completion("done")

    with scripted_upstream([*script(1), slow]) as up, proxy(up.url, **fake) as (url, state):
        messages = second_request(url)
        monkeypatch.setattr(app, "WAIT_LOG_S", 0.05)  # from here on: a request held 50 ms is said
        answer: dict = {}
        client = threading.Thread(target=lambda: answer.setdefault("r", httpx.post(url + "/chat/completions", json={"model": "m", "messages": messages}, timeout=60)))
        client.start()
        assert until(lambda: any("waited" in r.getMessage() for r in caplog.records))
        gate.set()  # scored: the request goes upstream and gets its answer
        client.join(60)
        assert answer["r"].status_code == 200
        # the same request again: nothing left to score, and the upstream holds it
        resent = threading.Thread(target=lambda: httpx.post(url + "/chat/completions", json={"model": "m", "messages": messages}, timeout=60))
        resent.start()
        assert until(lambda: len([r for r in caplog.records if "waited" in r.getMessage()]) == 2)
        upstream_gate.set()
        resent.join(60)
    waits = [r.getMessage() for r in caplog.records if "waited" in r.getMessage()]
    assert len(waits) == 2, waits  # one line per request
    # its step scored ahead holds the gated scorer: running (the prefill of P) or, on a machine
    # slow to start it, still queued
    assert ("prefill of P" in waits[0] or "scorer queue" in waits[0]) and "/v1/chat/completions (conversation " in waits[0]
    assert "the upstream" in waits[1]


def test_two_conversations_share_the_scorer_and_neither_waits_past_its_budget():
    gate, fake = gated()
    def tool_call(body, index):
        i = sum(m["role"] == "assistant" for m in body["messages"])
        return completion(None, [call("bash", {"command": f"ls {i}"}, call_id=f"call_{i}")], reasoning_content=REASONING)

    with scripted_upstream([tool_call] * 6) as up, proxy(up.url, max_wait=0.05, late="compress-later", **fake) as (url, state):
        # two sessions at once: each one's scoring is held, so every step of both goes late
        def session(user: str):
            messages = [FIRST[0], {"role": "user", "content": user}]
            for i in range(3):
                resp = httpx.post(url + "/chat/completions", json={"model": "m", "messages": messages}, timeout=60)
                assert resp.status_code == 200
                messages = [*messages, resp.json()["choices"][0]["message"], {"role": "tool", "tool_call_id": f"call_{i}", "content": "out"}]

        threads = [threading.Thread(target=session, args=(f"task {k}",)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        data = stats(url)
        metrics = httpx.get(url.removesuffix("/v1") + "/metrics", timeout=30).text
        gate.set()
    queue = data["scorer_queue"]
    assert data["total"]["requests"] == 6 and data["total"]["steps_late"] == 4 and data["total"]["steps_compressed"] == 0
    # the first step's scoring is held; the late ones wait behind it to be compressed later
    assert queue["depth"] >= 1 and queue["ahead"] == queue["depth"] and queue["oldest_s"] is not None and queue["running_s"] is not None
    assert data["max_wait_s"] == 0.05 and data["late"] == "compress-later"
    assert len(up.requests) == 6 and not any("[SKIP]" in json.dumps(r) for r in up.requests)
    for name in ("iclr_serve_scorer_queue_depth", "iclr_serve_scorer_queue_oldest_seconds", "iclr_serve_steps_late_total",
                 "iclr_serve_steps_late_compressed_total", "iclr_serve_scoring_wait_seconds_bucket", "iclr_serve_steps_completed_total",
                 "iclr_serve_requests_waiting_for_scores"):
        assert name in metrics, name
