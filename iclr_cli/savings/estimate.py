"""Per-request arithmetic of the static estimate (docs/savings.md).

Definitions (docs/FORMAT.md, "Recorded usage", says what a request is in each format):

- **Request k** is the model request whose answer is step k (0-based assistant turn). Its
  prompt is P and the complete steps ``0..k-1`` (reasoning, actions, observations); step k
  itself is its answer, not part of its prompt.
- **Online write-back** compresses step j once it is complete (its observations are in),
  before request j+1 goes out, and never changes it again. So request k carries every step
  ``j < k`` compressed, and the steps before k are exactly ``j = 0..k-1``: request 0 saves
  nothing, and request k saves ``sum(deleted[j] for j < k)``.
- **Cache reads carry over.** A compressed step enters the prompt once, already compressed,
  so the prompt of request k still starts with the prompt of request k-1 and the provider's
  cache hits where it hit before. The recorded ``cache_read`` of request k covered the first
  ``cache_read`` tokens of its prompt; step j lay inside them when ``end[j] <= cache_read``,
  where ``end[j]`` is the recorded input of the first later request whose prompt holds all of
  step j. Deletions in such steps come off the cache read, the others off the uncached rest.
- **Units.** Deleted, generated and rendered text is counted with the proxy's tokenizer. Where
  the session records the provider's usage, proxy tokens are converted by the session's own
  ratio (provider tokens per proxy token), found only from text both sides counted: the
  recorded input's growth between consecutive recorded requests over the proxy tokens of the
  steps added in between (pairs where the recorded input did not grow, e.g. after a
  compaction, are left out). A recorded prompt as a whole is never a basis: it holds text the
  file does not (Claude Code's system prompt and tool schemas, some 14k tokens). A ratio is a
  tokenizer's ratio only within :data:`RATIO_BOUNDS`; with no growth pair, or a ratio outside
  the bounds, the deletions stay in proxy tokens (ratio 1, basis ``unconverted``, the rejected
  ratio kept for the report). Where nothing is recorded, the input is the proxy count of the
  prompt and the ratio is 1. A request the file records without usage, after a recorded one,
  is that recorded input plus the converted proxy tokens of the steps added since.
- **Sealed** reasoning (signed or encrypted, :mod:`iclr_cli.savings.measure`) cannot be edited
  on its provider: it is counted apart (all of it, whatever the variant: no variant may edit
  it, so none is scored) and never taken off the input.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from iclr_cli.resent import Totals  # noqa: F401  (the sum over requests; re-exported for its users here)
from iclr_cli.trajectory import Request, Usage


@dataclass(frozen=True)
class StepTokens:
    """Proxy-tokenizer counts of one step.

    ``rendered``: the whole step as it stands in the history (every part, with its label);
    ``generated``: its reasoning as generated (sealed reasoning included, redacted reasoning
    with no text excluded); ``deleted``: what the variant deletes from reasoning written back
    in place; ``sealed``: signed or encrypted reasoning write-back cannot take off: all of a
    part the provider rule sealed before the variant ran (:mod:`iclr_cli.savings.measure`),
    what the variant deleted from one it edited anyway.
    """

    rendered: int
    generated: int = 0
    deleted: int = 0
    sealed: int = 0


@dataclass(frozen=True)
class RequestEstimate:
    """One request, in provider tokens where recorded (else proxy tokens).

    ``input``: the prompt as recorded (or estimated); ``reasoning``: of which reasoning of
    earlier steps; ``saved``: what write-back takes off it; ``cache_read`` / ``cache_saved``:
    the recorded cache read and what write-back takes off that (``None``: not recorded);
    ``sealed``: sealed reasoning of earlier steps, not taken off; ``recorded``: the input is the
    provider's count. What the provider recorded besides, for pricing
    (:mod:`iclr_cli.savings.prices`; ``None``: not recorded): ``cache_write`` /
    ``cache_write_1h`` (of which written for an hour), ``output`` and ``thinking`` (the part
    of ``output`` that was thinking), and the ``model`` / ``provider`` named for the request.
    """

    step: int
    input: float
    reasoning: float
    saved: float
    cache_read: float | None
    cache_saved: float | None
    sealed: float
    recorded: bool
    cache_write: float | None = None
    cache_write_1h: float | None = None
    output: float | None = None
    thinking: float | None = None
    model: str | None = None
    provider: str | None = None

    @property
    def input_after(self) -> float:
        """The input with write-back."""
        return self.input - self.saved

    @property
    def cache_read_after(self) -> float | None:
        """The cache read with write-back (``None``: not recorded)."""
        return None if self.cache_read is None or self.cache_saved is None else self.cache_read - self.cache_saved


@dataclass(frozen=True)
class SessionEstimate:
    """Every request of one session, and the ratio that converted proxy tokens.

    ``ratio``: provider tokens per proxy token (1.0 unless found); ``basis``: ``growth`` (found
    from the recorded input's growth), ``unconverted`` (usage recorded, but no ratio within
    :data:`RATIO_BOUNDS` found: deletions in proxy tokens) or ``proxy`` (nothing recorded);
    ``rejected``: the ratio found outside the bounds, if any (see the module docstring).
    """

    requests: tuple[RequestEstimate, ...]
    ratio: float
    basis: str
    rejected: float | None = None

    @property
    def recorded(self) -> int:
        """Requests whose input is the provider's count."""
        return sum(r.recorded for r in self.requests)


def _prefix(values: Sequence[int]) -> list[int]:
    """``out[k] = sum(values[:k])`` for k in 0..len(values)."""
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out


RATIO_BOUNDS = (0.5, 2.0)
"""Provider tokens per proxy token that a tokenizer ratio can plausibly be: BPE vocabularies
of 32k-200k entries count the same English or code within a factor of about 1.5 of each other,
so a ratio outside this range says the two counts were not of the same text."""


def session_ratio(proxy_input: Sequence[int], recorded: Sequence[tuple[int, int]]) -> tuple[float, str, float | None]:
    """Provider tokens per proxy token, its basis and the ratio rejected (see the module
    docstring): ``(ratio, "growth", None)``, ``(1.0, "unconverted", rejected or None)`` or
    ``(1.0, "proxy", None)``.

    ``proxy_input[k]``: proxy tokens of request k's prompt; ``recorded``: ``(step, input)`` of
    the recorded requests in request order.
    """
    if not recorded:
        return 1.0, "proxy", None
    grown = added = 0
    for (sa, ia), (sb, ib) in zip(recorded, recorded[1:]):
        if sb > sa and ib > ia:
            grown += ib - ia
            added += proxy_input[sb] - proxy_input[sa]
    if grown <= 0 or added <= 0:
        return 1.0, "unconverted", None
    ratio = grown / added
    low, high = RATIO_BOUNDS
    if not low <= ratio <= high:
        return 1.0, "unconverted", ratio
    return ratio, "growth", None


def estimate_session(prompt_tokens: int, steps: Sequence[StepTokens], requests: Sequence[Request] = ()) -> SessionEstimate:
    """The static estimate of one session (see the module docstring).

    Args:
        prompt_tokens: proxy tokens of P as rendered.
        steps: one :class:`StepTokens` per step, in order.
        requests: the requests the source records (``Trajectory.requests``); empty: one per
            step, nothing recorded. A request's step is clamped to ``0..len(steps)``.

    Returns:
        One :class:`RequestEstimate` per request, in order, and the ratio used.
    """
    n = len(steps)
    reqs = [dataclasses.replace(r, step=min(max(r.step, 0), n)) for r in requests] or [Request(k) for k in range(n)]
    proxy_input = [prompt_tokens + s for s in _prefix([s.rendered for s in steps])]
    recorded = [(r.step, r.usage.input_tokens) for r in reqs if r.usage is not None and r.usage.input_tokens is not None]
    ratio, basis, rejected = session_ratio(proxy_input, recorded)
    deleted = _prefix([s.deleted for s in steps])
    sealed = _prefix([s.sealed for s in steps])
    generated = _prefix([s.generated for s in steps])
    ends = _step_ends(n, reqs)
    out = []
    anchor: tuple[int, int] | None = None  # (step, input) of the last recorded request so far
    for r in reqs:
        k = r.step
        usage = r.usage
        known = usage is not None and usage.input_tokens is not None
        if known:
            total = float(usage.input_tokens)  # type: ignore[union-attr, arg-type]
            anchor = (k, usage.input_tokens)  # type: ignore[union-attr, assignment]
        elif anchor is not None and anchor[0] <= k:
            total = anchor[1] + ratio * (proxy_input[k] - proxy_input[anchor[0]])
        else:
            total = ratio * proxy_input[k]
        saved = min(total, ratio * deleted[k])
        cache = usage.cache_read_tokens if usage is not None else None
        cache_saved = None
        if cache is not None:
            inside = sum(steps[j].deleted for j in range(k) if ends[j] is not None and ends[j] <= cache)
            cache_saved = min(float(cache), ratio * inside, saved)
        billed = _billed(usage) if known else {}
        out.append(RequestEstimate(k, total, min(total, ratio * generated[k]), saved, None if cache is None else float(cache), cache_saved,
                                   ratio * sealed[k], known, **billed, model=r.model, provider=r.provider))
    return SessionEstimate(tuple(out), ratio, basis, rejected)


def _billed(usage: Usage | None) -> dict[str, float | None]:
    """The recorded counts a price needs besides input and cache reads (see :class:`RequestEstimate`)."""
    if usage is None:
        return {}

    def f(value: int | None) -> float | None:
        return None if value is None else float(value)

    return {"cache_write": f(usage.cache_write_tokens), "cache_write_1h": f(usage.cache_write_1h_tokens),
            "output": f(usage.output_tokens), "thinking": f(usage.reasoning_tokens)}


def _step_ends(n: int, requests: Sequence[Request]) -> list[int | None]:
    """``end[j]``: the recorded input of the first request (in order) after step j whose prompt
    holds all of step j (its step is above j); ``None`` when no such request is recorded."""
    ends: list[int | None] = [None] * n
    filled = 0  # every request fills a prefix of steps, so the filled ones are a prefix too
    for r in requests:
        if r.usage is None or r.usage.input_tokens is None:
            continue
        for j in range(filled, min(r.step, n)):
            ends[j] = r.usage.input_tokens
        filled = max(filled, min(r.step, n))
    return ends


def change_percent(before: float | None, saved: float | None) -> float | None:
    """``-100 * saved / before`` (negative: fewer tokens); ``None`` when ``before`` is 0 or unknown."""
    if before is None or saved is None or before <= 0:
        return None
    return -100.0 * saved / before
