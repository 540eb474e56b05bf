"""When a step sent late is compressed: at one prefix break that costs nothing or pays for itself.

A step whose scores were not ready within the latency budget goes upstream as generated
(:mod:`iclr_cli.serve.budget`). Compressing it at a later request changes the prompt from that
step on, so the provider writes that tail to its prompt cache again instead of reading it. Under
``--late when-it-pays`` (the default) the proxy keeps scoring such steps behind the requests
clients wait for and compresses **all** of a conversation's late steps whose scores are ready
together, at one request, and only when that break is free or pays (:func:`break_now`):

- ``cache_expired``: no request of the conversation for longer than the provider's cache lifetime
  (Anthropic: 5 minutes, or 1 hour for a ``"ttl": "1h"`` cache marker; OpenAI: in-memory
  retention of 5 to 10 minutes of inactivity, up to an hour, so an hour is taken). The whole
  prompt is written again anyway; a compressed one is shorter to write.
- ``client_break``: the client itself changed its history at or before the first late step
  (its own compaction, an edited turn): what follows is written again anyway.
- ``pays``: the tokens it removes from every later request, read from the cache at the read
  price, outweigh writing the tail again at the write price instead of reading it:
  ``saved * read * later >= (tail - saved) * write - tail * read``, where ``tail`` counts the
  tokens from the first late step to where the provider's cache would have stopped matching
  anyway (the end of the previous request, or an earlier item the client changed itself).
  ``later`` is the number of requests expected after this one, taken as the number the
  conversation has had so far (a session that has run k requests is, on the evidence, as
  likely to run k more as fewer).

Prices are relative to the provider's input price (:data:`CACHE_RULES`, from each provider's
docs). Where the provider is not known, Anthropic's rule is assumed: the dearest write premium
documented, so a break that pays under it pays under every other.

``--late as-sent`` leaves a late step as generated for good (the prefix never changes);
``--late compress-later`` compresses each late step at the first request that finds its scores
ready, whatever that costs (one break per late step at worst).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CacheRule:
    """A provider's prompt cache: ``ttl_s`` (seconds without a request after which the cached
    prefix is gone; ``None``: not documented as expiring within a session), ``write`` and
    ``read`` (price of a token written to / read from the cache, relative to an uncached input
    token), and ``source`` (the provider's docs)."""

    ttl_s: float | None
    write: float
    read: float
    source: str


ANTHROPIC = CacheRule(300.0, 1.25, 0.1, "https://platform.claude.com/docs/en/build-with-claude/prompt-caching#pricing")
ANTHROPIC_1H = CacheRule(3600.0, 2.0, 0.1, "https://platform.claude.com/docs/en/build-with-claude/prompt-caching#1-hour-cache-duration")

CACHE_RULES: dict[str, CacheRule] = {
    "anthropic": ANTHROPIC,
    # no write premium; cached input at a tenth for the GPT-5 family (a half or a quarter for
    # older models: a tenth is the case where a rewrite pays least); retention up to an hour
    "openai": CacheRule(3600.0, 1.0, 0.1, "https://platform.openai.com/docs/guides/prompt-caching"),
    # cache hits at a tenth of a miss, no write premium, kept for hours to days
    "deepseek": CacheRule(None, 1.0, 0.1, "https://api-docs.deepseek.com/guides/kv_cache"),
}
"""Per ``--upstream-kind`` (:mod:`iclr_cli.providers`); any other kind gets :data:`ANTHROPIC`."""

POLICIES = ("when-it-pays", "as-sent", "compress-later")
DEFAULT = "when-it-pays"


def rule_for(kind: str | None, one_hour: bool = False) -> CacheRule:
    """The cache rule of upstream ``kind``; ``one_hour``: the request asks Anthropic's 1-hour
    cache (a ``cache_control`` with ``"ttl": "1h"``), which only Anthropic-style kinds honour."""
    rule = CACHE_RULES.get(kind or "", ANTHROPIC)
    return ANTHROPIC_1H if one_hour and rule is ANTHROPIC else rule


@dataclass(frozen=True)
class Moment:
    """What :func:`break_now` sees at one request of a conversation with late steps ready.

    ``idle_s``: seconds since the conversation's previous request (``None``: unknown, e.g.
    after a restart). ``tail_tokens``: tokens the break makes the provider write again that it
    would otherwise have read from its cache (from the first late step to the end of the
    previous request, or to where the client changed its own items). ``saved_tokens``: tokens
    the compression removes. ``later_requests``: requests expected after this one.
    ``client_changed``: the client changed its own items since the previous request."""

    idle_s: float | None
    tail_tokens: int
    saved_tokens: int
    later_requests: float
    client_changed: bool = False


def break_now(rule: CacheRule, moment: Moment) -> str | None:
    """Why the ready late steps are compressed at this request (``cache_expired``,
    ``client_break`` or ``pays``), or ``None`` to send them as generated once more (module
    docstring). Pure: no clock, no state."""
    if moment.saved_tokens <= 0:
        return None
    if rule.ttl_s is not None and moment.idle_s is not None and moment.idle_s > rule.ttl_s:
        return "cache_expired"
    extra_now = (moment.tail_tokens - moment.saved_tokens) * rule.write - moment.tail_tokens * rule.read
    if extra_now <= 0:
        return "client_break" if moment.client_changed else "pays"
    if moment.saved_tokens * rule.read * moment.later_requests >= extra_now:
        return "pays"
    return None


def rewrite_cost(rule: CacheRule, tail_tokens: int, saved_tokens: int, later_requests: float) -> float:
    """What a break costs minus what it saves, in uncached-input-token equivalents (negative:
    it pays), by the formula of :func:`break_now`; for logs and benchmarks."""
    return (tail_tokens - saved_tokens) * rule.write - tail_tokens * rule.read - saved_tokens * rule.read * later_requests
