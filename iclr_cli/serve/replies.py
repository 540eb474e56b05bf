"""What serve does with an upstream's reply (docs/serve.md, "Scoring along the stream"): the
reply gives a first request its conversation, keeps its reasoning per tool call for
``--restore-reasoning``, and has its step scored ahead, while the agent runs its tool, as the
next request will send it (:func:`iclr_cli.serve.along.ahead_request`, the request the stream's
feeds build too; :mod:`iclr_cli.serve.eager`). Called from the exchange
(:mod:`iclr_cli.serve.exchange`) in worker threads, under the conversation's lock where it
reads or changes the conversation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iclr_cli.serve import along, shared
from iclr_cli.serve.chat import CHAT
from iclr_cli.serve.dialect import Dialect, Reply, Request
from iclr_cli.serve.fingerprint import conversation_id

if TYPE_CHECKING:  # the state module feeds the stream (along): imported for annotations only
    from iclr_cli.serve.state import Conversation, ServeState


def record_reply(state: ServeState, conv_id: str | None, request: Request | None, reply: Reply, dialect: Dialect = CHAT,
                 stream: str | None = None) -> Conversation | None:
    """Note what the upstream returned (``reply``, read by ``dialect`` from the answer to
    ``request``): gives a first request its conversation (and the scorer state fed under
    its provisional ``stream`` to that conversation), and keeps the reply's reasoning per
    tool-call id for ``--restore-reasoning``."""
    if conv_id is not None:
        conv = state.find(conv_id)
    else:
        known = request is not None and bool(reply.items)
        conv_id = conversation_id(dialect, dialect.continued(request, reply)) if known else None
        conv = state.conversation(conv_id) if conv_id is not None else None
    if conv is None:
        if stream is not None and stream != conv_id:  # a first request that starts nothing: its state goes
            along.forget(state, stream)
        return None
    if stream is not None and stream != conv.id:
        along.rename(state, stream, conv.id)
    if state.restore_reasoning:
        for call_id, name, text in dialect.remember(reply):
            with conv.lock:
                conv.reasoning[call_id] = (name, text)
            state.store.save_reasoning(conv.id, call_id, name, text)
    return conv


def prefetch(state: ServeState, conv: Conversation | None, request: Request | None, reply: Reply, dialect: Dialect = CHAT) -> bool:
    """Score the step of ``reply`` ahead, while the agent runs its tool
    (:mod:`iclr_cli.serve.eager`): the scorer request that the next request will send for
    it (:func:`~iclr_cli.serve.along.ahead_request`) is queued behind the requests clients wait for, under the
    step's key. A reply fed along the stream (:mod:`iclr_cli.serve.along`) has left the
    scorer's state so that this request runs only the last few tokens.

    Returns False when nothing was queued: the scorer does not score ahead, the variant
    needs no scores, the reply was not read, an earlier step is not compressed (the next
    request will compress it first), or the step has nothing to score.
    """
    ahead = getattr(state.scorer, "prefetch", None)
    if ahead is None or conv is None or request is None or not reply.items:
        return False
    # Under the conversation's lock, queueing included: a next request either finds the
    # result kept or has compressed the step already (then nothing is queued).
    with conv.lock:
        found = along.ahead_request(state, conv, conv.id, request, reply, dialect)
        if found is None:
            _drop_context(state, conv)
            return False
        if not ahead(found[0], found[1]):
            return False
        kept = getattr(state.scorer, "kept", None)
        future = kept(conv.id, found[1]) if kept is not None else None
        if future is not None:  # the other workers and replicas may get the next request
            shared.offer_ahead(state, conv.id, found[1], found[2], future)
        return True


def _drop_context(state: ServeState, conv: Conversation) -> None:
    """Take ``conv``'s P-and-history feed out of the scorer queue when it has not run: its
    reply ended with no step to score, so it would only run ahead of every conversation's
    current step (the next request, if any, feeds its history again). Holding ``conv.lock``."""
    future, conv.context_feed = conv.context_feed, None
    drop = getattr(state.scorer, "drop", None)
    if future is not None and drop is not None and not future.done() and drop(future):
        state.stats.eager_event("fed_context_dropped")
