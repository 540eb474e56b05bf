"""What serve does with an upstream's reply (docs/serve.md, "Scoring along the stream"): the
reply gives a first request its conversation, keeps its reasoning per tool call for
``--restore-reasoning``, and has its step scored ahead, while the agent runs its tool, as the
next request will send it (:mod:`iclr_cli.serve.eager`). Called from the exchange
(:mod:`iclr_cli.serve.exchange`) and the stream's feeder (:mod:`iclr_cli.serve.along`) in worker
threads, each under the conversation's lock where it reads or changes the conversation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iclr_cli.compress import prepare_step
from iclr_cli.errors import IclrError
from iclr_cli.serve import along, shared
from iclr_cli.serve.chat import CHAT
from iclr_cli.serve.dialect import Dialect, Reply, Request
from iclr_cli.serve.fingerprint import conversation_id, step_keys

if TYPE_CHECKING:  # the state module feeds the stream (along), which asks this one for its step
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
    it (:func:`ahead_request`) is queued behind the requests clients wait for, under the
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
        found = ahead_request(state, conv, conv.id, request, reply, dialect)
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


def ahead_request(state: ServeState, conv: Conversation | None, stream: str, request: Request, reply: Reply, dialect: Dialect):
    """``(scorer request, step key, prepared step)`` of ``reply``'s step as the next request will send it:
    ``request`` continued by ``reply`` (whose step is then the last one), the earlier
    steps as they stand (a step sent late and not yet compressed: as generated), under
    ``stream``; ``None`` when the reply was not read, an earlier step is not decided yet,
    the step is decided already, or it has nothing to score. ``reply`` may be a reply
    still streaming (its step as far as it has come). Call it holding ``conv.lock``
    (``conv`` is ``None`` for a first request: no earlier step)."""
    continued = dialect.continued(request, reply)
    memory = conv.reasoning if conv is not None else {}
    sent = dialect.restore(continued, memory) if state.restore_reasoning else continued
    try:
        transcript = dialect.read(sent, stream)
    except (IclrError, KeyError, TypeError, AttributeError, ValueError):
        return None
    read = transcript.trajectory
    if not read.steps:
        return None
    last = len(read.steps) - 1
    keys = step_keys(conv.id if conv is not None else stream, dialect, sent, transcript.ends)
    steps = conv.steps if conv is not None else {}
    if keys[last] in steps:
        return None
    done = []
    for step, key in zip(read.steps[:last], keys):
        stored = shared.known(state, conv, key) if conv is not None else None
        if stored is None:
            return None
        done.append(step.with_reasoning(stored.texts))
    prepared = prepare_step(stream, read.prompt, done, read.steps[last], state.settings)
    return (prepared.request, keys[last], prepared) if prepared.request is not None else None
