"""Steps sent late, compressed later: the stateful half of :mod:`iclr_cli.serve.late`.

A step sent late is stored ``pending`` (:class:`~iclr_cli.serve.store.StoredStep`) with its
scoring kept in ``Conversation.late`` (in memory; a restart queues it again on the history as it
stands then). At each later request of its conversation:

- ``compress-later`` (:func:`catch_up`): each pending step whose scores are ready is compressed
  at once, one step at a time.
- ``when-it-pays`` (:func:`settle_group`): every pending step whose scores are ready is
  finished (:func:`~iclr_cli.compress.finish_step`, no scoring), and the group is compressed
  together at this request when :func:`iclr_cli.serve.late.break_now` says the break costs
  nothing or pays; otherwise they all go as generated once more and are weighed again at the
  next request.

Either way the decision is stored with the step (``late=True``), so a restart never changes
what a step looks like, and the steps scored while it was pending keep the scores they got
(METHOD.md's online rule, as :mod:`iclr_cli.serve.budget` says).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import orjson

from iclr_cli.compress import finish_step, prepare_step
from iclr_cli.scoring.base import ScoringCancelled
from iclr_cli.serve.late import Moment, break_now, rewrite_cost
from iclr_cli.serve.store import StoredStep

log = logging.getLogger("iclr.serve")
BYTES_PER_TOKEN = 4


def _requeue(state, conv, key: str, prompt, history, step) -> None:
    """Queue the scoring of a pending step this process has none for (a restart), behind the
    waited-for work, on the history as it stands now."""
    prepared = prepare_step(conv.id, prompt, history, step, state.settings)
    submit = getattr(state.scorer, "submit", None)
    if prepared.request is None or submit is None:
        conv.late[key] = (prepared, None)
        return
    try:
        conv.late[key] = (prepared, submit([prepared.request], eager=True))
    except RuntimeError:  # stopped: the next process queues it again
        pass


def _finished(state, conv, key: str, step) -> tuple | None:
    """``(new texts, token report)`` of a pending step whose scores are ready, ``None`` while
    they are not; a failed scoring is stored at once (as generated, for good)."""
    prepared, future = conv.late[key]
    if future is not None and not future.done():
        return None
    stored = conv.steps[key]
    try:
        result = future.result()[0] if future is not None else None
        new_step, report = finish_step(prepared, result, state.settings, state.tokenizer)
    except ScoringCancelled:  # shutting down: still pending, queued again by the next process
        return None
    except Exception as exc:
        conv.late.pop(key, None)
        reason = f"{type(exc).__name__}: {exc}"[:500]
        log.warning("conversation %s step %d: compression failed (%s); the step is sent uncompressed from now on", conv.id, step.index, reason)
        failed = StoredStep(stored.texts, stored.generated, 0, reason, late=True)
        if state.save_step(conv, key, failed) == failed:
            before = state.accounting(stored.texts, stored.texts)
            state.stats.compressed_late(conv.counts, before, before, changed=False, failed=True)
        return None
    return tuple(p.text for p in new_step.reasoning), report


def _compress(state, conv, key: str, texts: tuple[str, ...], report) -> bool:
    """Store pending step ``key`` compressed to ``texts``; True when its text changed."""
    conv.late.pop(key, None)
    stored = conv.steps[key]
    new = StoredStep(texts, report.tokens.generated, report.tokens.deleted, late=True)
    if state.save_step(conv, key, new) != new:  # another process settled it first, and counted it
        return False
    before = state.accounting(stored.texts, stored.texts)
    changed = texts != stored.texts
    state.stats.compressed_late(conv.counts, before, report.tokens, changed=changed)
    return changed


def catch_up(state, conv, key: str, prompt, history, step) -> StoredStep:
    """``compress-later``: the pending step ``key`` compressed now if its scores are ready
    (never waited for), else left as generated for this request."""
    if key not in conv.late:
        _requeue(state, conv, key, prompt, history, step)
        return conv.steps[key]
    done = _finished(state, conv, key, step)
    if done is not None:
        _compress(state, conv, key, *done)
    return conv.steps[key]


def settle_group(state, conv, request, transcript, keys: Sequence[str], client_break_at: int | None, raw: bytes, report) -> None:
    """``when-it-pays``: decide at this request, together, every pending step whose scores are
    ready (module docstring). Steps whose scoring this process lacks are queued again; the
    decision and its reason go to ``report``
    (:class:`~iclr_cli.serve.report.RequestReport`)."""
    if not any(stored.pending for stored in conv.steps.values()):  # the common case: nothing late
        return
    read = transcript.trajectory
    history, ready, waiting = [], [], 0
    for t, step in enumerate(read.steps):
        stored = conv.steps.get(keys[t]) if transcript.ends[t] < len(request.items) else None
        if stored is None:  # a new step or the one in progress: no pending step follows it
            break
        if stored.pending:
            if keys[t] not in conv.late:
                _requeue(state, conv, keys[t], read.prompt, history, step)
            done = _finished(state, conv, keys[t], step) if keys[t] in conv.late else None
            if done is not None:
                ready.append((t, keys[t], *done))
            elif conv.steps[keys[t]].pending:
                waiting += 1
        history.append(step.with_reasoning(conv.steps[keys[t]].texts))
    report.late_waiting = waiting
    if not ready:
        return
    first = ready[0][0]
    first_at = transcript.ends[first - 1] if first > 0 else 0
    saved = sum(r.tokens.generated - r.tokens.written for *_, r in ready)
    # what the provider would read from its cache: up to the previous request's end, or to
    # where the client changed its own items (rewritten from there whatever the proxy does)
    hit_end = len(conv.sent) if conv.sent is not None else len(request.items)
    if client_break_at is not None:
        hit_end = min(hit_end, client_break_at)
    # estimated at 4 bytes a token: tokenizing a long tail on every request while late steps
    # wait would add tens of milliseconds to each; the rule needs its size, not its count
    tail = len(orjson.dumps(list(request.items[first_at:hit_end]))) // BYTES_PER_TOKEN if hit_end > first_at else 0
    one_hour = b'"ttl":"1h"' in raw or b'"ttl": "1h"' in raw
    rule = state.budget.cache_rule(one_hour)
    idle = None if conv.last_request is None else time.monotonic() - conv.last_request
    moment = Moment(idle, tail, saved, max(1, conv.seen), client_break_at is not None)
    why = break_now(rule, moment)
    if why is None:
        report.late_waiting += len(ready)
        log.debug("conversation %s: %d late steps ready, kept as generated (a break would cost %.0f input tokens' worth)",
                  conv.id, len(ready), rewrite_cost(rule, tail, saved, moment.later_requests))
        return
    for _, key, texts, tokens in ready:
        report.late_compressed += _compress(state, conv, key, texts, tokens)
    report.late_break = why
