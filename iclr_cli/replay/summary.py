"""Per-variant summary of a replay's results (METHOD.md, "What the paper measured"). Pure.

Rules:
- The last record of each (task, variant, seed) wins (a resumed ``--retry-errors`` run
  replaces the earlier one). Runs with status ``error`` (the API failed) are left out of
  every number and only counted.
- Wins / ties / losses compare reward with the baseline variant (``none``) on the same task
  and seed; a tie is an equal reward (within 1e-9). Runs without a baseline partner count in
  the totals but not in W/T/L or in any change against the baseline.
- Token totals are sums over runs; ``total`` = input + output tokens (input already includes
  cache reads on every provider this project knows). Changes against the baseline are
  ``(sum over paired runs - baseline sum over the same task+seed) / baseline sum``.
- Deletion ratio = reasoning tokens removed / reasoning tokens generated, both counted with
  the proxy's tokenizer (the one that counts the scorer's budget).
- Amplification = (change in total API tokens against the baseline, over paired runs) /
  (reasoning tokens removed in those runs). Negative means savings. Without trajectory
  change a removed token is still re-sent by every later request, so |amplification| above 1
  is the normal case; the paper's point is that it is not proportional to the deletion.
  ``None`` when nothing was removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens")


@dataclass(frozen=True)
class VariantSummary:
    """One row of the summary table (all counts in API tokens unless named ``reasoning``).

    ``change`` maps ``input_tokens``, ``output_tokens``, ``cache_read_tokens`` and
    ``total_tokens`` to a fraction (``-0.25`` = 25 % fewer than the baseline), or ``None``
    when there is no paired baseline or the baseline sum is zero / unreported.
    Token sums are ``None`` when no run of the variant reported that field.
    """

    variant: str
    runs: int
    errors: int
    mean_reward: float | None
    wins: int
    ties: int
    losses: int
    paired: int
    requests: int
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    total_tokens: int | None
    change: Mapping[str, float | None]
    reasoning_generated: int
    reasoning_removed: int
    deletion_ratio: float | None
    amplification: float | None


def latest(records: Iterable[Mapping]) -> dict[tuple[str, str, int], Mapping]:
    """The last record of each (task, variant, seed)."""
    out: dict[tuple[str, str, int], Mapping] = {}
    for r in records:
        out[(r["task"], r["variant"], r["seed"])] = r
    return out


def _sum(records: Sequence[Mapping], name: str) -> int | None:
    values = [r.get(name) for r in records if r.get(name) is not None]
    return sum(values) if values else None


def _total(r: Mapping) -> int:
    return (r.get("input_tokens") or 0) + (r.get("output_tokens") or 0)


def _change(now: int | None, base: int | None) -> float | None:
    if now is None or not base:
        return None
    return (now - base) / base


def summarize(records: Iterable[Mapping], baseline: str = "none") -> list[VariantSummary]:
    """One :class:`VariantSummary` per variant, baseline first, then in first-seen order."""
    by_key = latest(records)
    order: list[str] = []
    for _task, variant, _seed in by_key:
        if variant not in order:
            order.append(variant)
    if baseline in order:
        order.remove(baseline)
        order.insert(0, baseline)
    base = {(t, s): r for (t, v, s), r in by_key.items() if v == baseline and r.get("status") != "error"}
    rows = []
    for variant in order:
        all_runs = [r for (t, v, s), r in by_key.items() if v == variant]
        runs = [r for r in all_runs if r.get("status") != "error"]
        pairs = [(r, base[(r["task"], r["seed"])]) for r in runs if (r["task"], r["seed"]) in base]
        wins = sum(r["reward"] > b["reward"] + 1e-9 for r, b in pairs)
        losses = sum(r["reward"] < b["reward"] - 1e-9 for r, b in pairs)
        mine, theirs = [r for r, _ in pairs], [b for _, b in pairs]
        change = {name: (_change(_sum(mine, name), _sum(theirs, name)) if pairs else None) for name in TOKEN_FIELDS}
        change["total_tokens"] = _change(sum(map(_total, mine)), sum(map(_total, theirs))) if pairs else None
        removed_paired = sum(r.get("reasoning_tokens_removed") or 0 for r in mine)
        amplification = None
        if pairs and removed_paired:
            amplification = (sum(map(_total, mine)) - sum(map(_total, theirs))) / removed_paired
        generated = sum(r.get("reasoning_tokens_generated") or 0 for r in runs)
        removed = sum(r.get("reasoning_tokens_removed") or 0 for r in runs)
        rows.append(
            VariantSummary(
                variant=variant,
                runs=len(runs),
                errors=len(all_runs) - len(runs),
                mean_reward=sum(r["reward"] for r in runs) / len(runs) if runs else None,
                wins=wins,
                ties=len(pairs) - wins - losses,
                losses=losses,
                paired=len(pairs),
                requests=sum(r.get("requests") or 0 for r in runs),
                input_tokens=_sum(runs, "input_tokens"),
                output_tokens=_sum(runs, "output_tokens"),
                cache_read_tokens=_sum(runs, "cache_read_tokens"),
                total_tokens=sum(map(_total, runs)) if runs else None,
                change=change,
                reasoning_generated=generated,
                reasoning_removed=removed,
                deletion_ratio=removed / generated if generated else None,
                amplification=amplification,
            )
        )
    return rows


# The columns' units. input/output/cache read are the provider's usage (API tokens, the
# served model's tokenizer); deleted counts reasoning with the proxy's tokenizer, which is all
# iclr has for the reasoning it edits; amplification divides one by the other.
LEGEND = (
    "W/T/L: reward against 'none' on the same task and seed. "
    "input, output, cache read: API tokens (the provider's usage), summed over runs; (±%): change against 'none' on those runs. "
    "deleted: reasoning tokens removed / generated, both in the proxy's tokenizer (results.jsonl: reasoning_tokenizer). "
    "amplification: change in total API tokens (input + output) against 'none' / reasoning tokens removed (proxy tokens), "
    "so API tokens per proxy token (negative: saved; below -1: each deleted token saved more than itself)."
)
FAKE_TOKENIZER = "regex-words"
FAKE_NOTE = (
    "--proxy-model fake counts whitespace runs as tokens: a deleted word also joins the whitespace on its two sides, "
    "so 'deleted' reads about twice a random-R's R% (a real proxy's tokens carry their leading space)."
)


def legend(tokenizers: Iterable[str | None] = ()) -> str:
    """The line under the summary table saying each column's unit (:data:`LEGEND`), with
    :data:`FAKE_NOTE` when a run counted reasoning with the fake scorer's tokenizer
    (``tokenizers``: the records' ``reasoning_tokenizer``)."""
    return LEGEND + (" " + FAKE_NOTE if FAKE_TOKENIZER in set(tokenizers) else "")


def to_records(rows: Sequence[VariantSummary]) -> list[dict]:
    """Plain dicts (numbers, not display strings) for ``summary.json``."""
    from dataclasses import asdict

    return [{**asdict(r), "change": dict(r.change)} for r in rows]


def _tokens(value: int | None, change: float | None, is_baseline: bool) -> str:
    if value is None:
        return "n/a"
    if is_baseline or change is None:
        return f"{value:,}"
    return f"{value:,} ({change * 100:+.1f}%)"


def table_rows(rows: Sequence[VariantSummary], baseline: str = "none") -> tuple[list[str], list[list[str]]]:
    """Column names and display rows for :meth:`iclr_cli.render.output.Output.table`."""
    columns = ["variant", "runs", "reward", "W/T/L", "input", "output", "cache read", "requests", "deleted", "amplification"]
    out = []
    for r in rows:
        is_base = r.variant == baseline
        runs = f"{r.runs}" + (f" (+{r.errors} err)" if r.errors else "")
        out.append([
            r.variant,
            runs,
            "n/a" if r.mean_reward is None else f"{r.mean_reward:.3f}",
            "-" if is_base or not r.paired else f"{r.wins}/{r.ties}/{r.losses}",
            _tokens(r.input_tokens, r.change.get("input_tokens"), is_base),
            _tokens(r.output_tokens, r.change.get("output_tokens"), is_base),
            _tokens(r.cache_read_tokens, r.change.get("cache_read_tokens"), is_base),
            str(r.requests),
            "-" if r.deletion_ratio is None else f"{r.deletion_ratio * 100:.1f}%",
            "-" if r.amplification is None else f"{r.amplification:+.2f}",
        ])
    return columns, out
