"""What a forward pass costs, in token-equivalents: ``--context auto``'s estimate (docs/scoring.md,
"Scoring long sessions").

A token run at context length ``c`` (the number of tokens it attends to) costs its weights'
work plus attention over ``c`` keys and values. In units of one token's weights that is
``1 + c / E``, where ``E`` (:func:`attention_equivalent`) is the context length at which
attention costs as much as the weights: ``2 x`` the decoder's parameters (embeddings apart)
over ``4 x layers x attention width`` (scores and the weighted sum, a multiply and an add
each). SmolLM2-135M: about 3,070 tokens.

Counting tokens alone underrated the sliding window: every token it runs sees a whole window,
while a fresh window's tokens see their position in it. On the 1.95 MB Claude Code slice of
``../shared/realdata`` the token counts said sliding forwards 1.8x what fresh does (``auto``
kept sliding), and ``prune`` ran 548 s against 71 s (BENCHMARKS.md, "--context auto").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

AUTO_MARGIN = 2
"""``auto`` keeps the more faithful sliding window unless fresh costs less than 1/AUTO_MARGIN
of it (docs/scoring.md, "Scoring long sessions")."""


def attention_equivalent(model) -> float:
    """``E`` of the module docstring for a transformers causal LM (``inf`` when its config does
    not say its width: then tokens are counted alone)."""
    config = model.config
    layers = getattr(config, "num_hidden_layers", None)
    heads = getattr(config, "num_attention_heads", None)
    head_dim = getattr(config, "head_dim", None) or (config.hidden_size // heads if heads else None)
    if not layers or not heads or not head_dim:
        return float("inf")
    embedding = model.get_input_embeddings()
    params = sum(p.numel() for p in model.parameters()) - (embedding.weight.numel() if embedding is not None else 0)
    return 2.0 * params / (4.0 * layers * heads * head_dim)


def run_cost(start: int, end: int, equivalent: float) -> float:
    """Cost of running positions ``start .. end - 1`` of one sequence, each attending to every
    earlier position: ``sum(1 + p / E)``."""
    n = max(0, end - start)
    return n + (end * (end - 1) - start * (start - 1)) / (2.0 * equivalent) if n else 0.0


def sliding_cost(tokens: int, limit: int, equivalent: float) -> float:
    """Cost of reading ``tokens`` tokens once through a sliding window of ``limit``: a plain run
    up to the limit, then every token at a full window."""
    head = min(tokens, limit)
    return run_cost(0, head, equivalent) + max(0, tokens - limit) * (1 + limit / equivalent)


def auto_mode(layouts: Iterable[tuple[Sequence[int], object]], shared: Callable[[Sequence[int], Sequence[int]], int],
              count: Callable[[object], int], limit: int, equivalent: float) -> str:
    """``fresh`` or ``sliding`` for one stream under ``--context auto``, from its requests in
    order, without running the model: ``layouts`` gives each laid-out request's token ids (a
    request the layout skips left out) beside the request. ``fresh`` runs each request's
    window after the prefix it ``shared`` with the previous one; ``sliding`` reads the last
    request's sequence once (``count(request)`` tokens, counted rather than laid out so a huge
    segment's ids are never held), every token past ``limit`` at a full window. ``fresh`` when
    it costs less than ``1 / AUTO_MARGIN`` of that."""
    fresh, prev, last = 0.0, (), None
    for ids, request in layouts:
        fresh += run_cost(shared(prev, ids), len(ids), equivalent)
        prev, last = ids, request
    sliding = sliding_cost(count(last), limit, equivalent) if last is not None else 0.0
    return "fresh" if fresh * AUTO_MARGIN < sliding else "sliding"
