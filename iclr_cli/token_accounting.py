"""Reasoning-token accounting: the one definition every command reports (METHOD.md, "What the
paper measured": deletion ratio = reasoning tokens deleted / reasoning tokens generated).

Everything is computed from two texts per reasoning part: the text as generated and the text
as written (what really went to the output file or the next request: an item a writer dropped
whole counts as ``""``, an item it had to leave unedited counts as its original text). Tokens
are those of the proxy's tokenizer, named wherever the numbers are shown.

Per part, with ``count`` the tokenizer's token count of a whole text:

- ``generated`` = count(text as generated)                        (before)
- ``written``   = count(text as written)                          (after)
- ``markers``   = ``[SKIP]`` markers added by this compression (occurrences in the written
  text minus those already in the generated text, never below 0)
- ``marker_tokens`` = ``markers`` x count("[SKIP]")
- ``kept``      = ``written`` - ``marker_tokens``
- ``deleted``   = ``generated`` - ``kept``

so that ``generated = kept + deleted`` and ``written = kept + marker_tokens`` hold exactly, for
every variant and every part. ``deleted`` counts the reasoning that is gone; the markers that
stand in for it are counted apart and never offset it. Because the texts are tokenized whole,
a random-R deletion that joins two words may re-tokenize by a token or two; that difference
is part of ``deleted``, which is what a reader of the written text really saves.
A ``[SKIP]`` already in the generated text (a file pruned before) is ordinary kept text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from iclr_cli.blocks import SKIP
from iclr_cli.scoring.base import Tokenizer

CountTokens = Callable[[str], int]


@dataclass(frozen=True)
class ReasoningTokens:
    """Reasoning tokens of one part, step, trajectory or run (see the module docstring).

    All counts are in tokens of one tokenizer except ``markers``, which counts ``[SKIP]``
    markers. ``generated == kept + deleted`` and ``written == kept + marker_tokens`` always.
    """

    generated: int = 0
    written: int = 0
    kept: int = 0
    deleted: int = 0
    markers: int = 0
    marker_tokens: int = 0

    def __add__(self, other: ReasoningTokens) -> ReasoningTokens:
        return ReasoningTokens(
            self.generated + other.generated,
            self.written + other.written,
            self.kept + other.kept,
            self.deleted + other.deleted,
            self.markers + other.markers,
            self.marker_tokens + other.marker_tokens,
        )

    @property
    def deletion_ratio(self) -> float | None:
        """``deleted / generated``; ``None`` when nothing was generated."""
        return self.deleted / self.generated if self.generated else None

    def to_record(self, prefix: str = "reasoning_tokens_") -> dict[str, int]:
        """Flat fields for JSON records: ``reasoning_tokens_generated``, ``..._written``,
        ``..._kept``, ``..._deleted``, ``skip_markers``, ``skip_marker_tokens``."""
        return {
            f"{prefix}generated": self.generated,
            f"{prefix}written": self.written,
            f"{prefix}kept": self.kept,
            f"{prefix}deleted": self.deleted,
            "skip_markers": self.markers,
            "skip_marker_tokens": self.marker_tokens,
        }


class TokenViews:
    """``tokens_before``/``tokens_after``/``tokens_removed``: the names earlier reports used, as
    read-only views of a report's ``tokens`` (:class:`ReasoningTokens`)."""

    tokens: ReasoningTokens

    @property
    def tokens_before(self) -> int:
        """Reasoning tokens as generated."""
        return self.tokens.generated

    @property
    def tokens_after(self) -> int:
        """Reasoning tokens as written (kept text plus ``[SKIP]`` markers)."""
        return self.tokens.written

    @property
    def tokens_removed(self) -> int:
        """Reasoning tokens deleted (the numerator of the deletion ratio)."""
        return self.tokens.deleted


def token_counter(tokenizer: Tokenizer) -> CountTokens:
    """``text -> number of tokens`` under ``tokenizer`` (no special tokens added)."""
    return lambda text: len(tokenizer.token_spans(text)) if text else 0


def account(count: CountTokens, pairs: Iterable[tuple[str, str]]) -> ReasoningTokens:
    """Account ``(text as generated, text as written)`` pairs, one per reasoning part, summed.

    ``count`` is the token count of a text (:func:`token_counter`). See the module docstring
    for the definitions; the two identities hold exactly by construction.
    """
    total = ReasoningTokens()
    skip_tokens: int | None = None
    for generated, written in pairs:
        g, w = count(generated), count(written)
        markers = max(0, written.count(SKIP) - generated.count(SKIP))
        if markers and skip_tokens is None:
            skip_tokens = count(SKIP)
        marker_tokens = markers * (skip_tokens or 0)
        kept = w - marker_tokens
        total = total + ReasoningTokens(g, w, kept, g - kept, markers, marker_tokens)
    return total


def summary_rows(tokens: ReasoningTokens, tokenizer: str) -> list[tuple[str, object]]:
    """The accounting as (name, value) rows for the stderr summaries of prune, score and diff."""
    ratio = tokens.deletion_ratio
    return [
        (f"reasoning tokens generated ({tokenizer})", tokens.generated),
        ("reasoning tokens deleted", tokens.deleted),
        ("reasoning tokens kept", tokens.kept),
        ("[SKIP] markers added (tokens)", f"{tokens.markers} ({tokens.marker_tokens})"),
        ("reasoning tokens written", tokens.written),
        ("deletion ratio (deleted / generated)", "-" if ratio is None else f"{ratio:.3f}"),
    ]


WHOLE_ITEM_WHY = "encrypted reasoning can't be edited"
"""Why a reasoning item went out whole: its text sits beside ``encrypted_content`` (OpenAI
Responses / Codex), which the provider decrypts and re-reads in place of the text, so an edited
text would change nothing; ``--encrypted-reasoning drop`` removes the item instead
(docs/FORMAT.md, "Provider rules"; :class:`iclr_cli.formats.base.OpaqueEdits`)."""


def blocks_removed_cell(removed: int, whole_items: int, whole_blocks: int) -> str:
    """The "blocks removed" cell of ``prune``'s and ``diff``'s summaries, alike: ``removed``,
    and when ``whole_items`` encrypted items went whole, how many of the removed blocks they
    held and why: ``5 (5 in 2 items dropped whole: encrypted reasoning can't be edited)``."""
    if not whole_items:
        return str(removed)
    return f"{removed} ({whole_blocks} in {whole_items} item{'s' if whole_items != 1 else ''} dropped whole: {WHOLE_ITEM_WHY})"


def blocks_cell(candidates: int, sealed: int) -> str:
    """The "reasoning blocks" cell of ``score``'s, ``prune``'s and ``diff``'s summaries, alike:
    the blocks a variant may select, and apart the blocks of reasoning the provider rule left
    sealed (:mod:`iclr_cli.formats.sealing`: read as context, never a candidate), which
    ``floor(rho * N)`` does not count: ``0 (+17 sealed by the provider rule, not candidates)``."""
    if not sealed:
        return str(candidates)
    return f"{candidates} (+{sealed} sealed by the provider rule, not candidates)"
