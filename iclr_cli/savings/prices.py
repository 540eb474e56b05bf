"""Dollars of the static estimate, from the maintained price table of ``genai-prices``.

``genai-prices`` (PyPI, MIT; pydantic/genai-prices) keeps every provider's list prices, with
their dates, tiers and cache rates; this project keeps no price table of its own. Each
recorded request is priced as its provider bills it, before and after write-back:

- ``input_tokens`` is the whole prompt, cached or not (the convention of
  :class:`~iclr_cli.trajectory.Usage`, and what ``genai_prices.Usage`` asks for: "Cache tokens
  are partitions of the total"); ``cache_read_tokens`` and ``cache_write_tokens`` are parts of
  it billed at their own rates (Anthropic: reads 0.1x input, 5-minute writes 1.25x, 1-hour
  writes 2x; OpenAI: reads discounted, writes not billed apart, so they cost as input);
- per request, not on sums: a price can depend on the prompt's size (Anthropic's long-context
  tier above 200k input tokens), and a session can switch models;
- at the price in force on the session's last activity (``genai_request_timestamp``), or
  today's when the file holds no timestamps.

With write-back the request's prompt is ``saved`` tokens shorter, ``cache_saved`` of them
inside the recorded cache read (:mod:`iclr_cli.savings.estimate`). The rest came off the
uncached part, which a prompt-caching provider writes to its cache when the request ends on
a cache breakpoint: it comes off the recorded cache writes first (their 1-hour share kept),
then off the plain uncached input. Output is the same (a static estimate keeps the actions).

Only requests whose usage the file records are priced: an input estimated with the proxy
tokenizer is no provider's count. A request whose model ``genai-prices`` does not know is
left out and counted (``unpriced``), with the model named.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from iclr_cli.savings.estimate import RequestEstimate

PROVIDERS = {
    "anthropic": "anthropic", "openai": "openai", "openai-codex": "openai", "azure": "azure",
    "azure-openai-responses": "azure", "google": "google", "google-vertex": "google",
    "google-gemini-cli": "google", "vertex_ai": "google", "gemini": "google",
    "amazon-bedrock": "aws", "bedrock": "aws", "xai": "x-ai", "x-ai": "x-ai",
    "openrouter": "openrouter", "groq": "groq", "cerebras": "cerebras", "mistral": "mistral",
    "deepseek": "deepseek", "zai": "zai", "minimax": "minimax", "together_ai": "together",
    "fireworks_ai": "fireworks", "moonshot": "moonshotai",
}
"""Provider names as transcripts write them (pi's ``provider``, LiteLLM's
``custom_llm_provider``) -> ``genai-prices`` provider ids. A name not listed is tried as it
is, then the model alone."""

FORMAT_PROVIDERS = {"claude_code": "anthropic", "anthropic": "anthropic", "codex": "openai", "openai_responses": "openai"}
"""The provider a format's own requests go to, where the format fixes it."""


@dataclass(frozen=True)
class Cost:
    """Dollars of some requests at list price: ``before`` as recorded, ``after`` with
    write-back; ``priced`` counts the requests in them, ``unpriced`` those left out:
    ``no_usage`` (no recorded usage, or no price table), ``no_model`` (the transcript names
    no model) and the rest with a model the table does not know (``unknown``, by name);
    ``models``: the price table's model ids used."""

    before: float = 0.0
    after: float = 0.0
    priced: int = 0
    unpriced: int = 0
    models: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    no_usage: int = 0
    no_model: int = 0

    @property
    def saved(self) -> float:
        return self.before - self.after

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.before + other.before, self.after + other.after, self.priced + other.priced,
                    self.unpriced + other.unpriced, tuple(dict.fromkeys(self.models + other.models)),
                    tuple(dict.fromkeys(self.unknown + other.unknown)), self.no_usage + other.no_usage,
                    self.no_model + other.no_model)


def after_writeback(r: RequestEstimate) -> dict[str, float]:
    """The token counts of request ``r`` with write-back (see the module docstring): the
    saving inside the cache read comes off it, the rest off the cache writes (their 1-hour
    share kept), then off the plain uncached input."""
    read = r.cache_read or 0.0
    write = r.cache_write or 0.0
    write_1h = min(r.cache_write_1h or 0.0, write)
    cache_saved = min(r.cache_saved or 0.0, read)
    rest = max(0.0, r.saved - cache_saved)
    write_saved = min(write, rest)
    kept = (write - write_saved) / write if write else 0.0
    read_after, write_after = read - cache_saved, write - write_saved
    # the deletions outside the cache read may exceed what the request wrote and sent
    # uncached (the recorded split and the estimate's are not the same count): the parts stay
    return {"input": max(r.input - r.saved, read_after + write_after), "cache_read": read_after, "cache_write": write_after,
            "cache_write_1h": write_1h * kept}


@dataclass
class PriceBook:
    """``genai-prices``, or why it cannot be used (``problem``: not installed, or this Python
    is older than it supports). Lookups are remembered per (model, provider)."""

    problem: str | None = None
    version: str | None = None
    _found: dict[tuple[str, str | None], tuple[str | None, str | None]] = field(default_factory=dict)

    @classmethod
    def load(cls) -> PriceBook:
        try:
            import genai_prices
        except ImportError:
            return cls(problem="prices unavailable: the genai-prices package is not installed (pip install 'iclr-cli[savings]', Python 3.11+)")
        return cls(version=getattr(genai_prices, "__version__", "?"))

    @property
    def source(self) -> str | None:
        """The price table named for the report, or ``None`` when there is none."""
        return None if self.problem else f"genai-prices {self.version} (github.com/pydantic/genai-prices)"

    def _calc(self, usage: dict[str, float], model: str, provider: str | None, when: datetime | None):
        from genai_prices import Usage, calc_price

        counts = {k: int(round(v)) for k, v in usage.items() if v is not None}
        # parts within their totals after rounding (the table refuses a part above its total)
        if "cache_write_1h_tokens" in counts:
            counts["cache_write_1h_tokens"] = min(counts["cache_write_1h_tokens"], counts.get("cache_write_tokens", 0))
        parts = counts.get("cache_read_tokens", 0) + counts.get("cache_write_tokens", 0)
        counts["input_tokens"] = max(counts.get("input_tokens", 0), parts)
        return calc_price(Usage(**counts), model, provider_id=provider, genai_request_timestamp=when)

    def request(self, r: RequestEstimate, model: str, provider: str | None, when: datetime | None) -> tuple[float, float, str] | None:
        """``(dollars before, dollars after, price-table model id)`` of one recorded request,
        or ``None`` when the table knows no such model."""
        before = {"input_tokens": r.input, "cache_read_tokens": r.cache_read, "cache_write_tokens": r.cache_write,
                  "cache_write_1h_tokens": r.cache_write_1h, "output_tokens": r.output}
        after_counts = after_writeback(r)
        after = {**before, "input_tokens": after_counts["input"],
                 "cache_read_tokens": after_counts["cache_read"] if r.cache_read is not None else None,
                 "cache_write_tokens": after_counts["cache_write"] if r.cache_write is not None else None,
                 "cache_write_1h_tokens": after_counts["cache_write_1h"] if r.cache_write_1h is not None else None}
        key = (model, provider)
        if key in self._found and self._found[key][0] is None:
            return None
        for name, hint in _lookups(model, provider):
            try:
                one = self._calc(before, name, hint, when)
                two = self._calc(after, name, hint, when)
            except LookupError:
                continue
            self._found[key] = (one.model.id, hint)
            return float(one.total_price), float(two.total_price), one.model.id
        self._found[key] = (None, None)
        return None

    def session(self, requests: Sequence[RequestEstimate], model: str | None, provider: str | None, when: datetime | None) -> Cost:
        """The :class:`Cost` of one session's requests; ``model`` / ``provider``: the session's
        own, for requests that name none."""
        cost = Cost()
        for r in requests:
            name = r.model or model
            if self.problem or not r.recorded:
                cost = cost + Cost(unpriced=1, no_usage=1)
                continue
            if not name:
                cost = cost + Cost(unpriced=1, no_model=1)
                continue
            hint = provider_id(r.provider) or provider
            found = self.request(r, name, hint, when)
            if found is None:
                cost = cost + Cost(unpriced=1, unknown=(name,))
            else:
                cost = cost + Cost(found[0], found[1], 1, 0, (found[2],))
        return cost


def _lookups(model: str, provider: str | None) -> list[tuple[str, str | None]]:
    """The (model, provider) lookups to try in order: as named, then the model alone, then a
    LiteLLM-style ``provider/model`` name split in two."""
    tries: list[tuple[str, str | None]] = [(model, provider)] if provider else []
    tries.append((model, None))
    if "/" in model:
        prefix, rest = model.split("/", 1)
        tries += [(rest, provider_id(prefix)), (rest, None)]
    return list(dict.fromkeys(tries))


def provider_id(name: str | None) -> str | None:
    """The ``genai-prices`` id of a provider as a transcript names it (:data:`PROVIDERS`)."""
    if not name:
        return None
    return PROVIDERS.get(name, name)


def session_provider(fmt: str, meta_provider: object) -> str | None:
    """The provider of a session's requests that name none: LiteLLM's recorded provider,
    else the one the format implies (:data:`FORMAT_PROVIDERS`)."""
    if isinstance(meta_provider, str) and meta_provider:
        return provider_id(meta_provider)
    return FORMAT_PROVIDERS.get(fmt)


def total(costs: Iterable[Cost]) -> Cost:
    out = Cost()
    for c in costs:
        out = out + c
    return out
