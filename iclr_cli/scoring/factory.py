"""Build a scorer or a tokenizer from a ``--model`` spec; torch is imported only for real models."""

from __future__ import annotations

from iclr_cli.scoring.base import Scorer, Tokenizer


def build_scorer(
    model: str = "smollm2",
    *,
    max_tokens: int = 42_000,
    overflow: str = "window",
    dtype: str = "float32",
    device: str | None = None,
    prefix_cache: bool = True,
    batch_size: int = 8,
    chunk_size: int = 256,
) -> Scorer:
    """A :class:`~iclr_cli.scoring.fake.FakeScorer` for ``fake``, else the transformers scorer."""
    if model == "fake":
        from iclr_cli.scoring.fake import FakeScorer

        return FakeScorer(max_tokens=max_tokens, overflow=overflow)  # type: ignore[arg-type]
    from iclr_cli.scoring.transformers_scorer import TransformersScorer

    return TransformersScorer.from_spec(
        model,
        max_tokens=max_tokens,
        overflow=overflow,
        dtype=dtype,
        device=device,
        prefix_cache=prefix_cache,
        batch_size=batch_size,
        chunk_size=chunk_size,
    )


def load_tokenizer(model: str = "smollm2") -> Tokenizer:
    """Only the proxy's tokenizer (for variants that count tokens but need no scores)."""
    if model == "fake":
        from iclr_cli.scoring.fake import RegexTokenizer

        return RegexTokenizer()
    from iclr_cli.scoring.loading import load_proxy_tokenizer

    return load_proxy_tokenizer(model)
