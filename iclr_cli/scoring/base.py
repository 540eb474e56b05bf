"""The scorer interface: one batched method over self-contained requests.

A request carries the rendered scorer input in segments (P, the history as it stands, the
completed step) and the character spans of the step's reasoning blocks. The scorer decides
how much history fits (see :mod:`iclr_cli.scoring.window`), tokenizes, runs the proxy model
and returns one mean entropy in bits per block (METHOD.md, "Score").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol, runtime_checkable

Overflow = Literal["window", "skip"]
DEFAULT_MAX_TOKENS = 42_000
# What the proxy sees once P + history + step is over the limit (iclr_cli.scoring.sliding,
# iclr_cli.scoring.streams): a fresh window recomputed per step, one sliding KV window, or per
# trajectory the sliding one unless the fresh one forwards far fewer tokens (auto).
CONTEXTS = ("auto", "sliding", "fresh")
DEFAULT_CONTEXT = "auto"


class ScoringCancelled(RuntimeError):
    """The scorer was stopped (``iclr serve`` shutting down) before it finished a request.

    Raised between forward chunks once :meth:`TransformersScorer.cancel
    <iclr_cli.scoring.transformers_scorer.TransformersScorer.cancel>` was called, and by the
    serve batching scorer for requests still queued when it stops. Not a scoring failure: the
    step was not scored, and nothing about it should be remembered.
    """


@dataclass(frozen=True)
class ScoreRequest:
    """Everything needed to score the blocks of one completed step.

    Attributes:
        stream: key of the sequence this request continues (the trajectory id). A scorer may
            keep a prefix cache per stream; results never depend on it.
        prompt: rendered segments of P, in order.
        history: rendered earlier steps as they stand (already compressed), oldest first.
            Empty for the ``step-only`` variant.
        step: rendered completed step, cut after its last reasoning block (tokens after it
            cannot change the entropies of block tokens under a causal LM).
        spans: ``(start, end)`` character offsets of each block inside ``step``.
        partial: a feed along the stream (``iclr serve`` scoring a reply while it streams):
            ``step`` is the step as far as it has been generated, ``spans`` are ignored. The
            scorer runs the tokens that can no longer change (:meth:`settled`), keeps their
            keys, values and entropies in the stream's state, and returns no block scores; the
            request for the finished step then runs only what is left. Results never depend
            on feeds: a scorer that keeps no state may do nothing.
        limit: for a partial request with an empty ``step`` (P and the history fed ahead of a
            step, ``iclr serve``'s context feed): run at most this many tokens beyond what the
            stream's state already holds (or all of it when no more than half of ``limit``
            would be left: a rest that small would cost a forward call's fixed cost of its
            own); the result's ``pending_tokens`` says how many are left for the next request
            of the stream. A long history feed is so cut into
            pieces, and a step that can still be on time runs between them. Any prefix of the
            input is a valid state under a causal LM, so results do not change.
    """

    stream: str
    prompt: tuple[str, ...]
    history: tuple[str, ...]
    step: str
    spans: tuple[tuple[int, int], ...]
    partial: bool = False
    limit: int | None = None

    @property
    def pieced(self) -> bool:
        """A context feed to run in pieces: partial, an empty step and a ``limit``."""
        return self.partial and self.limit is not None and not self.step

    def settled(self) -> ScoreRequest:
        """A partial request cut where its tokens are settled: ``step`` up to
        :func:`settled_end`, no spans. BPE tokenizers split text into words before merging
        (GPT-2's pre-tokenizer: a word with its leading space, a run of whitespace), so the
        tokens of everything before the last whitespace run are those of the finished text;
        the last word and the whitespace before it may still merge with what comes."""
        return replace(self, step=self.step[: settled_end(self.step)], spans=())


_LAST_RUN = re.compile(r"\s+\S*\Z")


def settled_end(text: str) -> int:
    """Characters of ``text`` (a prefix of a text still being generated) whose tokens cannot
    change as it grows: up to the start of its last whitespace run (:meth:`ScoreRequest.settled`)."""
    found = _LAST_RUN.search(text)
    return found.start() if found else 0


@dataclass(frozen=True)
class BlockScore:
    """Mean token entropy of one block: ``entropy_bits`` over ``n_tokens`` proxy tokens.

    ``entropy_bits`` is ``None`` when no proxy token starts inside the block.
    """

    n_tokens: int
    entropy_bits: float | None


@dataclass(frozen=True)
class ScoreResult:
    """Scores for one request, or the reason it was not scored.

    Attributes:
        blocks: one :class:`BlockScore` per requested span; empty when ``skipped``.
        skipped: why the step was not scored (``None`` when it was).
        windowed: True when history was left out (or P cut) to fit the input limit.
        history_kept: how many of the most recent history segments the proxy saw.
        context_tokens: length of the scorer input in proxy tokens.
        context: ``fresh`` or ``sliding``, the context mode the request was scored in
            (``None`` from scorers without modes, such as the fake one).
        history_tail: when the oldest kept history segment did not fit whole (fresh window),
            the number of its most recent tokens the proxy saw; ``None`` otherwise.

    A partial request (``ScoreRequest.partial``) gets no blocks; ``context_tokens`` then
    counts the settled tokens its stream's state now holds, and ``pending_tokens`` the tokens
    of its input a ``limit`` left unrun (0 when it ran them all).
    """

    blocks: tuple[BlockScore, ...]
    skipped: str | None = None
    windowed: bool = False
    history_kept: int = 0
    context_tokens: int = 0
    context: str | None = None
    history_tail: int | None = None
    pending_tokens: int = 0


@runtime_checkable
class Tokenizer(Protocol):
    """Counts and locates tokens the way the proxy model does."""

    name: str

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` character offsets of each token of ``text`` (no special tokens)."""
        ...


@runtime_checkable
class Scorer(Protocol):
    """A frozen proxy LM that scores reasoning blocks.

    ``max_tokens`` is the input limit actually enforced: ``min(--max-tokens, proxy max
    positions)``. ``overflow`` says what happens above it (``window`` or ``skip``).
    """

    name: str
    max_tokens: int
    overflow: Overflow
    tokenizer: Tokenizer

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Score every request; results come back in request order.

        Requests of the same ``stream`` must arrive in causal order (step t before step t+1).
        """
        ...
