"""The task x variant x seed matrix: run, check, account, save; resumable.

Layout of ``--out DIR``::

    results.jsonl                       one record per finished (task, variant, seed)
    runs/TASK/VARIANT/seedN/trajectory.json   the conversation as the agent last saw it
                                              (compressed), OpenAI chat messages
    runs/TASK/VARIANT/seedN/generated.json    the same with reasoning as generated
    runs/TASK/VARIANT/seedN/requests.jsonl    per request: usage, and what compression did
                                              to the step the request produced
    runs/TASK/VARIANT/seedN/block_scores.jsonl  iclr / step-only: one ``iclr score`` record
                                              per reasoning block scored during the run

Both trajectory files are ``{"messages": [...], "tools": [...], "meta": {...}}``, which the
``openai`` format adapter reads, so ``iclr score`` / ``iclr prune`` / ``iclr diff`` work on them.

Crash safety: each record is appended with one write, then flushed and fsynced, under a lock
(records never interleave). On start, a torn last line from an earlier crash is cut off and
finished (task, variant, seed) keys are skipped. A run cut short by Ctrl-C writes no record
and runs again on resume.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import orjson

from iclr_cli.jsonio import write_output
from iclr_cli.replay.accounting import total_usage
from iclr_cli.replay.agent import Agent, AgentConfig, Interrupted, Outcome
from iclr_cli.replay.client import ChatClient
from iclr_cli.replay.history import Compressor, History
from iclr_cli.replay.suite import CheckContext, Task
from iclr_cli.replay.tools import TEXT_PROTOCOL, TOOL_SPECS, ToolLimits, Workspace
from iclr_cli.token_accounting import ReasoningTokens

SYSTEM_PROMPT = """\
You are an autonomous agent solving a task inside a workspace folder on a Linux machine.
Work step by step: inspect files, run commands, make changes, and check your work.
Use the tools provided; every tool runs inside the workspace. When the task is complete,
call the submit tool (with the final answer if the task asks for one)."""

RESULTS = "results.jsonl"
SUBMISSION_CAP = 2000


@dataclass(frozen=True)
class RunSpec:
    """One cell of the matrix."""

    task: Task
    variant: str
    seed: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.task.name, self.variant, self.seed)


@dataclass(frozen=True)
class ReplayConfig:
    """Settings shared by every run of a replay.

    ``model`` and ``base_url`` are recorded in each result; ``keep_workspaces`` leaves the
    temporary folders in place (their path is recorded) instead of deleting them.
    """

    out: Path
    model: str
    base_url: str
    agent: AgentConfig = AgentConfig()
    limits: ToolLimits = ToolLimits()
    keep_workspaces: bool = False


class ResultsLog:
    """``results.jsonl`` opened for appending (see module docstring)."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self.records = _read_records(path)
        self._fh = open(path, "ab")

    def append(self, record: Mapping) -> None:
        line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()


def _read_records(path: Path) -> list[dict]:
    """Finished records; a torn last line (no newline: crash mid-write) is cut off the file."""
    if not path.exists():
        return []
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        with open(path, "r+b") as fh:
            fh.truncate(keep)
        data = data[:keep]
    from iclr_cli.jsonl import iter_jsonl

    return [line.value for line in iter_jsonl(data, str(path)) if isinstance(line.value, dict)]


def plan(tasks: Sequence[Task], variants: Sequence[str], seeds: Sequence[int], done: set[tuple[str, str, int]]) -> list[RunSpec]:
    """Every (task, variant, seed) not in ``done``, seed-major so early results pair up."""
    return [RunSpec(t, v, s) for s in seeds for t in tasks for v in variants if (t.name, v, s) not in done]


def run_dir(out: Path, spec: RunSpec) -> Path:
    return out / "runs" / spec.task.name / spec.variant / f"seed{spec.seed}"


def run_one(spec: RunSpec, client: ChatClient, compressor: Compressor, config: ReplayConfig, stop: threading.Event | None = None) -> dict | None:
    """Run one cell: fresh workspace, environment, agent, checker, saved files; returns the
    results record, or ``None`` when ``stop`` was set before the run ended."""
    task = spec.task
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix=f"iclr-{task.name}-"))
    limits = config.limits if task.command_timeout_s is None else ToolLimits(task.command_timeout_s, config.limits.output_cap)
    try:
        task.prepare(root)
        with task.environment(root) as env:
            system = SYSTEM_PROMPT if config.agent.tool_protocol == "native" else f"{SYSTEM_PROMPT}\n\n{TEXT_PROTOCOL}"
            prompt = [{"role": "system", "content": system}, {"role": "user", "content": task.render_instruction(env).strip()}]
            tools = TOOL_SPECS if config.agent.tool_protocol == "native" else None
            traj_id = f"{task.name}/{spec.variant}/seed{spec.seed}"
            history = History(traj_id, prompt, tools, compressor, seed=spec.seed)
            agent = Agent(client, history, Workspace(root, limits), config.agent, should_stop=stop.is_set if stop else None)
            outcome = agent.run()
            if outcome.status == Interrupted.status:
                return None
            reward, check_error = _check(task, CheckContext(root, outcome.submission, env, task.root))
        return _finish(spec, config, history, outcome, reward, check_error, time.monotonic() - started, root)
    finally:
        if not config.keep_workspaces:
            shutil.rmtree(root, ignore_errors=True)


def _check(task: Task, ctx: CheckContext) -> tuple[float, str | None]:
    try:
        return task.check(ctx), None
    except Exception as exc:  # a broken checker is a failed run, not a crashed replay
        return 0.0, f"{type(exc).__name__}: {exc}"


def _finish(spec: RunSpec, config: ReplayConfig, history: History, outcome: Outcome, reward: float, check_error: str | None, wall_s: float, root: Path) -> dict:
    folder = run_dir(config.out, spec)
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"task": spec.task.name, "variant": spec.variant, "seed": spec.seed, "model": config.model, "status": outcome.status}
    for name, messages in (("trajectory.json", history.messages()), ("generated.json", history.generated_messages())):
        doc = {"messages": messages, "tools": history.tools or [], "meta": meta}
        write_output(str(folder / name), orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    lines = []
    for req, rep in zip(outcome.requests, history.reports):
        lines.append(orjson.dumps({
            "step": req.step, "messages_sent": req.messages, "finish_reason": req.finish_reason, "wall_s": round(req.wall_s, 3),
            **req.usage.to_record(), "raw_usage": req.raw_usage,
            **rep.tokens.to_record(),
            "blocks": len(rep.blocks), "blocks_removed": rep.n_removed, "compression_skipped": rep.skipped, "scorer_windowed": rep.windowed,
        }, option=orjson.OPT_APPEND_NEWLINE))
    write_output(str(folder / "requests.jsonl"), b"".join(lines))
    rel = folder.relative_to(config.out)
    block_scores = None
    if history.compressor.variant.needs_scores:
        from iclr_cli.pipeline import score_records

        block_scores = str(rel / "block_scores.jsonl")
        scored = score_records(str(rel / "generated.json"), [history.compression_result()], history.compressor.variant)
        write_output(str(config.out / block_scores), b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in scored))
    usage = total_usage(r.usage for r in outcome.requests)
    tokens = sum((r.tokens for r in history.reports), ReasoningTokens())
    submission = outcome.submission
    record = {
        "task": spec.task.name,
        "domain": spec.task.domain,
        "variant": spec.variant,
        "seed": spec.seed,
        "reward": reward,
        "status": outcome.status,
        "message": outcome.message,
        "requests": usage.requests,
        "steps": len(history.entries),
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "api_reasoning_tokens": usage.reasoning_tokens,
        # The one accounting (iclr_cli.token_accounting): removed = deleted, markers apart.
        "reasoning_tokens_generated": tokens.generated,
        "reasoning_tokens_removed": tokens.deleted,
        "reasoning_tokens_kept": tokens.kept,
        "skip_markers": tokens.markers,
        "skip_marker_tokens": tokens.marker_tokens,
        "reasoning_tokenizer": history.compressor.tokenizer.name,
        "unreported_usage": list(usage.unreported),
        "wall_s": round(wall_s, 3),
        "check_error": check_error,
        "submission": submission if submission is None or len(submission) <= SUBMISSION_CAP else submission[:SUBMISSION_CAP] + "...",
        "model": config.model,
        "trajectory": str(rel / "trajectory.json"),
        "generated": str(rel / "generated.json"),
        "requests_log": str(rel / "requests.jsonl"),
        "block_scores": block_scores,
    }
    if config.keep_workspaces:
        record["workspace"] = str(root)
    return record


def run_matrix(
    specs: Sequence[RunSpec],
    client: ChatClient,
    compressors: Mapping[str, Compressor],
    config: ReplayConfig,
    log: ResultsLog,
    *,
    jobs: int = 1,
    on_record: Callable[[dict], None] | None = None,
) -> int:
    """Run ``specs`` on ``jobs`` threads, appending each record as it finishes; returns how
    many were written. On Ctrl-C, runs in flight stop before their next request and nothing
    unfinished is written."""
    stop = threading.Event()

    def work(spec: RunSpec) -> bool:
        # The worker appends its own record, so a finished run is on disk even if another
        # run crashes the replay before the main thread looks at this one.
        record = run_one(spec, client, compressors[spec.variant], config, stop)
        if record is None or stop.is_set():
            # Interrupted: a run that ended while the replay was stopping (its request timed
            # out, say) is unfinished work, not a result; it runs again on resume.
            return False
        log.append(record)
        if on_record is not None:
            on_record(record)
        return True

    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="iclr-replay")
    try:
        futures = [pool.submit(work, s) for s in specs]
        written = sum(fut.result() for fut in as_completed(futures))
    except BaseException:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return written
