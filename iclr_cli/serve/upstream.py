"""The upstream: forwarding with httpx, headers in and out.

Requests go to ``UPSTREAM + path`` (``/v1/chat/completions`` on the proxy becomes
``{upstream}/chat/completions``, ``/v1/messages`` becomes ``{upstream}/messages``, so the
upstream URL is the base URL an OpenAI client would use, ending where ``/v1`` would:
``https://api.deepseek.com``, ``http://127.0.0.1:8000/v1``, ``https://api.anthropic.com/v1``). Headers pass through except
hop-by-hop ones, ``Host``, ``Content-Length``, ``Accept-Encoding`` (the proxy asks for identity
so it can read usage from what it relays) and the proxy's own ``X-Iclr-*``. ``Authorization``
and ``x-api-key`` (Anthropic's API) are the client's unless ``--api-key-env`` named a key,
which then replaces them; with client keys (:mod:`iclr_cli.serve.auth`) the client's are
dropped in any case, so only the ``--api-key-env`` key (or none) goes upstream; ``anthropic-version`` and ``anthropic-beta`` pass through. The answer's
status, body and headers come back unchanged (minus hop-by-hop and length/encoding headers,
which the ASGI server sets), so upstream errors reach the client as the upstream sent them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding",
}
_KEY_HEADERS = ("authorization", "x-api-key")
_BACK_DROP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "date", "server"}


def redact(url: str) -> str:
    """``url`` without user:password, for messages and ``/stats``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass(frozen=True)
class UpstreamConfig:
    """Where requests go.

    Attributes:
        base_url: the upstream's base URL (module docstring).
        api_key: sent instead of the client's key (:meth:`Upstream.headers`); read
            from ``--api-key-env``; never printed (``repr`` leaves it out).
        timeout_s: seconds to wait for the upstream to connect, or between two chunks.
        max_connections: connection pool size.
        forward_client_key: send the client's ``Authorization`` / ``x-api-key`` on when no
            ``api_key`` replaces them; ``False`` when they hold the proxy's client keys.
    """

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 600.0
    max_connections: int = 256
    forward_client_key: bool = True


class Upstream:
    """An ``httpx.AsyncClient`` pointed at the upstream (open it in the app's lifespan)."""

    def __init__(self, config: UpstreamConfig, *, transport=None):
        import httpx

        self.config = config
        base = config.base_url.rstrip("/") + "/"
        self.client = httpx.AsyncClient(
            base_url=base,
            timeout=httpx.Timeout(config.timeout_s, connect=min(30.0, config.timeout_s)),
            limits=httpx.Limits(max_connections=config.max_connections, max_keepalive_connections=config.max_connections),
            transport=transport,
            follow_redirects=False,
        )

    def headers(self, incoming: Mapping[str, str] | object, key_header: str = "authorization") -> list[tuple[str, str]]:
        """Request headers for the upstream (see module docstring). With ``--api-key-env``
        the key replaces the value of each key header the client sent (``Authorization:
        Bearer KEY``, ``x-api-key: KEY``); a client that sent neither gets ``key_header``
        (``x-api-key`` for Anthropic's API, ``authorization`` otherwise). Without
        ``forward_client_key`` the client's key headers never go upstream."""
        key = self.config.api_key
        drop = bool(key) or not self.config.forward_client_key
        items = list(incoming.items())  # type: ignore[attr-defined]
        out = [
            (k, v)
            for k, v in items
            if k.lower() not in _HOP and not k.lower().startswith("x-iclr-")
            and not (drop and k.lower() in _KEY_HEADERS)
        ]
        if key:
            sent = [h for h in _KEY_HEADERS if any(k.lower() == h for k, _ in items)] or [key_header]
            out += [(h, f"Bearer {key}" if h == "authorization" else key) for h in sent]
        out.append(("accept-encoding", "identity"))
        return out

    async def open(self, method: str, path: str, query: str, body: bytes, headers: list[tuple[str, str]]):
        """Send a request; returns the streamed ``httpx.Response`` (headers read, body not).

        Raises:
            httpx.TimeoutException, httpx.HTTPError: when the upstream cannot be reached.
        """
        request = self.client.build_request(method, path.lstrip("/"), params=query or None, content=body, headers=headers)
        return await self.client.send(request, stream=True)

    async def aclose(self) -> None:
        await self.client.aclose()


def response_headers(headers) -> dict[str, str]:
    """The upstream's answer headers the client gets (see module docstring)."""
    return {k: v for k, v in headers.items() if k.lower() not in _BACK_DROP}


def is_event_stream(headers) -> bool:
    return headers.get("content-type", "").split(";")[0].strip().lower() == "text/event-stream"
