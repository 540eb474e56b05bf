"""The precision the proxy runs in: the fastest one the hardware runs natively (METHOD.md, "Precision").

``--dtype auto`` (the default) is resolved once per process by :func:`native_precision`:

- CUDA: ``bfloat16`` when the GPU runs it natively (``torch.cuda.is_bf16_supported()``,
  compute capability 8.0 and up), else ``float32``.
- CPU: ``bfloat16`` when the CPU has AMX or AVX512-BF16 (its flags, as the kernel lists them),
  oneDNN is not capped below them (``ONEDNN_MAX_CPU_ISA``), and a matmul of the proxy's MLP
  shape measured here runs at least :data:`MIN_SPEEDUP` times as fast in bfloat16 as in
  float32. Flags alone are not enough: with oneDNN capped at AVX2, bf16 emulation ran 11-27x
  *slower* than float32 on an AMX machine, and without AMX an AVX512-BF16 matmul measured
  0.6x float32 on two threads (issue notes in BENCHMARKS.md, "Precision").
- MPS and anything else: ``float32``.

Only the decoder runs in bfloat16. The LM head at the scored positions, the log-softmax and the
entropy stay float32 (:class:`Float32Head`): the head's weights are copied in float32 before the
decoder is cast, so a tied embedding does not round them. ``--exact`` is float32 throughout, and
``--dtype float32|bfloat16|float16`` forces one. Every output names what ran
(:func:`describe`).
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path

AUTO = "auto"
# bf16 must beat float32 by this much on the probe to be "native" (AMX measured 7.6x, capped
# oneDNN 0.04-0.6x: the threshold sits far from both).
MIN_SPEEDUP = 1.5
# oneDNN ISA caps (ONEDNN_MAX_CPU_ISA) under which bf16 matmuls are emulated, not native.
_CAPS_WITHOUT_BF16 = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"}


@dataclass(frozen=True)
class Native:
    """What :func:`native_precision` found: ``dtype`` (``bfloat16`` or ``float32``) and ``why``
    in words (for ``--help``-level messages and the benchmarks' tables)."""

    dtype: str
    why: str


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str] | None:
    """The CPU's feature flags as Linux lists them, or ``None`` where they cannot be read."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return None


def _matmul_seconds(torch, dtype, reps: int = 7) -> float:
    """Best-of-``reps`` seconds of one ``[512, 576] @ [576, 1536]`` matmul (SmolLM2's MLP
    shape) in ``dtype``; the minimum, so that other load on the machine inflates neither side."""
    a = torch.randn(512, 576).to(dtype)
    b = torch.randn(576, 1536).to(dtype)
    with torch.inference_mode():
        for _ in range(2):
            a @ b
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t)
    return best


def cpu_bf16_speedup() -> float:
    """float32 time over bfloat16 time of the probe matmul on this CPU (above 1: bf16 faster)."""
    import torch

    return _matmul_seconds(torch, torch.float32) / _matmul_seconds(torch, torch.bfloat16)


@functools.lru_cache(maxsize=8)
def native_precision(device: str = "cpu") -> Native:
    """The precision the decoder runs in under ``--dtype auto`` on ``device`` (module docstring).

    Args:
        device: a torch device string (``cpu``, ``cuda``, ``cuda:1``, ``mps``).

    Returns:
        :class:`Native`; measured once per process and device.
    """
    import torch

    kind = torch.device(device).type
    if kind == "cuda":
        if torch.cuda.is_bf16_supported():
            return Native("bfloat16", f"CUDA GPU {torch.cuda.get_device_name(torch.device(device))} runs bf16 natively")
        return Native("float32", "CUDA GPU without native bf16")
    if kind != "cpu":
        return Native("float32", f"{kind}: float32 (bf16 not measured there)")
    flags = cpu_flags()
    if flags is not None and not flags & {"amx_bf16", "avx512_bf16"}:
        return Native("float32", "CPU without AMX or AVX512-BF16")
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if cap in _CAPS_WITHOUT_BF16:
        return Native("float32", f"oneDNN capped at {cap} (ONEDNN_MAX_CPU_ISA): bf16 would be emulated")
    have = "AMX" if flags and "amx_bf16" in flags else "AVX512-BF16" if flags else "unknown flags"
    speedup = cpu_bf16_speedup()
    if speedup >= MIN_SPEEDUP:
        return Native("bfloat16", f"CPU with {have}: bf16 matmul {speedup:.1f}x float32")
    return Native("float32", f"CPU with {have}, but bf16 matmul only {speedup:.2f}x float32 here")


def resolve(dtype: str, device: str | None, *, exact: bool = False) -> str:
    """The concrete precision for ``--dtype`` (``auto`` or a dtype name): ``float32`` under
    ``--exact`` unless a dtype was forced, else :func:`native_precision` of ``device``
    (``None``: the device :func:`iclr_cli.scoring.device.pick_device` picks)."""
    if dtype != AUTO:
        return dtype
    if exact:
        return "float32"
    from iclr_cli.scoring.device import pick_device

    return native_precision(pick_device(device)).dtype


def describe(dtype: str) -> str:
    """The precision as outputs name it: ``float32``, or ``bfloat16 decoder, float32 head``."""
    return dtype if dtype == "float32" else f"{dtype} decoder, float32 head"


class Float32Head:
    """The LM head in float32 over a lower-precision decoder: ``[n, d]`` hidden states (any
    float dtype) -> ``[n, V]`` float32 logits, from float32 weights copied before the decoder
    was cast (METHOD.md, "Precision": logits at the scored positions come from a float32 head).

    Built with :meth:`from_model` before the model is cast; ``weight`` ``[V, d]`` and ``bias``
    (``[V]`` or ``None``) live on the model's device.
    """

    def __init__(self, weight, bias=None):
        self.weight, self.bias = weight, bias

    @classmethod
    def from_model(cls, model) -> Float32Head:
        head = model.get_output_embeddings()
        bias = getattr(head, "bias", None)
        return cls(head.weight.detach().float().clone(), bias.detach().float().clone() if bias is not None else None)

    def __call__(self, hidden):
        import torch.nn.functional as F

        return F.linear(hidden.float(), self.weight, self.bias)


_HEAD_ATTR = "_iclr_float32_head"


def cast_decoder(model, dtype: str) -> None:
    """Cast ``model``'s decoder to ``dtype`` in place, keeping a float32 copy of its LM head
    for :func:`scoring_head` (nothing to do for ``float32``).

    ``model`` must be loaded in float32 and already on its device. The output embedding is
    copied first: with tied embeddings (SmolLM2) the decoder's cast rounds the shared weights.
    """
    if dtype == "float32":
        return
    import torch

    head = Float32Head.from_model(model)
    base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    base.to(getattr(torch, dtype))
    setattr(model, _HEAD_ATTR, head)


def scoring_head(model):
    """The head entropies are taken with: the float32 copy :func:`cast_decoder` kept, else the
    model's own output embedding (a float32 model, or one loaded in a forced lower dtype)."""
    return getattr(model, _HEAD_ATTR, None) or model.get_output_embeddings()
