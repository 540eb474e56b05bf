"""State externalization: where each reasoning block's derived state lives (paper sections 3.4, 4.4).

For every step ``t`` of a trajectory (:func:`trace`): the derived state of each of its
reasoning blocks (:mod:`iclr_cli.derived_state`: identifiers, paths, numbers, quoted strings
and code that occur in no earlier part of the history), which items reached an external
carrier (an action's arguments, a written file, a tool result) in that step or a later one,
and ``U_t``, the items derived up to ``t`` that live only in reasoning after step ``t``.
``G_t = 1`` while ``U_t`` is not empty (the paper's ``G_i = I(U_i != {})``).

Joined with boundary labels (:func:`join`): the future-behaviour rate (share of labelled
boundaries whose reasoning was needed again) with ``G = 1`` and with ``G = 0``, per task and
overall, with Wilson 95% intervals; the difference overall with a bootstrap interval; and the
within-task difference (the mean over tasks that have both kinds of boundary). The paper
reports 67.3% with ``G = 1`` against 36.2%, and a within-task increase of 19.8 points.
With the probe's held-out scores (``iclr analyze probe -o``), the mean score by ``G`` too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from iclr_cli.analysis.inputs import Source
from iclr_cli.analysis.labels import Labels
from iclr_cli.analysis.stats import bootstrap_paired, wilson
from iclr_cli.blocks import split_blocks
from iclr_cli.context import render_prompt, render_step
from iclr_cli.derived_state import Item, carrier_kind, first_carriers, step_state
from iclr_cli.trajectory import Trajectory

SHOWN = 50  # outstanding items listed per step record (the count is always complete)


def _item(item: Item, **extra) -> dict:
    return {"kind": item.kind, "text": item.text, **extra}


def trace(trajectory: Trajectory, source: str = "") -> list[dict]:
    """One record per step (module docstring): ``trajectory``, ``source``, ``step``, ``G``,
    ``derived`` (items its reasoning derived), ``externalized`` (items that reached a carrier
    in this step, by carrier kind), ``outstanding`` (``|U_t|``), ``outstanding_items`` (the
    first :data:`SHOWN`, with the step that derived each), and ``blocks``: per reasoning
    block its ``part``, ``block``, derived ``items`` and, for each, the step and carrier
    that first externalized it (``null`` while it lives only in reasoning)."""
    earlier: list[str] = list(render_prompt(trajectory.prompt))
    outstanding: dict[Item, int] = {}
    records: list[dict] = []
    # The item entries of earlier records, updated in place when the item reaches a carrier.
    where: dict[Item, dict] = {}
    for step in trajectory.steps:
        carriers = [(k, p.text) for p in step.parts if (k := carrier_kind(p)) is not None]
        taken: dict[str, int] = {}
        for item, kind in first_carriers(list(outstanding), carriers).items():
            del outstanding[item]
            where[item].update(carried_step=step.index, carrier=kind)
            taken[kind] = taken.get(kind, 0) + 1
        splits = [split_blocks(p.text) for p in step.reasoning]
        blocks = []
        derived = 0
        for state in step_state(earlier, step, splits):
            listed = []
            for item in state.items:
                derived += 1
                kind = state.carried.get(item)
                entry = _item(item, carried_step=step.index if kind else None, carrier=kind)
                listed.append(entry)
                if kind:
                    taken[kind] = taken.get(kind, 0) + 1
                elif item not in outstanding:
                    outstanding[item] = step.index
                    where[item] = entry
            blocks.append({"part": state.part, "block": state.block, "items": listed})
        earlier.append(render_step(step))
        records.append({
            "trajectory": trajectory.id, "source": source, "step": step.index, "G": int(bool(outstanding)),
            "derived": derived, "externalized": taken, "outstanding": len(outstanding),
            "outstanding_items": [_item(i, step=s) for i, s in list(outstanding.items())[:SHOWN]],
            "blocks": blocks,
        })
    return records


@dataclass(frozen=True)
class Rates:
    """Future-behaviour rates of one task (or all): boundaries, positives and rate by ``G``,
    with Wilson intervals; ``diff`` is rate(G=1) - rate(G=0) when both exist."""

    group: str
    n: tuple[int, int]  # boundaries with G = 0, G = 1
    positives: tuple[int, int]
    rate: tuple[float | None, float | None]
    ci: tuple[tuple[float, float] | None, tuple[float, float] | None]
    diff: float | None
    diff_ci: tuple[float, float] | None = None


def _rates(group: str, rows: Sequence[tuple[int, int]], *, interval: bool = False) -> Rates:
    """``rows`` are ``(G, label)`` pairs."""
    n = tuple(sum(1 for g, _ in rows if g == v) for v in (0, 1))
    pos = tuple(sum(label for g, label in rows if g == v) for v in (0, 1))
    rate = tuple(pos[v] / n[v] if n[v] else None for v in (0, 1))
    diff = rate[1] - rate[0] if rate[0] is not None and rate[1] is not None else None
    diff_ci = None
    if interval and diff is not None:
        def stat(r):
            g1, g0 = r[r[:, 0] == 1], r[r[:, 0] == 0]
            if not len(g1) or not len(g0):
                raise ValueError("one group empty")
            return float(g1[:, 1].mean() - g0[:, 1].mean())
        diff_ci = bootstrap_paired(rows, stat)
    return Rates(group, n, pos, rate, (wilson(pos[0], n[0]), wilson(pos[1], n[1])), diff, diff_ci)


@dataclass(frozen=True)
class Joined:
    """The join of ``G`` with the labels: per task, overall, the within-task difference (mean
    over tasks with both groups, and how many such tasks), and the probe's mean score by G."""

    tasks: list[Rates]
    overall: Rates
    within_task: float | None
    within_tasks: int
    probe: tuple[float | None, float | None] | None = None


def join(records: Sequence[dict], labels: Labels, groups: Mapping[str, str], probe_scores: Mapping[tuple[str, int], float] | None = None) -> Joined:
    """Rates by ``G`` over the labelled boundaries (module docstring). ``groups`` maps a
    trajectory id to its task; ``probe_scores`` maps ``(trajectory, step)`` to a held-out score."""
    by_task: dict[str, list[tuple[int, int]]] = {}
    scored: list[tuple[int, float]] = []
    for r in records:
        key = (r["trajectory"], r["step"])
        if key not in labels:
            continue
        by_task.setdefault(groups[r["trajectory"]], []).append((r["G"], labels[key].value))
        if probe_scores and key in probe_scores:
            scored.append((r["G"], probe_scores[key]))
    tasks = [_rates(task, rows) for task, rows in sorted(by_task.items())]
    overall = _rates("all", [row for rows in by_task.values() for row in rows], interval=True)
    diffs = [t.diff for t in tasks if t.diff is not None]
    probe = None
    if probe_scores is not None:
        probe = tuple(float(np.mean([s for g, s in scored if g == v])) if any(g == v for g, _ in scored) else None for v in (0, 1))
    return Joined(tasks, overall, float(np.mean(diffs)) if diffs else None, len(diffs), probe)


def trace_all(sources: Sequence[Source]) -> list[dict]:
    """:func:`trace` of every source, in order."""
    return [r for src in sources for r in trace(src.trajectory, src.file)]
