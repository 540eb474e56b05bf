"""Keep-alives on a relayed stream while the upstream is silent.

Once the upstream's status and headers have reached the client, a stream that goes quiet
(a slow upstream thinking before its next token, a local model prefilling) can be cut by the
client's watchdog or a box in between, however healthy the upstream. So after ``interval_s``
seconds without a byte to the client, the proxy sends what the path's API itself sends when
it has nothing to say, and nothing else:

- Anthropic Messages (``anthropic``): ``event: ping`` with ``{"type": "ping"}`` ("Event
  streams may also include any number of ping events", Anthropic's streaming docs). The
  anthropic SDKs skip it; Claude Code passes it by.
- OpenAI Responses (``responses``): a ``keepalive`` event, ``{"type": "keepalive",
  "sequence_number": N}``, the frame the Responses API sends during long requests (not in
  its reference; openai-node #1964, openai-php/client #732). Codex ignores event types it
  does not know but restarts its ``stream_idle_timeout_ms`` on every event, which a comment
  would not do (its SSE parser, eventsource-stream, drops comments). ``N`` repeats the last
  ``sequence_number`` the upstream sent, so no later number is taken. Before the upstream's
  first event it is a comment instead: the openai SDK's ``responses.stream()`` refuses any
  event before ``response.created``.
- everything else (chat completions, passthrough): an SSE comment, ``: keep-alive``, which
  every SSE parser skips (WHATWG HTML, "Server-sent events": a line starting with a colon),
  as OpenRouter sends on slow streams.

Which client clock each one resets (with the real CLIs: ``tests/test_serve_agent_faults.py``):
every byte resets socket idle timers (Bun's ``fetch`` under Claude Code, 300 s unless
``BUN_CONFIG_HTTP_IDLE_TIMEOUT``; httpx read timeouts of the Python SDKs; proxies such as
nginx's 60 s ``proxy_read_timeout``); Codex's per-event idle timeout counts the
``keepalive`` event. Claude Code's own event watchdog (``CLAUDE_STREAM_IDLE_TIMEOUT_MS``,
at least 300 s) skips pings (read in its 2.1.197 bundle): nothing a proxy sends, short of
the answer, resets that one. The default interval, :data:`DEFAULT_INTERVAL_S`, is below all
of them.

A keep-alive goes only between two events, never inside one the upstream is part way
through. Nothing is sent before the upstream's headers: the status must be the upstream's
(a 429 or 529 is what the SDKs retry; a 200 followed by an error event is not retried).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_INTERVAL_S = 15.0
_SEQUENCE = re.compile(rb'"sequence_number"\s*:\s*(\d+)')
# an SSE event ends with an empty line; a trailing lone CR may still be the start of a CRLF
_EVENT_ENDS = (b"\n\n", b"\r\n\r\n", b"\n\r\n")


@dataclass(frozen=True)
class KeepAlive:
    """What to send on a silent stream, and after how long.

    Attributes:
        interval_s: seconds without a byte to the client before a keep-alive (> 0).
        kind: ``anthropic``, ``responses`` or ``comment`` (module docstring).
    """

    interval_s: float
    kind: str = "comment"

    def frame(self, sequence: int | None) -> bytes:
        """The bytes of one keep-alive; ``sequence`` is the last Responses sequence number the
        client got (``None`` before the upstream's first event)."""
        if self.kind == "anthropic":
            return b'event: ping\ndata: {"type": "ping"}\n\n'
        if self.kind == "responses" and sequence is not None:
            return b'event: keepalive\ndata: {"type": "keepalive", "sequence_number": %d}\n\n' % sequence
        return b": keep-alive\n\n"


def kind_of(path: str) -> str:
    """The keep-alive kind of an upstream path (``messages``, ``responses``, anything else)."""
    if path == "messages" or path.startswith("messages/"):
        return "anthropic"
    if path == "responses" or path.startswith("responses/"):
        return "responses"
    return "comment"


class Relayed:
    """What the client has received of the upstream's stream: when the last byte went,
    whether it ended an event, and the last Responses ``sequence_number`` in it (``None``
    before the first event; 0 after one without a number)."""

    def __init__(self, now: float):
        self.last_at = now
        self.tail = b"\n\n"  # the start of a stream is between events
        self.sequence: int | None = None

    def sent(self, chunk: bytes, now: float) -> None:
        """Note ``chunk`` as relayed at ``now`` (seconds, the event loop's clock)."""
        if not chunk:
            return
        self.last_at = now
        self.tail = (self.tail + chunk)[-4:]
        found = _SEQUENCE.findall(chunk)
        if found:
            self.sequence = int(found[-1])
        elif self.sequence is None and self.between_events:
            self.sequence = 0

    @property
    def between_events(self) -> bool:
        return self.tail.endswith(_EVENT_ENDS)


def streaming_response(content, keepalive: KeepAlive | None, *, on_frame: Callable[[], None] | None = None, **kwargs):
    """A Starlette ``StreamingResponse`` of ``content`` (an async iterator of bytes) that
    sends ``keepalive`` frames while ``content`` is silent (plain when ``keepalive`` is
    ``None``), calling ``on_frame()`` after each. ``kwargs`` go to ``StreamingResponse``
    (status_code, headers, background).

    An exception ``content`` raises (the relay's broken-stream signal) propagates as it is.
    """
    import anyio
    from starlette.responses import StreamingResponse

    if keepalive is None:
        return StreamingResponse(content, **kwargs)

    class KeptAlive(StreamingResponse):
        async def stream_response(self, send) -> None:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            lock = anyio.Lock()
            relayed = Relayed(anyio.current_time())
            failed: list[Exception] = []

            async def beat() -> None:
                while True:
                    due = relayed.last_at + keepalive.interval_s - anyio.current_time()
                    if due > 0:
                        await anyio.sleep(due)
                        continue
                    async with lock:
                        now = anyio.current_time()
                        if now - relayed.last_at < keepalive.interval_s:
                            continue  # a chunk went while this waited for the lock
                        if not relayed.between_events:
                            relayed.last_at = now  # mid-event: try again one interval on
                            continue
                        try:
                            await send({"type": "http.response.body", "body": keepalive.frame(relayed.sequence), "more_body": True})
                        except Exception:  # the client went: the relay finds out on its next send
                            return
                        relayed.last_at = anyio.current_time()
                    if on_frame is not None:
                        on_frame()

            async with anyio.create_task_group() as group:
                group.start_soon(beat)
                try:
                    async for chunk in self.body_iterator:
                        async with lock:
                            await send({"type": "http.response.body", "body": chunk, "more_body": True})
                            relayed.sent(chunk, anyio.current_time())
                except Exception as exc:  # raised below, outside the group (not as a group of one)
                    failed.append(exc)
                finally:
                    group.cancel_scope.cancel()
            if failed:
                raise failed[0]
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    return KeptAlive(content, **kwargs)
