"""Build a scorer or a tokenizer from a ``--model`` name (torch imported only when needed).

``fake`` selects :class:`~iclr_cli.scoring.fake.FakeScorer` and its regex tokenizer (``fake:N``:
the same scores, taking the time of a proxy that runs N tokens a second); every other name is
a model spec for :mod:`iclr_cli.scoring.loading` (``smollm2`` by default).
"""

from __future__ import annotations

from pathlib import Path

from iclr_cli.errors import UsageError
from iclr_cli.scoring.base import CONTEXTS, DEFAULT_CONTEXT, DEFAULT_MAX_TOKENS, Overflow, Scorer, Tokenizer
from iclr_cli.scoring.fake import FakeScorer, RegexTokenizer, is_fake, parse_fake

FAKE = "fake"
DEFAULT_MODEL = "smollm2"


def build_scorer(
    model: str = DEFAULT_MODEL,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overflow: Overflow = "window",
    dtype: str = "float32",
    device: str | None = None,
    prefix_cache: bool = True,
    batch_size: int | None = None,
    chunk_size: int = 256,
    context: str = DEFAULT_CONTEXT,
    cache_tokens: int | None = None,
    prompt_cache: bool = True,
    prompt_cache_dir: Path | None = None,
) -> Scorer:
    """A ready scorer for ``model``.

    Args:
        model: ``fake`` (``fake:N``: paced at N tokens a second) or a model spec (``smollm2``/``default``, a ``.gguf`` file, a Hugging
            Face folder, or a hub id already in the local cache).
        max_tokens: requested input limit in tokens; the real scorer also caps it at the
            model's maximum positions (8,192 for SmolLM2).
        overflow: ``window`` (project default) or ``skip`` (the paper's rule).
        dtype: ``float32`` (default) or ``bfloat16`` (explicit opt-in; callers should warn).
        device: torch device; default CUDA when available, else CPU. Checked for every
            model, ``fake`` included (UsageError for one this torch or machine lacks).
        prefix_cache: reuse each trajectory's KV cache from step to step (``--no-prefix-cache``
            turns it off; results are the same within 1e-3 bits).
        batch_size: most trajectories (rows) per batched forward; ``None``: chosen for the
            device (:mod:`iclr_cli.scoring.budget`).
        chunk_size: positions per LM-head call when computing entropies.
        context: ``auto``, ``sliding`` or ``fresh``: what the proxy sees over the limit (docs/scoring.md,
            "Scoring long sessions"). The fake scorer has no keys to slide and ignores it.
        cache_tokens: key/value tokens kept over all stream caches; ``None``: from the
            device's free memory.
        prompt_cache: share the state after a long P across trajectories, in memory and on
            disk (:mod:`iclr_cli.scoring.prefix`; results are the same); needs ``prefix_cache``.
        prompt_cache_dir: that cache's folder (``None``: ``$ICLR_PROMPT_CACHE_DIR``, else
            ``<cache>/prompts``).

    Raises:
        UsageError: bad option values or an unresolvable model spec.
        IclrError: the model could not be converted or loaded.
    """
    if overflow not in ("window", "skip"):
        raise UsageError(f"--overflow {overflow!r}: choose window or skip")
    if context not in CONTEXTS:
        raise UsageError(f"--context {context!r}: choose one of {', '.join(CONTEXTS)}")
    if is_fake(model):
        pace = parse_fake(model)
        if device:
            # the same check as for a real model, so a run tried with --model fake does not
            # pass on a device the real run will refuse; torch is imported only for this
            from iclr_cli.scoring.device import pick_device

            pick_device(device)
        return FakeScorer(max_tokens=max_tokens, overflow=overflow, tokens_per_s=pace)
    from iclr_cli.scoring.threads import choose_wait_policy

    choose_wait_policy()  # library callers that skip the CLI's entry point: before torch loads
    from iclr_cli.scoring.loading import load_model
    from iclr_cli.scoring.transformers_scorer import TransformersScorer

    lm, tokenizer, source = load_model(model, dtype=dtype, device=device)
    return TransformersScorer(
        lm,
        tokenizer,
        name=source.name,
        max_tokens=max_tokens,
        overflow=overflow,
        prefix_cache=prefix_cache,
        batch_size=batch_size,
        chunk_size=chunk_size,
        context=context,
        cache_tokens=cache_tokens,
        prompt_cache=prompt_cache,
        prompt_cache_dir=prompt_cache_dir,
    )


def load_tokenizer(model: str = DEFAULT_MODEL) -> Tokenizer:
    """Only the tokenizer of ``model`` (for variants that count tokens but need no scores).

    Fast once the model cache exists (no torch import); the first use of a GGUF model
    converts it into the cache.

    Raises:
        UsageError: an unresolvable model spec.
    """
    if is_fake(model):
        parse_fake(model)
        return RegexTokenizer()
    from iclr_cli.scoring.loading import load_tokenizer as _load

    return _load(model)


def build_exact_like(fast: Scorer, model: str = DEFAULT_MODEL, *, precision: str = "float32", device: str | None = None,
                     overflow: Overflow = "window", context: str = DEFAULT_CONTEXT, prefix_cache: bool = True,
                     batch_size: int | None = None, cache_tokens: int | None = None) -> Scorer:
    """The scorer that rechecks ``fast``'s near ties (:mod:`iclr_cli.scoring.recheck`): the
    same proxy with ``--exact``'s window (:data:`~iclr_cli.scoring.profile.EXACT`, capped at
    the proxy's maximum positions) and ``context`` (as ``--exact`` takes it), in float32.

    ``precision`` is the one ``fast`` runs in: where it is float32 the weights are shared (no
    second copy, no second load); otherwise (a bf16 decoder) the proxy is loaded again in
    float32. ``model`` and the other arguments are those ``fast`` was built with.
    """
    from iclr_cli.scoring.profile import EXACT

    if isinstance(fast, FakeScorer):
        return FakeScorer(max_tokens=EXACT.max_tokens, overflow=overflow, tokens_per_s=fast.tokens_per_s)
    if precision != "float32":
        return build_scorer(model, max_tokens=EXACT.max_tokens, overflow=overflow, dtype="float32", device=device,
                            prefix_cache=prefix_cache, batch_size=batch_size, context=context, cache_tokens=cache_tokens,
                            prompt_cache=prefix_cache)
    from iclr_cli.scoring.transformers_scorer import TransformersScorer

    return TransformersScorer(fast.model, fast.tokenizer, name=fast.name, max_tokens=EXACT.max_tokens, overflow=overflow,
                              context=context, prefix_cache=prefix_cache, batch_size=batch_size,
                              cache_tokens=cache_tokens, prompt_cache=prefix_cache)
