"""Reading relayed server-sent events (the bytes a streamed answer was relayed as).

One parser for every dialect (``httpx-sse``): each event's ``event`` name and its ``data``
parsed as a JSON object; ``[DONE]`` and data that is not a JSON object are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson


def events(body: bytes) -> Iterator[tuple[str, dict]]:
    """``(event name, data object)`` of each event in ``body`` (SSE bytes), in order."""
    import httpx
    from httpx_sse import EventSource

    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
    for event in EventSource(response).iter_sse():
        if not event.data or event.data.strip() == "[DONE]":
            continue
        try:
            data = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict):
            yield event.event, data
