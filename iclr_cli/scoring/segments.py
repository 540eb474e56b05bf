"""Token ids of P and history segments, memoised, never holding a huge segment twice.

The scorer lays out every request from its segments; P and history repeat from one step to
the next, so their tokens are memoised. Three views, one per use (docs/scoring.md, "Huge tool outputs"):

- :meth:`SegmentTokens.tail`: the ids a history segment gives a fresh window, at most its
  last ``limit`` tokens (:func:`~iclr_cli.scoring.window.tail_ids`): a 50 MB tool output is
  never tokenized whole;
- :meth:`SegmentTokens.whole`: every id of a segment (``--context sliding`` reads every
  token), tokenized in pieces and kept as a compact ``array("i")``;
- :meth:`SegmentTokens.count`: the number of tokens (``auto``'s cost estimate), keeping no ids.

A long segment is keyed by its length, hash and edges rather than by the text itself, so a
memo never keeps another copy of it alive (``auto`` plans on a history rendered once more
than the scoring loop's).
"""

from __future__ import annotations

from array import array

from iclr_cli.scoring.tokenizer import count_ids, encode_ids
from iclr_cli.scoring.window import tail_ids

LONG_KEY = 1 << 16
"""Characters from which a segment is keyed by its length, hash and edges."""


def memo_key(text: str):
    """The memo key of a segment (see the module docstring)."""
    if len(text) < LONG_KEY:
        return text
    return len(text), hash(text), text[:256], text[-256:]


class SegmentTokens:
    """Memoised token views of segments for one tokenizer and input ``limit`` (tokens);
    each memo keeps its ``size`` most recently used segments."""

    def __init__(self, tokenizer, limit: int, size: int = 4096):
        self.tokenizer, self.limit, self.size = tokenizer, limit, size
        self._tails: dict = {}
        self._wholes: dict = {}
        self._counts: dict = {}

    def _remember(self, memo: dict, key, value):
        memo.pop(key, None)
        if len(memo) >= self.size:
            del memo[next(iter(memo))]
        memo[key] = value  # re-inserted: least recently used first
        return value

    def tail(self, text: str) -> list[int]:
        """The last ``limit`` token ids of ``text`` (all of them when it has fewer)."""
        key = memo_key(text)
        hit = self._tails.get(key)
        if hit is None:
            hit = tail_ids(text, self.tokenizer.encode, self.limit)
        return self._remember(self._tails, key, hit)

    def whole(self, text: str) -> array:
        """Every token id of ``text``, as ``array("i")``."""
        key = memo_key(text)
        hit = self._wholes.get(key)
        if hit is None:
            hit = encode_ids(self.tokenizer, text)
        return self._remember(self._wholes, key, hit)

    def count(self, text: str) -> int:
        """The number of tokens of ``text``."""
        key = memo_key(text)
        hit = self._counts.get(key)
        if hit is None:
            hit = len(self._wholes[key]) if key in self._wholes else count_ids(self.tokenizer, text)
        return self._remember(self._counts, key, hit)

    def clear(self) -> None:
        for memo in (self._tails, self._wholes, self._counts):
            memo.clear()
