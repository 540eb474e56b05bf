"""What ``iclr diff ORIGINAL PRUNED`` shows, computed as plain data before anything is painted.

Two ways in, one model out (:class:`Diff`):

- :func:`diff_files`: an original trajectory and a pruned copy of it (any format, any variant).
  Each reasoning part of the original is re-split into blocks with
  :func:`iclr_cli.blocks.split_blocks` (METHOD.md, "Blocks") and aligned with the pruned text
  split the same way. After ``iclr``/``step-only`` pruning the blocks pair one to one, a
  removed block standing as ``[SKIP]`` (METHOD.md, "Select and replace"); ``delete-all``
  leaves an empty text (every block removed); ``random-R`` deletes tokens inside blocks, shown
  as ``changed`` with the new text. A reasoning item the writer dropped (Codex encrypted items)
  shows every block removed.
- :func:`diff_scores`: the JSONL of ``iclr score`` plus the input it was made from: a block is
  removed when its record says ``selected``.

Entropies (bits, mean over the block's proxy tokens) come from score records, keyed by
trajectory id, step and candidate block number, the numbering of ``iclr score``: candidate
blocks are counted across the step's reasoning parts, skipping ``[SKIP]`` markers and blocks
holding text-encoded tool calls (:func:`iclr_cli.blocks.is_candidate`).

Nothing here reads files or knows about rich; :mod:`iclr_cli.render.diff_view` paints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from iclr_cli.blocks import SKIP, is_candidate, split_blocks
from iclr_cli.render.blockalign import BlockStatus, align_blocks, pair_parts
from iclr_cli.errors import InputError
from iclr_cli.token_accounting import ReasoningTokens, TokenViews, account
from iclr_cli.trajectory import Step, Trajectory

CountTokens = Callable[[str], int]


@dataclass(frozen=True)
class BlockScoreInfo:
    """One score record as the diff needs it: proxy tokens, mean entropy in bits, and whether
    the scorer's policy selected the block. ``text`` is the block text the score was taken on
    (checked against the input); ``line`` the record's 1-based line, for error messages;
    ``precision`` the proxy decoder's precision the record names (METHOD.md "Precision")."""

    n_tokens: int | None
    entropy_bits: float | None
    selected: bool
    text: str | None = None
    line: int | None = None
    precision: str | None = None


@dataclass(frozen=True)
class StepScores:
    """Scores of one step: ``blocks`` by candidate block number, or why it was not scored."""

    blocks: Mapping[int, BlockScoreInfo] = field(default_factory=dict)
    skipped: str | None = None


ScoreMap = Mapping[tuple[str, int], StepScores]
"""``(trajectory id, step) -> StepScores``."""


@dataclass(frozen=True)
class BlockDiff:
    """One reasoning block of the original and what became of it.

    Attributes:
        part: index of the reasoning part (of the step's scorable reasoning) it lies in.
        block: candidate block number (``iclr score``'s ``block``); ``None`` for ``[SKIP]``
            markers and protected tool-call blocks already in the original, and for ``added``.
        status: ``kept`` (same text), ``removed`` (``[SKIP]`` or gone), ``changed`` (text
            differs: random token deletion, or an edit), ``added`` (only in the pruned text).
        text: the original block text (``""`` for ``added``).
        new_text: the pruned text for ``changed`` and ``added``, else ``None``.
        entropy_bits: mean token entropy in bits, when known.
        n_tokens: proxy tokens the entropy is a mean over, when known.
        sealed: the block lies in reasoning the provider rule left sealed
            (:func:`iclr_cli.formats.sealing.default_sealed`, unchanged in the pruned copy):
            shown as kept, never a candidate, counted apart as ``score`` counts it.
    """

    part: int
    block: int | None
    status: BlockStatus
    text: str
    new_text: str | None = None
    entropy_bits: float | None = None
    n_tokens: int | None = None
    sealed: bool = False


@dataclass(frozen=True)
class Folded:
    """An action or observation, shown folded to one line. ``new_text`` is set only when the
    pruned file has different text here (pruning never does that; it means the two files are
    not original and pruned copy)."""

    kind: Literal["action", "observation"]
    label: str
    text: str
    new_text: str | None = None


Item = BlockDiff | Folded


@dataclass(frozen=True)
class StepDiff(TokenViews):
    """One assistant turn: its items in causal order, its reasoning-token accounting (the one
    definition of :mod:`iclr_cli.token_accounting`, counted by :attr:`Diff.tokenizer`), and
    why the scorer skipped it, if it did. ``whole``: encrypted reasoning items (text beside
    ``encrypted_content``) the writer dropped whole, holding ``whole_blocks`` blocks
    (:data:`iclr_cli.token_accounting.WHOLE_ITEM_WHY`)."""

    trajectory: str
    step: int
    items: tuple[Item, ...]
    tokens: ReasoningTokens
    skipped: str | None = None
    whole: int = 0
    whole_blocks: int = 0

    @property
    def blocks(self) -> tuple[BlockDiff, ...]:
        """The candidate blocks (sealed ones left out, see :attr:`sealed_blocks`)."""
        return tuple(i for i in self.items if isinstance(i, BlockDiff) and not i.sealed)

    @property
    def sealed_blocks(self) -> tuple[BlockDiff, ...]:
        """Blocks of reasoning the provider rule left sealed."""
        return tuple(i for i in self.items if isinstance(i, BlockDiff) and i.sealed)

    @property
    def changed(self) -> bool:
        """True when any block is not ``kept`` or any action/observation differs."""
        return any(i.status != "kept" if isinstance(i, BlockDiff) else i.new_text is not None for i in self.items)


@dataclass(frozen=True)
class Gap:
    """Unchanged steps ``first..last`` (inclusive) left out of a view."""

    trajectory: str
    first: int
    last: int


@dataclass(frozen=True)
class TrajectoryDiff:
    id: str
    steps: tuple[StepDiff, ...]


@dataclass(frozen=True)
class DiffSummary(TokenViews):
    """Totals over the whole diff (not only the steps shown). ``tokens``: the reasoning-token
    accounting by :attr:`Diff.tokenizer`, the same definition as ``prune``'s summary;
    ``entropy_min``/``entropy_max`` (bits) span the known block entropies (the heat scale).
    ``blocks`` counts candidates; ``sealed_blocks`` the blocks of sealed reasoning apart (as
    ``score`` and ``prune`` count them); ``dropped_whole`` encrypted items the writer dropped
    whole, holding ``dropped_whole_blocks`` of the removed blocks."""

    trajectories: int
    steps: int
    steps_changed: int
    blocks: int
    kept: int
    removed: int
    changed: int
    added: int
    tokens: ReasoningTokens
    entropy_min: float | None
    entropy_max: float | None
    sealed_blocks: int = 0
    dropped_whole: int = 0
    dropped_whole_blocks: int = 0


@dataclass(frozen=True)
class Diff:
    """The whole diff: what was compared, per trajectory the step diffs, and totals.

    ``scores`` names where entropies came from (a score file, ``computed with MODEL``) or is
    ``None`` when none are known; ``precision`` is the proxy decoder's precision they were
    computed in (the score records' ``precision``, METHOD.md "Precision"; several joined with
    ", "), ``None`` when not known (a score file written before records named it).
    """

    original: str
    pruned: str
    tokenizer: str
    scores: str | None
    trajectories: tuple[TrajectoryDiff, ...]
    summary: DiffSummary
    precision: str | None = None


def _step_diff(
    traj_id: str,
    old: Step,
    new_reasoning: Sequence[str | None],
    new_other: Sequence[str] | None,
    scores: StepScores | None,
    count: CountTokens,
    splitter: str,
    sealed: frozenset[int] = frozenset(),
) -> StepDiff:
    """``sealed``: positions of the reasoning parts the provider rule left sealed; their blocks
    take no candidate number (as in ``iclr score``'s numbering)."""
    from iclr_cli.trajectory import WriteBack

    items: list[Item] = []
    reasoning = old.reasoning
    candidate = 0
    part_no = 0
    other_no = 0
    whole = whole_blocks = 0
    for part in old.parts:
        if part.kind in ("action", "observation"):
            changed = new_other[other_no] if new_other is not None and new_other[other_no] != part.text else None
            items.append(Folded(part.kind, part.label or part.kind, part.text, changed))
            other_no += 1
            continue
        if not part.is_scorable_reasoning:
            continue
        pi = part_no
        part_no += 1
        blocks = split_blocks(part.text, splitter).blocks
        target = new_reasoning[pi]
        is_sealed = pi in sealed and target == part.text
        numbers: list[int | None] = []
        for text in blocks:
            numbers.append(candidate if is_candidate(text) and not is_sealed else None)
            candidate += is_candidate(text) and not is_sealed
        aligned = align_blocks(part.text, target if target is not None else "", splitter)
        if target is None and part.write_back is WriteBack.OPAQUE:  # the writer dropped the item whole
            whole += 1
            whole_blocks += sum(status == "removed" for status, _, _ in aligned)
        for status, bi, new_text in aligned:
            number = numbers[bi] if bi is not None else None
            info = scores.blocks.get(number) if scores is not None and number is not None else None
            items.append(
                BlockDiff(
                    part=pi,
                    block=number,
                    status=status,
                    text=blocks[bi] if bi is not None else "",
                    new_text=new_text,
                    entropy_bits=info.entropy_bits if info else None,
                    n_tokens=info.n_tokens if info else None,
                    sealed=is_sealed,
                )
            )
    tokens = account(count, [(p.text, new_reasoning[i] or "") for i, p in enumerate(reasoning)])
    return StepDiff(traj_id, old.index, tuple(items), tokens, scores.skipped if scores else None, whole, whole_blocks)


def diff_files(
    original: Sequence[Trajectory],
    pruned: Sequence[Trajectory],
    *,
    original_name: str,
    pruned_name: str,
    count_tokens: CountTokens,
    tokenizer: str,
    scores: ScoreMap | None = None,
    scores_from: str | None = None,
    splitter: str = "paragraph",
    sealed: Mapping[tuple[str, int], Mapping[int, str]] | None = None,
) -> Diff:
    """Diff trajectories against pruned copies of them (paired in file order).

    ``count_tokens`` counts reasoning tokens with the tokenizer named ``tokenizer``.
    ``sealed``: the reasoning parts the default provider rule seals, with what sealed them
    (:func:`iclr_cli.formats.sealing.default_sealed`). They are counted apart as sealed
    unless the pruned copy changed a part sealed for the same reason anywhere in the files:
    then ``prune`` ran with that kind edited on request (``--signed-thinking edit``,
    ``--encrypted-reasoning drop``) and every such part was a candidate.

    Raises:
        InputError: naming ``pruned_name`` when the two files do not hold the same
        trajectories with the same steps and the same number of actions/observations
        (pruning never adds or removes any; two replays are compared with run mode instead).
    """
    if len(original) != len(pruned):
        raise InputError(pruned_name, f"holds {len(pruned)} trajectories, {original_name} holds {len(original)}: not a pruned copy of it")
    out: list[TrajectoryDiff] = []
    pairs: list[list[list[str | None]]] = []  # per trajectory, per step: the pruned text of each reasoning part
    for old_t, new_t in zip(original, pruned):
        if len(old_t.steps) != len(new_t.steps):
            raise InputError(
                pruned_name,
                f"trajectory {new_t.id} has {len(new_t.steps)} steps, {old_t.id} in {original_name} has {len(old_t.steps)}: "
                "pruning never adds or removes steps (to compare two replays, give two run records)",
            )
        pairs.append([])
        for old_s, new_s in zip(old_t.steps, new_t.steps):
            old_other = [p for p in old_s.parts if p.kind in ("action", "observation")]
            new_other = [p.text for p in new_s.parts if p.kind in ("action", "observation")]
            if len(old_other) != len(new_other):
                raise InputError(pruned_name, f"trajectory {new_t.id} step {new_s.index}: {len(new_other)} actions/observations, the original has {len(old_other)}")
            old_r, new_r = [p.text for p in old_s.reasoning], [p.text for p in new_s.reasoning]
            if len(new_r) > len(old_r):
                raise InputError(pruned_name, f"trajectory {new_t.id} step {new_s.index}: {len(new_r)} reasoning parts, the original has {len(old_r)}")
            pairs[-1].append(pair_parts(old_r, new_r, splitter))
    sealed = sealed or {}
    edited = {  # kinds of sealing the pruned copy edited somewhere: prune ran with them edited on request
        what
        for old_t, t_pairs in zip(original, pairs)
        for old_s, paired in zip(old_t.steps, t_pairs)
        for i, what in sealed.get((old_t.id, old_s.index), {}).items()
        if paired[i] != old_s.reasoning[i].text
    }
    for old_t, new_t, t_pairs in zip(original, pruned, pairs):
        steps = []
        for old_s, new_s, paired in zip(old_t.steps, new_t.steps, t_pairs):
            new_other = [p.text for p in new_s.parts if p.kind in ("action", "observation")]
            step_scores = scores.get((old_t.id, old_s.index)) if scores is not None else None
            mine = frozenset(i for i, what in sealed.get((old_t.id, old_s.index), {}).items() if what not in edited)
            steps.append(_step_diff(old_t.id, old_s, paired, new_other, step_scores, count_tokens, splitter, mine))
        out.append(TrajectoryDiff(old_t.id, tuple(steps)))
    return Diff(original_name, pruned_name, tokenizer, scores_from, tuple(out), summarize(out))


def diff_scores(
    original: Sequence[Trajectory],
    scores: ScoreMap,
    *,
    original_name: str,
    scores_name: str,
    count_tokens: CountTokens,
    tokenizer: str,
    splitter: str = "paragraph",
    sealed: Mapping[tuple[str, int], Mapping[int, str]] | None = None,
) -> Diff:
    """Diff an input against what ``iclr score`` selected on it (selected = removed).

    ``sealed`` as for :func:`diff_files`: a step's sealed parts stay sealed unless its score
    records number more blocks than the other parts hold (scored with ``--signed-thinking
    edit`` / ``--encrypted-reasoning drop``).

    Raises:
        InputError: naming ``scores_name``, the record's line and field ``text`` when a score
        record's block text is not the input's block at that number (the scores were made
        from another file or with another ``--block-split``).
    """
    out: list[TrajectoryDiff] = []
    for traj in original:
        steps = []
        for step in traj.steps:
            step_scores = scores.get((traj.id, step.index))
            mine = _sealed_in_scores(step, frozenset((sealed or {}).get((traj.id, step.index), {})), step_scores, splitter)
            new_texts = []
            candidate = 0
            for pi, part in enumerate(step.reasoning):
                split = split_blocks(part.text, splitter)
                new_blocks = []
                for text in split.blocks:
                    info = None
                    if is_candidate(text) and pi not in mine:
                        info = step_scores.blocks.get(candidate) if step_scores else None
                        if info is not None and info.text is not None and info.text != text:
                            raise InputError(
                                scores_name,
                                f"block {candidate} of {traj.id} step {step.index} is not the block of that number in {original_name} "
                                "(scores made from another input, or with another --block-split)",
                                line=info.line,
                                field="text",
                            )
                        candidate += 1
                    new_blocks.append(SKIP if info is not None and info.selected else text)
                new_texts.append(split.join(new_blocks))
            steps.append(_step_diff(traj.id, step, new_texts, None, step_scores, count_tokens, splitter, mine))
        out.append(TrajectoryDiff(traj.id, tuple(steps)))
    return Diff(original_name, f"{scores_name} (selected blocks)", tokenizer, scores_name, tuple(out), summarize(out))


def _sealed_in_scores(step: Step, sealed: frozenset[int], scores: StepScores | None, splitter: str) -> frozenset[int]:
    """``sealed`` unless the step's score records reach past the unsealed parts' candidates
    (then ``score`` ran with the sealed reasoning edited on request, and numbered it)."""
    if not sealed or scores is None or not scores.blocks:
        return sealed
    free = sum(is_candidate(b) for i, p in enumerate(step.reasoning) if i not in sealed for b in split_blocks(p.text, splitter).blocks)
    return frozenset() if max(scores.blocks) >= free else sealed


def summarize(trajectories: Sequence[TrajectoryDiff]) -> DiffSummary:
    """Totals over every step of ``trajectories``."""
    steps = [s for t in trajectories for s in t.steps]
    blocks = [b for s in steps for b in s.blocks]  # candidates; sealed blocks are counted apart
    entropies = [b.entropy_bits for b in blocks if b.entropy_bits is not None]

    def count(status: str) -> int:
        return sum(b.status == status for b in blocks)

    return DiffSummary(
        trajectories=len(trajectories),
        steps=len(steps),
        steps_changed=sum(s.changed for s in steps),
        blocks=sum(b.status != "added" for b in blocks),
        kept=count("kept"),
        removed=count("removed"),
        changed=count("changed"),
        added=count("added"),
        tokens=sum((s.tokens for s in steps), ReasoningTokens()),
        entropy_min=min(entropies) if entropies else None,
        entropy_max=max(entropies) if entropies else None,
        sealed_blocks=sum(len(s.sealed_blocks) for s in steps),
        dropped_whole=sum(s.whole for s in steps),
        dropped_whole_blocks=sum(s.whole_blocks for s in steps),
    )


def select(trajectory: TrajectoryDiff, *, step: int | None = None, context: int | None = None) -> list[StepDiff | Gap]:
    """The steps of one trajectory a view shows, with :class:`Gap` where steps are left out.

    ``step``: only that step (0-based assistant turn). ``context``: every changed step plus
    that many unchanged steps on each side (``None``: every step).
    """
    steps = trajectory.steps
    if step is not None:
        return [s for s in steps if s.step == step]
    if context is None:
        return list(steps)
    keep = [False] * len(steps)
    for i, s in enumerate(steps):
        if s.changed:
            for k in range(max(0, i - context), min(len(steps), i + context + 1)):
                keep[k] = True
    shown: list[StepDiff | Gap] = []
    i = 0
    while i < len(steps):
        if keep[i]:
            shown.append(steps[i])
            i += 1
            continue
        j = i
        while j < len(steps) and not keep[j]:
            j += 1
        shown.append(Gap(trajectory.id, steps[i].step, steps[j - 1].step))
        i = j
    return shown


def to_json(diff: Diff, *, step: int | None = None) -> dict:
    """The diff as JSON-ready data (``iclr diff --json``); ``step`` keeps only that step.

    Shape: ``{original, pruned, tokenizer, scores, summary: {...}, trajectories: [{id, steps:
    [{step, changed, tokens_before, tokens_after, reasoning_tokens_generated, ..._written,
    ..._kept, ..._deleted, skip_markers, skip_marker_tokens, skipped, blocks: [{part, block,
    status, removed, entropy_bits, n_tokens, text, new_text}], folded: [{kind, label, text,
    new_text}]}]}]}``. Entropies in bits; tokens counted by ``tokenizer``
    (:mod:`iclr_cli.token_accounting`; ``tokens_before`` / ``tokens_after`` are generated /
    written).
    """
    s = diff.summary
    summary = {k: getattr(s, k) for k in s.__dataclass_fields__ if k != "tokens"}
    summary.update(tokens_before=s.tokens_before, tokens_after=s.tokens_after, deletion_ratio=s.tokens.deletion_ratio, **s.tokens.to_record())
    return {
        "original": diff.original,
        "pruned": diff.pruned,
        "tokenizer": diff.tokenizer,
        "scores": diff.scores,
        "precision": diff.precision,
        "summary": summary,
        "trajectories": [
            {"id": t.id, "steps": [_step_json(st) for st in t.steps if step is None or st.step == step]}
            for t in diff.trajectories
        ],
    }


def _step_json(step: StepDiff) -> dict:
    return {
        "step": step.step,
        "changed": step.changed,
        "tokens_before": step.tokens_before,
        "tokens_after": step.tokens_after,
        **step.tokens.to_record(),
        "skipped": step.skipped,
        "dropped_whole": step.whole,
        "dropped_whole_blocks": step.whole_blocks,
        "blocks": [
            {
                "part": b.part,
                "block": b.block,
                "status": b.status,
                "removed": b.status == "removed",
                "sealed": b.sealed,
                "entropy_bits": b.entropy_bits,
                "n_tokens": b.n_tokens,
                "text": b.text,
                "new_text": b.new_text,
            }
            for b in step.items if isinstance(b, BlockDiff)
        ],
        "folded": [{"kind": f.kind, "label": f.label, "text": f.text, "new_text": f.new_text} for f in step.items if isinstance(f, Folded)],
    }
