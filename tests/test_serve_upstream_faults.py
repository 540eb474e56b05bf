"""``iclr serve`` in front of an upstream that fails at the socket, not with a status.

A scripted upstream on 127.0.0.1 (:class:`BrokenUpstream`) answers every POST one way: it
closes the connection without a response, streams a few SSE chunks and closes mid-stream, or
promises a JSON body longer than it sends. The proxy must say what happened (502 bodies in
the path's API shape; one log line for a stream that broke off, never uvicorn's traceback),
count it as an upstream error in ``/stats`` and ``/metrics``, and leave the client of a
broken stream with a broken stream (not a complete-looking one).
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

from serve_fixtures import proxy

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
