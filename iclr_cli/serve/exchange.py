"""What happens to one request's reply, for both front ends of the engine: ``iclr serve``'s
HTTP app (:mod:`iclr_cli.serve.app`) and the LiteLLM guardrail
(:mod:`iclr_cli.serve.litellm_guardrail`).

Once the upstream's answer has gone through (a whole body, or the SSE bytes relayed), it is
read as a reply of the route's dialect and recorded under its conversation
(:func:`~iclr_cli.serve.replies.record_reply`: a first request's conversation id comes
from it, ``--restore-reasoning`` remembers its reasoning); once the client has it, the reply's
step is scored ahead (:func:`~iclr_cli.serve.replies.prefetch`,
:mod:`iclr_cli.serve.eager`). Both functions run the blocking work through ``in_thread``
(``async (fn, *args) -> result``), so the event loop never waits on the scorer.
"""

from __future__ import annotations

import logging

from iclr_cli.serve import replies
from iclr_cli.serve.along import forget as forget_fed
from iclr_cli.serve.dialect import Dialect

log = logging.getLogger("iclr.serve")


async def finish(state, dialect: Dialect, rewrite, conv, content: bytes | None, streamed: bool, outcome: str, in_thread):
    """Record the reply to ``rewrite`` (the :class:`~iclr_cli.serve.state.Rewrite` that went
    upstream; ``conv`` its conversation, ``None`` for a first request).

    ``content``: the whole body, or the relayed SSE bytes when ``streamed`` (``None``: too long
    to keep); ``outcome``: ``ok``, ``upstream_error`` or ``upstream_dropped`` (only an ``ok``
    reply is read). Returns ``(conversation, recorded, usage)``: the conversation the request
    counts under (a first request's, once the reply gave it an id), ``(conversation, reply)``
    for :func:`score_ahead` (``None`` when nothing was recorded), and the upstream's usage
    (``None`` when it reported none). Never raises: a reply that cannot be recorded is logged.
    """
    target, usage, recorded = conv, None, None
    if outcome != "ok" and rewrite.conversation is None and rewrite.stream is not None:
        forget_fed(state, rewrite.stream)  # a first request that failed: what was fed for it goes
    if outcome == "ok":
        try:
            reply = dialect.read_reply(content, streamed)
            usage = reply.usage
            target = await in_thread(replies.record_reply, state, rewrite.conversation, rewrite.request, reply, dialect, rewrite.stream)
            recorded = (target, reply)
        except Exception as exc:
            log.warning("reply not recorded (%s: %s)", type(exc).__name__, exc)
    return target, recorded, usage


async def score_ahead(state, dialect: Dialect, rewrite, recorded, in_thread) -> None:
    """Score the recorded reply's step (``recorded``: from :func:`finish`) while the agent runs
    its tool; nothing when nothing was recorded. Never raises: the next request scores the
    step itself."""
    if recorded is None:
        return
    try:
        await in_thread(replies.prefetch, state, recorded[0], rewrite.request, recorded[1], dialect)
    except Exception as exc:
        log.warning("step not scored ahead (%s: %s)", type(exc).__name__, exc)
