"""Grouped-query attention without copying the keys and values (CPU).

SmolLM2-135M has 9 query heads over 3 key/value heads. transformers' SDPA attention expands
the 3 into 9 with ``repeat_kv`` (a copy of every layer's whole cache) before
``torch.nn.functional.scaled_dot_product_attention`` whenever an attention mask is passed,
and the scorer always passes one (new tokens attend to a kept past). For a step fed onto a
4,096-token window that copy is a third of the call: measured here, capped to AVX2
(float32), feeding 50-token pieces onto a 4,016-token past took 0.52 s each with the copy and
0.33 s without, and reading the 4,279-token context 31.2 s against 14.2 s, with the same
entropies to the last printed digit (BENCHMARKS.md, "``iclr serve``: several conversations
and a busy CPU").

Only ``iclr serve`` turns it on (:func:`iclr_cli.serve.server.build`): there the scorer feeds
pieces of tens of tokens onto a long kept past, where the copy dominates. Scoring a whole file
runs long chunks, where the grouped kernel with a mask was slower here: ``iclr score`` of the
SWE-agent pydicom trajectory, capped to AVX2, alternating in one quiet run, 48.5 and 47.6 s with
it against 39.7 and 35.8 s without, the same records byte for byte.

torch (2.5 and later) computes grouped attention itself (``enable_gqa=True``), masks
included, on the CPU; transformers uses it only where it knows the kernel handles a mask, and
otherwise when ``TRANSFORMERS_SDPA_FORCE_GQA=1`` (``transformers.integrations.sdpa_attention.
use_gqa_in_sdpa``). :func:`grouped_attention_on_cpu` sets that variable for a scorer on the
CPU, unless the user set it. Not on CUDA: there a mask sends grouped attention to the slow
math kernel, which is what transformers avoids. The variable is read at every attention
call, so setting it after import takes effect.
"""

from __future__ import annotations

import os

FORCE_GQA = "TRANSFORMERS_SDPA_FORCE_GQA"


def grouped_attention_on_cpu(device_type: str) -> bool:
    """Let SDPA group the key/value heads itself when the scorer runs on ``device_type``
    ``cpu`` (module docstring). True when it is (now or by the user's own setting)."""
    if device_type != "cpu":
        return os.environ.get(FORCE_GQA) == "1"
    os.environ.setdefault(FORCE_GQA, "1")
    return os.environ[FORCE_GQA] == "1"
