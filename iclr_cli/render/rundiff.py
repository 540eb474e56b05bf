"""Two replays of the same task, aligned step by step (``iclr diff RUN_A RUN_B``), as data.

Step t of one run is paired with step t of the other (a step is one assistant turn, made by
agent request t). A step's action is its visible text and tool calls folded to one line
(``label: text | label: text``, tool calls labelled by the tool's name); two actions are the same when they are equal up to
whitespace. The first divergent step is the first where they differ or one run has stopped.
Per step: each run's request input/output tokens (the API's counts) and the running
difference of total tokens (input + output, B minus A) up to and including that step, so
trajectory amplification is visible where it starts (METHOD.md, "What the paper measured").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from iclr_cli.render.runs import RequestUsage, RunRecord
from iclr_cli.trajectory import Step


@dataclass(frozen=True)
class RunSide:
    """What the header shows of one replay: its record's identity and totals."""

    label: str
    task: str
    variant: str
    seed: int
    reward: float | None
    status: str | None
    requests: int | None
    input_tokens: int | None
    output_tokens: int | None


@dataclass(frozen=True)
class RunStepRow:
    """Step ``step`` of both runs. ``None``: that run has no such step / did not report."""

    step: int
    action_a: str | None
    action_b: str | None
    same: bool
    input_a: int | None
    output_a: int | None
    input_b: int | None
    output_b: int | None
    running_diff: int | None


@dataclass(frozen=True)
class RunDiff:
    """Both sides, the first divergent step (``None``: identical actions throughout) and
    one row per step of the longer run."""

    a: RunSide
    b: RunSide
    same_task: bool
    first_divergence: int | None
    rows: tuple[RunStepRow, ...]


def fold_action(step: Step) -> str:
    """The step's actions (visible text, tool calls) as one whitespace-collapsed line."""
    pieces = [f"{(p.label or p.kind).removeprefix('tool_call:')}: {' '.join(p.text.split())}" for p in step.parts if p.kind == "action"]
    return " | ".join(pieces) if pieces else "(no action)"


def _side(run: RunRecord) -> RunSide:
    r = run.record
    return RunSide(run.label, r["task"], r["variant"], r["seed"], r.get("reward"), r.get("status"), r.get("requests"), r.get("input_tokens"), r.get("output_tokens"))


def _usage_at(usage: tuple[RequestUsage, ...] | None, step: int) -> RequestUsage | None:
    if usage is None:
        return None
    by_step = {u.step: u for u in usage}
    return by_step.get(step)


def _total(u: RequestUsage | None) -> int | None:
    if u is None:
        return 0
    if u.input_tokens is None or u.output_tokens is None:
        return None
    return u.input_tokens + u.output_tokens


def align_runs(a: RunRecord, b: RunRecord) -> RunDiff:
    """Align two replays step by step (see the module docstring)."""
    steps_a = a.trajectory.steps if a.trajectory else ()
    steps_b = b.trajectory.steps if b.trajectory else ()
    n = max(len(steps_a), len(steps_b), len(a.usage or ()), len(b.usage or ()))
    rows = []
    first = None
    running: int | None = 0
    for t in range(n):
        act_a = fold_action(steps_a[t]) if t < len(steps_a) else None
        act_b = fold_action(steps_b[t]) if t < len(steps_b) else None
        same = act_a is not None and act_a == act_b
        if not same and first is None:
            first = t
        ua, ub = _usage_at(a.usage, t), _usage_at(b.usage, t)
        ta, tb = _total(ua), _total(ub)
        running = running + tb - ta if running is not None and ta is not None and tb is not None and a.usage is not None and b.usage is not None else None
        rows.append(
            RunStepRow(
                t, act_a, act_b, same,
                ua.input_tokens if ua else None, ua.output_tokens if ua else None,
                ub.input_tokens if ub else None, ub.output_tokens if ub else None,
                running,
            )
        )
    return RunDiff(_side(a), _side(b), a.record["task"] == b.record["task"], first, tuple(rows))


def to_json(diff: RunDiff) -> dict:
    """The run diff as JSON-ready data: ``{a, b, same_task, first_divergence, steps: [...]}``."""
    return {
        "a": asdict(diff.a),
        "b": asdict(diff.b),
        "same_task": diff.same_task,
        "first_divergence": diff.first_divergence,
        "steps": [asdict(r) for r in diff.rows],
    }
