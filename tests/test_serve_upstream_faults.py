"""``iclr serve`` in front of an upstream that fails at the socket, or with a status the SDKs retry.

A scripted upstream on 127.0.0.1 (:class:`BrokenUpstream`) answers every POST one way: it
closes the connection without a response, streams a few SSE chunks and closes mid-stream, or
promises a JSON body longer than it sends. The proxy must say what happened (502 bodies in
the path's API shape; one log line for a stream that broke off, never uvicorn's traceback),
count it as an upstream error in ``/stats`` and ``/metrics``, and leave the client of a
broken stream with a broken stream (not a complete-looking one).

An upstream that answers 529 (overloaded) or 429 (with ``retry-after``) to a streamed request:
the client gets that status, body and headers (``retry-after``, ``retry-after-ms``,
``x-should-retry``), never a 200 first, and the anthropic and openai SDKs retry through the
proxy as they would against the API (the real CLIs: ``test_serve_agent_faults.py``).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import logging
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from replay_fixtures import Reply
from serve_fixtures import proxy, scripted_upstream

pytest.importorskip("starlette")

CHAT_BODY = {"model": "m", "stream": True, "messages": [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix the bug."}]}
MESSAGES_BODY = {"model": "claude", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "Fix the bug."}]}


def _event(i: int) -> bytes:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": {"content": f"part{i} "}, "finish_reason": None}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


class BrokenUpstream:
    """A loopback HTTP server whose every POST fails as ``mode`` says: ``close`` (read the
    request, close without a byte), ``mid_stream`` (an SSE answer, chunked, cut after
    ``chunks`` events), ``short_body`` (a JSON answer whose Content-Length promises more than
    is sent). ``posts`` counts the requests it got."""

    def __init__(self, mode: str, chunks: int = 3):
        self.mode, self.chunks, self.posts = mode, chunks, 0

    def handler(self):
        up = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                up.posts += 1
                self.close_connection = True
                if up.mode == "mid_stream":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for i in range(up.chunks):
                        data = _event(i)
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                elif up.mode == "short_body":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    self.wfile.write(b'{"id": "chatcmpl-1", "choi')
                    self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)

        return Handler


@contextlib.contextmanager
def broken_upstream(mode: str, chunks: int = 3) -> Iterator[tuple[str, BrokenUpstream]]:
    """Start a :class:`BrokenUpstream`; yields (its base URL ending in ``/v1``, it)."""
    up = BrokenUpstream(mode, chunks)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), up.handler())
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", up
    finally:
        httpd.shutdown()
        httpd.server_close()


class Records(logging.Handler):
    """Every record a logger lets through."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def logs(*names: str) -> Iterator[list[logging.LogRecord]]:
    """Records of the named loggers (handlers on them: uvicorn's loggers do not reach the root)."""
    handler = Records()
    for name in names:
        logging.getLogger(name).addHandler(handler)
    try:
        yield handler.records
    finally:
        for name in names:
            logging.getLogger(name).removeHandler(handler)


@pytest.mark.parametrize("path, body", [("/chat/completions", CHAT_BODY), ("/messages", MESSAGES_BODY)])
def test_a_stream_that_breaks_off_is_one_log_line_an_upstream_error_and_a_broken_stream(path, body):
    with broken_upstream("mid_stream", chunks=3) as (up_url, up), proxy(up_url) as (url, _):
        root = url.removesuffix("/v1")
        got = bytearray()
        with logs("iclr.serve", "uvicorn.error") as records:
            with pytest.raises(httpx.RemoteProtocolError):  # the client sees the break, as curl's exit 18
                with httpx.stream("POST", url + path, json=body, timeout=20) as resp:
                    assert resp.status_code == 200
                    for chunk in resp.iter_bytes():
                        got += chunk
            stats = httpx.get(root + "/stats").json()
            metrics = httpx.get(root + "/metrics").text
    assert up.posts == 1
    assert bytes(got) == b"".join(_event(i) for i in range(3))  # what the upstream sent, then nothing
    assert stats["total"]["requests"] == 1 and stats["total"]["upstream_errors"] == 1
    assert 'iclr_serve_requests_total{outcome="upstream_dropped"} 1.0' in metrics
    assert 'outcome="ok"' not in metrics
    said = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    assert len(said) == 1, said
    assert up_url in said[0] and "broke off" in said[0] and "RemoteProtocolError" in said[0] and path.removeprefix("/") in said[0]
    assert not any(r.exc_info for r in records)


@pytest.mark.parametrize("path, body, shape", [
    ("/chat/completions", CHAT_BODY, "openai"),
    ("/messages", MESSAGES_BODY, "anthropic"),
])
def test_an_upstream_that_closes_without_replying_is_a_502_that_says_so(path, body, shape):
    with broken_upstream("close") as (up_url, up), proxy(up_url) as (url, _):
        resp = httpx.post(url + path, json=body, timeout=20)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert up.posts >= 1 and resp.status_code == 502
    if shape == "anthropic":
        assert resp.json()["type"] == "error" and resp.json()["error"]["type"] == "api_error"
        message = resp.json()["error"]["message"]
    else:
        assert resp.json()["error"]["code"] == "upstream_no_response"
        message = resp.json()["error"]["message"]
    assert "closed the connection without a response" in message and up_url in message
    assert "unreachable" not in message
    assert stats["total"]["upstream_errors"] == 1


def test_a_whole_body_answer_cut_short_is_a_502_and_an_upstream_error():
    with broken_upstream("short_body") as (up_url, _), proxy(up_url) as (url, _):
        root = url.removesuffix("/v1")
        with logs("iclr.serve", "uvicorn.error") as records:
            resp = httpx.post(url + "/chat/completions", json={**CHAT_BODY, "stream": False}, timeout=20)
            metrics = httpx.get(root + "/metrics").text
    assert resp.status_code == 502 and resp.json()["error"]["code"] == "upstream_dropped"
    assert "broke off its answer" in resp.json()["error"]["message"]
    assert 'iclr_serve_requests_total{outcome="upstream_dropped"} 1.0' in metrics
    said = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    assert len(said) == 1 and "got a 502" in said[0] and not any(r.exc_info for r in records)


# -- faults with a status: what the SDKs retry on ------------------------------------------

RESPONSES_BODY = {"model": "gpt", "stream": True, "input": "Fix the bug."}


def _overloaded(status: int = 529, **headers) -> Reply:
    kind = "overloaded_error" if status == 529 else "rate_limit_error"
    return Reply({"type": "error", "error": {"type": kind, "message": "Overloaded"}}, status=status, headers=headers)


@pytest.mark.parametrize("path, body", [("/messages", MESSAGES_BODY), ("/responses", RESPONSES_BODY), ("/chat/completions", CHAT_BODY)])
@pytest.mark.parametrize("status, headers", [
    (529, {"x-should-retry": "true"}),
    (429, {"retry-after": "7", "retry-after-ms": "7000", "anthropic-ratelimit-requests-remaining": "0"}),
])
def test_a_streamed_request_gets_the_upstreams_status_headers_and_body(path, body, status, headers):
    """Nothing goes to the client before the upstream's status: a 529 or a 429 to a streamed
    request reaches it as such (never a 200 followed by an error event, which the SDKs do not
    retry), with the headers they retry on."""
    fault = _overloaded(status, **headers)
    with scripted_upstream([fault]) as up, proxy(up.url) as (url, _):
        resp = httpx.post(url + path, json=body, timeout=20)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert resp.status_code == status and resp.json() == fault.body
    assert {k: resp.headers.get(k) for k in headers} == headers
    assert stats["total"]["upstream_errors"] == 1


@pytest.mark.parametrize("status, headers", [(529, {}), (429, {"retry-after-ms": "10"})])
def test_the_anthropic_sdk_retries_a_529_and_a_429_through_the_proxy(status, headers):
    anthropic = pytest.importorskip("anthropic")
    from wire_fixtures import anthropic_reply, text

    with scripted_upstream([_overloaded(status, **headers), anthropic_reply([text("Fixed.")], stream=True)]) as up, proxy(up.url) as (url, _):
        client = anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="sk-ant-test", max_retries=2)
        with client.messages.stream(model="claude", max_tokens=64, messages=[{"role": "user", "content": "Fix the bug."}]) as stream:
            message = stream.get_final_message()
    assert [b.text for b in message.content] == ["Fixed."] and len(up.raw) == 2 and up.raw[0] == up.raw[1]
    assert up.headers[1].get("x-stainless-retry-count") == "1"  # the SDK's own retry, not the proxy's


def test_x_should_retry_false_reaches_the_sdk_and_stops_its_retry():
    anthropic = pytest.importorskip("anthropic")
    with scripted_upstream([_overloaded(529, **{"x-should-retry": "false"})] * 3) as up, proxy(up.url) as (url, _):
        client = anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="sk-ant-test", max_retries=2)
        with pytest.raises(anthropic.APIStatusError) as info:
            client.messages.create(model="claude", max_tokens=64, messages=[{"role": "user", "content": "Fix the bug."}], stream=True)
    assert info.value.status_code == 529 and len(up.raw) == 1


@pytest.mark.parametrize("status", [529, 429])
def test_the_openai_sdk_retries_responses_and_chat_streams_through_the_proxy(status):
    openai = pytest.importorskip("openai")
    from serve_fixtures import stream_of
    from wire_fixtures import output_message, responses_reply

    fault = _overloaded(status, **{"retry-after-ms": "10"})
    with scripted_upstream([fault, responses_reply([output_message("Fixed.")], stream=True)]) as up, proxy(up.url) as (url, _):
        client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=2)
        with client.responses.stream(model="gpt", input="Fix the bug.") as stream:
            assert stream.get_final_response().output_text == "Fixed."
        assert len(up.raw) == 2
    with scripted_upstream([fault, stream_of("Fixed.")]) as up, proxy(up.url) as (url, _):
        client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=2)
        chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Fix the bug."}], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Fixed." and len(up.raw) == 2
