"""What a savings run will hand the scorer, counted before anything is scored.

A step is scored as recorded (online write-back compresses only the history before it), so
whether the scorer sees it is known up front (:func:`iclr_cli.compress.will_score`): never a
step whose reasoning is all sealed by the provider rule (no variant may edit it:
:func:`iclr_cli.savings.measure.seal_for_estimate`), nor one whose BottomK removes nothing
whatever the scores (``floor(rho x N) = 0``, a single candidate block at the default
``rho = 0.8``), as ``prune`` skips it, nor one an earlier write-back already compressed
(``[SKIP]`` markers: :mod:`iclr_cli.savings.compressed`). Counting every file's steps before the first is scored
gives the progress a total that never grows, and its time left a pace.

A scored step's weight is the proxy tokens the scorer reads anew for it: the rendered steps
since the previous scored step of its trajectory (P with the first), its own included
(:func:`iclr_cli.pipeline.step_tokens`). Steps it does not score are read only as the
context of a later one, so steps after a trajectory's last scored step weigh nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iclr_cli.compress import Settings, will_score
from iclr_cli.formats.sealing import Sealed
from iclr_cli.savings.compressed import Compressed
from iclr_cli.scoring.base import Tokenizer
from iclr_cli.trajectory import Step, Trajectory


@dataclass
class Plan:
    """The work of a run's files that are not in the cache, in steps.

    ``files``: files to estimate now; ``steps``: their steps; ``scored``: steps the scorer is
    handed; ``tokens``: the proxy tokens it reads for them (the progress's pace); ``sealed``:
    steps with reasoning that is all sealed; ``one_block``: steps with editable reasoning whose
    selection cannot depend on the scores; ``compressed``: steps already compressed by an
    earlier write-back. ``sealed``, ``one_block`` and ``compressed`` are never scored.
    """

    files: int = 0
    steps: int = 0
    scored: int = 0
    tokens: int = 0
    sealed: int = 0
    one_block: int = 0
    compressed: int = 0

    def add(self, other: Plan) -> None:
        """Add ``other``'s counts to these."""
        for name in ("files", "steps", "scored", "tokens", "sealed", "one_block", "compressed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def all_sealed(step: Step) -> bool:
    """True when ``step`` holds reasoning and all of it is sealed (none editable)."""
    return not step.reasoning and any(p.kind == "reasoning" and isinstance(p.ref, Sealed) for p in step.parts)


def already_compressed(step: Step) -> bool:
    """True when ``step``'s reasoning was frozen as already compressed (:func:`iclr_cli.savings.compressed.freeze`)."""
    return any(p.kind == "reasoning" and isinstance(p.ref, Compressed) for p in step.parts)


def plan_file(trajectories: Sequence[Trajectory], settings: Settings, tokenizer: Tokenizer,
              limit: int | None = None) -> tuple[Plan, dict[tuple[str, int], int]]:
    """The :class:`Plan` of one file's ``trajectories`` (``files`` = 1) and the weight of each
    step that will be scored, keyed by ``(trajectory id, step index)`` (module docstring).
    ``limit``: the scorer's input limit in tokens (a step weighs at most that). Tokens are
    counted only for a file that has a step to score."""
    plan = Plan(files=1)
    chosen: list[tuple[Trajectory, list[bool]]] = []
    for traj in trajectories:
        marks = [will_score(step, settings) for step in traj.steps]
        chosen.append((traj, marks))
        plan.steps += len(marks)
        plan.scored += sum(marks)
        for step, scored in zip(traj.steps, marks):
            if not scored and step.reasoning and settings.variant.needs_scores:
                plan.one_block += 1
            elif not scored and already_compressed(step):
                plan.compressed += 1
            elif not scored and all_sealed(step):
                plan.sealed += 1
    weights: dict[tuple[str, int], int] = {}
    if not plan.scored:
        return plan, weights
    from iclr_cli.pipeline import step_tokens

    rendered = step_tokens([t for t, marks in chosen if any(marks)], tokenizer, limit)
    for traj, marks in chosen:
        carried = 0
        for step, scored in zip(traj.steps, marks):
            carried += rendered.get((traj.id, step.index), 0)
            if scored:
                weights[(traj.id, step.index)] = carried
                carried = 0
    plan.tokens = sum(weights.values())
    return plan, weights
