"""Several processes serving one conversation: LiteLLM's workers, replicas behind a balancer.

A balancer sends a conversation's requests to whichever process it likes; the provider's
prompt cache needs each request to extend the previous one byte for byte, whichever process
sent that one. So every decision goes through the shared store (:mod:`iclr_cli.serve.store`):

- **Read through** (:func:`known`): a step this process holds no decision for is looked up
  in the store before it is decided; a step another process decided is sent as that process
  sent it, never decided again.
- **Claim** (:func:`claim`): a new decision is stored first-writer-wins; a process that lost
  the race sends the winner's, and only the winner counts the step, so the counters of all
  processes add up to what went upstream.
- **Offers** (:func:`offer_ahead`, :func:`take_offer`): the process that relayed a reply
  scores its step ahead (:mod:`iclr_cli.serve.eager`) and offers what the step becomes. The
  process that gets the next request takes the offer rather than scoring the step again on a
  scorer that has seen none of the conversation (which would be late, and cost the machine the
  same forward pass twice). While the offer says "being scored", it waits for it within the
  request's latency budget (:mod:`iclr_cli.serve.budget`), polling the store; a step whose
  offer does not come in time goes late (cause ``elsewhere``) like any other.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor

from iclr_cli.compress import PreparedStep, finish_step
from iclr_cli.serve.store import StoredStep

log = logging.getLogger("iclr.serve")

POLL_S = 0.02  # how often a request waiting for another process's offer reads the store


def known(state, conv, key: str) -> StoredStep | None:
    """The decision of ``conv``'s step ``key``: this process's, else the store's (then kept in
    memory too); ``None`` when nobody has decided it. Call it holding ``conv.lock``."""
    stored = conv.steps.get(key)
    if stored is None and state.store.shared:
        stored = state.store.step(conv.id, key)
        if stored is not None:
            conv.steps[key] = stored
            state.stats.metrics.offers.labels("decided_elsewhere").inc()
    return stored


def claim(state, conv, key: str, stored: StoredStep) -> StoredStep:
    """Store ``stored`` as step ``key``'s decision unless another process stored one first;
    returns the decision to send (kept in memory). Call it holding ``conv.lock``."""
    won = state.store.claim(conv.id, key, stored)
    conv.steps[key] = won
    return won


def offer_ahead(state, conv_id: str, key: str, prepared: PreparedStep, future: Future) -> None:
    """Offer the step ``key`` being scored ahead here (``future``): "being scored" now, what it
    becomes once the scores are in (finished off the scorer's thread)."""
    if not state.store.shared:
        return
    state.store.offer(conv_id, key, None)

    def scored(done: Future) -> None:
        if done.cancelled() or done.exception() is not None:
            return  # a waiting process goes late at its deadline; its own next request scores it
        _publisher(state).submit(_publish, state, conv_id, key, prepared, done)

    future.add_done_callback(scored)


def _publish(state, conv_id: str, key: str, prepared: PreparedStep, done: Future) -> None:
    try:
        new_step, report = finish_step(prepared, done.result()[0], state.settings, state.tokenizer)
    except Exception as exc:  # the process taking the next request decides it itself
        log.debug("conversation %s: the step scored ahead was not finished (%s)", conv_id, exc)
        return
    texts = tuple(p.text for p in new_step.reasoning)
    state.store.offer(conv_id, key, StoredStep(texts, report.tokens.generated, report.tokens.deleted))
    state.stats.metrics.offers.labels("offered").inc()


def _publisher(state) -> ThreadPoolExecutor:
    pool = getattr(state, "_publisher", None)
    if pool is None:
        pool = state._publisher = ThreadPoolExecutor(1, thread_name_prefix="iclr-offers")
        state.when_stopping(lambda: pool.shutdown(wait=False, cancel_futures=True))
    return pool


def take_offer(state, conv, key: str, deadline: float | None, waiting) -> tuple[bool, StoredStep | None]:
    """(another process offered step ``key``, what the step becomes: ``None`` when the offer
    did not come by ``deadline``). Waits while the offer says "being scored", polling the
    store; ``waiting`` counts the time as time waited for scores. Not called when this process
    scored the step ahead itself."""
    if not state.store.shared:
        return False, None
    found, offered = state.store.offered(conv.id, key)
    if not found or offered is not None:
        if offered is not None:
            state.stats.metrics.offers.labels("taken").inc()
        return found, offered
    began = time.monotonic()
    waiting.scored = True
    try:
        while deadline is None or time.monotonic() < deadline:
            if state.stopping.is_set():
                break
            time.sleep(POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - time.monotonic())))
            found, offered = state.store.offered(conv.id, key)
            if offered is not None or not found:  # ready, or claimed meanwhile (then known() finds it)
                break
    finally:
        waiting.scoring_s += time.monotonic() - began
    state.stats.metrics.offers.labels("taken" if offered is not None else "not_in_time").inc()
    return True, offered
