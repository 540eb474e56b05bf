"""Which part of the history the proxy sees when the input is over its limit (pure).

METHOD.md, "Score": with ``--overflow window`` the scorer sees P, then as much of the most
recent history as fits, then the whole step; with ``--overflow skip`` (the paper's rule) an
over-limit step is not pruned. A step whose own tokens exceed the limit is skipped either way.

To keep prefix-cache reuse working, the oldest history is dropped on a fixed grid: history
segment ``i`` is kept only if its starting token offset (counted from the first history
segment) is at or past a multiple of ``stride`` tokens. The window start therefore moves in
jumps of about ``stride`` tokens and stays put between jumps, and it depends only on token
counts, never on run order or cache state: cached and uncached scoring see the same input.

A history segment that does not fit the history budget even alone (a huge tool output) is
not dropped whole (docs/scoring.md, "Huge tool outputs"): its most recent tokens are kept, cut at a token
boundary, from the first grid point that leaves the history within the budget, as the
sliding window keeps the most recent tokens. The proxy never sees more than ``limit`` tokens
of any segment, so the fresh window tokenizes only a segment's last ``limit`` tokens
(:func:`tail_ids`): a 50 MB tool output is never tokenized whole, and a segment's size in
the plan is that tail's length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class WindowPlan:
    """Outcome of :func:`plan_window`.

    ``first_history`` is the index of the first history segment kept; ``history_cut`` the
    tokens cut from its start when only its most recent ``history_tail`` tokens fit;
    ``prompt_cut`` is the number of tokens cut from the start of P (only when P and the step
    alone are over the limit); ``skipped`` is a reason, or ``None``.
    """

    first_history: int
    prompt_cut: int = 0
    skipped: str | None = None
    history_cut: int = 0
    history_tail: int = 0

    @property
    def windowed(self) -> bool:
        return self.first_history > 0 or self.prompt_cut > 0 or self.history_cut > 0


def plan_window(
    prompt_tokens: int,
    history_tokens: Sequence[int],
    step_tokens: int,
    limit: int,
    *,
    overflow: str = "window",
    stride: int | None = None,
) -> WindowPlan:
    """Decide what the scorer sees for one step.

    Args:
        prompt_tokens: tokens of P.
        history_tokens: tokens of each earlier step, oldest first.
        step_tokens: tokens of the completed step (up to its last reasoning block).
        limit: the scorer's input limit in tokens.
        overflow: ``window`` or ``skip``.
        stride: grid of the window start in tokens; default ``limit // 4``.
    """
    total = prompt_tokens + sum(history_tokens) + step_tokens
    n_hist = len(history_tokens)
    if step_tokens > limit:
        return WindowPlan(n_hist, skipped=f"step is {step_tokens} tokens, over the scorer's limit of {limit}")
    if total <= limit:
        return WindowPlan(0)
    if overflow == "skip":
        return WindowPlan(n_hist, skipped=f"context is {total} tokens, over the limit of {limit} (--overflow skip)")
    if prompt_tokens + step_tokens > limit:
        return WindowPlan(n_hist, prompt_cut=prompt_tokens + step_tokens - limit)
    stride = max(1, stride if stride is not None else limit // 4)
    budget = limit - prompt_tokens - step_tokens
    offsets = []
    acc = 0
    for n in history_tokens:
        offsets.append(acc)
        acc += n
    # Smallest start whose remaining history fits, then rounded up to the stride grid.
    first = n_hist
    remaining = 0
    for i in range(n_hist - 1, -1, -1):
        if remaining + history_tokens[i] > budget:
            break
        remaining += history_tokens[i]
        first = i
    if first > 0 and history_tokens[first - 1] > budget:
        # The segment before the kept ones never fits whole: keep its most recent tokens,
        # from the first grid point after which the history fits the budget.
        i = first - 1
        start = -(-(acc - budget) // stride) * stride
        end = offsets[i] + history_tokens[i]
        if start < end:
            return WindowPlan(i, history_cut=start - offsets[i], history_tail=end - start)
    if first < n_hist:
        grid = -(-offsets[first] // stride) * stride
        while first < n_hist and offsets[first] < grid:
            first += 1
    return WindowPlan(first)


@dataclass(frozen=True)
class Layout:
    """A request turned into one token sequence for the proxy.

    Attributes:
        ids: the token ids the proxy sees, P first, then the kept history, then the step.
        block_positions: for each requested block, the positions in ``ids`` of its tokens (a
            token belongs to the block its first character falls in; METHOD.md, "Score").
            Position 0 has no predicting distribution and is never listed.
        plan: the window decision.
    """

    ids: tuple[int, ...]
    block_positions: tuple[tuple[int, ...], ...]
    plan: WindowPlan


def piece(lay: Layout, held: int, limit: int) -> tuple[Layout, int]:
    """A context feed's piece (:attr:`~iclr_cli.scoring.base.ScoreRequest.limit`): ``lay`` cut
    ``limit`` tokens past the ``held`` ones a stream's state already has, and the tokens left
    out; uncut (0 left) when no more than half of ``limit`` would be left."""
    cut = held + max(1, limit)
    if len(lay.ids) - cut <= limit // 2:
        return lay, 0
    return replace(lay, ids=lay.ids[:cut], block_positions=()), len(lay.ids) - cut


TAIL_MARGIN = 64
"""Tokens dropped at the front of a suffix's tokenization in :func:`tail_ids`."""


def tail_ids(text: str, encode, n: int) -> list[int]:
    """The ids of the last ``n`` tokens of ``text`` (all of them when it has fewer), without
    tokenizing a long text whole.

    A suffix of ``text`` is tokenized, starting ``8 * (n + TAIL_MARGIN)`` characters from
    the end (doubled until it yields enough tokens), and its first ``TAIL_MARGIN`` tokens are
    dropped: only the tokens at the cut can differ from the whole text's, since BPE
    pre-tokenization splits at spaces and punctuation and resynchronises within a word or two.
    A text of at most that many characters is tokenized whole. The result depends on the
    text alone (the same in every run), which is all the window rule needs.

    Args:
        text: the segment.
        encode: ``text -> (ids, offsets)``.
        n: tokens wanted (``0``: none).
    """
    if n <= 0:
        return []
    width = 8 * (n + TAIL_MARGIN)
    while width < len(text):
        ids = encode(text[len(text) - width :])[0]
        if len(ids) >= n + TAIL_MARGIN:
            return list(ids[-n:])
        width *= 2
    return list(encode(text)[0][-n:])


def lay_out(request, encode, limit: int, overflow: str = "window", *, history=None, prompt=None) -> Layout:
    """Tokenize a :class:`~iclr_cli.scoring.base.ScoreRequest` segment by segment and window it.

    Each segment is tokenized on its own (segments end in a blank line, so this matches
    natural boundaries) which keeps the token ids of P and of earlier steps stable from one
    step to the next: the prefix cache relies on it. A history segment contributes its last
    ``limit`` tokens at most (:func:`tail_ids`; the window never shows more of it).

    Args:
        request: the request.
        encode: ``text -> (ids, offsets)`` with ``offsets[i] = (start, end)`` of token i.
        limit: input limit in tokens.
        overflow: ``window`` or ``skip``.
        history: ``segment -> ids`` it contributes (default: its last ``limit`` tokens by
            :func:`tail_ids`; scorers pass a memoised one).
        prompt: ``segment -> ids`` of a P segment (default ``encode(segment)[0]``).
    """
    prompt_ids: list[int] = []
    for seg in request.prompt:
        prompt_ids.extend(prompt(seg) if prompt is not None else encode(seg)[0])
    history = history or (lambda seg: tail_ids(seg, encode, limit))
    hist_ids = [history(seg) for seg in request.history]
    step_ids, step_offsets = encode(request.step)
    plan = plan_window(len(prompt_ids), [len(h) for h in hist_ids], len(step_ids), limit, overflow=overflow)
    if plan.skipped:
        return Layout((), tuple(() for _ in request.spans), plan)
    ids = list(prompt_ids[plan.prompt_cut :])
    for k, h in enumerate(hist_ids[plan.first_history :]):
        ids.extend(h[plan.history_cut :] if k == 0 else h)
    base = len(ids)
    ids.extend(step_ids)
    positions: list[list[int]] = [[] for _ in request.spans]
    block = 0
    spans = request.spans
    for tok, (start, _end) in enumerate(step_offsets):
        while block < len(spans) and start >= spans[block][1]:
            block += 1
        if block == len(spans):
            break
        if start >= spans[block][0] and base + tok > 0:
            positions[block].append(base + tok)
    return Layout(tuple(ids), tuple(tuple(p) for p in positions), plan)


def lay_out_whole(request, encode, limit: int, overflow: str = "window", *, ids=None) -> Layout:
    """The whole input, P + every history segment + the step, for ``--context sliding``.

    The skip rules are those of :func:`plan_window` (a step over ``limit`` is skipped; with
    ``overflow="skip"`` so is a context over it); nothing is windowed here: the sliding
    window (:mod:`iclr_cli.scoring.sliding`) decides what each token attends to. ``ids``
    (``text -> ids``, default ``encode(text)[0]``) tokenizes P and history segments: they need
    no offsets, and a scorer may tokenize a long one in pieces.
    """
    ids = ids or (lambda seg: encode(seg)[0])
    prompt = sum(len(ids(seg)) for seg in request.prompt)
    history = [len(ids(seg)) for seg in request.history]
    plan = plan_window(prompt, history, len(encode(request.step)[0]), limit, overflow=overflow)
    if plan.skipped:
        return Layout((), tuple(() for _ in request.spans), plan)
    whole = lay_out(request, encode, prompt + sum(history) + len(encode(request.step)[0]), overflow, history=ids, prompt=ids)
    return Layout(whole.ids, whole.block_positions, WindowPlan(0))
