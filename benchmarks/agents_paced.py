"""The real agent CLIs at a provider's pace through ``iclr serve`` (``bench_serve_agents.py
--pace provider``): the scripted upstreams, the runs, and what is counted.

A round is ``--parallel`` sessions of one CLI at once (Codex or OpenCode sessions side by side,
a team's shared proxy), or with ``--subagents K`` one Claude Code session whose first reply
starts K subagents at once (Claude Code's Task tool: K + 1 conversations in flight). Every
round runs first straight to the upstream, then through serve (directly, or through the LiteLLM
proxy whose iclr guardrail sends its hooks to that serve: ``--via litellm``).

Which session (and subagent) a request belongs to is read from its first user message
(``Session N`` / ``Session N SUB-X`` in the prompt), so the upstream's draws (reasoning, time to
first byte) depend on the conversation and the step only: the direct and the proxied run of a
round get the same times.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

COUNTED = ("requests", "steps_completed", "steps_compressed", "steps_late", "steps_late_compressed",
           "reasoning_tokens_generated", "reasoning_tokens_removed")
CONVERSATION = re.compile(r"Session (\d+)(?: (SUB-[A-Z]))?")
CLAUDE_MODEL = "claude-opus-4-8"  # a name LiteLLM's price table knows as adaptive-thinking (test_litellm_agents)
CHAT_MODEL = "deepseek-reasoner"
CODEX_MODEL = "gpt-test"  # test_serve_agents._run_codex's model


def conversation(body: dict) -> tuple[int, str]:
    """(session, ``"main"`` or the subagent's tag) of a request, from its first user message that
    names a session; (-1, ``"side"``) for a request that names none (a CLI's title request)."""
    for item in body.get("messages") or body.get("input") or []:
        if isinstance(item, dict) and item.get("role") == "user":
            found = CONVERSATION.search(json.dumps(item.get("content")))
            if found:
                return int(found.group(1)), found.group(2) or "main"
    return -1, "side"


class Pacer:
    """The scripted upstream's pace and task: ``steps`` tool steps a conversation, each tool
    ``tool_s`` seconds, ``subagents`` subagents started by a Claude Code session's first reply."""

    def __init__(self, steps: int, tool_s: float, subagents: int = 0):
        self.steps, self.tool_s, self.subagents = steps, tool_s, subagents

    def reasoning(self, who: tuple[int, str], step: int) -> str:
        from synthetic import PARAGRAPHS, _fill

        rng = random.Random(f"{who[0]}/{who[1]}/{step}")
        return "\n\n".join(_fill(rng, rng.choice(PARAGRAPHS)) for _ in range(5))

    def command(self) -> str:
        return f"sleep {self.tool_s} && seq 1000 1199"  # the tool's time, then about 1 KB of output

    def stream(self, events: list[dict], who: tuple[int, str], step: int, named: bool = True):
        from bench_serve_budget import TTFT_S
        from serve_fixtures import Stream

        first = random.Random(f"ttft/{who[0]}/{who[1]}/{step}").uniform(*TTFT_S)
        return Stream(events, named=named, first_byte_s=first, delays=[_event_s(e) for e in events])


def _event_s(event: dict) -> float:
    """Seconds a provider takes to generate ``event``'s text at its pace."""
    from bench_serve_budget import CHARS_PER_TOKEN, TOKENS_PER_S

    delta, item = event.get("delta"), event.get("item") or {}
    choices = event.get("choices")
    if isinstance(choices, list) and choices:  # a chat completions chunk
        d = choices[0].get("delta") or {}
        chars = sum(len(v) for k, v in d.items() if k in ("content", "reasoning_content") and isinstance(v, str))
        chars += sum(len((c.get("function") or {}).get("arguments") or "") for c in d.get("tool_calls") or [])
    elif isinstance(delta, dict):
        chars = sum(len(v) for k, v in delta.items() if k in ("thinking", "text", "partial_json") and isinstance(v, str))
    elif isinstance(delta, str):
        chars = len(delta)
    elif event.get("type") == "response.output_item.done" and item.get("type") != "reasoning":
        chars = len(item.get("arguments") or json.dumps(item.get("content") or ""))
    else:
        chars = 0
    return chars / CHARS_PER_TOKEN / TOKENS_PER_S


def _claude_paced(pacer: Pacer):
    from replay_fixtures import Reply
    from wire_fixtures import anthropic_events, anthropic_message, anthropic_reply, text, thinking, tool_use

    def reply(body, index):
        if not body.get("tools"):  # Claude Code's side requests (titles, summaries): at once
            return anthropic_reply([text("Done.")], stream=bool(body.get("stream")))
        who = conversation(body)
        turn = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        tag = f"{who[0]}_{who[1]}_{turn}"
        if turn >= pacer.steps:
            blocks = [text(f"All {pacer.steps} steps of {who[1]} are done.")]
        elif turn == 0 and who[1] == "main" and pacer.subagents:  # the Task tool, several at once
            blocks = [thinking(pacer.reasoning(who, turn))]
            for k in range(pacer.subagents):
                sub = f"SUB-{chr(ord('A') + k)}"
                prompt = f"Session {who[0]} {sub}: run the {pacer.steps} commands you are given, one at a time, and report."
                blocks.append(tool_use(f"toolu_{tag}_{sub}", "Agent", {"description": f"Commands {sub}", "prompt": prompt,
                                                                         "subagent_type": "general-purpose"}))
        else:
            blocks = [thinking(pacer.reasoning(who, turn)),
                      tool_use(f"toolu_{tag}", "Bash", {"command": pacer.command(), "description": f"Step {turn}"})]
        message = anthropic_message(blocks, message_id=f"msg_{tag}")
        if not body.get("stream"):
            return Reply(message)
        return pacer.stream(anthropic_events(message, pieces=max(2, len(json.dumps(blocks)) // 12)), who, turn)

    return reply


def _codex_paced(pacer: Pacer):
    from wire_fixtures import function_call, output_message, reasoning_item, response, responses_events

    def reply(body, index):
        who = conversation(body)
        turn = sum(1 for item in body.get("input", []) if item.get("type") == "function_call")
        tag = f"{who[0]}_{turn}"
        if turn >= pacer.steps:
            output = [output_message(f"All {pacer.steps} steps are done.", f"msg_{tag}")]
        else:
            output = [reasoning_item(pacer.reasoning(who, turn), f"rs_{tag}"),
                      function_call(f"call_{tag}", "exec_command", {"cmd": pacer.command()})]
        resp = response(output, response_id=f"resp_{tag}")
        return pacer.stream(responses_events(resp, pieces=max(2, len(json.dumps(output)) // 12)), who, turn)

    return reply


def _chat_paced(pacer: Pacer, shell: str):
    """A DeepSeek-style chat upstream at a provider's pace: ``reasoning_content`` then one shell
    call a step, streamed with ``content: null`` and spaced JSON arguments (which OpenCode and
    Qwen Code send back as ``""`` and re-encoded)."""
    from agent_cli_fixtures import chat_stream

    def reply(body, index):
        if not body.get("tools"):  # OpenCode's title request: at once
            return chat_stream("Run the commands")
        who = conversation(body)
        turn = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant" and m.get("tool_calls"))
        if turn >= pacer.steps:
            return chat_stream(f"All {pacer.steps} steps are done.")
        args = {"command": pacer.command(), "description": f"Step {turn}"}
        text = pacer.reasoning(who, turn)
        events = chat_stream(reasoning=text, calls=((f"call_{who[0]}_{turn}", shell, args),), pieces=max(2, len(text) // 12)).events
        return pacer.stream(events, who, turn, named=False)

    return reply


def _runner(name: str, bins: Path, key: str | None):
    """``runner(url, home, prompt, timeout)`` -> the finished process, for CLI ``name`` with the
    API key ``key`` (LiteLLM's master key; None: the CLI's test key)."""
    import test_serve_agents as agents
    from agent_cli_fixtures import run_aisdk, run_goose, run_opencode, run_qwen

    def runner(url: str, home: Path, prompt: str, timeout: float):
        if name == "claude":
            return agents._run_claude(bins, url, home, timeout=timeout, prompt=prompt,
                                      env={"ANTHROPIC_MODEL": CLAUDE_MODEL, **({"ANTHROPIC_API_KEY": key} if key else {})})
        if name == "codex":
            return agents._run_codex(bins, url, home, timeout=timeout, prompt=prompt, **({"key": key} if key else {}))
        if name == "qwen":
            return run_qwen(url, home, prompt, timeout=timeout, key=key).process
        if name == "goose":  # docs/serve.md's recipe; its key is the recipe's
            return run_goose(url, home, prompt, timeout=timeout).process
        if name == "aisdk":  # tests/aisdk_agent.mjs over openai-compatible chat, one tool "shell"
            return run_aisdk("chat", url, "shell", prompt, timeout=timeout)
        run = run_opencode(name, url, home, prompt, timeout=timeout, **({"key": key} if key else {}))
        return run.process

    return runner


def _stats(bases: list[str]) -> dict:
    """``/stats`` of one serve, or of the replicas summed (the counters this benchmark reads)."""
    import httpx

    got = [httpx.get(b + "/stats", timeout=60).json() for b in bases]
    merged = dict(got[0])
    merged["total"] = {**got[0]["total"], **{k: sum(g["total"][k] for g in got) for k in COUNTED}}
    causes: dict[str, int] = {}
    for g in got:
        for cause, n in (g["total"].get("steps_late_by_cause") or {}).items():
            causes[cause] = causes.get(cause, 0) + n
    merged["total"]["steps_late_by_cause"] = causes
    merged["eager_scoring"] = {k: sum(g["eager_scoring"][k] for g in got) for k in ("fed_context", "fed_reasoning")}
    return merged


def provider_breaks(bodies: list[bytes]) -> dict[tuple[int, str], int]:
    """Per conversation, its requests that did not extend its previous request, as the upstream
    got them (cache markers aside: the client moves its marker every request). Only the
    agents' own loops count (their requests carry the tools), not a CLI's side requests."""
    from bench_replicas import _unmarked

    history: dict[tuple[int, str], list] = {}
    breaks: dict[tuple[int, str], int] = {}
    for raw in bodies:
        body = orjson.loads(raw)
        if not body.get("tools"):
            continue
        who, now = conversation(body), _unmarked(body.get("messages") or body.get("input"))
        before = history.get(who)
        breaks[who] = breaks.get(who, 0) + int(before is not None and now[: len(before)] != before)
        history[who] = now
    return breaks


def _litellm(upstream: str, serve_base: str, name: str, tmp: Path):
    """The LiteLLM proxy (``.venv/litellm-proxy``) with the iclr guardrail sending its hooks to
    ``serve_base`` (docs/litellm.md, ``serve_url``), its deployments on ``upstream``: a context
    manager yielding its base URL."""
    from litellm_fixtures import config_yaml, litellm_proxy

    config = config_yaml(upstream, options={"serve_url": serve_base},
                         openai_model=CODEX_MODEL if name == "codex" else CHAT_MODEL, anthropic_model=CLAUDE_MODEL)
    return litellm_proxy(config, tmp)


def run_paced(name: str, args: argparse.Namespace, bins: Path, serve) -> list[dict]:
    """``args.sessions`` rounds of ``name`` straight to a paced upstream, then through one fresh
    serve (``serve(upstream, env)`` -> (process, base URL); ``args.replicas`` of them behind a
    round-robin balancer, or behind LiteLLM with ``args.via == "litellm"``): one row a round."""
    import contextlib

    from bench_serve_budget import _busy, _idle
    from litellm_fixtures import MASTER_KEY
    from serve_fixtures import scripted_upstream

    pacer = Pacer(args.steps, args.tool_s, args.subagents)
    reply = {"claude": _claude_paced, "codex": _codex_paced}.get(name)
    shell = {"qwen": "run_shell_command", "goose": "shell", "aisdk": "shell"}.get(name, "bash")
    reply = reply(pacer) if reply else _chat_paced(pacer, shell)
    rows: list[dict] = []

    def one_round(runner, url: str, index: int) -> float:
        sessions = range(index * args.parallel, (index + 1) * args.parallel)
        prompts = [f"Session {s}: run the {args.steps} commands you are given, one at a time." for s in sessions]
        with tempfile.TemporaryDirectory() as home, ThreadPoolExecutor(args.parallel) as pool:
            start = time.monotonic()
            done = list(pool.map(lambda k: runner(url, Path(home) / f"s{k}", prompts[k], args.timeout), range(args.parallel)))
            wall = time.monotonic() - start
        for proc in done:
            if proc.returncode != 0:
                raise SystemExit(f"{name} exited {proc.returncode}: {proc.stderr[-2000:]}")
        return wall

    busy = _busy(args.busy)
    with contextlib.ExitStack() as stack:
        stack.callback(lambda: [b.kill() for b in busy])
        up = stack.enter_context(scripted_upstream([reply] * 100_000))
        direct = [one_round(_runner(name, bins, None), up.url, i) for i in range(args.sessions)]
        cold = {"ICLR_PROMPT_CACHE_DIR": tempfile.mkdtemp(prefix="iclr-bench-p-")}
        started = [serve(up.url, cold) for _ in range(args.replicas)]
        procs, bases = [p for p, _ in started], [b for _, b in started]
        for proc in procs:
            stack.callback(proc.wait, timeout=60)
            stack.callback(proc.terminate)
        front, key = bases[0], None
        if args.replicas > 1:
            from bench_replicas import _balancer

            front = _balancer(bases)[1]
        if args.via == "litellm":
            front = stack.enter_context(_litellm(up.url, front, name, Path(stack.enter_context(tempfile.TemporaryDirectory()))))
            key = MASTER_KEY
        runner = _runner(name, bins, key)
        before = _stats(bases)
        for i in range(args.sessions):
            sent_before = len(up.raw)
            wall = one_round(runner, front + "/v1", i)
            stats = _stats(bases)
            total, was = stats["total"], before["total"]
            eager, eager_was = stats["eager_scoring"], before["eager_scoring"]
            breaks = provider_breaks(up.raw[sent_before:])
            rows.append({
                "cli": name, "round": i + 1, "parallel": args.parallel, "subagents": args.subagents, "via": args.via,
                "busy": args.busy, "conversations": len(breaks), "p": "cold" if i == 0 else "kept", "wall_s": round(wall, 1),
                "direct_s": round(direct[i], 1), "ratio": round(wall / direct[i], 3),
                **{k: total[k] - was[k] for k in COUNTED},
                "fed_context": eager["fed_context"] - eager_was["fed_context"],
                "fed_reasoning": eager["fed_reasoning"] - eager_was["fed_reasoning"],
                "late_by_cause": _minus(total.get("steps_late_by_cause") or {}, was.get("steps_late_by_cause") or {}),
                "added_latency_ms": total["added_latency_ms"],
                "scorer_profile": stats.get("scorer_profile"), "replicas": args.replicas,
                "provider_breaks": sum(breaks.values()), "most_breaks_in_a_conversation": max(breaks.values(), default=0),
                "rss_mib": [_rss_mib(p.pid) for p in procs],
            })
            print(json.dumps(rows[-1]), flush=True)
            for base in bases:
                _idle(base, 900)
            before = _stats(bases)
    return rows


def _minus(now: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """Per-cause counts of this round: ``now`` less ``before`` (``/stats`` counts since start)."""
    return {k: v - before.get(k, 0) for k, v in now.items() if v - before.get(k, 0)}


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table (steps compressed when first sent, of those completed)."""
    out = ["| CLI | round | at once | P | steps compressed | sent late | breaks at the provider (most in one conversation) | wall | direct | ratio | fed (context / reasoning) |",
           "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        at_once = f"{r['parallel']} session(s)" + (f" + {r['subagents']} subagents" if r["subagents"] else "") + f", {r['conversations']} conv."
        out.append(f"| {r['cli']}{' via LiteLLM' if r['via'] == 'litellm' else ''} | {r['round']} | {at_once} | {r['p']} "
                   f"| {r['steps_compressed'] - r['steps_late_compressed']} of {r['steps_completed']} | {r['steps_late']} "
                   f"| {r['provider_breaks']} ({r['most_breaks_in_a_conversation']}) | {r['wall_s']} s | {r['direct_s']} s | {r['ratio']:.2f}x "
                   f"| {r['fed_context']} / {r['fed_reasoning']} |")
    return "\n".join(out)
