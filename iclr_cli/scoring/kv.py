"""Key/value storage the scorer owns: per-stream stores, batch buffers, RoPE re-rotation.

transformers' ``DynamicCache`` grows by concatenation (every forward step copies the whole
cache) and cannot drop tokens from the front. The scorer keeps each stream's keys and values
in a :class:`KVStore` it manages itself, and hands the model a :func:`buffer_cache`: a
transformers ``Cache`` whose layers write new keys and values into a preallocated buffer and
return views of it, so a forward step copies only the new tokens.

Layout everywhere: one tensor ``[layers, 2, ...]`` with keys at index 0 and values at index 1;
a store is ``[layers, 2, kv_heads, capacity, head_dim]``, a batch buffer
``[layers, 2, batch, kv_heads, capacity, head_dim]``. Keys are stored as the model leaves
them, rotated (RoPE) at the position they had when they were computed.

:class:`Rotary` moves stored keys to other positions: RoPE rotates each pair of dimensions
``(i, i + d/2)`` by ``position * inv_freq[i]``, and rotations compose, so a key rotated at
``p`` becomes the key rotated at ``p + delta`` by one more rotation by ``delta * inv_freq``
(exact up to float32 rounding; the angles are computed in float64).

Needs transformers >= 4.56 (the ``Cache(layers=...)`` API) and a model whose every layer is
plain full attention with one key/value cache; :func:`probe` says whether a model qualifies.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class KVShape:
    """Per-token key/value geometry of a model: ``layers x 2 x kv_heads x head_dim`` values."""

    layers: int
    kv_heads: int
    head_dim: int
    dtype: torch.dtype
    device: torch.device

    @property
    def bytes_per_token(self) -> int:
        """Bytes one token's keys and values take (SmolLM2 in float32: 46,080)."""
        return self.layers * 2 * self.kv_heads * self.head_dim * torch.empty((), dtype=self.dtype).element_size()


class KVStore:
    """One stream's keys and values: ``data[:, :, :, :length]`` is valid, the rest is room.

    Grows by 1.5x when full (amortised copies), but not past ``most`` unless asked for more
    (a stream's largest need is known: its window); :meth:`drop` removes tokens from the
    middle in place (the sliding window's eviction). ``nbytes`` counts the allocated capacity.
    """

    def __init__(self, shape: KVShape, capacity: int = 0, most: int | None = None):
        self.shape = shape
        self.most = most
        self.data = self._alloc(max(capacity, 16))
        self.length = 0

    def _alloc(self, capacity: int) -> torch.Tensor:
        s = self.shape
        return torch.empty(s.layers, 2, s.kv_heads, capacity, s.head_dim, dtype=s.dtype, device=s.device)

    @property
    def capacity(self) -> int:
        return self.data.shape[3]

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    def reserve(self, total: int) -> None:
        """Make room for ``total`` tokens in all, keeping the valid ones."""
        if total <= self.capacity:
            return
        grown = self.capacity * 3 // 2
        if self.most is not None:
            grown = min(grown, self.most)
        bigger = self._alloc(max(total, grown))
        bigger[:, :, :, : self.length] = self.data[:, :, :, : self.length]
        self.data = bigger

    def append(self, kv: torch.Tensor) -> None:
        """Append ``kv`` (``[layers, 2, kv_heads, n, head_dim]``) after the valid tokens."""
        n = kv.shape[3]
        self.reserve(self.length + n)
        self.data[:, :, :, self.length : self.length + n] = kv
        self.length += n

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` tokens (``length <= self.length``)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate {self.length} tokens to {length}")
        self.length = length

    def drop(self, start: int, count: int) -> None:
        """Remove tokens ``start .. start + count`` and close the gap (in place, no extra memory).

        Copies forward in blocks of at most ``count`` tokens so that no block overlaps its
        destination.
        """
        if count <= 0:
            return
        end = self.length
        src = start + count
        while src < end:
            n = min(count, end - src)
            self.data[:, :, :, start : start + n] = self.data[:, :, :, src : src + n]
            start += n
            src += n
        self.length -= count

    def release(self) -> None:
        """Free the memory now (the store is empty afterwards): a replaced stream's old keys
        and values must not live on beside the new ones."""
        self.data = self._alloc(16)
        self.length = 0

    def view(self, start: int, end: int) -> torch.Tensor:
        """``[layers, 2, kv_heads, end - start, head_dim]`` view of tokens ``start .. end``."""
        return self.data[:, :, :, start:end]


class Rotary:
    """Re-rotates stored keys by a position shift (see the module docstring).

    Args:
        inv_freq: the model's RoPE inverse frequencies, ``[head_dim / 2]``.
    """

    def __init__(self, inv_freq: torch.Tensor):
        self.inv_freq = inv_freq.detach().to("cpu", torch.float64)

    def shift(self, keys: torch.Tensor, delta: int) -> None:
        """Rotate ``keys`` (``[..., n, head_dim]``) in place from position ``p`` to ``p + delta``."""
        if delta == 0 or keys.shape[-2] == 0:
            return
        angle = self.inv_freq * float(delta)
        cos = torch.cat([angle.cos(), angle.cos()]).to(keys.device, keys.dtype)
        sin = torch.cat([angle.sin(), angle.sin()]).to(keys.device, keys.dtype)
        half = keys.shape[-1] // 2
        # One leading slice at a time (a layer of a store): the rotated copy stays small.
        for part in keys.unbind(0) if keys.dim() > 3 else (keys,):
            rotated = torch.cat([-part[..., half:], part[..., :half]], dim=-1)
            part.mul_(cos).add_(rotated.mul_(sin))


def _layer_class():
    from transformers.cache_utils import DynamicLayer

    class BufferLayer(DynamicLayer):
        """A cache layer over a preallocated ``[batch, kv_heads, capacity, head_dim]`` buffer."""

        def __init__(self, keys: torch.Tensor, values: torch.Tensor, length: int):
            super().__init__()
            self._kbuf, self._vbuf, self._len = keys, values, length
            self.device, self.dtype = keys.device, keys.dtype
            self.is_initialized = True
            self.keys, self.values = keys[:, :, :length], values[:, :, :length]

        def lazy_initialization(self, key_states, value_states) -> None:  # already initialised
            return None

        def update(self, key_states, value_states, *args, **kwargs):
            n = key_states.shape[-2]
            end = self._len + n
            self._kbuf[:, :, self._len : end] = key_states
            self._vbuf[:, :, self._len : end] = value_states
            self._len = end
            self.keys, self.values = self._kbuf[:, :, :end], self._vbuf[:, :, :end]
            return self.keys, self.values

        def get_seq_length(self, *args, **kwargs) -> int:
            return self._len

        def get_mask_sizes(self, query, *args, **kwargs) -> tuple[int, int]:
            # transformers 5 passes the query length, 4.5x the query's cache positions.
            q = query if isinstance(query, int) else int(query.shape[0])
            return self._len + q, 0

    return BufferLayer


_BUFFER_LAYER = None


def buffer_cache(buffer: torch.Tensor, length: int):
    """A transformers ``Cache`` over ``buffer`` (``[layers, 2, batch, kv_heads, capacity, head_dim]``)
    whose first ``length`` positions are filled; each forward writes its new keys and values
    into the following positions."""
    global _BUFFER_LAYER
    from transformers.cache_utils import Cache

    if _BUFFER_LAYER is None:
        _BUFFER_LAYER = _layer_class()
    return Cache(layers=[_BUFFER_LAYER(buffer[i, 0], buffer[i, 1], length) for i in range(buffer.shape[0])])


@dataclass(frozen=True)
class Probe:
    """What :func:`probe` found: ``shape`` when the scorer can manage the model's keys and
    values itself (else ``None``, with ``reason``), ``rotary`` when stored keys can be moved
    to other positions (else ``None``, with ``rotary_reason``)."""

    shape: KVShape | None
    reason: str | None
    rotary: Rotary | None
    rotary_reason: str | None


def probe(base, cache_kw: str) -> Probe:
    """Check a transformers decoder (``model.get_decoder()``) against what this module needs.

    Runs one token through the model twice (positions 0 and 37) and compares the first
    layer's keys: they depend on the token and its position only, so rotating the first by
    37 positions must give the second when the model's position encoding is RoPE as
    :class:`Rotary` applies it.
    """
    try:
        from transformers import DynamicCache
        from transformers.cache_utils import Cache, DynamicLayer  # noqa: F401  (>= 4.56)
    except ImportError as exc:
        return Probe(None, f"transformers too old for scorer-managed caches ({exc})", None, "no cache API")
    config = base.config
    device = next(base.parameters()).device
    ids = torch.tensor([[min(17, config.vocab_size - 1)]], device=device)

    def first_keys(position: int):
        try:
            cache = DynamicCache(config=config)
        except TypeError:
            cache = DynamicCache()
        with torch.inference_mode():
            base(input_ids=ids, position_ids=torch.tensor([[position]], device=device), use_cache=True, **{cache_kw: cache})
        return cache

    cache = first_keys(0)
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) is not DynamicLayer or layer.keys is None for layer in layers):
        return Probe(None, "the model has layers that are not plain full attention", None, "no plain layers")
    k = layers[0].keys
    shape = KVShape(len(layers), k.shape[1], k.shape[3], k.dtype, k.device)
    if any(layer.keys.shape != k.shape for layer in layers):
        return Probe(None, "the layers' key shapes differ", None, "no plain layers")
    rope = getattr(base, "rotary_emb", None)
    inv_freq = getattr(rope, "inv_freq", None)
    if inv_freq is None or getattr(rope, "rope_type", "default") == "dynamic" or 2 * inv_freq.numel() != shape.head_dim:
        return Probe(shape, None, None, "the model's position encoding is not a full-width static RoPE")
    rotary = Rotary(inv_freq)
    moved = k.clone()
    rotary.shift(moved, 37)
    target = first_keys(37).layers[0].keys
    scale = target.abs().max().item() or 1.0
    if (moved - target).abs().max().item() > 1e-4 * scale:
        return Probe(shape, None, None, "the model's keys do not rotate as RoPE (rotate-half) does")
    return Probe(shape, None, rotary, None)
