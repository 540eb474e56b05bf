"""Online write-back: compress each completed step against the history as it stands.

METHOD.md, "Select and replace": only the reasoning of the just-completed step is compressed;
the compressed text is written back and never restored, so step t is scored on a history in
which steps before t are already compressed. :func:`compress_step` does one step (replay
calls it after every agent turn); :func:`compress_trajectories` simulates the online loop over
recorded trajectories, batching step t of every trajectory into one scorer call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from iclr_cli.blocks import SKIP, Split, candidates, holds_delimiter, split_blocks
from iclr_cli.context import render_for_scoring, render_prompt, render_step
from iclr_cli.derived_state import unexternalized
from iclr_cli.policies import DEFAULT_RATIO, Variant, bottom_k, bottom_k_protected, random_token_deletion, selection_margin
from iclr_cli.scoring.base import ScoreRequest, ScoreResult, Scorer, Tokenizer
from iclr_cli.scoring.recheck import Recheck
from iclr_cli.token_accounting import ReasoningTokens, TokenViews, account, token_counter
from iclr_cli.trajectory import Part, Step, Trajectory


@dataclass(frozen=True)
class BlockReport:
    """One reasoning block of a step: what the proxy thought of it and whether it went.

    ``block`` numbers the candidate blocks of the step from 0 (``[SKIP]`` markers from an
    earlier compression and blocks holding text-encoded tool calls are not candidates); ``part`` is the index of the reasoning part it
    lies in; ``n_tokens`` and ``entropy_bits`` are ``None`` when the step was not scored.
    ``protected`` (``iclr-ext`` only) marks a block whose derived state had not reached an
    external carrier, which the variant never removes.
    """

    block: int
    part: int
    text: str
    selected: bool
    n_tokens: int | None = None
    entropy_bits: float | None = None
    protected: bool = False


@dataclass(frozen=True)
class StepReport(TokenViews):
    """What compression did to one step.

    ``tokens`` is the step's reasoning-token accounting (:mod:`iclr_cli.token_accounting`:
    generated, written, kept, deleted, ``[SKIP]`` markers) with the tokenizer named in the run
    summary. ``skipped`` is the reason the step was left unpruned, if it was. ``near_tie`` is
    the fast profile's selection margin in bits when it was under the recheck's threshold
    (:mod:`iclr_cli.scoring.recheck`), else ``None``; ``rechecked``: such a step was rescored
    as ``exact`` scores it (its scores and context fields are then the exact scorer's);
    ``recheck_changed``: the exact selection differs from the fast one.
    """

    trajectory: str
    step: int
    blocks: tuple[BlockReport, ...]
    tokens: ReasoningTokens = ReasoningTokens()
    skipped: str | None = None
    windowed: bool = False
    history_kept: int | None = None
    context_tokens: int | None = None
    context: str | None = None
    history_tail: int | None = None
    near_tie: float | None = None
    rechecked: bool = False
    recheck_changed: bool = False

    @property
    def n_removed(self) -> int:
        return sum(b.selected for b in self.blocks)


@dataclass(frozen=True)
class CompressionResult:
    """A trajectory before and after online compression, with one report per step."""

    original: Trajectory
    compressed: Trajectory
    steps: tuple[StepReport, ...]


class FinishedSteps(Protocol):
    """Steps finished by an earlier, interrupted run of the same online loop (a checkpoint,
    :class:`iclr_cli.checkpoint.SourceSteps`): ``get`` returns a step's reasoning texts as
    written back and its report, ``put`` keeps them."""

    def get(self, trajectory: str, step: int) -> tuple[Sequence[str], StepReport] | None: ...

    def put(self, trajectory: str, step: int, texts: Sequence[str], report: StepReport) -> None: ...


@dataclass(frozen=True)
class Settings:
    """Knobs of the online loop (defaults from METHOD.md).

    ``ratio`` is rho of BottomK; ``seed`` seeds ``random-R``; ``splitter`` names the block
    splitter (:data:`iclr_cli.blocks.SPLITTERS`). ``score_all=False`` sends the scorer only
    steps whose selection depends on the scores: a step whose BottomK removes nothing
    whatever the scores (``floor(rho*N) = 0``, e.g. ``N = 1``) is not scored and its blocks
    report no entropy (``iclr prune``; ``iclr score`` reports every block). The result is
    the same: the scores of the other steps do not depend on which steps were scored.
    ``elide`` is what the proxy sees of long tool outputs and parts of P, in characters kept
    at each end (:func:`iclr_cli.context.elide_text`; the default profile's, ``None`` under
    ``--exact``: :mod:`iclr_cli.scoring.profile`). It changes the scorer's input only, never
    the history written back.
    """

    variant: Variant
    ratio: float = DEFAULT_RATIO
    seed: int = 0
    splitter: str = "paragraph"
    score_all: bool = True
    elide: int | None = None


@dataclass
class _Pending:
    """A step waiting for its scores."""

    step: Step
    splits: list[Split]
    candidates: list[tuple[int, int]]  # (part index, block index within the part)
    request: ScoreRequest | None
    earlier: tuple[str, ...] = ()  # iclr-ext: P and the history, to find what is not externalized


def count_tokens(tokenizer: Tokenizer, parts: Sequence[Part]) -> int:
    """Tokens of the given reasoning parts under ``tokenizer``."""
    return sum(len(tokenizer.token_spans(p.text)) for p in parts if p.text)


def will_score(step: Step, settings: Settings) -> bool:
    """True when the online loop hands ``step`` to the scorer: the variant ranks by scores,
    the step has candidate blocks, and (unless ``score_all``) BottomK's selection depends on
    the scores. Known before anything is scored: a step is scored as recorded (only the
    history before it is compressed), so a caller can count the work up front. Reasoning the
    provider rule left sealed (``WriteBack.READ_ONLY``, :mod:`iclr_cli.formats.sealing`) holds
    no candidates: a step whose reasoning is all sealed is never scored, and the sealed text
    is still rendered into the history later steps are scored against."""
    return _scores(candidates([split_blocks(p.text, settings.splitter) for p in step.reasoning]), settings)


def _scores(cands: Sequence[tuple[int, int]], settings: Settings) -> bool:
    # bottom_k of equal scores is empty exactly when floor(rho*N) = 0: nothing to rank.
    matters = settings.score_all or bool(bottom_k([0.0] * len(cands), settings.ratio))
    return settings.variant.needs_scores and bool(cands) and matters


def _prepare(traj_id: str, prompt: Sequence[str], history: Sequence[str], step: Step, settings: Settings) -> _Pending:
    splits = [split_blocks(p.text, settings.splitter) for p in step.reasoning]
    cands = candidates(splits)
    request = None
    if _scores(cands, settings):
        step_only = settings.variant.kind == "step-only"
        rendered = render_for_scoring(step, splits, step_only=step_only, elide=settings.elide)
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
            spans=tuple(offsets[c] for c in cands),
        )
    earlier = (*prompt, *history) if settings.variant.kind == "iclr-ext" and request is not None else ()
    return _Pending(step, splits, cands, request, earlier)


def _select(pending: _Pending, entropies: Sequence[float | None], settings: Settings) -> tuple[frozenset[int], frozenset[int]]:
    """The blocks a scoring variant removes and, for ``iclr-ext``, those it protects."""
    if settings.variant.kind == "iclr-ext":
        # Found only once the step was scored: a preview or a request made ahead needs none.
        keep = unexternalized(pending.earlier, pending.step, pending.splits)
        protected = frozenset(i for i, c in enumerate(pending.candidates) if c in keep)
        return bottom_k_protected(entropies, protected, settings.ratio), protected
    return bottom_k(entropies, settings.ratio), frozenset()


def _finish(traj_id: str, pending: _Pending, result: ScoreResult | None, settings: Settings, tokenizer: Tokenizer,
            near: tuple[float, bool, bool] | None = None) -> tuple[Step, StepReport]:
    step, splits, cands = pending.step, pending.splits, pending.candidates
    variant = settings.variant
    selected: frozenset[int] = frozenset()
    protected: frozenset[int] = frozenset()
    scores: list = [None] * len(cands)
    skipped = result.skipped if result else None
    # Every variant says what happens to candidate blocks; Split.edit applies it and refuses
    # anything else (the one block rule of iclr_cli.blocks).
    changes: list[dict[int, str | None]] = [{} for _ in splits]

    if variant.needs_scores and result is not None and not skipped:
        scores = list(result.blocks)
        selected, protected = _select(pending, [s.entropy_bits for s in scores], settings)
        for i in selected:
            pi, bi = cands[i]
            changes[pi][bi] = SKIP
    elif variant.kind == "delete-all":
        selected = frozenset(range(len(cands)))
        for pi, bi in cands:
            changes[pi][bi] = None
    elif variant.kind == "random":
        changes = _random_changes(step, splits, cands, tokenizer, variant.param or 0, settings.seed, traj_id)

    old_texts = [p.text for p in step.reasoning]
    texts = [sp.edit(ch) if ch else text for sp, ch, text in zip(splits, changes, old_texts)]
    new_step = step.with_reasoning(texts) if texts != old_texts else step
    reports = tuple(
        BlockReport(
            block=i,
            part=pi,
            text=splits[pi].blocks[bi],
            selected=i in selected,
            n_tokens=scores[i].n_tokens if scores[i] is not None else None,
            entropy_bits=scores[i].entropy_bits if scores[i] is not None else None,
            protected=i in protected,
        )
        for i, (pi, bi) in enumerate(cands)
    )
    report = StepReport(
        trajectory=traj_id,
        step=step.index,
        blocks=reports,
        tokens=account(token_counter(tokenizer), zip(old_texts, texts)),
        skipped=skipped,
        windowed=result.windowed if result else False,
        history_kept=result.history_kept if result and not skipped else None,
        context_tokens=result.context_tokens if result and not skipped else None,
        context=result.context if result and not skipped else None,
        history_tail=result.history_tail if result and not skipped else None,
        near_tie=near[0] if near else None,
        rechecked=bool(near and near[1]),
        recheck_changed=bool(near and near[2]),
    )
    return new_step, report


def _random_changes(
    step: Step, splits: Sequence[Split], cands: Sequence[tuple[int, int]], tokenizer: Tokenizer, percent: int, seed: int, traj_id: str
) -> list[dict[int, str | None]]:
    """random-R: ``round(R% x n)`` of the step's ``n`` reasoning tokens (the text as generated,
    tokenized whole) deleted, drawn only from tokens that lie inside a candidate block and are
    not whitespace. Separators, block edges, line breaks, protected blocks and blocks quoting a
    reasoning delimiter (:func:`~iclr_cli.blocks.holds_delimiter`) stay, so a format's parser
    finds the same action after the edit (a THOUGHT merged into its fenced command would not
    be; docs/method.md, "Blocks"). A block left with no words is removed whole."""
    inside: list[tuple[int, int, int, int]] = []  # (part, block, start, end) of editable blocks
    for pi, bi in cands:
        if holds_delimiter(splits[pi].blocks[bi]):
            continue
        start = splits[pi].starts[bi]
        inside.append((pi, bi, start, start + len(splits[pi].blocks[bi])))
    flat: list[tuple[int, int, int]] = []  # (part, start, end) of every reasoning token
    owner: list[tuple[int, int] | None] = []  # the candidate block a token lies in, if any
    for pi, part in enumerate(step.reasoning):
        ranges = [(bi, s, e) for p, bi, s, e in inside if p == pi]
        for s, e in tokenizer.token_spans(part.text):
            flat.append((pi, s, e))
            home = next((bi for bi, bs, be in ranges if bs <= s and e <= be), None)
            owner.append(None if home is None or not part.text[s:e].strip() else (pi, home))
    deletable = [i for i, o in enumerate(owner) if o is not None]
    gone = random_token_deletion(len(flat), percent, seed=seed, trajectory=traj_id, step=step.index, deletable=deletable)
    cut: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for i in sorted(gone):
        pi, s, e = flat[i]
        cut.setdefault(owner[i], []).append((s, e))
    changes: list[dict[int, str | None]] = [{} for _ in splits]
    for (pi, bi), spans in cut.items():
        text = step.reasoning[pi].text
        pos, end = splits[pi].starts[bi], splits[pi].starts[bi] + len(splits[pi].blocks[bi])
        pieces = []
        for s, e in spans:
            pieces.append(text[pos:s])
            pos = e
        pieces.append(text[pos:end])
        new = "".join(pieces)
        changes[pi][bi] = new if new.strip() else None
    return changes


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
    that do not score (``none``, ``delete-all``, ``random-R``). A step is scored once, in the
    scorer's sliding window (replay, serve): there is no recheck of near ties here.

    Raises:
        ValueError: when the variant needs scores and ``scorer`` is ``None``.
    """
    if settings.variant.needs_scores and scorer is None:
        raise ValueError(f"variant {settings.variant.name} needs a scorer")
    prepared = prepare_step(trajectory_id, prompt, history, step, settings)
    result = scorer.score([prepared.request])[0] if prepared.request is not None else None
    return finish_step(prepared, result, settings, tokenizer)


def score_request(trajectory_id: str, prompt: Sequence[Part], history: Sequence[Step], step: Step, settings: Settings) -> ScoreRequest | None:
    """The request :func:`compress_step` sends the scorer for these arguments, or ``None``
    when it sends none (``iclr serve`` scores a reply's step ahead with it: the same request
    gets the same result)."""
    return prepare_step(trajectory_id, prompt, history, step, settings).request


@dataclass(frozen=True)
class PreparedStep:
    """:func:`compress_step` in two halves, for a caller that waits for the scores itself
    (``iclr serve``, with its latency budget): ``request`` is what the scorer must score
    (``None`` when the variant needs no scores or the step has nothing whose selection
    depends on them), and :func:`finish_step` applies the variant once its result is known.
    """

    trajectory_id: str
    request: ScoreRequest | None
    _pending: _Pending


def prepare_step(trajectory_id: str, prompt: Sequence[Part], history: Sequence[Step], step: Step, settings: Settings) -> PreparedStep:
    """The first half of :func:`compress_step`: the scorer request for ``step`` given P and
    ``history`` (the earlier steps as they stand), nothing scored yet."""
    pending = _prepare(trajectory_id, render_prompt(prompt, settings.elide), [render_step(s, settings.elide) for s in history], step, settings)
    return PreparedStep(trajectory_id, pending.request, pending)


def context_request(trajectory_id: str, prompt: Sequence[Part], history: Sequence[Step], settings: Settings) -> ScoreRequest | None:
    """What the scorer input of the next step will start with, before that step exists: P and
    ``history`` (the steps as they stand) rendered as :func:`prepare_step` renders them, as a
    partial request with an empty step (``ScoreRequest.partial``). ``iclr serve`` feeds it
    while the upstream works on the request, so that the step's own tokens are all that is
    left. ``None`` for variants whose scorer input holds no history (or that score nothing)."""
    if not (settings.variant.needs_scores and settings.variant.conditions_on_history):
        return None
    return ScoreRequest(trajectory_id, tuple(render_prompt(prompt, settings.elide)),
                        tuple(render_step(s, settings.elide) for s in history), "", (), partial=True)


def finish_step(prepared: PreparedStep, result: ScoreResult | None, settings: Settings, tokenizer: Tokenizer) -> tuple[Step, StepReport]:
    """The second half of :func:`compress_step`: the step to write back and its report, from
    the scorer's ``result`` for ``prepared.request`` (``None`` when there was no request)."""
    return _finish(prepared.trajectory_id, prepared._pending, result, settings, tokenizer)


def _preview(traj: Trajectory, prompt: Sequence[str], settings: Settings) -> list[ScoreRequest]:
    """The requests ``traj`` would send on its history as recorded, one per step with candidate
    blocks whatever ``score_all`` says (so ``score`` and ``prune`` plan alike), for a scorer
    that plans its work before the online loop (``plan_contexts``)."""
    every = replace(settings, score_all=True)
    history: list[str] = []
    requests = []
    for step in traj.steps:
        request = _prepare(traj.id, prompt, history, step, every).request
        if request is not None:
            requests.append(request)
        history.append(render_step(step, settings.elide))
    return requests


def compress_trajectories(
    trajectories: Sequence[Trajectory],
    settings: Settings,
    scorer: Scorer | None,
    tokenizer: Tokenizer,
    *,
    on_step: Callable[[StepReport], None] | None = None,
    done: FinishedSteps | None = None,
) -> list[CompressionResult]:
    """Run the online loop over recorded trajectories; results in input order.

    Step t of every trajectory is scored in one batched scorer call, after step t-1 of each
    was written back. A scorer that plans (``plan_contexts``) first gets every trajectory's
    requests on the history as recorded. When the scorer says how many trajectories can keep their caches at
    once (``stream_capacity``), trajectories go in waves of that many, so no cache is
    evicted while its trajectory still has steps to score (results do not change: the
    trajectories are independent). ``on_step`` is called once per completed step. ``done``
    (a checkpoint, :mod:`iclr_cli.checkpoint`) gives steps finished by an interrupted run,
    taken as they were instead of scored again, and keeps each step finished now.
    A scorer with a ``recheck`` (the fast profile's, :mod:`iclr_cli.scoring.recheck`) has the
    steps whose selection is within its margin of changing rescored as ``exact`` scores them,
    on the same written-back history rendered with nothing elided.

    Raises:
        ValueError: when the variant needs scores and ``scorer`` is ``None``.
    """
    if settings.variant.needs_scores and scorer is None:
        raise ValueError(f"variant {settings.variant.name} needs a scorer")
    wave = getattr(scorer, "stream_capacity", None) if settings.variant.conditions_on_history else None
    if wave and len(trajectories) > wave:
        return [r for a in range(0, len(trajectories), wave)
                for r in compress_trajectories(trajectories[a : a + wave], settings, scorer, tokenizer, on_step=on_step, done=done)]
    prompts = [render_prompt(t.prompt, settings.elide) for t in trajectories]
    plan = getattr(scorer, "plan_contexts", None) if settings.variant.conditions_on_history else None
    if plan is not None:
        plan({traj.id: _preview(traj, prompts[i], settings) for i, traj in enumerate(trajectories)})
    histories: list[list[str]] = [[] for _ in trajectories]
    recheck: Recheck | None = getattr(scorer, "recheck", None)
    done_steps: list[list[Step]] = [[] for _ in trajectories]
    whole = _WholeRender(trajectories, done_steps, settings) if recheck is not None and settings.variant.needs_scores else None
    reports: list[list[StepReport]] = [[] for _ in trajectories]
    longest = max((len(t.steps) for t in trajectories), default=0)
    for t in range(longest):
        active = [i for i, traj in enumerate(trajectories) if t < len(traj.steps)]
        kept = {i: found for i in active if done is not None and (found := done.get(trajectories[i].id, t)) is not None}
        pendings = {i: _prepare(trajectories[i].id, prompts[i], histories[i], trajectories[i].steps[t], settings) for i in active if i not in kept}
        to_score = [i for i in pendings if pendings[i].request is not None]
        results = scorer.score([pendings[i].request for i in to_score]) if to_score else []
        by_index = dict(zip(to_score, results))
        margins = _recheck(recheck, whole, pendings, by_index, settings) if whole is not None else {}
        for i in active:
            if i in kept:
                texts, report = kept[i]
                step = trajectories[i].steps[t]
                new_step = step.with_reasoning(texts) if list(texts) != [p.text for p in step.reasoning] else step
            else:
                new_step, report = _finish(trajectories[i].id, pendings[i], by_index.get(i), settings, tokenizer, margins.get(i))
                if done is not None:
                    done.put(trajectories[i].id, t, [p.text for p in new_step.reasoning], report)
            done_steps[i].append(new_step)
            reports[i].append(report)
            if settings.variant.conditions_on_history:
                histories[i].append(render_step(new_step, settings.elide))
            if on_step is not None:
                on_step(report)
    return [
        CompressionResult(traj, traj.with_steps(done_steps[i]), tuple(reports[i]))
        for i, traj in enumerate(trajectories)
    ]


class _WholeRender:
    """P and the history as they stand, rendered with nothing elided: what a rechecked step is
    scored against (``exact``'s render, :mod:`iclr_cli.scoring.profile`). The history is
    rendered when a near tie asks for it, from the written-back steps the loop holds anyway,
    so a run without near ties keeps no second copy of a long session's tool outputs."""

    def __init__(self, trajectories: Sequence[Trajectory], done_steps: Sequence[Sequence[Step]], settings: Settings) -> None:
        self.trajectories = trajectories
        self.done_steps = done_steps
        self.ids = [t.id for t in trajectories]
        self.settings = replace(settings, elide=None)

    def plan(self, recheck: Recheck, indices: Sequence[int]) -> None:
        """Have the exact scorer choose the context mode of these trajectories as ``--exact``
        would: from their requests on the history as recorded, rendered whole (``_preview``).
        Without history (``step-only``) there is nothing to plan: every step is one window."""
        if self.settings.variant.conditions_on_history:
            recheck.plan({self.ids[i]: functools.partial(_preview, self.trajectories[i], self._prompt(i), self.settings) for i in indices})

    def request(self, i: int, step: Step) -> ScoreRequest | None:
        """The whole-render request of ``step`` of trajectory ``i`` on its history so far."""
        history = [render_step(s, None) for s in self.done_steps[i]] if self.settings.variant.conditions_on_history else []
        return _prepare(self.ids[i], self._prompt(i), history, step, self.settings).request

    def _prompt(self, i: int) -> tuple[str, ...]:
        return render_prompt(self.trajectories[i].prompt, None)


def _recheck(recheck: Recheck, whole: _WholeRender, pendings: dict[int, _Pending], by_index: dict[int, ScoreResult],
             settings: Settings) -> dict[int, tuple[float, bool, bool]]:
    """Find the near ties among the scored steps of ``by_index`` (selection margin under the
    recheck's threshold) and rescore as ``exact`` those whose trajectory ``--exact`` scores in
    the fresh window (:meth:`Recheck.affordable`), in one batch, replacing their results in
    ``by_index``. Returns ``{index: (fast margin in bits, rescored, selection changed)}`` for
    every near tie. A step the exact scorer skips keeps its fast result."""
    near: dict[int, tuple[float, frozenset[int]]] = {}
    for i, result in by_index.items():
        if result.skipped:
            continue
        entropies = [b.entropy_bits for b in result.blocks]
        selected, protected = _select(pendings[i], entropies, settings)
        margin = selection_margin([None if k in protected else e for k, e in enumerate(entropies)], selected)
        if recheck.wants(margin):
            near[i] = (margin, selected)
    if not near:
        return {}
    whole.plan(recheck, list(near))
    history = settings.variant.conditions_on_history  # without it a step is one short window
    requests = {i: whole.request(i, pendings[i].step) for i in near if not history or recheck.affordable(whole.ids[i])}
    requests = {i: r for i, r in requests.items() if r is not None}
    out = {i: (margin, False, False) for i, (margin, _) in near.items()}
    for i, result in zip(requests, recheck.scorer.score(list(requests.values())) if requests else []):
        if result.skipped:
            continue
        by_index[i] = result
        changed = _select(pendings[i], [b.entropy_bits for b in result.blocks], settings)[0] != near[i][1]
        out[i] = (near[i][0], True, changed)
        recheck.note(changed)
    recheck.left += len(near) - sum(rescored for _, rescored, _ in out.values())
    return out
