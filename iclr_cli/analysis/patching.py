"""Activation patching at every compression boundary (paper section 3.4, "Activation patching").

At the boundary after step ``t`` (the request for step ``t+1``; :mod:`~iclr_cli.analysis.boundaries`)
the sensor reads the full history and the deleted history (``delete-all`` of every earlier
step), and for each layer ``l`` the deleted history with the boundary residual after layer
``l`` replaced by the full history's (:meth:`~iclr_cli.analysis.sensor.Sensor.patch`):

- ``d = KL(P_full || P_del)`` in bits;
- for ``d > min_kl`` (the paper's ``d > 0``; this project's floor, :data:`MIN_KL` bits by
  default, because a repair ratio over a near-zero ``d`` is float noise):
  ``Repair(l) = 1 - KL(P_full || P_patch,l) / d`` and top-1 agreement, whether
  ``argmax P_patch,l`` is ``argmax P_full``.

Patching at the last layer gives ``P_patch = P_full`` exactly (Repair 1); at a layer whose
residual the history has not yet reached the repair is near 0. Records go out one per
(trajectory, boundary, layer); a boundary with ``d`` at or below the floor, or skipped by the
window rule, gives one record with ``layer`` null and the reason. :func:`summarize` gives the
paper's Table 13 shape: mean repair per layer with a bootstrap 95% interval and ``n``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from iclr_cli.analysis.boundaries import boundaries, delete_all, lay_out
from iclr_cli.analysis.stats import bootstrap_ci, kl_bits
from iclr_cli.trajectory import Trajectory

MIN_KL = 1e-3  # bits


@dataclass(frozen=True)
class LayerSummary:
    """Mean repair at one layer over the boundaries with ``d > min_kl``.

    ``repair_ci`` is the bootstrap 95% interval (``None`` for fewer than 2 boundaries);
    ``top1`` the share whose patched top-1 token is the full history's.
    """

    layer: int
    n: int
    repair: float
    repair_ci: tuple[float, float] | None
    top1: float


def parse_layers(spec: str | None, n_layers: int) -> tuple[int, ...]:
    """``all`` (or ``None``) -> every layer; ``4,20,-1`` -> those (negative from the end).

    Raises:
        ValueError: a layer that is not an integer or not in ``-n_layers .. n_layers-1``.
    """
    if spec is None or spec.strip() == "all":
        return tuple(range(n_layers))
    out = []
    for piece in spec.split(","):
        piece = piece.strip()
        try:
            layer = int(piece)
        except ValueError:
            raise ValueError(f"--layers: {piece!r} is not a layer number (use all or L,L,..)") from None
        if not -n_layers <= layer < n_layers:
            raise ValueError(f"--layers: the model has layers 0..{n_layers - 1}, not {layer}")
        out.append(layer % n_layers)
    return tuple(dict.fromkeys(out))


def patch_trajectory(sensor, trajectory: Trajectory, *, source: str, layers: Sequence[int], min_kl: float = MIN_KL) -> Iterator[dict]:
    """Records of every boundary of ``trajectory`` (module docstring), in step order.

    Every record: ``trajectory``, ``source``, ``step`` (the completed step; the request is for
    ``step + 1``), ``layer`` (0-based decoder layer whose output was patched, ``null`` when none
    was), ``d_bits``, ``kl_patched_bits``, ``repair``, ``top1_agree`` (patched vs full),
    ``top1_del_agree`` (deleted vs full), ``tokens_full`` / ``tokens_deleted`` (proxy tokens of
    the two inputs), ``window`` (per input: ``tokens``, ``windowed``, ``history_kept``),
    ``context`` (``fresh``: the scorer's window rule), ``method`` (``cached`` or ``hook``),
    ``model``, ``precision`` (the decoder's, :mod:`iclr_cli.scoring.precision`), and ``below_floor`` or
    ``skipped`` where no layer was patched.
    """
    deleted = delete_all(trajectory, sensor.tokenizer)
    streams = (f"{trajectory.id}\0full", f"{trajectory.id}\0deleted")
    try:
        for b in boundaries(trajectory, deleted, sensor.elide):
            full = lay_out(b.prompt, b.full, b.head, b.head_chars, sensor.encode, sensor.max_tokens, sensor.overflow)
            dele = lay_out(b.prompt, b.deleted, b.head, b.head_chars, sensor.encode, sensor.max_tokens, sensor.overflow)
            base = {
                "trajectory": trajectory.id, "source": source, "step": b.step - 1, "layer": None,
                "tokens_full": len(full.ids), "tokens_deleted": len(dele.ids),
                "window": {"full": full.describe(), "deleted": dele.describe()},
                "context": "fresh", "method": sensor.method, "model": sensor.name,
                "precision": getattr(sensor.model, "iclr_precision", "float32"),
            }
            skipped = full.plan.skipped or dele.plan.skipped
            if skipped:
                yield {**base, "skipped": skipped}
                continue
            rf = sensor.read(streams[0], full.ids)
            rd = sensor.read(streams[1], dele.ids)
            d = kl_bits(rf.logprobs, rd.logprobs)
            top_full = int(rf.logprobs.argmax())
            base.update(d_bits=d, top1_del_agree=int(rd.logprobs.argmax()) == top_full)
            if d <= min_kl:
                yield {**base, "below_floor": True, "reasoning_removed": b.removes_reasoning}
                continue
            for layer, lp in sensor.patch(streams[1], rf.residuals, layers).items():
                kl = kl_bits(rf.logprobs, lp)
                yield {**base, "layer": layer, "kl_patched_bits": kl, "repair": 1.0 - kl / d,
                       "top1_agree": int(lp.argmax()) == top_full}
    finally:
        for stream in streams:
            sensor.forget(stream)


def summarize(records: Sequence[dict]) -> list[LayerSummary]:
    """Mean repair per layer over the records with a layer (module docstring), layer order."""
    by_layer: dict[int, list[dict]] = {}
    for r in records:
        if r.get("layer") is not None:
            by_layer.setdefault(r["layer"], []).append(r)
    out = []
    for layer in sorted(by_layer):
        rows = by_layer[layer]
        repairs = [r["repair"] for r in rows]
        out.append(LayerSummary(layer, len(rows), float(np.mean(repairs)), bootstrap_ci(repairs),
                                float(np.mean([r["top1_agree"] for r in rows]))))
    return out


def boundary_counts(records: Sequence[dict]) -> dict[str, int]:
    """How many boundaries were patched, below the floor and skipped, and trajectories seen."""
    seen: dict[tuple[str, int], dict] = {}
    for r in records:
        seen.setdefault((r["trajectory"], r["step"]), r)
    rows = list(seen.values())
    return {
        "trajectories": len({t for t, _ in seen}),
        "boundaries": len(rows),
        "patched": sum(r.get("layer") is not None for r in rows),
        "below_floor": sum(bool(r.get("below_floor")) for r in rows),
        "skipped": sum("skipped" in r for r in rows),
        "windowed": sum(r["window"]["full"]["windowed"] or r["window"]["deleted"]["windowed"] for r in rows),
    }
