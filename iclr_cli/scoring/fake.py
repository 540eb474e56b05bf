"""A deterministic, model-free scorer for tests and dry runs (``--model fake``).

Tokens are regex pieces (words, single punctuation marks, whitespace runs). The "entropy" of
token t is a hash of the previous and current token mapped to [0, 8) bits, so scores depend
on context and windowing exactly as a real proxy's would, while staying reproducible and
instant. Never use it for real compression.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from iclr_cli.scoring.base import BlockScore, DEFAULT_MAX_TOKENS, Overflow, ScoreRequest, ScoreResult
from iclr_cli.scoring.window import lay_out

_TOKEN = re.compile(r"\w+|[^\w\s]|\s+")


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
    """

    name = "fake"

    def __init__(self, max_tokens: int = DEFAULT_MAX_TOKENS, overflow: Overflow = "window", *, record_requests: bool = False):
        self.max_tokens = max_tokens
        self.overflow = overflow
        self.tokenizer = RegexTokenizer()
        self.calls = 0
        self.record_requests = record_requests
        self.requests_seen: list[ScoreRequest] = []

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
        self.calls += 1
        if self.record_requests:
            self.requests_seen.extend(requests)
        results = []
        for req in requests:
            layout = lay_out(req, self._encode, self.max_tokens, self.overflow)
            if layout.plan.skipped:
                results.append(ScoreResult((), skipped=layout.plan.skipped))
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
