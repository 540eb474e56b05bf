"""Score records for ``iclr diff``: recognise ``iclr score`` output, read it, or compute it.

A file is ``score`` output when its first record is a JSON object with ``trajectory``,
``step`` and either ``block`` + ``entropy_bits`` (a scored block) or ``skipped`` (a step the
scorer left unpruned) -- the record shape documented in :func:`iclr_cli.pipeline.score_records`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from iclr_cli.compress import CompressionResult
from iclr_cli.errors import InputError
from iclr_cli.jsonio import BOM, loads
from iclr_cli.jsonl import iter_jsonl
from iclr_cli.render.diffdata import BlockScoreInfo, ScoreMap, StepScores


def is_score_output(data: bytes) -> bool:
    """True when the first non-blank line of ``data`` is an ``iclr score`` record."""
    body = data[len(BOM) :] if data.startswith(BOM) else data
    for raw in body.splitlines():
        if not raw.strip():
            continue
        try:
            value = loads(raw)
        except (ValueError, UnicodeDecodeError):
            return False
        return (
            isinstance(value, dict)
            and "trajectory" in value
            and "step" in value
            and (("block" in value and "entropy_bits" in value) or "skipped" in value)
        )
    return False


def _field(value: dict, name: str, kind, source: str, line: int, *, optional: bool = False):
    if name not in value and optional:
        return None
    got = value.get(name)
    if got is None and optional:
        return None
    if not isinstance(got, kind) or (kind is int and isinstance(got, bool)):
        raise InputError(source, f"expected {getattr(kind, '__name__', 'number')}, got {type(got).__name__}", line=line, field=name)
    return got


def read_scores(data: bytes, source: str) -> ScoreMap:
    """Parse ``iclr score`` JSONL into ``(trajectory, step) -> StepScores``.

    Raises:
        InputError: naming ``source``, the 1-based line and the field for a record that is
        not a score record (missing or mistyped ``trajectory``, ``step``, ``block``,
        ``entropy_bits``, ``n_tokens``, ``selected``, ``precision``) or a block listed twice.
    """
    steps: dict[tuple[str, int], dict[int, BlockScoreInfo]] = {}
    skipped: dict[tuple[str, int], str] = {}
    for line in iter_jsonl(data, source):
        value = line.value
        if value is None:
            continue
        if not isinstance(value, dict):
            raise InputError(source, "a score record must be a JSON object", line=line.number)
        traj = _field(value, "trajectory", str, source, line.number)
        step = _field(value, "step", int, source, line.number)
        key = (traj, step)
        if "skipped" in value and "block" not in value:
            skipped[key] = str(value["skipped"])
            continue
        block = _field(value, "block", int, source, line.number)
        entropy = _field(value, "entropy_bits", (int, float), source, line.number, optional=True)
        info = BlockScoreInfo(
            n_tokens=_field(value, "n_tokens", int, source, line.number, optional=True),
            entropy_bits=float(entropy) if entropy is not None else None,
            selected=bool(_field(value, "selected", bool, source, line.number, optional=True)),
            text=_field(value, "text", str, source, line.number, optional=True),
            line=line.number,
            precision=_field(value, "precision", str, source, line.number, optional=True),
        )
        blocks = steps.setdefault(key, {})
        if block in blocks:
            raise InputError(source, f"block {block} of {traj} step {step} is listed twice (first on line {blocks[block].line})", line=line.number, field="block")
        blocks[block] = info
    keys = set(steps) | set(skipped)
    return {k: StepScores(steps.get(k, {}), skipped.get(k)) for k in keys}


def scores_precision(scores: ScoreMap) -> str | None:
    """The decoder precision the scores of :func:`read_scores` were computed in: their records'
    ``precision`` values (``float32``, ``bfloat16``; several joined with ", "), ``None`` when no
    record names one (files written before records named it)."""
    seen = {info.precision for step in scores.values() for info in step.blocks.values() if info.precision}
    return ", ".join(sorted(seen)) or None


def check_ids(scores: ScoreMap, trajectory_ids: Sequence[str], scores_name: str, input_name: str) -> None:
    """Make sure the score file speaks of the input's trajectories.

    Raises:
        InputError: when none of the score file's trajectory ids is in the input (the
        message lists both, so a renamed input is easy to spot).
    """
    in_scores = {t for t, _ in scores}
    if in_scores and not in_scores & set(trajectory_ids):
        raise InputError(
            scores_name,
            f"scores trajectories {', '.join(sorted(in_scores)[:3])}, none of which is in {input_name} "
            f"({', '.join(list(trajectory_ids)[:3])}); score the same file under the same name",
        )


def scores_from_results(results: Iterable[CompressionResult]) -> ScoreMap:
    """The entropies a compression run computed, as a score map (``iclr diff --score``)."""
    out: dict[tuple[str, int], StepScores] = {}
    for result in results:
        for report in result.steps:
            if not report.blocks and not report.skipped:
                continue
            blocks = {
                b.block: BlockScoreInfo(b.n_tokens, b.entropy_bits, b.selected, b.text)
                for b in report.blocks
                if b.entropy_bits is not None or b.n_tokens is not None
            }
            out[(report.trajectory, report.step)] = StepScores(blocks, report.skipped)
    return out
