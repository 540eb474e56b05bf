"""A deterministic, model-free scorer for tests and dry runs (``--model fake``).

Tokens are regex pieces (words, single punctuation marks, whitespace runs). The "entropy" of
token t is a hash of the previous and current token mapped to [0, 8) bits, so scores depend
on context and windowing exactly as a real proxy's would, while staying reproducible and
instant. Never use it for real compression.

It can also take the time a real proxy would (``--proxy-model fake:300``: 300 tokens a second),
so the latency of ``iclr serve`` (its budget, late steps, the scorer queue) can be tried
without a model: like the real scorer with kept state, a request costs the tokens after what
it shares with its stream's previous request, so a conversation's first scored step pays for
all of P and later ones only for their new tokens, and a step fed along the stream
(``ScoreRequest.partial``) charges its settled tokens then, so the finished step pays only for
the rest. The scores are the same at any pace.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence

from iclr_cli.errors import UsageError
from iclr_cli.scoring.base import BlockScore, DEFAULT_MAX_TOKENS, Overflow, ScoreRequest, ScoreResult, ScoringCancelled
from iclr_cli.scoring.recheck import Recheck
from iclr_cli.scoring.window import lay_out, piece

_TOKEN = re.compile(r"\w+|[^\w\s]|\s+")
NAME = "fake"
_KEPT_STREAMS = 1000  # streams whose last input a paced fake remembers (least recently used out)


def parse_fake(spec: str) -> float | None:
    """The pace of a ``fake`` model spec: ``fake`` -> ``None`` (instant), ``fake:300`` -> 300
    tokens a second.

    Raises:
        UsageError: for ``fake:X`` where X is not a positive number.
    """
    if spec == NAME:
        return None
    try:
        pace = float(spec.removeprefix(NAME + ":"))
    except ValueError:
        pace = 0.0
    if not pace > 0 or pace == float("inf"):
        raise UsageError(f"--model {spec}: a paced fake is fake:N, N tokens a second (a positive number), e.g. fake:300")
    return pace


def is_fake(spec: str) -> bool:
    """True for ``fake`` and ``fake:N``."""
    return spec == NAME or spec.startswith(NAME + ":")


class RegexTokenizer:
    """Words, punctuation marks and whitespace runs as tokens."""

    name = "regex-words"

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _TOKEN.finditer(text)]


def _token_id(piece: str) -> int:
    return int.from_bytes(hashlib.blake2b(piece.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


class FakeScorer:
    """Context-dependent pseudo-entropies from a hash; see the module docstring.

    ``calls`` counts :meth:`score` invocations; with ``record_requests`` every request is kept
    in ``requests_seen`` (tests check batching and order; off by default so long runs stay
    flat in memory).

    Args:
        tokens_per_s: take the time a proxy forwarding this many tokens a second would, with
            kept state per stream (module docstring); ``None``: instant.
        gate: when given, every :meth:`score` call first waits until it is set (tests hold
            scores back this way, without timing anything).

    :meth:`cancel` ends a wait for the pace or the gate at once with
    :class:`~iclr_cli.scoring.base.ScoringCancelled`, as the real scorer stops between
    forward chunks.
    """

    name = NAME

    def __init__(self, max_tokens: int = DEFAULT_MAX_TOKENS, overflow: Overflow = "window", *, record_requests: bool = False,
                 tokens_per_s: float | None = None, gate: threading.Event | None = None):
        self.max_tokens = max_tokens
        self.overflow = overflow
        self.tokenizer = RegexTokenizer()
        self.calls = 0
        self.record_requests = record_requests
        self.requests_seen: list[ScoreRequest] = []
        self.tokens_per_s = tokens_per_s
        self.recheck: Recheck | None = None  # set by iclr_cli.pipeline.build_engines (the fast profile's)
        self.gate = gate
        self.tokens_run = 0  # tokens a paced fake charged for (after each stream's kept prefix)
        self._kept: OrderedDict[str, list[int]] = OrderedDict()  # stream -> its last input's ids
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Stop for good: waits in progress and later calls raise ScoringCancelled."""
        self._cancelled.set()

    def prefills(self, request: ScoreRequest) -> bool:
        """True when scoring ``request`` charges all of its tokens: a paced fake keeps no
        state of its stream yet (an instant one has no cost to save)."""
        return self.tokens_per_s is not None and request.stream not in self._kept

    def forget(self, stream: str) -> None:
        """Drop ``stream``'s kept state."""
        self._kept.pop(stream, None)

    def rename(self, old: str, new: str) -> None:
        """Keep ``old``'s state under ``new`` (as the real scorer's :meth:`rename`)."""
        kept = self._kept.pop(old, None)
        if kept is not None:
            self._keep(new, kept)

    def cache_info(self) -> dict | None:
        """A paced fake's kept state as the real scorer reports its own (``iclr serve``'s
        ``/stats``): streams held and ``forward_tokens`` charged; ``None`` for an instant one."""
        if self.tokens_per_s is None:
            return None
        return {"streams": len(self._kept), "tokens": None, "bytes": None, "budget_tokens": None, "budget_bytes": None,
                "evictions": 0, "not_kept": 0, "forward_tokens": self.tokens_run, "reused_tokens": None}

    def _hold(self, seconds: float | None) -> None:
        """Wait for the gate, then ``seconds`` (the pace); ScoringCancelled once cancelled."""
        if self.gate is not None:
            while not self.gate.wait(0.05):
                if self._cancelled.is_set():
                    raise ScoringCancelled("the scorer was stopped")
        if seconds and self._cancelled.wait(seconds):
            raise ScoringCancelled("the scorer was stopped")
        if self._cancelled.is_set():
            raise ScoringCancelled("the scorer was stopped")

    def _charge(self, stream: str, ids: list[int]) -> int:
        """Tokens of ``ids`` after what they share with ``stream``'s previous input."""
        before = self._kept.get(stream) or []
        common = 0
        for a, b in zip(before, ids):
            if a != b:
                break
            common += 1
        return len(ids) - common

    def _keep(self, stream: str, ids: list[int]) -> None:
        self._kept.pop(stream, None)
        self._kept[stream] = ids
        while len(self._kept) > _KEPT_STREAMS:
            self._kept.popitem(last=False)

    def _encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        # A token's id is a hash of its text, never the order tokens were first seen: scores
        # must not depend on what this scorer (or another worker's) scored before.
        spans = self.tokenizer.token_spans(text)
        return [_token_id(text[s:e]) for s, e in spans], spans

    @staticmethod
    def _entropy(prev: int, tok: int) -> float:
        digest = hashlib.blake2b(f"{prev}:{tok}".encode(), digest_size=4).digest()
        return int.from_bytes(digest, "big") / 2**32 * 8.0

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Pseudo-entropies for every request, in order (after the gate and the pace).

        Raises:
            ScoringCancelled: once :meth:`cancel` was called.
        """
        self.calls += 1
        if self.record_requests:
            self.requests_seen.extend(requests)
        requests = [r.settled() if r.partial else r for r in requests]
        layouts = [lay_out(req, self._encode, self.max_tokens, self.overflow) for req in requests]
        pending = [0] * len(requests)
        if self.tokens_per_s is not None:  # a context feed's piece (ScoreRequest.limit), as the real scorer cuts it
            for i, (req, lay) in enumerate(zip(requests, layouts)):
                if req.pieced and req.stream in self._kept and not lay.plan.skipped:
                    layouts[i], pending[i] = piece(lay, len(lay.ids) - self._charge(req.stream, list(lay.ids)), req.limit)
        if self.tokens_per_s is not None:
            run = sum(self._charge(req.stream, list(lay.ids)) for req, lay in zip(requests, layouts) if not lay.plan.skipped)
            self._hold(run / self.tokens_per_s)
            self.tokens_run += run
            for req, lay in zip(requests, layouts):  # kept once scored, as the real scorer keeps its state
                if not lay.plan.skipped:
                    self._keep(req.stream, list(lay.ids))
        else:
            self._hold(None)
        results = []
        for i, (req, layout) in enumerate(zip(requests, layouts)):
            if layout.plan.skipped:
                results.append(ScoreResult((), skipped=layout.plan.skipped))
                continue
            if req.partial:  # a feed: a paced fake charged its tokens and kept them, as the real one keeps its state
                results.append(ScoreResult((), context_tokens=len(layout.ids), pending_tokens=pending[i]))
                continue
            ids = layout.ids
            blocks = []
            for positions in layout.block_positions:
                hs = [self._entropy(ids[p - 1], ids[p]) for p in positions]
                blocks.append(BlockScore(len(hs), sum(hs) / len(hs) if hs else None))
            results.append(
                ScoreResult(
                    tuple(blocks),
                    windowed=layout.plan.windowed,
                    history_kept=len(req.history) - layout.plan.first_history,
                    context_tokens=len(ids),
                    history_tail=layout.plan.history_tail or None,
                )
            )
        return results
