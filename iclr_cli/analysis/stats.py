"""Small statistics shared by the analyses: KL in bits, bootstrap and Wilson intervals (numpy).

Intervals are 95% unless asked otherwise. The bootstrap resamples the given values (one per
boundary) with replacement, ``n`` times from a seeded generator, and takes the percentile
interval of the statistic: reproducible run to run. Boundaries of one trajectory are not
independent, so with few trajectories the interval is optimistic; the tables say ``n``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

BOOTSTRAP = 2000
LEVEL = 0.95


def kl_bits(p_log, q_log) -> float:
    """``KL(P || Q)`` in bits from natural-log probabilities (torch tensors or arrays), in
    float64, never below 0 (rounding can make an exact 0 slightly negative)."""
    p, q = _array(p_log), _array(q_log)
    return max(0.0, float((np.exp(p) * (p - q)).sum()) / math.log(2))


def _array(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().to("cpu").double().numpy()
    return np.asarray(x, dtype=np.float64)


def bootstrap_ci(values: Sequence[float], stat: Callable[[np.ndarray], float] = np.mean, *, n: int = BOOTSTRAP,
                 seed: int = 0, level: float = LEVEL) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``stat`` over ``values`` (``None`` for fewer than 2)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size < 2:
        return None
    rng = np.random.default_rng(seed)
    stats = np.array([stat(data[rng.integers(0, data.size, data.size)]) for _ in range(n)])
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return None
    tail = (1 - level) / 2 * 100
    return float(np.percentile(stats, tail)), float(np.percentile(stats, 100 - tail))


def bootstrap_paired(values: Sequence[tuple], stat: Callable[[np.ndarray], float], *, n: int = BOOTSTRAP, seed: int = 0,
                     level: float = LEVEL) -> tuple[float, float] | None:
    """Percentile bootstrap of ``stat`` over rows (``values[i]`` is one row of a 2-D array):
    for statistics of several columns at once, such as an AUROC of (label, score) pairs.
    Resamples where ``stat`` raises ``ValueError`` (one class only) are left out."""
    data = np.asarray(values, dtype=np.float64)
    if data.shape[0] < 2:
        return None
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        try:
            out.append(stat(data[rng.integers(0, data.shape[0], data.shape[0])]))
        except ValueError:
            continue
    out = [v for v in out if math.isfinite(v)]
    if not out:
        return None
    tail = (1 - level) / 2 * 100
    return float(np.percentile(out, tail)), float(np.percentile(out, 100 - tail))


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float] | None:
    """Wilson score interval of a proportion ``k / n`` (``None`` when ``n == 0``)."""
    if n == 0:
        return None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
