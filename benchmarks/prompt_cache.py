"""What a provider's prompt cache makes of the requests an upstream received: cache writes, cache
reads and uncached input, under Anthropic's and OpenAI's rules.

Both providers cache a prompt by its prefix: a request reuses what an earlier request of the
same conversation already sent, up to the first token that differs, and everything after that
token is new. A request is linearised as the provider reads it (``system``, ``tools``, then
``messages`` or ``input``), with ``cache_control`` markers left out (clients move them; they
mark where to cache, they are not prompt text), and counted in proxy tokens.

- **Anthropic** (docs.anthropic.com, "Prompt caching"): with a breakpoint on the last message
  (Claude Code puts one there on every request), the cached prefix is read
  (``cache_read_input_tokens``, billed at 0.1x input) and the rest is written
  (``cache_creation_input_tokens``, 1.25x for the 5-minute cache). A changed prefix is a cache
  write from the first changed token. The service looks for earlier hits at most 20 blocks
  before a breakpoint; a change further back than that would lose more than counted here.
- **OpenAI** (platform.openai.com, "Prompt caching"): automatic for prompts of 1,024 tokens or
  more, in 128-token increments of the common prefix; cached input is billed at 0.1x for the
  GPT-5 family (0.25x-0.5x for older models), nothing is charged for writing.

:func:`account` returns token sums and a cost in "input-token units" (input price = 1) with
those multipliers, so two runs of the same scripted session can be compared.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

ANTHROPIC_WRITE, ANTHROPIC_READ = 1.25, 0.1
OPENAI_CACHED = 0.1
OPENAI_MIN, OPENAI_STEP = 1024, 128


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def linear(body: dict) -> str:
    """The prompt of one request body as one text, in the order a provider reads it."""
    parts = [json.dumps(_strip(body.get(key)), sort_keys=True) for key in ("system", "instructions", "tools") if body.get(key) is not None]
    items = body.get("messages") or body.get("input") or []
    parts += [json.dumps(_strip(item), sort_keys=True) for item in items]
    return "\n".join(parts)


def _common(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo = 0
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


@dataclass
class CacheCost:
    """Sums over the requests of one or more conversations (tokens of the proxy tokenizer)."""

    requests: int = 0
    input_tokens: int = 0  # every prompt token of every request, cached or not
    anthropic_write: int = 0
    anthropic_read: int = 0
    openai_cached: int = 0
    openai_uncached: int = 0

    @property
    def anthropic_units(self) -> float:
        return self.anthropic_write * ANTHROPIC_WRITE + self.anthropic_read * ANTHROPIC_READ

    @property
    def openai_units(self) -> float:
        return self.openai_uncached + self.openai_cached * OPENAI_CACHED

    def to_record(self) -> dict:
        return {
            "requests": self.requests, "input_tokens": self.input_tokens,
            "anthropic_cache_write": self.anthropic_write, "anthropic_cache_read": self.anthropic_read,
            "anthropic_units": round(self.anthropic_units), "openai_uncached": self.openai_uncached,
            "openai_cached": self.openai_cached, "openai_units": round(self.openai_units),
        }


def account(conversations: Iterable[Sequence[dict]], tokenizer) -> CacheCost:
    """The cache cost of ``conversations`` (each the request bodies of one conversation, in
    the order the upstream received them), counted with ``tokenizer.token_spans``."""
    cost = CacheCost()
    for bodies in conversations:
        before = None
        for body in bodies:
            text = linear(body)
            spans = tokenizer.token_spans(text)
            common = _common(before, text) if before is not None else 0
            prefix = sum(1 for _, end in spans if end <= common)
            cost.requests += 1
            cost.input_tokens += len(spans)
            cost.anthropic_read += prefix
            cost.anthropic_write += len(spans) - prefix
            cached = prefix // OPENAI_STEP * OPENAI_STEP if prefix >= OPENAI_MIN else 0
            cost.openai_cached += cached
            cost.openai_uncached += len(spans) - cached
            before = text
    return cost
