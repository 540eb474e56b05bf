"""Online write-back: compress each completed step against the history as it stands.

METHOD.md, "Select and replace": only the reasoning of the just-completed step is compressed;
the compressed text is written back and never restored, so step t is scored on a history in
which steps before t are already compressed. :func:`compress_step` does one step (replay
calls it after every agent turn); :func:`compress_trajectories` simulates the online loop over
recorded trajectories, batching step t of every trajectory into one scorer call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from iclr_cli.blocks import SKIP, Split, is_candidate, split_blocks
from iclr_cli.context import render_for_scoring, render_prompt, render_step
from iclr_cli.policies import DEFAULT_RATIO, Variant, bottom_k, random_token_deletion
from iclr_cli.scoring.base import ScoreRequest, ScoreResult, Scorer, Tokenizer
from iclr_cli.trajectory import Part, Step, Trajectory


@dataclass(frozen=True)
class BlockReport:
    """One reasoning block of a step: what the proxy thought of it and whether it went.

    ``block`` numbers the candidate blocks of the step from 0 (``[SKIP]`` markers from an
    earlier compression and blocks holding text-encoded tool calls are not candidates); ``part`` is the index of the reasoning part it
    lies in; ``n_tokens`` and ``entropy_bits`` are ``None`` when the step was not scored.
    """

    block: int
    part: int
    text: str
    selected: bool
    n_tokens: int | None = None
    entropy_bits: float | None = None


@dataclass(frozen=True)
class StepReport:
    """What compression did to one step.

    ``tokens_before`` / ``tokens_after`` count the step's reasoning, as generated and as
    written back, with the tokenizer named in the run summary. ``tokens_removed`` counts the
    deleted content itself (the removed blocks, the deleted random tokens, or everything for
    ``delete-all``): it is the numerator of the deletion ratio and differs from
    ``tokens_before - tokens_after`` by the ``[SKIP]`` markers and by re-tokenization.
    ``skipped`` is the reason the step was left unpruned, if it was.
    """

    trajectory: str
    step: int
    blocks: tuple[BlockReport, ...]
    tokens_before: int
    tokens_after: int
    tokens_removed: int = 0
    skipped: str | None = None
    windowed: bool = False
    history_kept: int | None = None
    context_tokens: int | None = None

    @property
    def n_removed(self) -> int:
        return sum(b.selected for b in self.blocks)


@dataclass(frozen=True)
class CompressionResult:
    """A trajectory before and after online compression, with one report per step."""

    original: Trajectory
    compressed: Trajectory
    steps: tuple[StepReport, ...]


@dataclass(frozen=True)
class Settings:
    """Knobs of the online loop (defaults from METHOD.md).

    ``ratio`` is rho of BottomK; ``seed`` seeds ``random-R``; ``splitter`` names the block
    splitter (:data:`iclr_cli.blocks.SPLITTERS`).
    """

    variant: Variant
    ratio: float = DEFAULT_RATIO
    seed: int = 0
    splitter: str = "paragraph"


@dataclass
class _Pending:
    """A step waiting for its scores."""

    step: Step
    splits: list[Split]
    candidates: list[tuple[int, int]]  # (part index, block index within the part)
    request: ScoreRequest | None


def count_tokens(tokenizer: Tokenizer, parts: Sequence[Part]) -> int:
    """Tokens of the given reasoning parts under ``tokenizer``."""
    return sum(len(tokenizer.token_spans(p.text)) for p in parts if p.text)


def _prepare(traj_id: str, prompt: Sequence[str], history: Sequence[str], step: Step, settings: Settings) -> _Pending:
    splits = [split_blocks(p.text, settings.splitter) for p in step.reasoning]
    candidates = [(pi, bi) for pi, sp in enumerate(splits) for bi, b in enumerate(sp.blocks) if is_candidate(b)]
    request = None
    if settings.variant.needs_scores and candidates:
        step_only = settings.variant.kind == "step-only"
        rendered = render_for_scoring(step, splits, step_only=step_only)
        offsets = {}
        i = 0
        for pi, sp in enumerate(splits):
            for bi in range(len(sp.blocks)):
                offsets[(pi, bi)] = rendered.spans[i]
                i += 1
        request = ScoreRequest(
            stream=traj_id,
            prompt=() if step_only else tuple(prompt),
            history=() if step_only else tuple(history),
            step=rendered.text,
            spans=tuple(offsets[c] for c in candidates),
        )
    return _Pending(step, splits, candidates, request)


def _finish(traj_id: str, pending: _Pending, result: ScoreResult | None, settings: Settings, tokenizer: Tokenizer) -> tuple[Step, StepReport]:
    step, splits, candidates = pending.step, pending.splits, pending.candidates
    variant = settings.variant
    before = count_tokens(tokenizer, step.reasoning)
    texts = [p.text for p in step.reasoning]
    selected: frozenset[int] = frozenset()
    removed = 0
    scores: list = [None] * len(candidates)
    skipped = result.skipped if result else None

    if variant.needs_scores and result is not None and not skipped:
        scores = list(result.blocks)
        selected = bottom_k([s.entropy_bits for s in scores], settings.ratio)
    elif variant.kind == "delete-all":
        selected = frozenset(range(len(candidates)))
        texts = ["" for _ in texts]
    elif variant.kind == "random":
        texts, removed = _delete_random_tokens(texts, tokenizer, variant.param or 0, settings.seed, traj_id, step.index)

    if variant.needs_scores and selected:
        new_blocks = [list(sp.blocks) for sp in splits]
        for i in selected:
            pi, bi = candidates[i]
            new_blocks[pi][bi] = SKIP
        texts = [sp.join(nb) for sp, nb in zip(splits, new_blocks)]
        removed = sum(len(tokenizer.token_spans(splits[pi].blocks[bi])) for pi, bi in (candidates[i] for i in selected))
    if variant.kind == "delete-all":
        removed = before

    new_step = step.with_reasoning(texts) if texts != [p.text for p in step.reasoning] else step
    reports = tuple(
        BlockReport(
            block=i,
            part=pi,
            text=splits[pi].blocks[bi],
            selected=i in selected,
            n_tokens=scores[i].n_tokens if scores[i] is not None else None,
            entropy_bits=scores[i].entropy_bits if scores[i] is not None else None,
        )
        for i, (pi, bi) in enumerate(candidates)
    )
    report = StepReport(
        trajectory=traj_id,
        step=step.index,
        blocks=reports,
        tokens_before=before,
        tokens_after=count_tokens(tokenizer, new_step.reasoning),
        tokens_removed=removed,
        skipped=skipped,
        windowed=result.windowed if result else False,
        history_kept=result.history_kept if result and not skipped else None,
        context_tokens=result.context_tokens if result and not skipped else None,
    )
    return new_step, report


def _delete_random_tokens(texts: list[str], tokenizer: Tokenizer, percent: int, seed: int, traj_id: str, step: int) -> tuple[list[str], int]:
    spans = [tokenizer.token_spans(t) for t in texts]
    flat = [(pi, s) for pi, ps in enumerate(spans) for s in ps]
    gone = random_token_deletion(len(flat), percent, seed=seed, trajectory=traj_id, step=step)
    cut: list[list[tuple[int, int]]] = [[] for _ in texts]
    for i in sorted(gone):
        pi, span = flat[i]
        cut[pi].append(span)
    out = []
    for text, spans_to_cut in zip(texts, cut):
        pieces, pos = [], 0
        for s, e in spans_to_cut:
            pieces.append(text[pos:s])
            pos = e
        pieces.append(text[pos:])
        out.append("".join(pieces))
    return out, len(gone)


def compress_step(
    trajectory_id: str,
    prompt: Sequence[Part],
    history: Sequence[Step],
    step: Step,
    settings: Settings,
    scorer: Scorer | None,
    tokenizer: Tokenizer,
) -> tuple[Step, StepReport]:
    """Compress the just-completed ``step`` given P and the (already compressed) history.

    Returns the step to write back and its report. ``scorer`` may be ``None`` for variants
    that do not score (``none``, ``delete-all``, ``random-R``).

    Raises:
        ValueError: when the variant needs scores and ``scorer`` is ``None``.
    """
    if settings.variant.needs_scores and scorer is None:
        raise ValueError(f"variant {settings.variant.name} needs a scorer")
    pending = _prepare(trajectory_id, render_prompt(prompt), [render_step(s) for s in history], step, settings)
    result = scorer.score([pending.request])[0] if pending.request is not None else None
    return _finish(trajectory_id, pending, result, settings, tokenizer)


def compress_trajectories(
    trajectories: Sequence[Trajectory],
    settings: Settings,
    scorer: Scorer | None,
    tokenizer: Tokenizer,
    *,
    on_step: Callable[[StepReport], None] | None = None,
) -> list[CompressionResult]:
    """Run the online loop over recorded trajectories; results in input order.

    Step t of every trajectory is scored in one batched scorer call, after step t-1 of each
    was written back. ``on_step`` is called once per completed step (progress bars).

    Raises:
        ValueError: when the variant needs scores and ``scorer`` is ``None``.
    """
    if settings.variant.needs_scores and scorer is None:
        raise ValueError(f"variant {settings.variant.name} needs a scorer")
    prompts = [render_prompt(t.prompt) for t in trajectories]
    histories: list[list[str]] = [[] for _ in trajectories]
    done_steps: list[list[Step]] = [[] for _ in trajectories]
    reports: list[list[StepReport]] = [[] for _ in trajectories]
    longest = max((len(t.steps) for t in trajectories), default=0)
    for t in range(longest):
        active = [i for i, traj in enumerate(trajectories) if t < len(traj.steps)]
        pendings = {i: _prepare(trajectories[i].id, prompts[i], histories[i], trajectories[i].steps[t], settings) for i in active}
        to_score = [i for i in active if pendings[i].request is not None]
        results = scorer.score([pendings[i].request for i in to_score]) if to_score else []
        by_index = dict(zip(to_score, results))
        for i in active:
            new_step, report = _finish(trajectories[i].id, pendings[i], by_index.get(i), settings, tokenizer)
            done_steps[i].append(new_step)
            reports[i].append(report)
            if settings.variant.kind == "iclr":
                histories[i].append(render_step(new_step))
            if on_step is not None:
                on_step(report)
    return [
        CompressionResult(traj, traj.with_steps(done_steps[i]), tuple(reports[i]))
        for i, traj in enumerate(trajectories)
    ]
