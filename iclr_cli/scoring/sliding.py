"""The sliding KV window (``--context sliding``, docs/scoring.md): every token computed once.

What the proxy conditions on. The scorer input is the whole sequence ``P, history, step``
(nothing is cut before the model sees it). ``S = min(|P|, limit // 2)`` tokens at the front of
P are the *sink*: always attended to (StreamingLLM: evicting the first tokens wrecks the
distribution). Everything after them is the *stream*, indexed ``j = 0, 1, ...``. With
``B = limit - S`` (the stream budget) and ``C = max(1, limit // 8)`` (the eviction step), the
token at stream index ``j`` attends to the sink and to stream tokens ``start(j) .. j``::

    start(j) = 0                          if j < B   (everything fits: a plain forward)
    start(j) = ((j - B) // C + 1) * C     otherwise  (the oldest tokens evicted, C at a time)

so it sees between ``limit - C + 1`` and ``limit`` tokens. Positions are those of the window,
never the token's place in the whole sequence: the sink at ``0 .. S-1``, stream token ``i`` at
``S + i - start(j)``. No query ever sees a relative distance of ``limit`` or more, the range
the proxy was trained on. Keys and values of a token are computed once, when the token is
first reached, and kept while it is inside the window; when the window start moves by ``d``,
the kept keys are rotated by ``-d`` positions (RoPE is a rotation: exact up to float32
rounding, see :class:`iclr_cli.scoring.kv.Rotary`). A kept token therefore carries what it
saw when it was computed, including tokens evicted since: the proxy conditions on the whole
history through those states, directly on the last ``limit`` tokens and the sink.

The result is a function of the token sequence alone (``start`` depends only on ``j``): the
same with or without a cache, in any batch, and identical to one plain forward pass while
``|P| + history + step <= limit``.

Cost. Each token is run once per session, plus the tokens after the first change when a
compressed step is written back (the online loop replaces a step's reasoning with its
compressed text: everything from the first changed token is recomputed, its window start
included, which needs the kept tokens back to ``start(first change)``: a stream keeps that
margin until its next request).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from iclr_cli.scoring.engine import Segment
from iclr_cli.scoring.kv import KVShape, KVStore, Rotary
from iclr_cli.scoring.streams import kept_entropies, resume_at


@dataclass(frozen=True)
class SlidingWindow:
    """The window rule above: ``limit`` tokens in all, ``sink`` of them from P, evicting ``step`` at a time."""

    limit: int
    sink: int
    step: int

    @classmethod
    def for_prompt(cls, prompt_tokens: int, limit: int) -> SlidingWindow:
        """The project's choice: ``S = min(|P|, limit // 2)``, ``C = max(1, limit // 8)``."""
        return cls(limit, min(prompt_tokens, limit // 2), max(1, limit // 8))

    @property
    def budget(self) -> int:
        """Stream tokens the window holds (``B = limit - sink``)."""
        return self.limit - self.sink

    @property
    def most_held(self) -> int:
        """Most tokens a stream's store ever holds: the sink, a window and the evicted tokens
        kept for write-back."""
        return 2 * self.limit + self.step

    def start(self, j: int) -> int:
        """First stream index attended to by stream token ``j``."""
        if j < self.budget:
            return 0
        return ((j - self.budget) // self.step + 1) * self.step

    def run_end(self, j: int) -> int:
        """First stream index after ``j`` whose window start differs from ``start(j)``."""
        if j < self.budget:
            return self.budget
        return self.budget + ((j - self.budget) // self.step + 1) * self.step


@dataclass
class SlidingState:
    """One stream's cache: ``ids`` (sink + stream tokens done), the store holding the sink
    then stream tokens ``lo ..``, their keys rotated for window start ``rot``, and the
    entropies it ran from the last request's step on (``ents``: position -> bits,
    :func:`iclr_cli.scoring.streams.resume_at`)."""

    window: SlidingWindow
    ids: list[int]
    store: KVStore
    lo: int = 0
    rot: int = 0
    ents: dict[int, float] = field(default_factory=dict)

    @property
    def stream_done(self) -> int:
        return len(self.ids) - self.window.sink


class SlidingJob:
    """Scores one request in sliding mode, one window run (:class:`Segment`) at a time.

    Args:
        state: the stream's previous :class:`SlidingState`, or ``None``.
        ids: the request's whole token sequence (P, history, step).
        rows: positions whose next-token entropy is wanted (sorted).
        window: the request's :class:`SlidingWindow`.
        keep_from: sequence position where the request's step starts: kept tokens needed to
            resume there (the next request's first change is never earlier) stay stored.
        shape, rotary: key/value geometry and the re-rotation of stored keys.
        common: a function ``(a, b) -> length of the common prefix``.

    After the last segment, ``entropies`` maps each wanted position to bits and ``state`` is
    the stream's new state; ``reused`` counts tokens taken from the cache.
    """

    def __init__(self, state: SlidingState | None, ids: Sequence[int], rows: Sequence[int], window: SlidingWindow,
                 keep_from: int, shape: KVShape, rotary: Rotary, common):
        self.ids, self.rows, self.window, self.rotary = ids, rows, window, rotary
        self.entropies: dict[int, float] = {}
        s = window.sink
        self.floor = window.start(max(0, keep_from - s))
        resume = 0
        if state is not None and state.window == window:
            resume = resume_at(state.ids, state.ents, ids, rows, common)
            if resume > s and state.lo > window.start(resume - s):
                resume = 0
        if resume:
            if resume <= s:  # within the sink (a shared P's state): no stream token is kept
                state.store.truncate(resume)
                state.lo = state.rot = 0
            else:
                state.store.truncate(s + (resume - s) - state.lo)
            del state.ids[resume:]
            self.entropies = kept_entropies(state.ents, rows, resume)
            # Later requests never change a token before this step's start: its entropies
            # are never wanted again.
            for r in [r for r in state.ents if r < keep_from - 1]:
                del state.ents[r]
            self.state = state
        else:
            if state is not None:
                state.store.release()
            self.state = SlidingState(window, [], KVStore(shape, min(window.limit, len(ids)), window.most_held))
        self.reused = resume
        self._pending: Segment | None = None

    def next_segment(self) -> Segment | None:
        st, w = self.state, self.window
        pos = len(st.ids)
        if pos >= len(self.ids):
            return None
        s = w.sink
        if pos < s or pos == 0:  # the sink and the stream while everything fits: one plain run,
            # resumed after the sink tokens a state kept (iclr_cli.scoring.prefix)
            end, past = min(len(self.ids), s + w.budget), ([(st.store, 0, pos)] if pos else [])
        else:
            j = pos - s
            start = w.start(j)
            if start != st.rot:
                self.rotary.shift(st.store.view(s, st.store.length)[:, 0], st.rot - start)
                st.rot = start
            end = min(len(self.ids), s + w.run_end(j))
            past = [(st.store, 0, s), (st.store, s + start - st.lo, s + j - st.lo)]
        wanted = [r - pos for r in self.rows if pos <= r < end]
        self._pending = Segment(past, self.ids[pos:end], wanted, st.store)
        return self._pending

    def accept(self, entropies: dict[int, float]) -> None:
        """Take the entropies of the segment just run and drop keys no longer needed."""
        seg, st, w = self._pending, self.state, self.window
        pos = len(st.ids)
        for t, h in entropies.items():
            self.entropies[pos + t] = h
            st.ents[pos + t] = h
        st.ids.extend(seg.ids)
        # Keep the stored stream from the smaller of the next window start and the floor.
        keep = min(w.start(st.stream_done), self.floor)
        if keep > st.lo:
            st.store.drop(w.sink, keep - st.lo)
            st.lo = keep
        self._pending = None
