"""Token accounting from the API's own ``usage`` object (METHOD.md, "What the paper measured").

Every count here is the provider's, in the agent model's own tokens; nothing is re-tokenized.
Field names differ between providers:

- input: ``prompt_tokens`` (includes cached tokens on OpenAI, DeepSeek, vLLM and llama.cpp);
- output: ``completion_tokens`` (includes reasoning tokens);
- cache reads: ``prompt_tokens_details.cached_tokens`` (OpenAI, vLLM, SGLang, OpenRouter) or
  ``prompt_cache_hit_tokens`` (DeepSeek), whichever is present;
- reasoning: ``completion_tokens_details.reasoning_tokens`` (OpenAI, DeepSeek, OpenRouter).

A field the provider does not send is ``None``, never 0, so "reported zero" and "not
reported" stay apart; a run total is ``None`` only when no request of the run reported it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Usage:
    """Token counts of one request (``None``: the provider did not report the field)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None

    def to_record(self) -> dict:
        """Plain dict for the per-request log."""
        return asdict(self)


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parse_usage(usage: Mapping | None) -> Usage:
    """Read a chat-completions ``usage`` object (see module docstring); ``None`` -> all ``None``."""
    if not isinstance(usage, Mapping):
        return Usage()
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    cached = _int(prompt_details.get("cached_tokens")) if isinstance(prompt_details, Mapping) else None
    if cached is None:
        cached = _int(usage.get("prompt_cache_hit_tokens"))
    reasoning = _int(completion_details.get("reasoning_tokens")) if isinstance(completion_details, Mapping) else None
    return Usage(
        input_tokens=_int(usage.get("prompt_tokens")),
        output_tokens=_int(usage.get("completion_tokens")),
        cache_read_tokens=cached,
        reasoning_tokens=reasoning,
    )


def _sum(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


@dataclass(frozen=True)
class UsageTotals:
    """Sums over every request of one run.

    ``requests`` counts agent requests that returned a completion; ``unreported`` names the
    fields no request reported (e.g. ``["cache_read_tokens"]`` on llama.cpp), so a reader
    sees a missing number as missing, not as zero.
    """

    requests: int
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    reasoning_tokens: int | None
    unreported: tuple[str, ...]


def total_usage(usages: Iterable[Usage]) -> UsageTotals:
    """Add up request usages (see :class:`UsageTotals`)."""
    usages = list(usages)
    sums = {
        name: _sum(getattr(u, name) for u in usages)
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens")
    }
    unreported = tuple(name for name, v in sums.items() if v is None and usages)
    return UsageTotals(requests=len(usages), unreported=unreported, **sums)
