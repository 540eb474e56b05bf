"""What a run says about its blocks before and after it: steps whose reasoning is one block
(BottomK removes nothing from N = 1) and steps already compressed by an earlier prune."""

from __future__ import annotations

from collections.abc import Sequence

from iclr_cli.blocks import SKIP, candidates, is_skip, split_blocks
from iclr_cli.trajectory import Step, Trajectory


def block_counts(trajectories: Sequence[Trajectory], splitter: str) -> tuple[int, int, int]:
    """``(steps with reasoning, those whose reasoning is one candidate block, those that
    already hold a [SKIP] block)`` as ``splitter`` cuts it, before anything is scored (for
    :func:`one_block_note`)."""
    with_reasoning = one = compressed = 0
    for traj in trajectories:
        for step in traj.steps:
            if any(p.text.strip() for p in step.reasoning):
                with_reasoning += 1
                splits = [split_blocks(p.text, splitter) for p in step.reasoning]
                one += len(candidates(splits)) == 1
                compressed += any(is_skip(b) for sp in splits for b in sp.blocks)
    return with_reasoning, one, compressed


FINER = {"paragraph": "--block-split line or --block-split sentence", "line": "--block-split sentence"}


def holds_skip(step: Step) -> bool:
    """Whether a step's reasoning already holds a ``[SKIP]`` block (an earlier compression)."""
    return any(SKIP in p.text and any(is_skip(b) for b in split_blocks(p.text).blocks) for p in step.reasoning)


def one_block_note(one_block: int, with_reasoning: int, splitter: str, compressed: int = 0) -> str | None:
    """What to say when most steps with reasoning hold a single block (``N = 1``): BottomK
    removes ``floor(rho * N)`` blocks (METHOD.md, "Select and replace"), none of one, so the
    run scores and removes nothing there. When most of the steps already hold ``[SKIP]``
    markers (``compressed``: a file pruned before), that is what it says instead of a finer
    splitter. ``None`` when it is not most of them."""
    if with_reasoning and 2 * compressed > with_reasoning:
        left = f"; {one_block} keep a single block, which BottomK leaves (N = 1)" if one_block else ""
        return (f"already compressed: {compressed} of {with_reasoning} steps with reasoning hold [SKIP] markers from an earlier "
                f"prune{left}; prune the original file to compress it another way")
    if not with_reasoning or 2 * one_block <= with_reasoning:
        return None
    finer = FINER.get(splitter)
    advice = f"; {finer} cuts reasoning into more blocks" if finer else ""
    return (f"{one_block} of {with_reasoning} steps with reasoning hold a single block (their reasoning is one {splitter}), "
            f"and BottomK removes nothing from one block (N = 1){advice}")
