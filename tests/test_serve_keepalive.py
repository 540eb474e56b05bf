"""Keep-alives on silent relayed streams (:mod:`iclr_cli.serve.keepalive`).

Through the proxy, the scripted upstream holds its stream after the first event until the
test has seen keep-alives arrive (``release``), so nothing depends on timing: the test waits
for them. The relayed bytes, keep-alives taken out, are the upstream's bytes exactly; each
API's keep-alive is its own (Anthropic ``event: ping``, a Responses ``keepalive`` event, an
SSE comment for chat completions), and the anthropic and openai SDKs read the kept-alive
streams as they read the API's.
"""

from __future__ import annotations

import re
import threading
import time

import anyio
import httpx
import pytest

from iclr_cli.serve.keepalive import KeepAlive, Relayed, kind_of, streaming_response
from serve_fixtures import proxy, scripted_upstream, stream_of
from wire_fixtures import anthropic_reply, output_message, responses_reply, text

pytest.importorskip("starlette")

PING = b'event: ping\ndata: {"type": "ping"}\n\n'
COMMENT = b": keep-alive\n\n"
KEEPALIVE = re.compile(rb'event: keepalive\ndata: \{"type": "keepalive", "sequence_number": (\d+)\}\n\n')


def test_frames_and_kinds():
    assert KeepAlive(1, "anthropic").frame(7) == PING
    assert KEEPALIVE.fullmatch(KeepAlive(1, "responses").frame(7)).group(1) == b"7"
    assert KeepAlive(1, "responses").frame(None) == COMMENT  # before response.created
    assert KeepAlive(1, "comment").frame(7) == COMMENT
    assert [kind_of(p) for p in ("messages", "messages/count_tokens", "responses", "chat/completions", "models")] == [
        "anthropic", "anthropic", "responses", "comment", "comment"]


def test_relayed_knows_event_boundaries_and_the_last_sequence_number():
    relayed = Relayed(0.0)
    assert relayed.between_events and relayed.sequence is None  # the start of a stream
    relayed.sent(b'event: response.created\ndata: {"type": "response.created", "sequence_number": 4', 1.0)
    assert not relayed.between_events and relayed.sequence == 4 and relayed.last_at == 1.0
    relayed.sent(b"}\n", 2.0)
    assert not relayed.between_events  # one line end is not the end of an event
    relayed.sent(b"\n", 3.0)
    assert relayed.between_events
    for ending, between in ((b"x\r\n\r\n", True), (b"x\n\r\n", True), (b"x\r\n", False), (b"x\r", False)):
        relayed.sent(ending, 4.0)
        assert relayed.between_events is between, ending
    relayed.sent(b"", 9.0)
    assert relayed.last_at == 4.0  # nothing sent is not a byte sent
    unnumbered = Relayed(0.0)
    unnumbered.sent(b"data: {}\n\n", 1.0)
    assert unnumbered.sequence == 0


def _held(reply):
    reply.hold = True
    return reply


def _relay(url: str, path: str, body: dict, held=None, frame=None) -> bytes:
    """The bytes a client gets; with ``held``, released once two ``frame``s more than the
    upstream's own arrived after the first event."""
    got = bytearray()
    with httpx.stream("POST", url + path, json=body, timeout=30) as resp:
        assert resp.status_code == 200
        for chunk in resp.iter_bytes():
            got += chunk
            if held is not None and len(re.findall(frame, bytes(got)[bytes(got).find(b"\n\n"):])) >= 2:
                held.release.set()
    return bytes(got)


@pytest.mark.parametrize("path, body, reply, frame", [
    ("/messages", {"model": "claude", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}]},
     lambda: anthropic_reply([text("Hello there.")], stream=True), PING),
    ("/responses", {"model": "gpt", "stream": True, "input": "hi"},
     lambda: responses_reply([output_message("Hello there.")], stream=True), KEEPALIVE),
    ("/chat/completions", {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
     lambda: stream_of("Hello there."), COMMENT),
], ids=["anthropic-ping", "responses-keepalive", "chat-comment"])
def test_a_held_stream_gets_its_apis_keepalives_between_events_and_loses_nothing(path, body, reply, frame):
    with scripted_upstream([reply()]) as up, proxy(up.url, keepalive_s=0) as (url, _):
        plain = _relay(url, path, body)
    held = _held(reply())
    with scripted_upstream([held]) as up, proxy(up.url, keepalive_s=0.05) as (url, _):
        got = _relay(url, path, body, held, frame)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
        metrics = httpx.get(url.removesuffix("/v1") + "/metrics").text
    added = len(re.findall(frame, got)) - len(re.findall(frame, plain))  # Anthropic's stream has a ping of its own
    assert added >= 2 and stats["keepalives_sent"] == added
    assert f"iclr_serve_keepalives_total {float(added)}" in metrics
    assert re.sub(frame, b"", got) == re.sub(frame, b"", plain)  # nothing lost, nothing changed
    first_event_end = plain.index(b"\n\n") + 2
    assert got[:first_event_end] == plain[:first_event_end] and re.match(frame, got[first_event_end:])  # between events
    if frame is KEEPALIVE:  # the number of the last event the client got, not a later one
        assert {m.group(1) for m in re.finditer(frame, got)} == {b"0"}
    assert held.finished.is_set()


def _release_after_keepalives(url: str, held, at_least: int = 2) -> threading.Thread:
    """A thread that releases ``held`` once ``/stats`` counts ``at_least`` keep-alives."""
    def wait() -> None:
        while httpx.get(url.removesuffix("/v1") + "/stats").json()["keepalives_sent"] < at_least:
            time.sleep(0.02)
        held.release.set()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def test_the_anthropic_sdk_reads_a_kept_alive_stream():
    anthropic = pytest.importorskip("anthropic")
    held = _held(anthropic_reply([text("Hello there.")], stream=True))
    with scripted_upstream([held]) as up, proxy(up.url, keepalive_s=0.05) as (url, _):
        _release_after_keepalives(url, held)
        client = anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="sk-ant-test", max_retries=0)
        with client.messages.stream(model="claude", max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as stream:
            message = stream.get_final_message()
    assert [b.text for b in message.content] == ["Hello there."] and message.stop_reason == "end_turn"


def test_the_openai_sdk_reads_kept_alive_responses_and_chat_streams():
    openai = pytest.importorskip("openai")
    held = _held(responses_reply([output_message("Hello there.")], stream=True))
    with scripted_upstream([held]) as up, proxy(up.url, keepalive_s=0.05) as (url, _):
        _release_after_keepalives(url, held)
        client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0)
        with client.responses.stream(model="gpt", input="hi") as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_response()
    assert final.output_text == "Hello there." and kinds.count("keepalive") >= 2 and kinds[-1] == "response.completed"
    held = stream_of("Hello there.", hold=True)
    with scripted_upstream([held]) as up, proxy(up.url, keepalive_s=0.05) as (url, _):
        _release_after_keepalives(url, held)
        client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0)
        chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello there."


class _Boom(Exception):
    pass


async def _drive(content, keepalive: KeepAlive) -> list[dict]:
    """Run a kept-alive response over ``content`` with a send that records the messages."""
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    await streaming_response(content, keepalive, media_type="text/event-stream").stream_response(send)
    return sent


@pytest.mark.parametrize("kind, first", [("anthropic", PING), ("responses", COMMENT), ("comment", COMMENT)])
def test_before_the_first_event_a_keepalive_no_sdk_refuses(kind, first):
    """An upstream that sent its headers and is still silent (a local model prefilling)."""
    async def run() -> list[bytes]:
        kept = anyio.Event()
        sent: list[bytes] = []

        async def send(message: dict) -> None:
            sent.append(message.get("body", b""))
            if message.get("body") == first:
                kept.set()

        async def content():
            await kept.wait()  # the first event only once a keep-alive went out
            yield b'event: response.created\ndata: {"type": "response.created", "sequence_number": 0}\n\n'

        await streaming_response(content(), KeepAlive(0.01, kind)).stream_response(send)
        return sent

    sent = anyio.run(run)
    assert sent[0] == b"" and sent[1] == first and sent[-1] == b""  # headers, a keep-alive, ..., the end
    assert b"response.created" in b"".join(sent)


def test_no_keepalive_inside_an_event_and_an_error_from_the_relay_propagates_as_itself():
    async def half_event():
        yield b'data: {"part": 1'
        await anyio.sleep(0.3)  # 30 intervals of silence inside one event
        yield b'}\n\n'

    sent = anyio.run(_drive, half_event(), KeepAlive(0.01, "comment"))
    bodies = [m.get("body") for m in sent if m["type"] == "http.response.body"]
    assert bodies == [b'data: {"part": 1', b'}\n\n', b""]

    async def broken():
        yield b"data: 1\n\n"
        raise _Boom("upstream broke off")

    with pytest.raises(_Boom):  # not an exception group: uvicorn's log filter and the relay rely on it
        anyio.run(_drive, broken(), KeepAlive(10, "comment"))
