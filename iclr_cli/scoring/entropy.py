"""Full-vocabulary token entropy in bits, a chunk of positions at a time (pure torch).

METHOD.md, "Score": ``h_t = -sum_v p(v|c_t) log2 p(v|c_t)`` where ``p`` is the softmax of the
logits at the position before token t, computed from ``log_softmax`` as
``-(exp(lp) * lp).sum(-1) / ln 2``, never materialising ``[positions x vocab]`` logits for a
whole long context: :func:`head_entropies` applies the LM head to ``chunk_size`` hidden states
at a time, so peak extra memory is about ``3 * chunk_size * vocab * 4`` bytes (~150 MB for
256 positions and SmolLM2's 49,152-token vocabulary).

Import this module only where torch is wanted (it imports torch at the top).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

LN2 = math.log(2.0)
DEFAULT_CHUNK = 256


def entropy_bits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy in bits of ``softmax(logits)`` along the last axis.

    Args:
        logits: ``[..., V]`` any float dtype; computed in float32 at least.

    Returns:
        ``[...]`` float32 (or float64 if given), values in ``[0, log2 V]``.
    """
    x = logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
    lp = torch.log_softmax(x, dim=-1)
    # A probability that underflows to 0 has lp = -inf and 0 * -inf = nan; clamping lp to the
    # most negative finite value makes that term exactly 0 instead.
    lp = lp.clamp_(min=torch.finfo(lp.dtype).min)
    plogp = lp.exp().mul_(lp)
    return plogp.sum(-1).neg_().div_(LN2)


def logit_transform(config) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """The post-head logit transform a model config asks for, or ``None`` (Llama: none).

    Handles ``logit_scale`` (Cohere: logits are multiplied by it) and
    ``final_logit_softcapping`` (Gemma 2: ``cap * tanh(logits / cap)``). The entropy must be
    taken of the distribution the model actually predicts, so these are applied before the
    softmax.
    """
    scale = getattr(config, "logit_scale", None)
    cap = getattr(config, "final_logit_softcapping", None)
    if not scale and not cap:
        return None

    def transform(logits: torch.Tensor) -> torch.Tensor:
        if scale:
            logits = logits * scale
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return logits

    return transform


def head_entropies(
    hidden: torch.Tensor,
    head: Callable[[torch.Tensor], torch.Tensor],
    *,
    chunk_size: int = DEFAULT_CHUNK,
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Entropy in bits of the next-token distribution at each hidden state.

    Args:
        hidden: ``[n, d]`` final hidden states, already passed through the model's final norm
            (a transformers base model's ``last_hidden_state`` is).
        head: the LM head, ``[k, d] -> [k, V]`` (``model.get_output_embeddings()``).
        chunk_size: positions per head call; bounds memory, never changes results.
        transform: optional logit transform (:func:`logit_transform`).

    Returns:
        ``[n]`` float32 on ``hidden``'s device.

    Raises:
        ValueError: when ``chunk_size`` < 1 or ``hidden`` is not 2-D.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if hidden.dim() != 2:
        raise ValueError(f"hidden must be [n, d], got shape {tuple(hidden.shape)}")
    out = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
    for a in range(0, hidden.shape[0], chunk_size):
        logits = head(hidden[a : a + chunk_size])
        if transform is not None:
            logits = transform(logits)
        out[a : a + chunk_size] = entropy_bits(logits)
    return out
