"""Batched forward passes over rows whose cached pasts differ in length (docs/scoring.md, "Batching and memory").

A :class:`Segment` is one row of work: a past (key/value ranges of stores, laid end to end at
positions ``0 .. L-1``), new token ids at positions ``L, L+1, ...``, the indices of the new
tokens whose next-token entropy is wanted, and the store the new keys and values go to.
:meth:`Engine.run` packs segments into groups and runs each group as one batch:

- pasts are right-aligned in one buffer (left padding), new tokens follow at the same slots
  for every row (right padding);
- a 2-D attention mask hides the padding and explicit position ids give every row its own
  positions, so each row computes exactly what it would alone (up to float rounding: the
  equality tests allow 1e-3 bits);
- with one row, or rows of equal lengths, no mask is passed and the model takes its usual
  causal path.

Groups hold at most ``batch_size`` rows and ``batch_tokens`` buffer slots (rows times the
longest past plus the longest new run), which bounds memory. The model runs ``step`` new
tokens per row at a time (``forward_chunk`` divided among the rows, at least 256 so that the
per-step copies of a long past stay small against the compute); the LM head sees only wanted
positions (:func:`iclr_cli.scoring.entropy.head_entropies`).

:meth:`Engine.cancel` stops the work for good between two such steps: a long prefill (tens of
thousands of tokens of P on a CPU) would otherwise hold ``iclr serve``'s shutdown for minutes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from iclr_cli.scoring.base import ScoringCancelled
from iclr_cli.scoring.entropy import head_entropies
from iclr_cli.scoring.kv import KVShape, KVStore, buffer_cache

MIN_STEP = 256


@dataclass
class ScorerStats:
    """Counters for benchmarks and tests (tokens are proxy tokens).

    ``requests``: score requests; ``forward_tokens``: real tokens run through the model;
    ``pad_tokens``: padding run with them; ``reused_tokens``: tokens taken from a stream's
    cache instead; ``scored_positions``: hidden states that went through the LM head;
    ``batches``: batched forwards (groups of rows); ``rows``: segments run.
    ``feeds``: partial requests run (steps fed along the stream, ``ScoreRequest.partial``;
    what they ran is in ``forward_tokens``).
    The shared P cache (:mod:`iclr_cli.scoring.prefix`): ``prompt_hits``, requests of a
    stream without state that started from a stored P state (``reused_tokens`` counts its
    tokens); ``prompt_disk_hits``, P states read from disk for them; ``prompt_misses``, P
    states computed (their tokens are in ``forward_tokens``) and stored.
    """

    requests: int = 0
    reused_tokens: int = 0
    forward_tokens: int = 0
    pad_tokens: int = 0
    scored_positions: int = 0
    batches: int = 0
    rows: int = 0
    prompt_hits: int = 0
    prompt_disk_hits: int = 0
    prompt_misses: int = 0
    feeds: int = 0


@dataclass
class Segment:
    """One row of a batched forward (see the module docstring).

    ``past``: ``(store, start, end)`` ranges concatenated in order; ``ids``: new tokens;
    ``wanted``: indices into ``ids`` whose next-token entropy is returned; ``out``: store the
    new tokens' keys and values are appended to (``None``: not kept).
    """

    past: Sequence[tuple[KVStore, int, int]]
    ids: Sequence[int]
    wanted: Sequence[int] = ()
    out: KVStore | None = None
    past_len: int = field(init=False)

    def __post_init__(self):
        self.past_len = sum(b - a for _, a, b in self.past)


class Engine:
    """Runs :class:`Segment` batches through a decoder and an LM head.

    Args:
        base: the decoder (``model.get_decoder()``), returning ``last_hidden_state``.
        head: the LM head. ``transform``: logit transform or ``None``.
        shape: key/value geometry (:class:`~iclr_cli.scoring.kv.KVShape`).
        cache_kw: name of the decoder's cache argument (``cache`` or ``past_key_values``).
        pad_id: token id used for padding (never attended to).
        chunk_size: positions per LM-head call; forward_chunk: tokens per forward step,
            divided among the rows; batch_size / batch_tokens: group limits.
    """

    def __init__(self, base, head, transform, shape: KVShape | None, *, cache_kw: str, pad_id: int,
                 chunk_size: int, forward_chunk: int, batch_size: int, batch_tokens: int):
        self.base, self.head, self.transform, self.shape = base, head, transform, shape
        self.cache_kw, self.pad_id = cache_kw, pad_id
        self.chunk_size, self.forward_chunk = chunk_size, forward_chunk
        self.batch_size, self.batch_tokens = batch_size, batch_tokens
        self.stats = ScorerStats()
        self.device = next(base.parameters()).device
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Make the forward step in progress the last one: every later step, of this run or
        any other, raises :class:`~iclr_cli.scoring.base.ScoringCancelled` (for good: this
        is for shutdown). Safe to call from any thread."""
        self._cancelled.set()

    def _forward(self, **kw):
        """One forward step of the decoder (``forward_chunk`` tokens per row at most)."""
        if self._cancelled.is_set():
            raise ScoringCancelled("the scorer was stopped")
        return self.base(**kw).last_hidden_state

    def groups(self, segs: Sequence[Segment]) -> list[list[int]]:
        """Indices of ``segs`` packed into groups: longest first, within the group limits."""
        order = sorted(range(len(segs)), key=lambda i: -(segs[i].past_len + len(segs[i].ids)))
        out: list[list[int]] = []
        most_past = most_new = 0
        for i in order:
            p, n = segs[i].past_len, len(segs[i].ids)
            if out and len(out[-1]) < self.batch_size and \
                    (len(out[-1]) + 1) * (max(most_past, p) + max(most_new, n)) <= self.batch_tokens:
                out[-1].append(i)
                most_past, most_new = max(most_past, p), max(most_new, n)
            else:
                out.append([i])
                most_past, most_new = p, n
        return out

    def run(self, segs: Sequence[Segment]) -> list[dict[int, float]]:
        """Run every segment; per segment ``{index into ids: entropy in bits}`` for its ``wanted``."""
        results: list[dict[int, float]] = [{} for _ in segs]
        with torch.inference_mode():
            for group in self.groups(segs):
                for i, res in zip(group, self._run_group([segs[i] for i in group])):
                    results[i] = res
        return results

    def _run_group(self, segs: list[Segment]) -> list[dict[int, float]]:
        if self.shape is None:
            return self._run_plain(segs)
        if len(segs) == 1 and _in_place(segs[0]):
            return self._run_in_place(segs[0])
        s, dev = self.shape, self.device
        rows = len(segs)
        lens = [g.past_len for g in segs]
        news = [len(g.ids) for g in segs]
        most_past, most_new = max(lens), max(news)
        buf = torch.zeros(s.layers, 2, rows, s.kv_heads, most_past + most_new, s.head_dim, dtype=s.dtype, device=dev)
        for r, g in enumerate(segs):
            pos = most_past - g.past_len
            for store, a, b in g.past:
                buf[:, :, r, :, pos : pos + b - a] = store.view(a, b)
                pos += b - a
        padded = len(set(lens)) > 1 or len(set(news)) > 1
        mask = None
        if padded:
            mask = torch.zeros(rows, most_past + most_new, dtype=torch.long, device=dev)
            for r, g in enumerate(segs):
                mask[r, most_past - g.past_len : most_past + news[r]] = 1
        cache = buffer_cache(buf, most_past)
        step = max(MIN_STEP, self.forward_chunk // rows) if rows > 1 else self.forward_chunk
        out: list[dict[int, float]] = [{} for _ in segs]
        want = [sorted(set(g.wanted)) for g in segs]
        self.stats.batches += 1
        self.stats.rows += rows
        for a in range(0, most_new, step):
            c = min(step, most_new - a)
            kw = {}
            if padded:
                kw["attention_mask"] = mask[:, : most_past + a + c]
                kw["position_ids"] = torch.tensor([[lens[r] + a + t for t in range(c)] for r in range(rows)], device=dev)
            hidden = self._forward(input_ids=self._ids(segs, a, c), use_cache=True, **{self.cache_kw: cache}, **kw)
            self._pick(hidden, segs, want, a, c, out)
        for r, g in enumerate(segs):
            if g.out is not None:
                g.out.append(buf[:, :, r, :, most_past : most_past + news[r]])
        return out

    def _run_in_place(self, g: Segment) -> list[dict[int, float]]:
        """One row whose past is the head of its own store: new keys and values are written
        straight after it, with no batch buffer (half the memory of a copy, no copying)."""
        store, past, n = g.out, g.past_len, len(g.ids)
        store.reserve(past + n)
        cache = buffer_cache(store.data.unsqueeze(2), past)
        out: list[dict[int, float]] = [{}]
        want = [sorted(set(g.wanted))]
        self.stats.batches += 1
        self.stats.rows += 1
        for a in range(0, n, self.forward_chunk):
            c = min(self.forward_chunk, n - a)
            hidden = self._forward(input_ids=self._ids([g], a, c), use_cache=True, **{self.cache_kw: cache})
            self._pick(hidden, [g], want, a, c, out)
        store.length = past + n
        return out

    def _run_plain(self, segs: list[Segment]) -> list[dict[int, float]]:
        """Models whose caches the scorer cannot manage: no past, right padding, the model's own cache.

        Under a causal mask a real token never attends to a later position, so right padding
        needs no attention mask.
        """
        from transformers import DynamicCache

        if any(g.past for g in segs):
            raise ValueError("this model runs without a reused past")
        try:
            cache = DynamicCache(config=self.base.config)
        except TypeError:  # transformers < 4.56 takes no config
            cache = DynamicCache()
        most_new = max(len(g.ids) for g in segs)
        step = max(64, self.forward_chunk // len(segs))
        out: list[dict[int, float]] = [{} for _ in segs]
        want = [sorted(set(g.wanted)) for g in segs]
        self.stats.batches += 1
        self.stats.rows += len(segs)
        for a in range(0, most_new, step):
            c = min(step, most_new - a)
            hidden = self._forward(input_ids=self._ids(segs, a, c), use_cache=True, **{self.cache_kw: cache})
            self._pick(hidden, segs, want, a, c, out)
        return out

    def _ids(self, segs: list[Segment], a: int, c: int) -> torch.Tensor:
        rows = [list(g.ids[a : a + c]) for g in segs]
        real = sum(len(r) for r in rows)
        self.stats.forward_tokens += real
        self.stats.pad_tokens += len(rows) * c - real
        padded = [r + [self.pad_id] * (c - len(r)) for r in rows]
        return torch.tensor(padded, dtype=torch.long, device=self.device)

    def _pick(self, hidden, segs, want, a: int, c: int, out: list[dict[int, float]]) -> None:
        """Entropies of the wanted positions among new tokens ``a .. a + c`` into ``out``."""
        picks, where = [], []
        for r, w in enumerate(want):
            local = [t for t in w if a <= t < a + c]
            if local:
                picks.append(hidden[r, [t - a for t in local]])
                where.append((r, local))
        if not picks:
            return
        ent = head_entropies(torch.cat(picks), self.head, chunk_size=self.chunk_size, transform=self.transform)
        self.stats.scored_positions += ent.shape[0]
        values = ent.tolist()
        k = 0
        for r, local in where:
            for t in local:
                out[r][t] = values[k]
                k += 1


def _in_place(g: Segment) -> bool:
    """True when ``g``'s past is exactly its output store's tokens ``0 .. length``, in order."""
    if g.out is None:
        return False
    pos = 0
    for store, a, b in g.past:
        if store is not g.out or a != pos:
            return False
        pos = b
    return pos == g.out.length
