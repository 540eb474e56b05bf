"""Turn ``iclr replay`` options into a ready matrix: client, compressors, plan, results log."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from iclr_cli.errors import IclrError, Interrupted, UsageError
from iclr_cli.replay.agent import AgentConfig
from iclr_cli.replay.client import ChatClient, ClientConfig
from iclr_cli.replay.history import Compressor
from iclr_cli.replay.provider import STYLES
from iclr_cli.replay.runner import RESULTS, ReplayConfig, ResultsLog, RunSpec, plan, run_matrix
from iclr_cli.replay.suite import Task
from iclr_cli.replay.tools import ToolLimits


@dataclass
class Session:
    """A replay ready to run: what is left to do and everything needed to do it."""

    output: object  # iclr_cli.render.output.Output
    specs: list[RunSpec]
    client: ChatClient
    compressors: Mapping[str, Compressor]
    config: ReplayConfig
    log: ResultsLog
    skipped: int
    finished: list[dict] = field(default_factory=list)

    def run(self, jobs: int) -> int:
        """Run every remaining cell; returns how many records were written.

        Each finished run prints one line; a failed one prints its reason.

        The records written are kept in :attr:`finished` (see :meth:`all_failed`).

        Raises:
            Interrupted: on Ctrl-C (exit 130), saying how many finished runs are in
                ``results.jsonl`` and that the same command resumes.
        """
        out = self.output
        if self.skipped:
            out.info(f"resuming: {self.skipped} finished run(s) in {self.log.path} are skipped")
        if not self.specs:
            out.info("nothing left to run")
            self.log.close()
            return 0
        finished = self.finished
        try:
            with out.progress("replay", len(self.specs), unit="runs") as advance:

                def on_record(r: dict) -> None:
                    finished.append(r)
                    tokens = (r["input_tokens"] or 0) + (r["output_tokens"] or 0)
                    line = f"{r['task']} {r['variant']} seed {r['seed']}: reward {r['reward']:.2f}, {r['status']}, {r['requests']} requests, {tokens:,} tokens"
                    if r["status"] == "error":
                        out.warn(f"{line}: {r.get('message') or 'no reason given'}")
                    else:
                        out.info(line)
                    advance()

                written = run_matrix(self.specs, self.client, self.compressors, self.config, self.log, jobs=jobs, on_record=on_record)
        except KeyboardInterrupt:
            total = len(self.log.records) + len(finished)
            raise Interrupted(
                f"{len(finished)} run(s) finished in this session, {total} in all are kept in {self.log.path}; "
                "runs in progress were not recorded; run the same command again to resume"
            ) from None
        finally:
            self.log.close()
        return written

    def all_failed(self) -> str | None:
        """When every run of this session ended in an API error: a one-line reason (the
        first error's message), else ``None``."""
        failed = [r for r in self.finished if r["status"] == "error"]
        if not failed or len(failed) < len(self.finished):
            return None
        return f"every run failed ({len(failed)} of {len(self.finished)}); first reason: {failed[0].get('message') or 'none given'}"


def _api_key(var: str | None) -> str:
    """The key from ``--api-key-env``; without it a placeholder (local servers ignore it). No
    variable is read unless named, so a key is never sent to an endpoint it was not meant for."""
    if var is None:
        return "no-key"
    value = os.environ.get(var)
    if not value:
        raise UsageError(f"--api-key-env {var}: the environment variable is not set")
    return value


def _engines(variants: Sequence, proxy_model: str, options: Mapping):
    from iclr_cli.pipeline import ScorerConfig, build_engines, check_splitter

    check_splitter(str(options["split"]))
    # No recheck of near ties: each turn's step is scored once, in the sliding window (docs/scoring.md).
    config = ScorerConfig.chosen(bool(options.get("exact")), options.get("max_tokens"), options.get("elide"), 0, model=proxy_model, overflow=str(options["overflow"]), dtype=str(options["dtype"]),
                                      batch_size=8, device=options["device"])
    try:
        needs = next((v for v in variants if v.needs_scores), variants[0])
        return (*build_engines(needs, config), config)
    except ImportError as exc:
        raise IclrError(f"--proxy-model {proxy_model}: cannot load the proxy scorer/tokenizer ({exc}); '--proxy-model fake' runs without one") from exc


def build_run(
    output,
    *,
    tasks: Sequence[Task],
    variants: Sequence[str],
    model: str,
    base_url: str,
    api_key_env: str | None,
    seeds: int,
    max_steps: int,
    out: Path,
    proxy_model: str,
    scorer_options: Mapping,
    tool_protocol: str = "native",
    send_reasoning: str = "auto",
    temperature: float | None = None,
    max_output_tokens: int | None = None,
    extra_body: str | None = None,
    request_timeout: float = 300.0,
    max_retries: int = 6,
    command_timeout: float = 30.0,
    output_cap: int = 10_000,
    retry_errors: bool = False,
    keep_workspaces: bool = False,
    send_seed: bool = False,
    http_client=None,
) -> Session:
    """Validate options, build the engines and plan the remaining runs.

    Raises:
        UsageError: for a bad variant, protocol, reasoning style, ``--extra-body`` or API key.
        IclrError: when the proxy scorer cannot be loaded.
    """
    from iclr_cli.policies import parse_variant

    parsed = [parse_variant(v) for v in variants]
    if tool_protocol not in ("native", "text"):
        raise UsageError(f"--tool-protocol must be 'native' or 'text', not {tool_protocol!r}")
    if send_reasoning != "auto" and send_reasoning not in STYLES:
        raise UsageError(f"--send-reasoning must be auto or one of {', '.join(STYLES)}, not {send_reasoning!r}")
    body: dict = {}
    if extra_body:
        try:
            body = orjson.loads(extra_body)
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"--extra-body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise UsageError("--extra-body must be a JSON object")
    scorer, tokenizer, scorer_config = _engines(parsed, proxy_model, scorer_options)
    compressors = {
        v.name: Compressor(v, scorer if v.needs_scores else None, tokenizer, ratio=scorer_options["ratio"], splitter=scorer_options["split"],
                           elide=scorer_config.elide)
        for v in parsed
    }
    shared = next(iter(compressors.values())).lock
    for c in compressors.values():
        c.lock = shared  # one scorer, one lock
    client = ChatClient(
        ClientConfig(base_url, model, _api_key(api_key_env), request_timeout, max_retries, temperature, max_output_tokens, body),
        http_client=http_client,
    )
    out.mkdir(parents=True, exist_ok=True)
    _note_settings(output, out, {"model": model, "base_url": base_url, "proxy_model": proxy_model, "tool_protocol": tool_protocol, "max_steps": max_steps, "temperature": temperature, "send_seed": send_seed,
                                  "ratio": scorer_options["ratio"], "block_split": scorer_options["split"],
                                  "scorer_profile": scorer_config.describe()})
    log = ResultsLog(out / RESULTS)
    done = {(r["task"], r["variant"], r["seed"]) for r in log.records if not (retry_errors and r.get("status") == "error")}
    specs = plan(tasks, [v.name for v in parsed], range(seeds), done)
    wanted = len(tasks) * len(parsed) * seeds
    config = ReplayConfig(
        out=out,
        model=model,
        base_url=base_url,
        agent=AgentConfig(max_steps=max_steps, tool_protocol=tool_protocol, reasoning_style=send_reasoning, send_seed=send_seed),
        limits=ToolLimits(command_timeout, output_cap),
        keep_workspaces=keep_workspaces,
    )
    return Session(output, specs, client, compressors, config, log, wanted - len(specs))


def _note_settings(output, out: Path, settings: dict) -> None:
    """Write ``replay.json`` the first time; warn when a resume uses other settings."""
    from iclr_cli.jsonio import loads, write_output

    path = out / "replay.json"
    if path.is_file():
        try:
            before = loads(path.read_bytes())
        except ValueError:
            before = {}
        changed = [k for k, v in settings.items() if isinstance(before, dict) and k in before and before[k] != v]
        if changed:
            output.warn(f"{out} was started with other settings ({', '.join(f'{k}={before[k]!r}' for k in changed)}); new records will mix with old ones")
        return
    write_output(str(path), orjson.dumps(settings, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
