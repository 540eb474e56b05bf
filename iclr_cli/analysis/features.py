"""Probe features: the sensor's hidden states at each compression boundary (paper section 3.3).

At the boundary after step ``t`` the sensor reads the full history (the request for step
``t+1``, :mod:`~iclr_cli.analysis.boundaries`) and keeps, per layer ``l`` (a decoder layer's
output), three poolings ``z^(l,p)`` of the hidden states:

- ``boundary``: the last (prompt-last) token, whose distribution predicts the agent's next token;
- ``reasoning``: the mean over step ``t``'s reasoning tokens (the just-completed step);
- ``last64``: the mean over the last 64 tokens of the input.

Boundaries are read in step order with the stream's prefix reuse, so a trajectory costs about
one scoring pass. A boundary whose reasoning tokens the window left out, or which the window
rule skipped, has no features; it is listed with the reason.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from iclr_cli.analysis.boundaries import boundaries, lay_out
from iclr_cli.analysis.inputs import Source

POOLS = ("boundary", "reasoning", "last64")


@dataclass
class Features:
    """Hidden-state features of labelled boundaries.

    Attributes:
        keys: ``(trajectory, step)`` per row.
        groups: the ``--group-by`` key per row.
        x: ``[rows, layers, pools, hidden]`` float32.
        layers: the layer index of each layer slot; ``pools``: :data:`POOLS`.
        skipped: ``(trajectory, step, reason)`` for boundaries without features.
    """

    keys: list[tuple[str, int]]
    groups: list[str]
    x: np.ndarray
    layers: tuple[int, ...]
    pools: tuple[str, ...] = POOLS
    skipped: list[tuple[str, int, str]] = field(default_factory=list)


def extract(sensor, sources: Sequence[Source], wanted: Collection[tuple[str, int]], *, layers: Sequence[int],
            group_by: str = "auto", on_boundary=None) -> Features:
    """Read every boundary in ``wanted`` (``(trajectory, step)`` keys) of ``sources``.

    ``on_boundary()`` is called after each boundary read (progress).
    """
    keys: list[tuple[str, int]] = []
    groups: list[str] = []
    rows: list[np.ndarray] = []
    skipped: list[tuple[str, int, str]] = []
    chosen = list(layers)
    for src in sources:
        traj = src.trajectory
        stream = f"{traj.id}\0probe"
        seen: set[int] = set()
        try:
            for b in boundaries(traj, traj, sensor.elide):
                step = b.step - 1
                if (traj.id, step) not in wanted:
                    continue
                seen.add(step)
                lay = lay_out(b.prompt, b.full, b.head, b.head_chars, sensor.encode, sensor.max_tokens, sensor.overflow, b.reasoning)
                reason = lay.plan.skipped or (None if lay.pools.get("reasoning") else "the window left out the step's reasoning")
                if reason:
                    skipped.append((traj.id, step, reason))
                    continue
                reading = sensor.read(stream, lay.ids, lay.pools)
                stacked = np.stack([reading.residuals.numpy(), reading.pooled["reasoning"].numpy(), reading.pooled["last64"].numpy()], axis=1)
                rows.append(stacked[chosen])
                keys.append((traj.id, step))
                groups.append(src.group(group_by))
                if on_boundary is not None:
                    on_boundary()
        finally:
            sensor.forget(stream)
        skipped.extend((traj.id, step, "no request follows the last step") for t, step in sorted(wanted) if t == traj.id and step not in seen)
    x = np.stack(rows).astype(np.float32) if rows else np.zeros((0, len(chosen), len(POOLS), sensor.hidden), np.float32)
    return Features(keys, groups, x, tuple(chosen), POOLS, skipped)
