"""Default memory budget of the scorer: cache size and batch size from the device's free memory.

Choose them from what the device has, not from constants (docs/scoring.md, "Batching and memory"). A share of the free
memory (``SHARE``, measured when the scorer is built: ``torch.cuda.mem_get_info`` on CUDA,
``MemAvailable`` of ``/proc/meminfo`` on Linux CPUs) goes to keys and values: 60% of it to
the stream caches kept between steps (``cache_tokens``), 40% to the buffers of one batched
forward (``batch_tokens``: rows times the longest past plus new tokens, with room for the
per-layer copies attention makes). The row cap (``batch_size``) is a compute choice, not a
memory one: wide batches pay on a GPU, while on CPU cores a forward of a few hundred tokens
already keeps them busy and rows of different lengths only add padding. Measured on 2 cores
(``benchmarks/bench_batching.py``, BENCHMARKS.md): 382, 349 and 272 tokens/s at 1, 4 and 16
rows. So CPUs get 1 row.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

SHARE = 0.4
ROWS_GPU = 64
ROWS_CPU = 1
FALLBACK_FREE = 4 << 30  # when free memory cannot be read


@dataclass(frozen=True)
class Budget:
    """``cache_tokens``: stream caches; ``batch_tokens``: one batch's buffer slots; ``batch_size``: rows."""

    cache_tokens: int
    batch_tokens: int
    batch_size: int
    free_bytes: int | None


def free_bytes(device) -> int | None:
    """Free memory of ``device`` (a ``torch.device``) in bytes, or ``None`` when unknown."""
    if device.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def plan(bytes_per_token: int, limit: int, device, *, free: int | None = None) -> Budget:
    """The default budget for a model with ``bytes_per_token`` of keys/values and input limit ``limit``.

    Never below one full-length stream in the cache and one full-length row in a batch, so a
    small device still scores (more slowly) instead of refusing.
    """
    if free is None:
        free = free_bytes(device)
    usable = SHARE * (free if free is not None else FALLBACK_FREE)
    cache_tokens = max(limit, int(0.6 * usable / bytes_per_token))
    # A batch buffer holds each row's past and new tokens once; attention copies a layer's
    # keys and values per step (x 2 with grouped-query heads expanded), so count 1.5 per slot.
    batch_tokens = max(limit, int(0.4 * usable / (1.5 * bytes_per_token)))
    rows = ROWS_GPU if device.type in ("cuda", "mps") else ROWS_CPU
    return Budget(cache_tokens, batch_tokens, rows, free)
