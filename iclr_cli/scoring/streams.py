"""Per-stream caches of the scorer: prefix reuse for the fresh window, and the memory budget.

``--context fresh``: the proxy sees the layout of :func:`iclr_cli.scoring.window.lay_out`
computed from scratch, and a stream only saves work: its next request keeps the cached keys
and values up to the common token prefix and runs the rest (:class:`FreshJob`). A cache holds
no hidden states, so a wanted position ``p - 1`` (whose hidden state predicts token ``p``) is
run again unless the state kept its entropy (:func:`resume_at`): a step fed along the stream
(``ScoreRequest.partial``) leaves the entropies of every token it ran. Results never depend on
the cache.

:class:`StreamCache` holds the states between calls within ``cache_tokens`` tokens of store
capacity (and at most ``max_streams`` streams), least recently used first out, but never a
stream already used in the current call: with more trajectories than room, the first ones
keep their caches and the rest are recomputed, instead of each evicting the next (cyclic LRU
thrashing, no reuse at all). It counts what it had to let go (``evictions``: states removed
to make room; ``not_kept``: states that found no room) for ``iclr serve``'s ``/stats``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from iclr_cli.scoring.engine import Segment
from iclr_cli.scoring.kv import KVShape, KVStore


def resume_at(ids: Sequence[int], ents: dict[int, float], new_ids: Sequence[int], rows: Sequence[int], common) -> int:
    """Where a request over ``new_ids`` resumes after a state that ran ``ids`` and kept the
    entropies ``ents`` (position -> bits): the common token prefix, but no later than the
    first wanted row (sorted ``rows``) inside it whose entropy was not kept.

    The entropy at position ``r`` depends on tokens ``0 .. r`` alone (a causal LM; the sliding
    window's rule too), so a kept one is valid for every input that shares them."""
    n = common(ids, new_ids)
    for r in rows:
        if r >= n:
            break
        if r not in ents:
            return r
    return n


def kept_entropies(ents: dict[int, float], rows: Sequence[int], resume: int) -> dict[int, float]:
    """Drop the kept entropies at ``resume`` and after (their tokens change) and return those of
    ``rows`` before it."""
    for r in [r for r in ents if r >= resume]:
        del ents[r]
    return {r: ents[r] for r in rows if r < resume}


@dataclass
class FreshState:
    """A stream's last input (``ids``), the keys/values of its first ``store.length`` tokens and
    the entropies it ran (``ents``: position -> bits)."""

    ids: list[int]
    store: KVStore
    ents: dict[int, float] = field(default_factory=dict)


class FreshJob:
    """One request in fresh-window mode: a single :class:`Segment` after the reused prefix.

    ``entropies`` maps each wanted position to bits once :meth:`accept` ran; ``state`` is the
    stream's new state; ``reused`` counts tokens taken from the cache.
    """

    def __init__(self, state: FreshState | None, ids: Sequence[int], rows: Sequence[int], shape: KVShape, common, *,
                 keep: bool = True, most: int | None = None):
        self.ids, self.rows = ids, rows
        self.entropies: dict[int, float] = {}
        resume = resume_at(state.ids, state.ents, ids, rows, common) if state is not None else 0
        # A state whose input is all of this one still runs the last token when its
        # entropy is wanted and was not kept (resume_at said so).
        if resume > 0 and resume <= state.store.length:
            state.store.truncate(resume)
            self.entropies = kept_entropies(state.ents, rows, resume)
            self.state = state
        else:
            resume = 0
            if state is not None:
                state.store.release()
            self.state = FreshState([], KVStore(shape, len(ids), most)) if keep else None
        self.reused = resume
        self._done = resume >= len(ids)
        if self._done and self.state is not None:
            self.state.ids = list(self.ids)

    def next_segment(self) -> Segment | None:
        if self._done:
            return None
        self._done = True
        r = self.reused
        store = self.state.store if self.state is not None else None
        past = [(store, 0, r)] if r else []
        return Segment(past, self.ids[r:], [p - r for p in self.rows if p >= r], store)

    def accept(self, entropies: dict[int, float]) -> None:
        ran = {t + self.reused: h for t, h in entropies.items()}
        self.entropies.update(ran)
        if self.state is not None:
            self.state.ids = list(self.ids)
            self.state.ents.update(ran)


class StreamCache:
    """Stream states kept between scorer calls (see the module docstring).

    Sizes are store capacities in tokens. ``call`` numbers the scorer's calls. ``held``,
    ``evictions`` and ``not_kept`` are plain counters, safe to read from another thread.
    """

    def __init__(self, max_streams: int, cache_tokens: int):
        self.max_streams, self.cache_tokens = max_streams, cache_tokens
        self._entries: OrderedDict[str, tuple[object, int, int]] = OrderedDict()  # stream -> (state, tokens, call)
        self._held = 0
        self.evictions = 0
        self.not_kept = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self):
        return iter(self._entries)

    def __contains__(self, stream: object) -> bool:
        return stream in self._entries

    @property
    def held(self) -> int:
        """Tokens of store capacity held."""
        return self._held

    def take(self, stream: str):
        """Remove and return ``stream``'s state (``None`` if not held)."""
        entry = self._entries.pop(stream, None)
        if entry is None:
            return None
        self._held -= entry[1]
        return entry[0]

    def peek(self, stream: str):
        """``stream``'s state, left in place (``None`` if not held)."""
        entry = self._entries.get(stream)
        return entry[0] if entry is not None else None

    def touch(self, stream: str, call: int) -> None:
        """Mark ``stream`` as used in ``call`` (never evicted for another stream of that call)."""
        entry = self._entries.get(stream)
        if entry is not None:
            self._entries[stream] = (entry[0], entry[1], call)
            self._entries.move_to_end(stream)

    def size(self, stream: str) -> int:
        """Tokens of capacity ``stream``'s state holds (0 if none)."""
        entry = self._entries.get(stream)
        return entry[1] if entry is not None else 0

    def make_room(self, tokens: int, call: int) -> bool:
        """Evict streams not used in ``call`` until ``tokens`` more fit; False if they cannot."""
        while self._entries and (self._held + tokens > self.cache_tokens or len(self._entries) >= self.max_streams):
            oldest = next(iter(self._entries))
            if self._entries[oldest][2] == call:
                break
            self.take(oldest)
            self.evictions += 1
        return self._held + tokens <= self.cache_tokens

    def put(self, stream: str, state, tokens: int, call: int) -> bool:
        """Keep ``state`` (``tokens`` of capacity) if there is room after :meth:`make_room`; it
        replaces a state the stream still holds (two requests of one stream in one call)."""
        self.take(stream)
        if tokens > self.cache_tokens or not self.make_room(tokens, call) or len(self._entries) >= self.max_streams:
            self.not_kept += 1
            return False
        self._entries[stream] = (state, tokens, call)
        self._held += tokens
        return True

    def clear(self) -> None:
        self._entries.clear()
        self._held = 0


class OneShot:
    """A request run without a stream cache: one segment from position 0."""

    reused = 0

    def __init__(self, ids, rows):
        self.ids, self.rows, self.entropies, self._done = ids, rows, {}, False

    def next_segment(self) -> Segment | None:
        if self._done:
            return None
        self._done = True
        return Segment([], self.ids, list(self.rows), None)

    def accept(self, entropies: dict[int, float]) -> None:
        self.entropies = entropies


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    # Compare in slices first: prefixes are long and mostly equal.
    while i + 256 <= n and a[i : i + 256] == b[i : i + 256]:
        i += 256
    while i < n and a[i] == b[i]:
        i += 1
    return i
