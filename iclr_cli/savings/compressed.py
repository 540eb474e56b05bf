"""Reasoning that an earlier iclr write-back already compressed: steps with ``[SKIP]`` markers.

A step whose reasoning holds a ``[SKIP]`` block (:func:`iclr_cli.block_notes.holds_skip`) went
through iclr's write-back before it was recorded (``iclr serve`` in front of the agent, or a
file that ``iclr prune`` wrote). Online write-back compresses each step once, when it is
complete, and never again, so the estimate takes nothing more off such a step: its saving was
had when the session ran, and a recorded input already holds it. Compressing the blocks it kept
once more would count a saving no write-back makes.

So before any variant runs, such a step's editable reasoning is frozen (:func:`freeze`): it is
read-only with a :class:`Compressed` ref, so no variant selects it (the upper bound included)
and the scorer is never handed the step, while it is still rendered as context of the later
steps and counted as reasoning re-sent, never as deleted or sealed
(:func:`iclr_cli.savings.measure.measure`).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace

from iclr_cli.block_notes import holds_skip
from iclr_cli.trajectory import Step, Trajectory, WriteBack


@dataclass(frozen=True)
class Compressed:
    """The ref of a reasoning part frozen by :func:`freeze`: its own ``ref`` and write-back
    kind (``was``) before."""

    ref: Hashable
    was: WriteBack


def freeze(traj: Trajectory) -> tuple[Trajectory, int]:
    """``traj`` with the editable reasoning of every step already compressed frozen (module
    docstring), and how many steps that was."""
    steps = []
    frozen = 0
    for step in traj.steps:
        if not holds_skip(step):
            steps.append(step)
            continue
        frozen += 1
        parts = tuple(replace(p, ref=Compressed(p.ref, p.write_back), write_back=WriteBack.READ_ONLY) if p.is_scorable_reasoning else p
                      for p in step.parts)
        steps.append(Step(step.index, parts))
    return (traj.with_steps(steps) if frozen else traj), frozen
