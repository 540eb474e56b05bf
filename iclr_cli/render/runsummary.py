"""Per-variant summary of a replay run, from ``results.jsonl`` records alone (pure).

The targets METHOD.md ("What the paper measured") lists, per variant:

- ``mean_reward`` over records with a reward; ``wins``/``ties``/``losses`` against the
  ``none`` record of the same task and seed (``None`` for ``none`` itself or without one);
- sums of API ``input_tokens``, ``output_tokens``, ``cache_read_tokens`` (``None`` when no
  record reported the field) and ``requests``;
- ``change_*_pct``: the change of that sum against ``none`` on the (task, seed) pairs both
  ran, in percent of ``none``;
- ``deletion_ratio`` = reasoning tokens removed / reasoning tokens generated;
- ``amplification`` = change in total (input + output) tokens against ``none`` on the paired
  runs, divided by the reasoning tokens deleted in them. Negative: tokens saved; a value below
  -1 means each deleted token saved more than itself (trajectory amplification).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BASE = "none"


@dataclass(frozen=True)
class VariantSummary:
    """One variant's row of the summary table (see the module docstring for each field)."""

    variant: str
    runs: int
    mean_reward: float | None
    wins: int | None
    ties: int | None
    losses: int | None
    requests: int | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    change_input_pct: float | None
    change_output_pct: float | None
    change_total_pct: float | None
    deletion_ratio: float | None
    amplification: float | None


def _sum(records: Sequence[Mapping], name: str) -> int | None:
    values = [r.get(name) for r in records if r.get(name) is not None]
    return sum(values) if values else None


def _pct(new: float | None, old: float | None) -> float | None:
    return 100.0 * (new - old) / old if new is not None and old else None


def _total(r: Mapping) -> int | None:
    a, b = r.get("input_tokens"), r.get("output_tokens")
    return a + b if a is not None and b is not None else None


def pairs_with_base(records: Sequence[Mapping]) -> list[tuple[Mapping, Mapping]]:
    """``(record, none record of the same task and seed)`` for every non-``none`` record that
    has one."""
    base = {(r["task"], r["seed"]): r for r in records if r["variant"] == BASE}
    return [(r, base[(r["task"], r["seed"])]) for r in records if r["variant"] != BASE and (r["task"], r["seed"]) in base]


def summarize_variants(records: Sequence[Mapping]) -> list[VariantSummary]:
    """One :class:`VariantSummary` per variant, ``none`` first, then in order of appearance."""
    order: list[str] = []
    for r in records:
        if r["variant"] not in order:
            order.append(r["variant"])
    order.sort(key=lambda v: v != BASE)
    pairs = pairs_with_base(records)
    out = []
    for variant in order:
        mine = [r for r in records if r["variant"] == variant]
        rewards = [r["reward"] for r in mine if r.get("reward") is not None]
        paired = [(r, b) for r, b in pairs if r["variant"] == variant]
        wins = ties = losses = None
        change_in = change_out = change_total = amplification = None
        if paired:
            scored = [(r["reward"], b["reward"]) for r, b in paired if r.get("reward") is not None and b.get("reward") is not None]
            wins = sum(x > y for x, y in scored)
            ties = sum(x == y for x, y in scored)
            losses = sum(x < y for x, y in scored)
            mine_p, base_p = [r for r, _ in paired], [b for _, b in paired]
            change_in = _pct(_sum(mine_p, "input_tokens"), _sum(base_p, "input_tokens"))
            change_out = _pct(_sum(mine_p, "output_tokens"), _sum(base_p, "output_tokens"))
            totals = [(_total(r), _total(b)) for r, b in paired]
            if all(t is not None and u is not None for t, u in totals):
                delta = sum(t - u for t, u in totals)  # type: ignore[operator]
                change_total = _pct(sum(t for t, _ in totals), sum(u for _, u in totals))  # type: ignore[misc]
                deleted = _sum(mine_p, "reasoning_tokens_removed")
                amplification = delta / deleted if deleted else None
        generated = _sum(mine, "reasoning_tokens_generated")
        removed = _sum(mine, "reasoning_tokens_removed")
        out.append(
            VariantSummary(
                variant=variant,
                runs=len(mine),
                mean_reward=sum(rewards) / len(rewards) if rewards else None,
                wins=wins,
                ties=ties,
                losses=losses,
                requests=_sum(mine, "requests"),
                input_tokens=_sum(mine, "input_tokens"),
                output_tokens=_sum(mine, "output_tokens"),
                cache_read_tokens=_sum(mine, "cache_read_tokens"),
                change_input_pct=change_in,
                change_output_pct=change_out,
                change_total_pct=change_total,
                deletion_ratio=removed / generated if generated and removed is not None else None,
                amplification=amplification,
            )
        )
    return out
