"""The sensor: a frozen causal LM read at a boundary position, and patched there (imports torch).

Hooks, not an interpretability library: plain ``torch`` forward hooks on the decoder layers
of a transformers model read the residual stream (each layer's output) and replace it. This
works on every model the scorer loads, GGUF-converted ones included, offline, and it runs on
the scorer's own key/value stores (:mod:`iclr_cli.scoring.kv`), which is what makes the cached
patched run below possible. docs/analyze.md, "Why torch hooks".

**Reading** (:meth:`Sensor.read`): one token sequence through the model. Per layer ``l`` (the
output of decoder layer ``l``, 0-based, before the final norm) the reading keeps the residual
at the last position and the mean over each requested pool of positions; and the next-token
log-probabilities at the last position (the final norm, the LM head and the model's logit
transform, in float64). A stream keeps its keys and values, so the next reading of the same
stream runs only the tokens after the common prefix (and from the first pooled position, and
always the last one), as the scorer's fresh-window cache does. Results never depend on it.

**Patching** (:meth:`Sensor.patch`): the deleted-history run with the residual at the last
position after layer ``l`` replaced by the full-history run's. The replacement changes only
that position, and under causal attention no earlier position attends to a later one: every
earlier position's residuals, keys and values in every layer are the deleted run's, and the
layers up to ``l`` at the last position are irrelevant once their output is replaced. So the
patched run is the boundary token alone, on top of the deleted run's stored keys and values
(positions ``0 .. n-2``), through layers ``l .. L-1`` with layer ``l``'s output overwritten
(the one layer computed and thrown away is cheaper than special-casing the final norm). It
writes its own keys and values into slot ``n - 1`` of the stored cache, which is restored
afterwards. A boundary therefore costs its two readings (with prefix reuse: the tokens new
since the previous boundary, twice) plus ``L`` one-token runs, where the plain method is
``L + 2`` forwards of the whole input (:meth:`Sensor.patch_by_hook`, kept as the reference the
tests compare with and the path for models whose caches the scorer cannot manage).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch

from iclr_cli.errors import UsageError
from iclr_cli.scoring.precision import scoring_head
from iclr_cli.scoring.entropy import logit_transform
from iclr_cli.scoring.kv import KVStore, buffer_cache, probe
from iclr_cli.scoring.profile import FAST
from iclr_cli.scoring import threads
from iclr_cli.scoring.streams import common_prefix
from iclr_cli.scoring.threads import fix_mmap_threshold

DEFAULT_FORWARD_CHUNK = 1024
_ENCODE_MEMO = 4096
MIN_SHARED = 64  # tokens worth copying from another stream's prefix (below: run them)


@dataclass
class Reading:
    """What one reading saw at the last position of its input.

    Attributes:
        logprobs: ``[vocab]`` float64 natural-log probabilities of the next token.
        residuals: ``[layers, hidden]`` float32, each decoder layer's output at the last position.
        pooled: pool name -> ``[layers, hidden]`` float32 mean over the pool's positions.
        tokens: input length; ``forwarded``: tokens run through the model for this reading;
        ``reused``: tokens taken from the stream's cache.
    """

    logprobs: torch.Tensor
    residuals: torch.Tensor
    pooled: dict[str, torch.Tensor]
    tokens: int
    forwarded: int
    reused: int


@dataclass
class _Stream:
    ids: list[int]
    store: KVStore | None  # None without managed caches (the input alone is kept)


class _Capture:
    """Forward-hook state: the absolute position of the chunk being run and the sums kept."""

    def __init__(self, n_layers: int, hidden: int, last: int, pools: Mapping[str, Sequence[int]], device):
        self.start = 0
        self.last = last
        self.residuals = torch.zeros(n_layers, hidden, dtype=torch.float32, device=device)
        self.pools = {name: torch.tensor(sorted(set(p)), dtype=torch.long, device=device) for name, p in pools.items()}
        self.sums = {name: torch.zeros(n_layers, hidden, dtype=torch.float64, device=device) for name in pools}

    def take(self, layer: int, hidden: torch.Tensor) -> None:
        c = hidden.shape[1]
        if self.start <= self.last < self.start + c:
            self.residuals[layer] = hidden[0, self.last - self.start].float()
        for name, pos in self.pools.items():
            local = pos[(pos >= self.start) & (pos < self.start + c)] - self.start
            if local.numel():
                self.sums[name][layer] += hidden[0, local].double().sum(0)


def _output_tensor(output):
    return output[0] if isinstance(output, tuple) else output


def _with_output(output, hidden):
    return (hidden, *output[1:]) if isinstance(output, tuple) else hidden


class Sensor:
    """A frozen transformers causal LM as the analysis sensor (module docstring).

    Args:
        model: a loaded causal LM in eval mode (:func:`iclr_cli.scoring.loading.load_model`).
        tokenizer: its :class:`~iclr_cli.scoring.tokenizer.ProxyTokenizer`.
        name: model name for records.
        max_tokens: input limit before ``min`` with the model's maximum positions.
        overflow: ``window`` or ``skip`` (the scorer's rule, :mod:`iclr_cli.analysis.boundaries`).
        forward_chunk: tokens per forward step (activation memory).
        reuse: keep each stream's keys and values between readings (results are the same).
        elide: characters read at each end of a long tool output or part of P, as the
            scorer's profile (:mod:`iclr_cli.scoring.profile`; ``None``: all of it).

    Raises:
        UsageError: for a model whose decoder has no ``layers`` list of decoder layers.
    """

    def __init__(self, model, tokenizer, *, name: str = "proxy", max_tokens: int = FAST.max_tokens, overflow: str = "window",
                 forward_chunk: int = DEFAULT_FORWARD_CHUNK, reuse: bool = True, elide: int | None = FAST.elide):
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.elide = elide
        self.base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
        layers = getattr(self.base, "layers", None)
        if not isinstance(layers, torch.nn.ModuleList) or not len(layers):
            raise UsageError(f"--model {name}: the decoder has no 'layers' list of decoder layers to read and patch")
        self.layers = layers
        self.n_layers = len(layers)
        self.hidden = int(model.config.hidden_size)
        limit = getattr(model.config, "max_position_embeddings", None)
        self.max_tokens = min(max_tokens, limit) if limit else max_tokens
        self.overflow = overflow
        self.forward_chunk = forward_chunk
        self.head = scoring_head(model)
        self.transform = logit_transform(model.config)
        self.device = next(model.parameters()).device
        if self.device.type == "cpu":
            threads.limit_torch()
            fix_mmap_threshold()
        params = inspect.signature(self.base.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self.shape = probe(self.base, self._cache_kw).shape
        self.cached = reuse and self.shape is not None
        self._streams: dict[str, _Stream] = {}
        self._memo: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}
        self.forwarded = 0  # tokens run through the whole model
        self.shared_tokens = 0  # tokens a new stream took from another's prefix
        self.patch_runs = 0  # cached patched runs (one token each)

    @property
    def method(self) -> str:
        """``cached`` (patched runs on the stored keys and values) or ``hook`` (plain forwards)."""
        return "cached" if self.shape is not None else "hook"

    def encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Memoised tokenization (P and history segments repeat from boundary to boundary)."""
        hit = self._memo.pop(text, None)
        if hit is None:
            hit = self.tokenizer.encode(text)
            if len(self._memo) >= _ENCODE_MEMO:
                del self._memo[next(iter(self._memo))]
        self._memo[text] = hit
        return hit

    def forget(self, stream: str | None = None) -> None:
        """Drop one stream's keys and values (all streams with ``None``)."""
        if stream is None:
            self._streams.clear()
        else:
            self._streams.pop(stream, None)

    # -- reading ------------------------------------------------------------------------------

    def read(self, stream: str, ids: Sequence[int], pools: Mapping[str, Sequence[int]] | None = None) -> Reading:
        """Run ``ids`` (at least one token) and read the last position (module docstring).

        ``pools`` maps a name to positions of ``ids`` whose per-layer mean is wanted (an empty
        pool reads as zeros). Keys and values are kept under ``stream`` for the next reading
        and for :meth:`patch`.
        """
        ids = list(ids)
        n = len(ids)
        if n == 0:
            raise ValueError("a reading needs at least one token")
        pools = {k: v for k, v in (pools or {}).items()}
        capture = _Capture(self.n_layers, self.hidden, n - 1, pools, self.device)
        with torch.inference_mode(), self._hooks(lambda layer, h: capture.take(layer, h)):
            if self.cached:
                last, reused = self._run_cached(stream, ids, pools, capture)
            else:
                last, reused = self._run_plain(ids, capture), 0
                self._streams[stream] = _Stream(ids, None)  # the input, for patch_by_hook
            logprobs = self._logprobs(last)
        pooled = {}
        for name, pos in pools.items():
            count = len(set(pos))
            pooled[name] = (capture.sums[name] / max(count, 1)).float()
        return Reading(logprobs, capture.residuals, pooled, n, n - reused, reused)

    def _run_cached(self, stream: str, ids: list[int], pools: Mapping[str, Sequence[int]], capture: _Capture):
        n = len(ids)
        first = min([n - 1, *(min(p) for p in pools.values() if p)])
        state = self._streams.get(stream)
        resume = min(common_prefix(state.ids, ids), first) if state is not None else 0
        if state is None:
            state, resume = self._seeded(ids, first)
        elif resume == 0:
            state = _Stream([], KVStore(self.shape, n))
        state.store.truncate(resume)
        state.store.reserve(n)
        cache = buffer_cache(state.store.data.unsqueeze(2), resume)
        last = None
        for a in range(resume, n, self.forward_chunk):
            c = min(self.forward_chunk, n - a)
            capture.start = a
            hidden = self.base(input_ids=torch.tensor([ids[a : a + c]], device=self.device), use_cache=True,
                               **{self._cache_kw: cache}).last_hidden_state
            last = hidden[0, -1]
        state.store.length = n
        state.ids = ids
        self._streams[stream] = state
        self.forwarded += n - resume
        return last, resume

    def _seeded(self, ids: list[int], first: int) -> tuple[_Stream, int]:
        """A new stream's state, starting from the keys and values of the longest prefix it
        shares with a kept stream (P and the early history: the full and the deleted stream
        of a trajectory share P, and so do all sessions of one agent), copied, never shared:
        the donor's store goes on changing. At most ``first`` tokens are taken (the positions
        read must be run); below ``MIN_SHARED`` tokens nothing is. Returns (state, tokens reused)."""
        store = KVStore(self.shape, len(ids))
        best, shared = None, 0
        for other in self._streams.values():
            if other.store is not None:
                common = min(common_prefix(other.ids, ids), other.store.length, first)
                if common > shared:
                    best, shared = other, common
        if best is None or shared < MIN_SHARED:
            return _Stream([], store), 0
        store.data[:, :, :, :shared] = best.store.data[:, :, :, :shared]
        store.length = shared
        self.shared_tokens += shared
        return _Stream(list(ids[:shared]), store), shared

    def _run_plain(self, ids: list[int], capture: _Capture):
        capture.start = 0
        hidden = self.base(input_ids=torch.tensor([ids], device=self.device), use_cache=False).last_hidden_state
        self.forwarded += len(ids)
        return hidden[0, -1]

    def _logprobs(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.head(hidden.unsqueeze(0))
        if self.transform is not None:
            logits = self.transform(logits)
        return torch.log_softmax(logits[0].double(), dim=-1)

    @contextlib.contextmanager
    def _hooks(self, take):
        handles = [layer.register_forward_hook(lambda _m, _a, out, i=i: take(i, _output_tensor(out)))
                   for i, layer in enumerate(self.layers)]
        try:
            yield
        finally:
            for h in handles:
                h.remove()

    # -- patching -----------------------------------------------------------------------------

    def patch(self, stream: str, residuals: torch.Tensor, layers: Iterable[int]) -> dict[int, torch.Tensor]:
        """Log-probabilities of the patched runs at ``layers`` (module docstring).

        ``stream`` must hold the deleted-history reading of the boundary (the last
        :meth:`read` of that stream); ``residuals`` are the full-history reading's
        (``[layers, hidden]``). Returns ``{layer: [vocab] float64 log-probabilities}``. For
        models without managed caches (:attr:`method` ``hook``) each layer is a plain forward.
        """
        state = self._streams.get(stream)
        if state is None:
            raise ValueError(f"no reading of stream {stream!r} to patch")
        if not self.cached:
            return {l: self.patch_by_hook(state.ids, l, residuals[l]) for l in layers}
        n = len(state.ids)
        store = state.store
        saved = store.data[:, :, :, n - 1].clone()
        token = torch.tensor([[state.ids[-1]]], device=self.device)
        position = torch.tensor([[n - 1]], device=self.device)
        out: dict[int, torch.Tensor] = {}
        try:
            with torch.inference_mode():
                for layer in layers:
                    cache = buffer_cache(store.data.unsqueeze(2), n - 1)
                    with self._from_layer(layer), self._replaced(layer, residuals[layer], last_only=False):
                        hidden = self.base(input_ids=token, position_ids=position, use_cache=True,
                                           **{self._cache_kw: cache}).last_hidden_state
                    out[layer] = self._logprobs(hidden[0, -1])
                    self.patch_runs += 1
        finally:
            with torch.inference_mode():
                store.data[:, :, :, n - 1] = saved
        return out

    def patch_by_hook(self, ids: Sequence[int], layer: int, residual: torch.Tensor) -> torch.Tensor:
        """The plain method: one forward of all of ``ids`` with layer ``layer``'s output at the
        last position replaced by ``residual``; ``[vocab]`` float64 log-probabilities."""
        with torch.inference_mode(), self._replaced(layer, residual, last_only=True):
            hidden = self.base(input_ids=torch.tensor([list(ids)], device=self.device), use_cache=False).last_hidden_state
            self.forwarded += len(ids)
            return self._logprobs(hidden[0, -1])

    @contextlib.contextmanager
    def _replaced(self, layer: int, residual: torch.Tensor, *, last_only: bool):
        def hook(_module, _args, output):
            hidden = _output_tensor(output)
            if last_only:
                hidden = hidden.clone()
                hidden[:, -1] = residual.to(hidden.dtype)
            else:
                hidden = residual.to(hidden.dtype).view(1, 1, -1).expand_as(hidden).contiguous()
            return _with_output(output, hidden)

        handle = self.layers[layer].register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()

    @contextlib.contextmanager
    def _from_layer(self, layer: int):
        """Run only decoder layers ``layer ..`` (each indexes the cache by its own layer index)."""
        self.base.layers = torch.nn.ModuleList(list(self.layers)[layer:])
        try:
            yield
        finally:
            self.base.layers = self.layers
