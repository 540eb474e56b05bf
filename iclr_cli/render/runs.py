"""Read a replay run folder for ``iclr diff RUN_A RUN_B`` and ``iclr report``.

Input contract (what ``iclr replay --out DIR`` writes; docs/replay.md, "Output"):

- ``DIR/results.jsonl``: one record per (task, variant, seed) with ``task`` (str), ``variant``
  (str), ``seed`` (int), ``reward`` (number in [0, 1] or null), ``requests``,
  ``input_tokens``, ``output_tokens``, ``cache_read_tokens`` (API tokens, int or null when the
  provider reports none), ``reasoning_tokens_generated``, ``reasoning_tokens_removed`` (proxy
  tokens), ``wall_s``, ``status``. Other fields are kept and ignored.
- ``trajectory`` (optional): path, relative to DIR, of the run's trajectory as OpenAI chat
  messages JSON (any file ``iclr score`` reads).
- ``requests_log`` (optional): path, relative to DIR, of a JSONL with one line per agent
  request in order: ``step`` and the token counts ``input_tokens``, ``output_tokens``,
  ``cache_read_tokens`` either at top level or under ``usage``.
- ``block_scores`` (optional): path, relative to DIR, of a JSONL of ``iclr score`` records
  for the blocks scored during the run (the report's heat map).

A replay record is named on the command line as a run folder (``--task``/``--seed`` pick one
record when it holds several; ``DIR@VARIANT`` picks the variant), or as a trajectory file (or
the folder holding it, e.g. ``DIR/runs/TASK/VARIANT/seedN``) that a ``results.jsonl`` in one
of its parent folders lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from iclr_cli.errors import InputError, UsageError
from iclr_cli.jsonio import read_input
from iclr_cli.jsonl import iter_jsonl
from iclr_cli.trajectory import Trajectory

RESULTS = "results.jsonl"
_REQUIRED = {"task": str, "variant": str, "seed": int}
_NUMBERS = (
    "reward", "requests", "input_tokens", "output_tokens", "cache_read_tokens",
    "reasoning_tokens_generated", "reasoning_tokens_removed", "wall_s",
)


@dataclass(frozen=True)
class RequestUsage:
    """API token counts of one agent request (``None``: not reported)."""

    step: int
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None = None


@dataclass(frozen=True)
class RunRecord:
    """One replay: its ``results.jsonl`` record, trajectory and per-request usage.

    ``trajectory`` / ``usage`` are ``None`` when the record names no such file.
    """

    run_dir: str
    record: dict
    trajectory: Trajectory | None
    usage: tuple[RequestUsage, ...] | None

    @property
    def label(self) -> str:
        r = self.record
        return f"{r['task']}/{r['variant']}/seed {r['seed']}"


def read_results(run_dir: str) -> list[dict]:
    """The records of ``run_dir/results.jsonl``, in file order.

    Raises:
        InputError: naming the file, line and field for a missing folder/file, a line that
        is not a JSON object, a missing or mistyped ``task``/``variant``/``seed``, or a token,
        reward or time field that is neither a number nor null.
    """
    path = Path(run_dir) / RESULTS
    if not Path(run_dir).is_dir():
        raise InputError(run_dir, "no such run folder")
    records = []
    for line in iter_jsonl(read_input(str(path)), str(path)):
        value = line.value
        if value is None:
            continue
        if not isinstance(value, dict):
            raise InputError(str(path), "a result record must be a JSON object", line=line.number)
        for name, kind in _REQUIRED.items():
            got = value.get(name)
            if not isinstance(got, kind) or isinstance(got, bool):
                raise InputError(str(path), f"expected {kind.__name__}, got {type(got).__name__ if name in value else 'nothing'}", line=line.number, field=name)
        for name in _NUMBERS:
            got = value.get(name)
            if got is not None and (isinstance(got, bool) or not isinstance(got, (int, float))):
                raise InputError(str(path), f"expected a number or null, got {type(got).__name__}", line=line.number, field=name)
        records.append(value)
    return records


def _split_variant(arg: str) -> tuple[str, str | None]:
    if not Path(arg).exists() and "@" in arg:
        head, _, variant = arg.rpartition("@")
        return head, variant
    return arg, None


def _owner_dir(path: Path) -> Path | None:
    """The nearest parent folder (up to 6 levels: ``DIR/runs/TASK/VARIANT/seedN/FILE``)
    holding ``results.jsonl``."""
    for parent in list(path.resolve().parents)[:6]:
        if (parent / RESULTS).is_file():
            return parent
    return None


def _owned(owner: Path, records: Sequence[dict], p: Path) -> list[dict]:
    """Records whose trajectory file is ``p``, or lies directly in folder ``p``."""
    target = p.resolve()
    out = []
    for r in records:
        if not isinstance(r.get("trajectory"), str):
            continue
        traj = (owner / r["trajectory"]).resolve()
        if traj == target or (p.is_dir() and traj.parent == target):
            out.append(r)
    return out


def is_run_record(arg: str) -> bool:
    """True when ``arg`` names a replay record (see the module docstring)."""
    path, _variant = _split_variant(arg)
    p = Path(path)
    if p.is_dir() and (p / RESULTS).is_file():
        return True
    if not p.exists() or p.name == RESULTS:
        return False
    owner = _owner_dir(p)
    if owner is None:
        return False
    try:
        return bool(_owned(owner, read_results(str(owner)), p))
    except InputError:
        return False


def load_record(arg: str, *, task: str | None = None, seed: int | None = None, variant: str | None = None) -> RunRecord:
    """Load the replay record ``arg`` names, with its trajectory and request log.

    Raises:
        UsageError: when the folder holds no record or several that match (the message lists
        them and the options that pick one).
        InputError: for an unreadable results file, trajectory or request log.
    """
    path, at_variant = _split_variant(arg)
    variant = at_variant or variant
    p = Path(path)
    if p.is_dir() and (p / RESULTS).is_file():
        run_dir, records = p, read_results(path)
        matches = [
            r for r in records
            if (task is None or r["task"] == task) and (seed is None or r["seed"] == seed) and (variant is None or r["variant"] == variant)
        ]
    else:
        owner = _owner_dir(p)
        if owner is None:
            raise InputError(path, f"no {RESULTS} in the folders above it")
        run_dir = owner
        matches = _owned(owner, read_results(str(owner)), p)
    if len(matches) != 1:
        found = ", ".join(f"{r['task']}/{r['variant']}/{r['seed']}" for r in matches[:6]) or "none"
        raise UsageError(f"{arg}: {len(matches)} replay records match ({found}); pick one with --task, --seed or RUN_DIR@VARIANT")
    return _with_files(str(run_dir), matches[0])


def _with_files(run_dir: str, record: dict) -> RunRecord:
    from iclr_cli.inputs import load_file

    trajectory = None
    if isinstance(record.get("trajectory"), str):
        docs = load_file(str(Path(run_dir) / record["trajectory"]), allow_empty=True)[1].trajectories
        trajectory = docs[0] if docs else None
    usage = None
    if isinstance(record.get("requests_log"), str):
        usage = read_requests_log(str(Path(run_dir) / record["requests_log"]))
    return RunRecord(run_dir, record, trajectory, usage)


def read_requests_log(path: str) -> tuple[RequestUsage, ...]:
    """Per-request token counts from a request log (see the module docstring).

    Raises:
        InputError: naming the file, line and field for a token count that is not an
        integer or null.
    """
    out = []
    for line in iter_jsonl(read_input(path), path):
        value = line.value
        if value is None:
            continue
        if not isinstance(value, dict):
            raise InputError(path, "a request record must be a JSON object", line=line.number)
        usage = value.get("usage") if isinstance(value.get("usage"), dict) else value
        counts = {}
        for name in ("input_tokens", "output_tokens", "cache_read_tokens"):
            got = usage.get(name)
            if got is not None and (isinstance(got, bool) or not isinstance(got, int)):
                raise InputError(path, f"expected an integer or null, got {type(got).__name__}", line=line.number, field=name)
            counts[name] = got
        step = value.get("step")
        out.append(RequestUsage(step if isinstance(step, int) and not isinstance(step, bool) else len(out), **counts))
    return tuple(out)


def load_run(run_dir: str) -> list[RunRecord]:
    """Every record of a run folder with its files, in ``results.jsonl`` order."""
    return [_with_files(run_dir, r) for r in read_results(run_dir)]


def total_tokens(record: dict) -> int | None:
    """Input + output API tokens of one record (``None`` when either is unreported)."""
    a, b = record.get("input_tokens"), record.get("output_tokens")
    return a + b if a is not None and b is not None else None


def heat_candidates(records: Sequence[RunRecord], spec: str | None) -> list[RunRecord]:
    """Records whose block heat map the report may show, best first.

    ``spec`` is ``TASK/VARIANT/SEED`` (any part may be empty): the matching records. Without
    it: records of a scoring variant (``iclr``, ``step-only``), then the others; each group in
    file order. Only records with a trajectory are candidates.

    Raises:
        UsageError: when ``spec`` matches no record with a trajectory.
    """
    with_traj = [r for r in records if r.trajectory is not None]
    if spec:
        task, _, rest = spec.partition("/")
        variant, _, seed = rest.partition("/")
        found = [
            r for r in with_traj
            if (not task or r.record["task"] == task) and (not variant or r.record["variant"] == variant) and (not seed or str(r.record["seed"]) == seed)
        ]
        if not found:
            raise UsageError(f"no replay record with a trajectory matches {spec!r} (TASK/VARIANT/SEED)")
        return found
    return sorted(with_traj, key=lambda r: r.record["variant"] not in ("iclr", "iclr-ext", "step-only"))
