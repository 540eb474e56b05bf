"""The real scorer: a frozen Hugging Face causal LM, prefix (KV) cache reuse, batching.

METHOD.md, "Score". For every request the scorer lays out the tokens the proxy sees
(:func:`iclr_cli.scoring.window.lay_out`), runs the model, and takes the full-vocabulary
entropy in bits of the distribution at position ``p - 1`` for every block token ``p``; a
block's score is the mean over its tokens.

Work saved, never results changed (cached, uncached and batched agree within 1e-3 bits):

- **Prefix reuse.** Step t+1 of a trajectory repeats P and the history of step t. Per
  ``stream`` the scorer keeps the token ids and the KV cache of its last request (at most
  ``max_streams`` streams and ``cache_tokens`` tokens in all: ~46 KB per token in float32 for
  SmolLM2, so the default 32,768 tokens is ~1.5 GB). The next request of the stream keeps
  the cached prefix up to
  ``min(common token prefix, first needed position)``: the hidden state at ``p - 1`` is what
  predicts token ``p`` and a KV cache holds no hidden states, so that position is recomputed.
  Only the remaining tokens are run. When all slots hold streams seen in the current call, a
  new stream is scored without being cached, so a batch of more trajectories than slots does
  not evict every entry before it is reused (cyclic LRU thrashing).
- **Chunks.** The model runs ``forward_chunk`` tokens at a time (activation memory), and only
  hidden states at needed positions go through the LM head, ``chunk_size`` at a time
  (:mod:`iclr_cli.scoring.entropy`).
- **Batching.** Requests that cannot use the cache (``prefix_cache=False``, or the
  ``step-only`` variant whose input is history-free) are batched longest first with right
  padding and their results put back in request order. Under a causal mask a real token never
  attends to a later position, so right padding needs no attention mask and cannot change a
  real token's hidden state.

Position 0 has no predicting distribution. For a history-free request (``step-only``: no P,
no history) the scorer prepends the tokenizer's start token (``bos_id``, ``<|im_start|>`` for
SmolLM2) so that the step's first token is scored too; the step is then limited to
``max_tokens - 1`` tokens. When the model has no start token, the first token is not scored.
"""

from __future__ import annotations

import ctypes
import inspect
import os
import platform
import sys
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from iclr_cli.errors import UsageError
from iclr_cli.scoring.base import (
    DEFAULT_MAX_TOKENS,
    BlockScore,
    Overflow,
    ScoreRequest,
    ScoreResult,
)
from iclr_cli.scoring.entropy import DEFAULT_CHUNK, head_entropies, logit_transform
from iclr_cli.scoring.window import Layout, lay_out

DEFAULT_FORWARD_CHUNK = 1024
DEFAULT_BATCH_TOKENS = 16_384
DEFAULT_CACHE_TOKENS = 32_768
_ENCODE_MEMO = 4096


@dataclass
class ScorerStats:
    """Counters for benchmarks and tests (tokens are proxy tokens).

    ``forward_tokens``: tokens run through the model, padding included; ``reused_tokens``:
    tokens taken from a stream's KV cache instead; ``scored_positions``: hidden states that
    went through the LM head; ``batches``: forward passes over a group of requests.
    """

    requests: int = 0
    forward_tokens: int = 0
    reused_tokens: int = 0
    scored_positions: int = 0
    batches: int = 0


@dataclass
class _Stream:
    ids: tuple[int, ...]
    cache: object
    last_call: int


class TransformersScorer:
    """:class:`~iclr_cli.scoring.base.Scorer` over a transformers causal LM (see module docstring).

    Args:
        model: a loaded ``PreTrainedModel`` for causal LM, in eval mode.
        tokenizer: its :class:`~iclr_cli.scoring.tokenizer.ProxyTokenizer` (needs ``encode``,
            ``token_spans`` and ``bos_id``).
        name: model name for reports.
        max_tokens: requested input limit; the enforced one is
            ``min(max_tokens, config.max_position_embeddings)``.
        overflow: ``window`` or ``skip`` (METHOD.md, "Input limit").
        prefix_cache: reuse KV caches across the requests of a stream.
        batch_size: most requests per batched forward.
        chunk_size: positions per LM-head call.
        forward_chunk: tokens per forward call (divided among the rows of a batch).
        max_streams: most streams whose KV cache is kept.
        cache_tokens: most tokens kept in KV caches over all streams (bounds memory).
        batch_tokens: most padded tokens in one batch (``rows * longest``); a single request
            longer than this still runs, alone.

    Raises:
        UsageError: for an unknown ``overflow`` or a size parameter below 1.
    """

    def __init__(
        self,
        model,
        tokenizer,
        *,
        name: str = "proxy",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        overflow: Overflow = "window",
        prefix_cache: bool = True,
        batch_size: int = 8,
        chunk_size: int = DEFAULT_CHUNK,
        forward_chunk: int = DEFAULT_FORWARD_CHUNK,
        max_streams: int = 16,
        cache_tokens: int = DEFAULT_CACHE_TOKENS,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
    ):
        if overflow not in ("window", "skip"):
            raise UsageError(f"--overflow {overflow!r}: choose window or skip")
        for label, value in (("max_tokens", max_tokens), ("batch_size", batch_size), ("chunk_size", chunk_size),
                             ("forward_chunk", forward_chunk), ("max_streams", max_streams),
                             ("cache_tokens", cache_tokens), ("batch_tokens", batch_tokens)):
            if value < 1:
                raise UsageError(f"{label} must be at least 1, got {value}")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        limit = getattr(model.config, "max_position_embeddings", None)
        self.max_tokens = min(max_tokens, limit) if limit else max_tokens
        self.overflow = overflow
        self.prefix_cache = prefix_cache
        self.batch_size = batch_size
        self.chunk_size = chunk_size
        self.forward_chunk = forward_chunk
        self.max_streams = max_streams
        self.cache_tokens = cache_tokens
        self.batch_tokens = batch_tokens
        self.stats = ScorerStats()
        self._base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
        self._head = model.get_output_embeddings()
        self._transform = logit_transform(model.config)
        self._device = next(model.parameters()).device
        # transformers 5.2x renamed the forward's ``past_key_values`` to ``cache``.
        params = inspect.signature(self._base.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._pad_id = tokenizer.bos_id if tokenizer.bos_id is not None else 0
        self._streams: OrderedDict[str, _Stream] = OrderedDict()
        self._memo: OrderedDict[str, tuple[list[int], list[tuple[int, int]]]] = OrderedDict()
        self._call = 0
        if self._device.type == "cpu":
            _limit_threads()
            _fix_mmap_threshold()

    # -- layout -----------------------------------------------------------------------------

    def _encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Memoised tokenization: P and history segments repeat step after step."""
        hit = self._memo.get(text)
        if hit is not None:
            self._memo.move_to_end(text)
            return hit
        enc = self.tokenizer.encode(text)
        self._memo[text] = enc
        if len(self._memo) > _ENCODE_MEMO:
            self._memo.popitem(last=False)
        return enc

    def _lay_out(self, req: ScoreRequest) -> Layout:
        bos = self.tokenizer.bos_id
        if req.prompt or req.history or bos is None:
            return lay_out(req, self._encode, self.max_tokens, self.overflow)
        layout = lay_out(req, self._encode, self.max_tokens - 1, self.overflow)
        if layout.plan.skipped:
            return layout
        # Shift every position by the start token and give the step's first token (position 0
        # before the shift, never listed by lay_out) to its block, by lay_out's own rule: a
        # token belongs to the block its first character falls in.
        positions = [[p + 1 for p in ps] for ps in layout.block_positions]
        offsets = self._encode(req.step)[1]
        if offsets:
            start, spans, block = offsets[0][0], req.spans, 0
            while block < len(spans) and start >= spans[block][1]:
                block += 1
            if block < len(spans) and start >= spans[block][0]:
                positions[block].insert(0, 1)
        return Layout((bos, *layout.ids), tuple(tuple(p) for p in positions), layout.plan)

    # -- scoring ----------------------------------------------------------------------------

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Score every request; results in request order (see :class:`~iclr_cli.scoring.base.Scorer`).

        Requests of one stream must come in causal order; the cache is only an optimisation
        and results never depend on it.
        """
        self._call += 1
        self.stats.requests += len(requests)
        layouts = [self._lay_out(r) for r in requests]
        results: list[ScoreResult | None] = [None] * len(requests)
        streamed: list[tuple[int, list[int]]] = []
        batched: list[tuple[int, list[int]]] = []
        for i, (req, lay) in enumerate(zip(requests, layouts)):
            if lay.plan.skipped:
                results[i] = ScoreResult((), skipped=lay.plan.skipped)
                continue
            rows = sorted({p - 1 for ps in lay.block_positions for p in ps})
            if not rows:
                results[i] = self._result(req, lay, {})
            elif self.prefix_cache and (req.prompt or req.history):
                streamed.append((i, rows))
            else:
                batched.append((i, rows))
        with torch.inference_mode():
            for i, rows in streamed:
                ent = self._score_stream(requests[i].stream, layouts[i].ids, rows)
                results[i] = self._result(requests[i], layouts[i], ent)
            for group in self._groups([(i, rows, len(layouts[i].ids)) for i, rows in batched]):
                ents = self._score_batch([layouts[i].ids for i, _ in group], [rows for _, rows in group])
                for (i, _), ent in zip(group, ents):
                    results[i] = self._result(requests[i], layouts[i], ent)
        return results  # type: ignore[return-value]

    @staticmethod
    def _result(req: ScoreRequest, lay: Layout, ent: dict[int, float]) -> ScoreResult:
        blocks = []
        for ps in lay.block_positions:
            hs = [ent[p - 1] for p in ps]
            blocks.append(BlockScore(len(hs), sum(hs) / len(hs) if hs else None))
        return ScoreResult(
            tuple(blocks),
            windowed=lay.plan.windowed,
            history_kept=len(req.history) - lay.plan.first_history,
            context_tokens=len(lay.ids),
        )

    def _groups(self, items: list[tuple[int, list[int], int]]) -> list[list[tuple[int, list[int]]]]:
        """Longest first, at most ``batch_size`` rows and ``batch_tokens`` padded tokens each."""
        groups: list[list[tuple[int, list[int]]]] = []
        longest = 0
        for i, rows, n in sorted(items, key=lambda it: -it[2]):
            if groups and len(groups[-1]) < self.batch_size and (len(groups[-1]) + 1) * longest <= self.batch_tokens:
                groups[-1].append((i, rows))
            else:
                groups.append([(i, rows)])
                longest = n
        return groups

    def _new_cache(self):
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self.model.config)
        except TypeError:  # transformers < 4.56 takes no config
            return DynamicCache()

    def _admit(self, n_tokens: int) -> bool:
        """Make room for a stream cache of ``n_tokens``; False when it should not be kept.

        Evicts least recently used streams, but never one already used in this call: with
        more trajectories than room, the first ones keep their caches and the rest are
        recomputed, instead of each evicting the next (cyclic LRU thrashing, no reuse at all).
        """
        if n_tokens > self.cache_tokens:
            return False
        held = sum(len(e.ids) for e in self._streams.values())
        while self._streams and (len(self._streams) >= self.max_streams or held + n_tokens > self.cache_tokens):
            oldest = next(iter(self._streams))
            if self._streams[oldest].last_call == self._call:
                return False
            held -= len(self._streams.pop(oldest).ids)
        return True

    def _score_stream(self, stream: str, ids: tuple[int, ...], rows: list[int]) -> dict[int, float]:
        entry = self._streams.pop(stream, None)
        start, cache = 0, None
        if entry is not None:
            start = min(_common_prefix(entry.ids, ids), rows[0])
            if start > 0 and _crop(entry.cache, start):
                cache = entry.cache
            else:
                start = 0
            entry = None  # frees an unusable cache before the forward
        if cache is None:
            cache = self._new_cache()
        self.stats.reused_tokens += start
        tensor = torch.tensor([ids[start:]], dtype=torch.long, device=self._device)
        ent = self._forward(tensor, start, cache, [rows])[0]
        if self._admit(len(ids)):
            self._streams[stream] = _Stream(tuple(ids), cache, self._call)
        return ent

    def _score_batch(self, seqs: list[tuple[int, ...]], rows: list[list[int]]) -> list[dict[int, float]]:
        longest = max(len(s) for s in seqs)
        padded = [list(s) + [self._pad_id] * (longest - len(s)) for s in seqs]
        tensor = torch.tensor(padded, dtype=torch.long, device=self._device)
        return self._forward(tensor, 0, self._new_cache(), rows)

    def _forward(self, ids: torch.Tensor, offset: int, cache, rows: list[list[int]]) -> list[dict[int, float]]:
        """Run ``ids`` ([B, L], absolute positions ``offset..offset+L``) over ``cache`` in chunks.

        Returns, per row of the batch, ``{position: entropy in bits}`` for its ``rows``.
        """
        batch, length = ids.shape
        step = max(64, self.forward_chunk // batch)
        out: list[dict[int, float]] = [{} for _ in range(batch)]
        self.stats.batches += 1
        for a in range(0, length, step):
            b = min(a + step, length)
            hidden = self._base(input_ids=ids[:, a:b], use_cache=True, **{self._cache_kw: cache}).last_hidden_state
            self.stats.forward_tokens += batch * (b - a)
            picks, where = [], []
            for bi, want in enumerate(rows):
                local = [r - offset - a for r in want if a <= r - offset < b]
                if local:
                    picks.append(hidden[bi, local])
                    where.append((bi, [r + a + offset for r in local]))
            if not picks:
                continue
            ent = head_entropies(torch.cat(picks), self._head, chunk_size=self.chunk_size, transform=self._transform)
            self.stats.scored_positions += ent.shape[0]
            values = ent.tolist()
            k = 0
            for bi, positions in where:
                for pos in positions:
                    out[bi][pos] = values[k]
                    k += 1
        return out

    def reset(self) -> None:
        """Forget every cached stream (frees their KV memory)."""
        self._streams.clear()


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    # Compare in slices first: prefixes are long and mostly equal.
    while i + 256 <= n and a[i : i + 256] == b[i : i + 256]:
        i += 256
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _crop(cache, keep: int) -> bool:
    """Cut ``cache`` to its first ``keep`` positions; False when this cache cannot be cut.

    A negative argument means "remove that many tokens" in every transformers release that
    has ``crop`` (4.x read a positive one as the length to keep, 5.2x rejects it).
    """
    have = cache.get_seq_length()
    if keep > have:
        return False
    if keep == have:
        return True
    try:
        cache.crop(keep - have)
    except (ValueError, RuntimeError, NotImplementedError, AttributeError):
        return False  # e.g. a sliding-window layer that no longer holds the dropped states
    return cache.get_seq_length() == keep


def _limit_threads() -> None:
    """Use no more intra-op threads than the CPUs this process may run on.

    torch counts the host's cores; in a container or under ``taskset`` that oversubscribes
    the CPUs actually granted and slows every matmul down.
    """
    try:
        allowed = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return
    if torch.get_num_threads() > allowed:
        torch.set_num_threads(allowed)


def _fix_mmap_threshold(threshold: int = 1 << 20) -> None:
    """Serve allocations above 1 MiB with mmap, so freed KV buffers go back to the OS (glibc).

    A growing KV cache is re-allocated a little larger at every forward chunk. glibc raises
    its mmap threshold each time such a block is freed, after which the blocks come from the
    heap, which fragments and does not shrink: peak RSS for a 4,096-token context was ~125 MiB
    higher. Setting the threshold explicitly (the ``MALLOC_MMAP_THRESHOLD_`` variable does
    the same) turns that adjustment off. Process-wide and harmless elsewhere; skipped when the
    user set the variable or the C library is not glibc.
    """
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return
    if platform.libc_ver()[0] != "glibc":
        return
    try:
        ctypes.CDLL(None).mallopt(-3, threshold)  # -3 = M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass
