"""Helpers for the ``iclr serve`` tests: a scripted upstream that also streams, and the proxy.

:class:`ScriptedUpstream` extends replay's :class:`~replay_fixtures.FakeOpenAI`: it records
the raw body bytes and headers of every request, answers ``GET /v1/models``, and serves
:class:`Stream` replies as SSE, one chunk at a time, optionally holding back everything after
the first chunk until ``release`` is set (so a test can see a chunk arrive before the upstream
has finished, without timing anything), or going quiet for ``pause_s`` seconds after the first
chunk (a slow upstream, for the keep-alive tests; nothing is timed, the CLI's own idle timeout
is what a silence longer than it would trip).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from replay_fixtures import FakeOpenAI, Reply

MODELS = {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "tests"}]}


@dataclass
class Stream:
    """A streamed answer: ``events`` are sent as ``data: JSON`` lines, then ``data: [DONE]``
    (``named``: each preceded by ``event: TYPE`` and no ``[DONE]``, as Anthropic and the
    Responses API stream). With ``hold`` set, the server waits for ``release`` after the first
    event; with ``pause_s``, it sends nothing for that many seconds after the first event;
    ``interval_s`` spaces every event from the next (a provider's pace: the tests of scoring
    along the stream assert counts and bytes, never times). ``first_byte_s`` waits before the
    response starts and ``delays`` (one per event) after each event, in place of
    ``interval_s`` (benchmarks/bench_serve_agents.py paces each event by its text)."""

    events: list[dict]
    hold: bool = False
    named: bool = False
    pause_s: float = 0.0
    interval_s: float = 0.0
    first_byte_s: float = 0.0
    delays: list[float] | None = None
    release: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)


def stream_of(content: str, *, reasoning: str | None = None, field_name: str = "reasoning_content", pieces: int = 3, usage_: dict | None = None, hold: bool = False) -> Stream:
    """A chat.completion.chunk stream that spells out ``reasoning`` then ``content``."""
    def chunk(delta, finish=None):
        return {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""})]
    for text, name in ((reasoning, field_name), (content, "content")):
        if text:
            step = max(1, len(text) // pieces)
            events += [chunk({name: text[i : i + step]}) for i in range(0, len(text), step)]
    events.append(chunk({}, "stop"))
    if usage_ is not None:
        events.append({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": "fake-model", "choices": [], "usage": usage_})
    return Stream(events, hold=hold)


class ScriptedUpstream(FakeOpenAI):
    """See module docstring. ``raw`` and ``headers`` parallel ``requests``."""

    def __init__(self, script=None):
        super().__init__(script)
        self.raw: list[bytes] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.get_headers: list[dict[str, str]] = []

    def handler(self):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # headers and body go out in separate writes: without this, Nagle + delayed ACK add 40 ms
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                server.get_headers.append({k.lower(): v for k, v in self.headers.items()})
                data = json.dumps(MODELS).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with server.lock:
                    server.raw.append(raw)
                    server.paths.append(self.path)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = server.next_reply(json.loads(raw or b"{}"))
                try:
                    if isinstance(reply, Stream):
                        self._stream(reply)
                    else:
                        self._json(reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _json(self, reply: Reply) -> None:
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, reply: Stream) -> None:
                if reply.first_byte_s:
                    time.sleep(reply.first_byte_s)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                for i, event in enumerate(reply.events):
                    name = f"event: {event.get('type')}\n".encode() if reply.named else b""
                    self.wfile.write(name + b"data: " + json.dumps(event).encode() + b"\n\n")
                    self.wfile.flush()
                    if i == 0 and reply.hold:
                        reply.release.wait(60)
                    if i == 0 and reply.pause_s:
                        time.sleep(reply.pause_s)
                    if reply.delays is not None:
                        time.sleep(reply.delays[i])
                    elif reply.interval_s:
                        time.sleep(reply.interval_s)
                if not reply.named:
                    self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                reply.finished.set()

        return Handler


@contextlib.contextmanager
def scripted_upstream(script=None) -> Iterator[ScriptedUpstream]:
    """Start a :class:`ScriptedUpstream` on a free port; ``url`` ends in ``/v1``."""
    fake = ScriptedUpstream(script)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextlib.contextmanager
def proxy(upstream_url: str, **options) -> Iterator[tuple[str, object]]:
    """``iclr serve`` in front of ``upstream_url`` (fake proxy model unless given); yields
    (base URL, :class:`~iclr_cli.serve.state.ServeState`).

    Unless the test sets ``max_wait``, requests wait for every step's scores however long
    they take: what a test asserts about the bytes sent must not depend on how fast this
    machine scores (the tests of the latency budget hold scores back with a gate instead)."""
    from iclr_cli.serve.server import ServeOptions, build, running

    scorer = options.pop("scorer", None)
    tokenizer = options.pop("tokenizer", None)
    options.setdefault("proxy_model", "fake")
    options.setdefault("max_wait", None)
    app, state = build(ServeOptions(upstream=upstream_url, **options), scorer=scorer, tokenizer=tokenizer)
    with running(app, on_exit=state.stop) as url:
        yield url, state
