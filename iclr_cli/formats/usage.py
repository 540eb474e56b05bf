"""The provider's own token counts of a model request, read from the usage objects formats keep.

Every reader returns a :class:`~iclr_cli.trajectory.Usage` whose ``input_tokens`` counts the
whole prompt, cached or not, whatever the provider's convention (docs/FORMAT.md, "Recorded
usage"):

- Anthropic Messages ``usage`` (Claude Code ``message.usage``): ``input_tokens`` is the
  uncached rest only, so input = ``input_tokens + cache_creation_input_tokens +
  cache_read_input_tokens`` (Anthropic, "Prompt caching: tracking cache performance");
- OpenAI chat completions ``usage`` (and LiteLLM's copy of it): ``prompt_tokens`` already
  includes ``prompt_tokens_details.cached_tokens`` (OpenAI, "Prompt caching"); DeepSeek names
  the cached part ``prompt_cache_hit_tokens``, LiteLLM for Anthropic ``cache_read_input_tokens``
  (with ``cache_creation_input_tokens`` for writes);
- OpenAI Responses / Codex ``token_count``: ``input_tokens`` includes ``cached_tokens`` /
  ``cached_input_tokens`` (and the cache writes newer Codex releases record,
  ``cache_write_input_tokens``); ``reasoning_output_tokens`` is part of ``output_tokens``;
- pi ``AssistantMessage.usage`` (:func:`pi_usage`): ``input`` is the uncached part.

A count that is missing, negative or not an integer is ``None``; a usage with no input count
at all is ``None`` (nothing to estimate from).
"""

from __future__ import annotations

from collections.abc import Mapping

from iclr_cli.trajectory import Usage


def count(value: object) -> int | None:
    """``value`` when it is a non-negative integer (not a bool), else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _details(obj: Mapping, key: str, field: str) -> int | None:
    inner = obj.get(key)
    return count(inner.get(field)) if isinstance(inner, Mapping) else None


def _first(*values: int | None) -> int | None:
    return next((v for v in values if v is not None), None)


def anthropic_usage(obj: object, source: str) -> Usage | None:
    """An Anthropic Messages ``usage`` object (see the module docstring), or ``None``. The
    1-hour part of the cache writes is ``cache_creation.ephemeral_1h_input_tokens``; the
    thinking part of the output, where recorded, ``output_tokens_details.thinking_tokens``."""
    if not isinstance(obj, Mapping):
        return None
    uncached = count(obj.get("input_tokens"))
    if uncached is None:
        return None
    write = count(obj.get("cache_creation_input_tokens"))
    read = count(obj.get("cache_read_input_tokens"))
    return Usage(uncached + (write or 0) + (read or 0), count(obj.get("output_tokens")), read, write, source,
                 cache_write_1h_tokens=_details(obj, "cache_creation", "ephemeral_1h_input_tokens"),
                 reasoning_tokens=_details(obj, "output_tokens_details", "thinking_tokens"))


def openai_usage(obj: object, source: str) -> Usage | None:
    """A chat-completions or Responses ``usage`` object, LiteLLM's included (see the module
    docstring), or ``None``."""
    if not isinstance(obj, Mapping):
        return None
    if "prompt_tokens" in obj:
        read = _first(
            _details(obj, "prompt_tokens_details", "cached_tokens"),
            count(obj.get("prompt_cache_hit_tokens")),
            count(obj.get("cache_read_input_tokens")),
        )
        total = count(obj.get("prompt_tokens"))
        output = count(obj.get("completion_tokens"))
        reasoning = _details(obj, "completion_tokens_details", "reasoning_tokens")
    else:  # Responses API / Codex: input_tokens already includes the cached part
        read = _first(_details(obj, "input_tokens_details", "cached_tokens"), count(obj.get("cached_input_tokens")))
        total = count(obj.get("input_tokens"))
        output = count(obj.get("output_tokens"))
        reasoning = _first(_details(obj, "output_tokens_details", "reasoning_tokens"), count(obj.get("reasoning_output_tokens")))
    if total is None:
        return None
    write = _first(count(obj.get("cache_creation_input_tokens")), count(obj.get("cache_write_input_tokens")),
                   _details(obj, "prompt_tokens_details", "cache_write_tokens"), _details(obj, "input_tokens_details", "cache_write_tokens"))
    return Usage(total, output, read, write, source, reasoning_tokens=reasoning)


def pi_usage(obj: object, api: object, source: str) -> Usage | None:
    """A pi ``AssistantMessage.usage`` (``input``, ``output``, ``cacheRead``, ``cacheWrite``,
    ``totalTokens``, ``cost``), or ``None`` when it holds no input count or records nothing
    (pi writes all zeros for a request that ended before the provider reported usage).

    pi stores the uncached part as ``input`` for Anthropic, OpenAI and Gemini CLI requests
    (pi-mono ``packages/ai/src/providers``: ``input = prompt_tokens - cached_tokens``, or
    Anthropic's own ``input_tokens``), so the prompt is ``input + cacheRead + cacheWrite``;
    its ``google-generative-ai`` and ``google-vertex`` providers store Gemini's
    ``promptTokenCount``, which already includes ``cachedContentTokenCount``, as ``input``.
    ``output`` includes thinking (pi adds ``reasoning_tokens`` / ``thoughtsTokenCount`` in).
    """
    if not isinstance(obj, Mapping):
        return None
    fresh = count(obj.get("input"))
    if fresh is None:
        return None
    read, write, output = count(obj.get("cacheRead")), count(obj.get("cacheWrite")), count(obj.get("output"))
    if not any((fresh, read, write, output)):
        return None
    included = api in ("google-generative-ai", "google-vertex") and (read or 0) <= fresh
    total = fresh + (write or 0) + (0 if included else (read or 0))
    return Usage(total, output, read, write, source)


def message_usage(obj: object, source: str) -> Usage | None:
    """A usage object of either convention: Anthropic's when it carries Anthropic's cache
    fields or ``input_tokens`` without OpenAI's names, else OpenAI's."""
    if not isinstance(obj, Mapping):
        return None
    anthropic = "prompt_tokens" not in obj and (
        "cache_read_input_tokens" in obj or "cache_creation_input_tokens" in obj
        or ("input_tokens" in obj and "input_tokens_details" not in obj and "cached_input_tokens" not in obj)
    )
    return anthropic_usage(obj, source) if anthropic else openai_usage(obj, source)
