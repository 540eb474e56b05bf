"""The real scorer: a frozen Hugging Face causal LM, stream caches, batched forwards.

METHOD.md, "Score". For every request the scorer lays out the tokens the proxy sees, runs the
model, and takes the full-vocabulary entropy in bits of the distribution at position ``p - 1``
for every block token ``p``; a block's score is the mean over its tokens.

Two context modes (``context``, CLI ``--context``), when P + history + step is over the limit:

- ``fresh``: the proxy sees P, as much recent history as fits (on a grid, see
  :mod:`iclr_cli.scoring.window`) and the step, computed from scratch as one sequence. A
  stream's cache (:mod:`iclr_cli.scoring.streams`) only saves work: cached, uncached and
  batched agree within 1e-3 bits. Cost: each step whose window start moved runs a whole window.
- ``sliding``: the proxy reads the whole sequence once, through a window of ``limit`` tokens
  that slides over it with P's head kept as attention sink; each token's keys and values are
  computed once and kept while inside the window (:mod:`iclr_cli.scoring.sliding` says
  exactly what each token conditions on). Cost grows with the session's length.
- ``auto`` (default): per trajectory, ``sliding`` (the more faithful, BENCHMARKS.md "Context
  modes") unless ``fresh`` would cost less than half as much (tokens weighted by the context
  they attend to: :mod:`iclr_cli.scoring.cost`), which happens on long sessions with few
  reasoning-bearing steps between long tool outputs. The choice is made
  before scoring from the trajectory as recorded (:meth:`TransformersScorer.plan_contexts`,
  called by the online loop), so it does not depend on the scores; a stream that was not
  planned (``serve``, ``replay``: the future is unknown) is scored ``sliding``. Each result
  says which mode scored it.

Below the limit both are one plain forward pass over P + history + step.

Work saved, never results changed:

- **P once per machine** (:mod:`iclr_cli.scoring.prefix`). A stream with no state yet starts
  from a copy of the state after P's shared part (its segments before the first user turn:
  system prompt, tools), shared by all streams with the same part, model and window, kept in
  memory and on disk; on a miss a job that reads that part alone runs first and its state is
  stored.
- **Batching** (:mod:`iclr_cli.scoring.engine`). Step t of many trajectories runs as one
  batch even when their cached pasts differ in length (padded, explicit positions and masks).
  History-free requests (``step-only``) and uncached ones batch the same way.
- **Chunks.** The model runs ``forward_chunk`` tokens at a time (activation memory), and only
  hidden states at needed positions go through the LM head, ``chunk_size`` at a time.
- **Memory budget.** ``cache_tokens`` bounds the keys/values of all streams (kept and in
  work), ``batch_tokens`` the buffer of one batch, ``batch_size`` its rows; by default all
  three come from the device's free memory (:mod:`iclr_cli.scoring.budget`).
  ``stream_capacity`` tells callers how many trajectories can keep caches at once.

Position 0 has no predicting distribution. For a history-free request (``step-only``: no P,
no history) the scorer prepends the tokenizer's start token (``bos_id``, ``<|im_start|>`` for
SmolLM2) so that the step's first token is scored too; the step is then limited to
``max_tokens - 1`` tokens. When the model has no start token, the first token is not scored.

Models whose keys and values the scorer cannot manage (layers other than plain full
attention, or transformers < 4.56) are scored without prefix reuse, and only in ``fresh``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from iclr_cli.errors import UsageError
from iclr_cli.scoring import budget as budgets
from iclr_cli.scoring import threads
from iclr_cli.scoring.threads import fix_mmap_threshold
from iclr_cli.scoring.base import (
    CONTEXTS,
    DEFAULT_CONTEXT,
    DEFAULT_MAX_TOKENS,
    BlockScore,
    Overflow,
    ScoreRequest,
    ScoreResult,
)
from iclr_cli.scoring.cost import attention_equivalent, auto_mode
from iclr_cli.scoring.recheck import Recheck
from iclr_cli.scoring.engine import Engine, ScorerStats
from iclr_cli.scoring.entropy import DEFAULT_CHUNK, logit_transform
from iclr_cli.scoring.kv import probe
from iclr_cli.scoring.precision import scoring_head
from iclr_cli.scoring.prefix import PromptCache, PromptState, model_fingerprint, prompt_dir, prompt_span
from iclr_cli.scoring.sliding import SlidingJob, SlidingWindow
from iclr_cli.scoring.streams import FreshJob, OneShot, StreamCache, common_prefix
from iclr_cli.scoring.segments import SegmentTokens
from iclr_cli.scoring.window import Layout, lay_out, lay_out_whole, piece

DEFAULT_FORWARD_CHUNK = 1024
_ENCODE_MEMO = 4096

__all__ = ["CONTEXTS", "DEFAULT_CONTEXT", "ScorerStats", "TransformersScorer"]


@dataclass(frozen=True)
class _Meta:
    """What a result reports about the context: see :class:`~iclr_cli.scoring.base.ScoreResult`."""

    windowed: bool
    history_kept: int
    context_tokens: int
    history_tail: int | None = None


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
        context: ``auto``, ``sliding`` or ``fresh`` (module docstring).
        prefix_cache: keep stream caches across requests (``False``: every request from
            scratch; results are the same).
        batch_size: most rows per batched forward (``None``: from the device, see
            :mod:`iclr_cli.scoring.budget`).
        chunk_size: positions per LM-head call.
        forward_chunk: tokens per forward step (divided among the rows of a batch).
        max_streams: most streams whose cache is kept (``None``: no count limit).
        cache_tokens: most key/value tokens over all stream caches (``None``: from free memory).
        batch_tokens: most buffer slots of one batch (rows x (longest past + longest new);
            ``None``: from free memory); a single longer row still runs, alone.
        prompt_cache: share the state after P's shared part (before its first user turn)
            across streams, in memory (at most a quarter of ``cache_tokens`` more) and on disk
            (:mod:`iclr_cli.scoring.prefix`); off when ``prefix_cache`` is (results are the same).
        prompt_cache_dir: its folder (``None``: ``$ICLR_PROMPT_CACHE_DIR`` or
            ``<cache>/prompts``).

    Raises:
        UsageError: for an unknown ``overflow`` or ``context``, a size parameter below 1, or
            ``sliding`` with a model whose keys cannot be re-rotated.
    """

    def __init__(
        self,
        model,
        tokenizer,
        *,
        name: str = "proxy",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        overflow: Overflow = "window",
        context: str = DEFAULT_CONTEXT,
        prefix_cache: bool = True,
        batch_size: int | None = None,
        chunk_size: int = DEFAULT_CHUNK,
        forward_chunk: int = DEFAULT_FORWARD_CHUNK,
        max_streams: int | None = None,
        cache_tokens: int | None = None,
        batch_tokens: int | None = None,
        prompt_cache: bool = True,
        prompt_cache_dir: Path | None = None,
    ):
        if overflow not in ("window", "skip"):
            raise UsageError(f"--overflow {overflow!r}: choose window or skip")
        if context not in CONTEXTS:
            raise UsageError(f"--context {context!r}: choose one of {', '.join(CONTEXTS)}")
        for label, value in (("max_tokens", max_tokens), ("batch_size", batch_size), ("chunk_size", chunk_size),
                             ("forward_chunk", forward_chunk), ("max_streams", max_streams),
                             ("cache_tokens", cache_tokens), ("batch_tokens", batch_tokens)):
            if value is not None and value < 1:
                raise UsageError(f"{label} must be at least 1, got {value}")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.recheck: Recheck | None = None  # set by iclr_cli.pipeline.build_engines (the fast profile's)
        limit = getattr(model.config, "max_position_embeddings", None)
        self.max_tokens = min(max_tokens, limit) if limit else max_tokens
        self.overflow = overflow
        self.context = context
        self.chunk_size = chunk_size
        self.forward_chunk = forward_chunk
        self._base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
        self._device = next(model.parameters()).device
        if self._device.type == "cpu":
            threads.limit_torch()
            fix_mmap_threshold()
        # transformers 5.2x renamed the forward's ``past_key_values`` to ``cache``.
        params = inspect.signature(self._base.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        found = probe(self._base, self._cache_kw)
        if context == "sliding" and found.rotary is None:  # auto falls back to fresh
            raise UsageError(f"--context sliding needs a model whose cached keys can be re-rotated: "
                             f"{found.reason or found.rotary_reason}; use --context fresh")
        self._shape, self._rotary = found.shape, found.rotary
        self.prefix_cache = prefix_cache and self._shape is not None
        per_token = self._shape.bytes_per_token if self._shape else 1
        auto = budgets.plan(per_token, self.max_tokens, self._device)
        self.batch_size = batch_size or auto.batch_size
        self.cache_tokens = cache_tokens or auto.cache_tokens
        self.batch_tokens = batch_tokens or auto.batch_tokens
        self.max_streams = max_streams or 1 << 30
        self.free_bytes = auto.free_bytes
        self._pad_id = tokenizer.bos_id if tokenizer.bos_id is not None else 0
        self._engine = Engine(self._base, scoring_head(model), logit_transform(model.config), self._shape,
                              cache_kw=self._cache_kw, pad_id=self._pad_id, chunk_size=chunk_size,
                              forward_chunk=forward_chunk, batch_size=self.batch_size, batch_tokens=self.batch_tokens)
        self._streams = StreamCache(self.max_streams, self.cache_tokens)
        self._prompts: PromptCache | None = None
        self._warm = False
        if prompt_cache and self.prefix_cache:
            folder = Path(prompt_cache_dir) if prompt_cache_dir is not None else prompt_dir()
            self._prompts = PromptCache(self._shape, folder, model_fingerprint(model, tokenizer, self._shape), self.max_tokens,
                                        max_tokens=self.cache_tokens // 4)
        self._memo: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}
        self._segments = SegmentTokens(tokenizer, self.max_tokens, _ENCODE_MEMO)
        self._call = 0
        self._modes: dict[str, str] = {}  # stream -> mode chosen by plan_contexts (auto)
        self._attention_equivalent = attention_equivalent(model)

    @property
    def stats(self) -> ScorerStats:
        """Work counters (:class:`~iclr_cli.scoring.engine.ScorerStats`); assign a new one to reset."""
        return self._engine.stats

    @stats.setter
    def stats(self, value: ScorerStats) -> None:
        self._engine.stats = value

    @property
    def stream_tokens(self) -> int:
        """Cache tokens one trajectory may need: its window, plus in ``sliding`` the evicted
        tokens kept for write-back (up to one step, itself at most the limit)."""
        return self.max_tokens * (1 if self.context == "fresh" else 2) + max(1, self.max_tokens // 8)

    @property
    def stream_capacity(self) -> int:
        """How many trajectories can keep their caches at once (callers schedule by it)."""
        return max(1, min(self.max_streams, self.cache_tokens // self.stream_tokens))

    # -- layout -----------------------------------------------------------------------------

    def _encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Memoised tokenization: P and history segments repeat step after step."""
        hit = self._memo.pop(text, None)
        if hit is None:
            hit = self.tokenizer.encode(text)
            if len(self._memo) >= _ENCODE_MEMO:
                del self._memo[next(iter(self._memo))]
        self._memo[text] = hit  # re-inserted: the dict's order is least recently used first
        return hit

    def mode(self, stream: str) -> str:
        """The context mode requests of ``stream`` are scored in: ``fresh`` or ``sliding``."""
        if self.context != "auto":
            return self.context
        return self._modes.get(stream, "sliding" if self._rotary is not None else "fresh")

    def plan_contexts(self, previews: Mapping[str, Sequence[ScoreRequest]]) -> dict[str, str]:
        """Choose each stream's mode under ``auto`` from the requests it is expected to send.

        ``previews`` maps a stream to its requests in order, on the history as recorded (the
        online loop passes every step with candidate blocks, for ``score`` and ``prune``
        alike, so both choose the same mode). Each mode's work is estimated on the layouts,
        without running the model, in token-equivalents that count attention over each
        token's context (:func:`iclr_cli.scoring.cost.auto_mode`). Other context settings
        ignore the plan. Returns ``{stream: mode}`` for the planned streams.
        """
        if self.context != "auto" or self._rotary is None:
            return {stream: self.mode(stream) for stream in previews}
        shared = common_prefix if self.prefix_cache else (lambda prev, ids: 0)
        for stream, requests in previews.items():
            self._modes.pop(stream, None)
            layouts = ((lay.ids, req) for req in requests
                       if not (lay := lay_out(req, self._encode, self.max_tokens, self.overflow, history=self._segments.tail)).plan.skipped)
            self._modes[stream] = auto_mode(layouts, shared, self._sequence_tokens, self.max_tokens, self._attention_equivalent)
        return {stream: self._modes[stream] for stream in previews}

    def _sequence_tokens(self, req: ScoreRequest) -> int:
        """Tokens of ``req``'s whole sequence (P, history, step), counted segment by segment."""
        return sum(map(self._segments.count, (*req.prompt, *req.history))) + len(self._encode(req.step)[0])

    def _lay_out(self, req: ScoreRequest) -> Layout:
        bos = self.tokenizer.bos_id
        if req.prompt or req.history or bos is None:
            if self.mode(req.stream) == "sliding":
                return lay_out_whole(req, self._encode, self.max_tokens, self.overflow, ids=self._segments.whole)
            return lay_out(req, self._encode, self.max_tokens, self.overflow, history=self._segments.tail)
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

    def _meta(self, req: ScoreRequest, lay: Layout) -> _Meta:
        if self.mode(req.stream) != "sliding" or not (req.prompt or req.history):
            return _Meta(lay.plan.windowed, len(req.history) - lay.plan.first_history, len(lay.ids), lay.plan.history_tail or None)
        prompt = sum(len(self._segments.whole(seg)) for seg in req.prompt)
        window = SlidingWindow.for_prompt(prompt, self.max_tokens)
        last = len(lay.ids) - 1 - window.sink
        step_start = len(lay.ids) - len(self._encode(req.step)[0]) - window.sink
        seen_from = window.sink + window.start(max(0, step_start))
        end, kept = prompt, 0
        for seg in req.history:
            end += len(self._segments.whole(seg))
            kept += end > seen_from
        return _Meta(len(lay.ids) > self.max_tokens, kept, window.sink + last + 1 - window.start(max(0, last)))

    # -- scoring ----------------------------------------------------------------------------

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Score every request; results in request order (see :class:`~iclr_cli.scoring.base.Scorer`).

        Requests of one stream must come in causal order; caches never change results.
        """
        self._call += 1
        self.stats.requests += len(requests)
        requests = [r.settled() if r.partial else r for r in requests]
        layouts = [self._lay_out(r) for r in requests]
        pending = [0] * len(requests)
        for i, req in enumerate(requests):
            if req.pieced and not layouts[i].plan.skipped:
                layouts[i], pending[i] = self._piece(req, layouts[i])
        results: list[ScoreResult | None] = [None] * len(requests)
        plain: list[tuple[int, list[int]]] = []
        streamed: list[tuple[int, list[int]]] = []
        for i, (req, lay) in enumerate(zip(requests, layouts)):
            if lay.plan.skipped:
                results[i] = ScoreResult((), skipped=lay.plan.skipped)
                continue
            if req.partial:
                if not (self.prefix_cache and (req.prompt or req.history)):  # no state to feed
                    results[i] = ScoreResult(())
                    continue
                # every settled token of the step: its entropy is kept for the finished step
                first = max(0, len(lay.ids) - len(self._encode(req.step)[0]) - 1)
                self.stats.feeds += 1
                streamed.append((i, list(range(first, len(lay.ids)))))
                continue
            rows = sorted({p - 1 for ps in lay.block_positions for p in ps})
            if not rows:
                results[i] = self._result(req, lay, {})
            elif req.prompt or req.history:
                (streamed if self.prefix_cache or self.mode(req.stream) == "sliding" else plain).append((i, rows))
            else:
                plain.append((i, rows))
        if plain:
            jobs = [OneShot(layouts[i].ids, rows) for i, rows in plain]
            self._run(jobs)
            for (i, _), job in zip(plain, jobs):
                results[i] = self._result(requests[i], layouts[i], job.entropies)
        for wave in self._waves(requests, layouts, streamed):
            with torch.inference_mode():
                starts = self._prompt_starts(requests, layouts, wave)
                jobs = [self._job(requests[i], layouts[i], rows, starts.get(i, (None, 0))[0]) for i, rows in wave]
            self._run(jobs)
            for (i, _), job in zip(wave, jobs):
                # P computed for this very request was forwarded, not reused.
                self.stats.reused_tokens += job.reused - min(job.reused, starts.get(i, (None, 0))[1])
                if requests[i].partial:
                    results[i] = ScoreResult((), context_tokens=len(layouts[i].ids), context=self.mode(requests[i].stream),
                                             pending_tokens=pending[i])
                else:
                    results[i] = self._result(requests[i], layouts[i], job.entropies)
                if self.prefix_cache and job.state is not None:
                    self._streams.put(requests[i].stream, job.state, job.state.store.capacity, self._call)
        return results  # type: ignore[return-value]

    def _piece(self, req: ScoreRequest, lay: Layout) -> tuple[Layout, int]:
        """A context feed's layout cut ``req.limit`` tokens past what its stream's state holds,
        and the tokens left out (``ScoreRequest.limit``). Not cut for a stream without state:
        its first feed starts from P's shared state (:mod:`iclr_cli.scoring.prefix`), whose
        tokens must all be in the input."""
        state = self._streams.peek(req.stream) if self.prefix_cache else None
        if state is None:
            return lay, 0
        return piece(lay, common_prefix(state.ids, lay.ids), req.limit)

    def _waves(self, requests, layouts, streamed):
        """Stream requests in groups whose caches fit ``cache_tokens`` together with the kept ones.

        Taking a stream's state out of the cache makes it part of the work; other streams'
        states are evicted (least recently used, never one of this call) to make room.
        """
        for i, _ in streamed:
            self._streams.touch(requests[i].stream, self._call)
        wave: list[tuple[int, list[int]]] = []
        need = 0
        for i, rows in streamed:
            size = max(0, min(len(layouts[i].ids), self.stream_tokens) - self._streams.size(requests[i].stream))
            if wave and not self._streams.make_room(need + size, self._call):
                yield wave
                wave, need = [], 0
            wave.append((i, rows))
            need += size
        if wave:
            yield wave

    def _job(self, req: ScoreRequest, lay: Layout, rows: list[int], start: PromptState | None = None):
        """The request's job, from its stream's state, else from a copy of ``start`` (P's)."""
        state = self._streams.take(req.stream) if self.prefix_cache else None
        if self.mode(req.stream) == "fresh":
            if state is None and start is not None:
                state = start.fresh_state(self._shape, len(lay.ids), self.max_tokens)
            return FreshJob(state, lay.ids, rows, self._shape, common_prefix, keep=self.prefix_cache, most=self.max_tokens)
        prompt = sum(len(self._segments.whole(seg)) for seg in req.prompt)
        window = SlidingWindow.for_prompt(prompt, self.max_tokens)
        if state is None and start is not None:
            state = start.sliding_state(window, self._shape, min(window.limit, len(lay.ids)), window.most_held)
        step_start = len(lay.ids) - len(self._encode(req.step)[0])
        return SlidingJob(state, lay.ids, rows, window, step_start, self._shape, self._rotary, common_prefix)

    def _prompt_starts(self, requests, layouts, wave) -> dict[int, tuple[PromptState, int]]:
        """Shared P states for the wave's requests whose stream holds no state
        (:meth:`~iclr_cli.scoring.prefix.PromptCache.starts`)."""
        if self._prompts is None:
            return {}
        wanted = []
        for i, _ in wave:
            req = requests[i]
            if req.stream in self._streams:
                continue
            mode = self.mode(req.stream)
            ids = self._segments.whole if mode == "sliding" else (lambda seg: self._encode(seg)[0])
            span = prompt_span(req, layouts[i], mode, self.max_tokens, ids)
            if span is not None:
                wanted.append((i, span))
        return self._prompts.starts(wanted, self._rotary, common_prefix, self._run, self.stats)

    def _run(self, jobs) -> None:
        """Run jobs in lock step: each round batches the next segment of every unfinished job.

        Stores are created, rotated and trimmed in inference mode too: torch forbids in-place
        updates of inference tensors outside it.
        """
        active = list(jobs)
        with torch.inference_mode():
            while active:
                segs = [(job, job.next_segment()) for job in active]
                segs = [(job, seg) for job, seg in segs if seg is not None]
                if not segs:
                    return
                for (job, _), ent in zip(segs, self._engine.run([seg for _, seg in segs])):
                    job.accept(ent)
                active = [job for job, _ in segs]

    def _result(self, req: ScoreRequest, lay: Layout, ent: dict[int, float]) -> ScoreResult:
        blocks = []
        for ps in lay.block_positions:
            hs = [ent[p - 1] for p in ps]
            blocks.append(BlockScore(len(hs), sum(hs) / len(hs) if hs else None))
        meta = self._meta(req, lay)
        return ScoreResult(tuple(blocks), windowed=meta.windowed, history_kept=meta.history_kept,
                           context_tokens=meta.context_tokens, history_tail=meta.history_tail,
                           context=self.mode(req.stream) if req.prompt or req.history else None)

    def cancel(self) -> None:
        """Stop scoring for good, from any thread: the call in progress raises
        :class:`~iclr_cli.scoring.base.ScoringCancelled` before its next forward step, and so
        does every later call (``iclr serve`` shutting down: :mod:`iclr_cli.serve.batching`)."""
        self._engine.cancel()

    def reset(self) -> None:
        """Forget every cached stream (frees their key/value memory), the shared P states held
        in memory (not those on disk), every planned mode and the memoised tokens of segments."""
        self._streams.clear()
        if self._prompts is not None:
            self._prompts.clear()
        self._modes.clear()
        self._memo.clear()
        self._segments.clear()

    def forget(self, stream: str) -> None:
        """Drop ``stream``'s cache and planned mode (``iclr serve``: the conversation was
        evicted). Not thread-safe: call it from the thread that scores."""
        self._streams.take(stream)
        self._modes.pop(stream, None)

    def rename(self, old: str, new: str) -> None:
        """Keep ``old``'s cache and planned mode under ``new`` (``iclr serve``: a conversation's
        first reply was fed along the stream before the reply gave the conversation its id).
        Not thread-safe: call it from the thread that scores."""
        state = self._streams.take(old)
        if state is not None:
            self._streams.put(new, state, state.store.capacity, self._call)
        if old in self._modes:
            self._modes[new] = self._modes.pop(old)

    def warm(self) -> int:
        """Load the shared P states this model used most recently from disk
        (:meth:`~iclr_cli.scoring.prefix.PromptCache.preload`); ``iclr serve`` calls it in its
        scorer thread before the first batch. Returns how many were loaded."""
        try:
            return self._prompts.preload() if self._prompts is not None else 0
        finally:
            self._warm = True

    def is_warm(self) -> bool:
        """True once :meth:`warm` ran, or when there is no shared P cache to warm (readiness
        of ``iclr serve``: :mod:`iclr_cli.serve.health`). Safe to call from any thread."""
        return self._warm or self._prompts is None

    @property
    def device_type(self) -> str:
        """``cpu``, ``cuda``, ``mps``: where the model runs (``iclr serve`` batches by it)."""
        return self._device.type

    def prefills(self, request: ScoreRequest) -> bool:
        """True when scoring ``request`` runs P and the history from the start: no state of
        its stream is kept (a conversation's first scored step, or one evicted). False means
        it runs only the tokens after what it shares with the stream's previous request.
        ``iclr serve`` says so when a request waits on it and estimates its time by it. Also
        False for a stream without state whose P's state is shared (in memory, or on disk
        as this process knows it): only the history and step run. Safe to call from another
        thread: it hashes P's text and reads dicts and a set."""
        if self.prefix_cache and request.stream in self._streams:
            return False
        prompts = self._prompts
        if prompts is None or not request.prompt:
            return True
        return not prompts.holds(self.mode(request.stream), request.prompt)

    def cache_info(self) -> dict[str, int | None]:
        """The stream caches kept between calls, as plain numbers (safe to read while another
        thread scores): ``streams`` held, ``tokens`` and ``bytes`` of key/value capacity they
        hold, the budget (``budget_tokens``, ``budget_bytes``: ``cache_tokens``), ``evictions``
        (least recently used states removed to make room), ``not_kept`` (states that found
        no room), and the work so far: ``forward_tokens`` run through the model and
        ``reused_tokens`` taken from kept states. The shared P cache: ``prompt_hits``,
        ``prompt_disk_hits``, ``prompt_misses`` (:class:`~iclr_cli.scoring.engine.ScorerStats`),
        ``prompt_states`` and ``prompt_tokens`` held in memory (``None`` when it is off).
        Bytes are ``None`` for a model whose caches the scorer cannot manage."""
        per_token = self._shape.bytes_per_token if self._shape is not None else None
        held = self._streams.held
        return {
            "streams": len(self._streams),
            "tokens": held,
            "bytes": held * per_token if per_token else None,
            "budget_tokens": self.cache_tokens,
            "budget_bytes": self.cache_tokens * per_token if per_token else None,
            "evictions": self._streams.evictions,
            "not_kept": self._streams.not_kept,
            "forward_tokens": self.stats.forward_tokens,
            "reused_tokens": self.stats.reused_tokens,
            "prompt_hits": self.stats.prompt_hits,
            "prompt_disk_hits": self.stats.prompt_disk_hits,
            "prompt_misses": self.stats.prompt_misses,
            "prompt_states": len(self._prompts) if self._prompts is not None else None,
            "prompt_tokens": self._prompts.held if self._prompts is not None else None,
        }
