"""Compression boundaries of a trajectory, rendered and tokenized as the scorer renders a request.

Boundary ``k`` (``1 <= k < T``, 0-based step index) is the request that produced step ``k``:
P and steps ``0 .. k-1`` (the history as recorded, i.e. as the agent sent it), followed by the
label line of step ``k``'s first part (``[reasoning]\\n``, ``[assistant]\\n``, ...). That is the
proxy's input up to the token before the agent's first token of step ``k``, with every
segment rendered by :mod:`iclr_cli.context` and tokenized on its own, as the scorer does
(:func:`iclr_cli.scoring.window.lay_out`); the label line is cut from the tokenization of the
whole rendered step, so its tokens are those the scorer sees. Its last token is the
**boundary position**: the distribution there predicts the agent's next token (paper section
3.4, "the prompt boundary residual").

The **deleted history** is the same request after ``delete-all`` (every candidate reasoning
block of every earlier step removed with its separators, by the variant's own code,
:func:`iclr_cli.compress.compress_trajectories`). Over the proxy's limit the input is windowed
by the scorer's rule (:func:`iclr_cli.scoring.window.plan_window`) as for the request that
scores the completed step: P, the most recent older history that fits on a grid of
``limit/4`` tokens, then the completed step and the label line, which always stay (P is cut
from its start when they and P alone are over the limit; a completed step over the limit is
skipped, as the scorer skips it). The full and the deleted input are windowed each on its
own; with ``overflow="skip"`` a boundary over the limit is skipped with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from iclr_cli.context import render_part, render_prompt, render_step
from iclr_cli.scoring.base import Tokenizer
from iclr_cli.scoring.window import WindowPlan, plan_window
from iclr_cli.trajectory import Step, Trajectory

Encode = Callable[[str], tuple[list[int], list[tuple[int, int]]]]


@dataclass(frozen=True)
class Boundary:
    """One compression boundary of a trajectory, as text.

    Attributes:
        trajectory: the trajectory id.
        step: ``k``, the 0-based index of the step the request produced.
        prompt: rendered segments of P.
        full: rendered earlier steps as recorded, oldest first.
        deleted: the same after ``delete-all``.
        head: the rendered step ``k`` (whole); only its label line (``head_chars``) is input.
        head_chars: length of that label line in characters.
        reasoning: ``(start, end)`` character spans of step ``k-1``'s reasoning texts inside
            ``full[-1]`` (the just-completed step; empty when it had none).
    """

    trajectory: str
    step: int
    prompt: tuple[str, ...]
    full: tuple[str, ...]
    deleted: tuple[str, ...]
    head: str
    head_chars: int
    reasoning: tuple[tuple[int, int], ...]

    @property
    def removes_reasoning(self) -> bool:
        """True when ``delete-all`` changed the history (there was earlier reasoning to remove)."""
        return self.full != self.deleted


@dataclass(frozen=True)
class Layout:
    """A boundary's input as proxy tokens.

    ``ids``: the tokens (the boundary position is the last); ``plan``: the window decision
    (``plan.skipped`` is the reason when there is no input); ``history_starts[i]``: position of
    history segment ``i`` in ``ids`` (``None`` when the window left it out); ``pools``: token
    positions by name: ``reasoning`` (the just-completed step's reasoning tokens, those whose
    first character lies in a reasoning text) and ``last64`` (the last 64 positions).
    """

    ids: tuple[int, ...]
    plan: WindowPlan
    history_starts: tuple[int | None, ...]
    pools: dict[str, tuple[int, ...]]

    @property
    def history_kept(self) -> int:
        return sum(s is not None for s in self.history_starts)

    def describe(self) -> dict:
        """The window as it goes into records: tokens, windowed, history kept, the kept tail of a
        cut history segment (``history_tail_tokens``, when there is one), skipped."""
        out = {"tokens": len(self.ids), "windowed": self.plan.windowed, "history_kept": self.history_kept}
        if self.plan.history_tail:
            out["history_tail_tokens"] = self.plan.history_tail
        if self.plan.skipped:
            out["skipped"] = self.plan.skipped
        return out


def reasoning_spans(step: Step, elide: int | None = None) -> tuple[tuple[int, int], ...]:
    """Character spans of ``step``'s scorable reasoning texts inside :func:`render_step` of it
    (rendered with ``elide``: reasoning is never elided, the parts before it may be)."""
    spans, pos = [], 0
    for part in step.parts:
        piece = render_part(part, elide)
        if part.is_scorable_reasoning and part.text:
            start = pos + piece.index("\n") + 1
            spans.append((start, start + len(part.text)))
        pos += len(piece)
    return tuple(spans)


def delete_all(trajectory: Trajectory, tokenizer: Tokenizer) -> Trajectory:
    """``trajectory`` with every candidate reasoning block removed, by the ``delete-all``
    variant's own code (``tokenizer`` only counts tokens for its report)."""
    from iclr_cli.compress import Settings, compress_trajectories
    from iclr_cli.policies import parse_variant

    [result] = compress_trajectories([trajectory], Settings(parse_variant("delete-all")), None, tokenizer)
    return result.compressed


def boundaries(full: Trajectory, deleted: Trajectory, elide: int | None = None) -> list[Boundary]:
    """Every boundary ``k = 1 .. T-1`` of ``full``; ``deleted`` is ``full`` after ``delete-all``
    (same steps, same parts). ``elide``: what the sensor reads of long tool outputs and parts
    of P, as the scorer (:func:`iclr_cli.context.elide_text`; ``None``: all)."""
    prompt = render_prompt(full.prompt, elide)
    full_steps = [render_step(s, elide) for s in full.steps]
    del_steps = [render_step(s, elide) for s in deleted.steps]
    out = []
    for k in range(1, len(full.steps)):
        step = full.steps[k]
        if not step.parts:
            continue
        head = render_step(step, elide)
        label = render_part(step.parts[0], elide)
        out.append(Boundary(full.id, k, prompt, tuple(full_steps[:k]), tuple(del_steps[:k]), head,
                            label.index("\n") + 1, reasoning_spans(full.steps[k - 1], elide)))
    return out


def lay_out(prompt: Sequence[str], history: Sequence[str], head: str, head_chars: int, encode: Encode, limit: int,
            overflow: str = "window", reasoning: Sequence[tuple[int, int]] = ()) -> Layout:
    """Tokenize and window one boundary input (module docstring).

    Args:
        prompt, history: rendered segments, each tokenized on its own.
        head: the rendered step whose label line ends the input; ``head_chars`` its length.
        encode: ``text -> (ids, offsets)``, the proxy tokenizer's.
        limit: the input limit in tokens; ``overflow``: ``window`` or ``skip``.
        reasoning: character spans in the last history segment pooled as ``reasoning``.
    """
    prompt_ids: list[int] = []
    for seg in prompt:
        prompt_ids.extend(encode(seg)[0])
    encoded = [encode(seg) for seg in history]
    step_ids, step_offsets = encode(head)
    n_head = 0
    while n_head < len(step_ids) and step_offsets[n_head][1] <= head_chars:
        n_head += 1
    head_ids = step_ids[:n_head]
    # The completed step and the label line form the scorer's "step": always in view.
    last = len(encoded[-1][0]) if encoded else 0
    older = [len(ids) for ids, _ in encoded[:-1]]
    plan = plan_window(len(prompt_ids), older, last + len(head_ids), limit, overflow=overflow)
    if plan.skipped:
        return Layout((), plan, tuple(None for _ in history), {})
    ids = list(prompt_ids[plan.prompt_cut :])
    starts: list[int | None] = []
    for i, (seg_ids, _) in enumerate(encoded):
        if i < plan.first_history and i < len(older):
            starts.append(None)
            continue
        # The oldest kept segment may be cut: only its most recent tokens fit (plan.history_cut).
        cut = plan.history_cut if i == plan.first_history else 0
        starts.append(len(ids))
        ids.extend(seg_ids[cut:])
    ids.extend(head_ids)
    pools = {"last64": tuple(range(max(0, len(ids) - 64), len(ids)))}
    if encoded and reasoning:
        base = starts[-1]
        pools["reasoning"] = tuple(base + t for t, (s, _) in enumerate(encoded[-1][1]) if any(a <= s < b for a, b in reasoning))
    return Layout(tuple(ids), plan, tuple(starts), pools)
