"""Claude Code, Codex, OpenCode and Qwen Code through an ``iclr serve`` process: what the proxy adds per request.

Run from the repository root::

    python benchmarks/bench_serve_agents.py                    # SmolLM2 proxy, both CLIs
    python benchmarks/bench_serve_agents.py --quick            # --proxy-model fake: a smoke run
    python benchmarks/bench_serve_agents.py --max-tokens 8000  # a shorter scoring window
    python benchmarks/bench_serve_agents.py --pace provider --steps 8 --sessions 2 --cli claude
    python benchmarks/bench_serve_agents.py --pace provider --steps 6 --sessions 1 --cli opencode   # or qwen
    python benchmarks/bench_serve_agents.py --pace provider --cli claude --replicas 2 --state /tmp/iclr-state   # two replicas, round robin

Each CLI (found or installed as ``tests/test_serve_agents.py`` does: ``$ICLR_AGENT_CLIS`` or
``~/.cache/iclr/agent-clis``) runs the same task as that test, three tool-calling steps and an
answer, against a scripted upstream on 127.0.0.1, through ``iclr serve`` started as its own
process (``--proxy-model``, ``--max-tokens``). Reported per CLI: exit code, wall time, the
size of P (system / instructions and tool definitions, in characters: what the proxy scores
every step against), requests, steps compressed, reasoning tokens removed, and the proxy's
added latency (``/stats``: receipt to upstream send, scoring included) p50 / p95, and the steps
sent late (``--max-wait``: serve's latency budget; ``inf`` waits for every step as before it).

``--pace provider`` runs each CLI the way a provider paces it (the pace of
``bench_serve_budget.py``, after public traces of real Claude Code and Codex steps): every
reply's first byte after 1.5 to 3 s (drawn per step), then 60 tokens a second, a five-paragraph
reasoning block a step and a ``Bash`` / ``exec_command`` call that runs ``--tool-s`` seconds and
prints about 1 KB. ``--steps`` tool steps and an answer, ``--sessions`` sessions one after the
other, first straight to the upstream, then through one ``iclr serve`` started with no P kept
(``ICLR_PROMPT_CACHE_DIR`` empty: the first session on a machine), each session once the one
before has been scored. Reported per session: wall time through serve against straight to the
upstream, steps completed, compressed, sent late (``/stats``, this session's share), and the
feeds along the stream.

Claude Code and Codex send a large P (tens of KB of tool definitions), so with a CPU proxy
model the first compressed step of a conversation prefills all of it: on 2 shared, overloaded
cores one such step took 851 s. Run it on a quiet machine (or a GPU: ``--device cuda``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(upstream: str, args: argparse.Namespace, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    import httpx

    port = _free_port()
    cmd = [sys.executable, "-m", "iclr_cli", "serve", "--upstream", upstream, "--port", str(port), "--proxy-model", args.proxy_model]
    if args.state:
        cmd += ["--state", args.state]
    if args.max_tokens is not None:
        cmd += ["--max-tokens", str(args.max_tokens)]
    if args.device:
        cmd += ["--device", args.device]
    if args.max_wait is not None:
        cmd += ["--max-wait", args.max_wait]
    tree = args.repo or ROOT  # another checkout's serve (a "before" row)
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(tree), **(env or {})}, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while True:
        try:
            httpx.get(base + "/healthz", timeout=2)
            return proc, base
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"iclr serve did not start: {' '.join(cmd)}")
            time.sleep(0.5)


def _p_chars(body: dict) -> int:
    context = {k: body.get(k) for k in ("system", "instructions", "tools")}
    developer = [i for i in body.get("input") or [] if isinstance(i, dict) and i.get("role") == "developer"]
    return len(json.dumps(context)) + len(json.dumps(developer))


def run(name: str, args: argparse.Namespace, bins: Path) -> dict:
    import httpx
    import test_serve_agents as agents
    from serve_fixtures import scripted_upstream

    script, runner = (agents._claude_script(redacted=False), agents._run_claude) if name == "claude" else (agents._codex_script(encrypted=False), agents._run_codex)
    with scripted_upstream(script) as up, tempfile.TemporaryDirectory() as home:
        proc, base = _serve(up.url, args)
        try:
            start = time.monotonic()
            result = runner(bins, base + "/v1", Path(home), timeout=args.timeout)
            wall = time.monotonic() - start
            stats = httpx.get(base + "/stats", timeout=30).json()
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    total = stats["total"]
    first = json.loads(up.raw[0]) if up.raw else {}
    return {
        "cli": name, "proxy_model": args.proxy_model, "exit_code": result.returncode, "wall_s": round(wall, 1),
        "p_chars": _p_chars(first), "requests": total["requests"], "steps_completed": total["steps_completed"],
        "steps_compressed": total["steps_compressed"], "steps_late": total["steps_late"], "steps_late_compressed": total["steps_late_compressed"],
        "reasoning_tokens_generated": total["reasoning_tokens_generated"], "reasoning_tokens_removed": total["reasoning_tokens_removed"],
        "added_latency_ms": total["added_latency_ms"],
    }


# -- at a provider's pace -----------------------------------------------------------------

COUNTED = ("requests", "steps_completed", "steps_compressed", "steps_late", "steps_late_compressed",
           "reasoning_tokens_generated", "reasoning_tokens_removed")


class Pacer:
    """The scripted upstream's pace and task: which session runs (the draws depend on it and
    on the step only, so the direct and the proxied run of a session get the same times)."""

    def __init__(self, steps: int, tool_s: float):
        self.steps, self.tool_s, self.session = steps, tool_s, 0

    def reasoning(self, step: int) -> str:
        from synthetic import PARAGRAPHS, _fill

        rng = random.Random(self.session * 1000 + step)
        return "\n\n".join(_fill(rng, rng.choice(PARAGRAPHS)) for _ in range(5))

    def command(self) -> str:
        return f"sleep {self.tool_s} && seq 1000 1199"  # the tool's time, then about 1 KB of output

    def stream(self, events: list[dict], step: int, named: bool = True):
        from bench_serve_budget import TTFT_S
        from serve_fixtures import Stream

        first = random.Random(self.session * 31 + step).uniform(*TTFT_S)
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
        turn = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        if turn >= pacer.steps:
            blocks = [text(f"All {pacer.steps} steps are done.")]
        else:
            blocks = [thinking(pacer.reasoning(turn)),
                      tool_use(f"toolu_{pacer.session}_{turn}", "Bash", {"command": pacer.command(), "description": f"Step {turn}"})]
        message = anthropic_message(blocks, message_id=f"msg_{pacer.session}_{turn}")
        if not body.get("stream"):
            return Reply(message)
        return pacer.stream(anthropic_events(message, pieces=max(2, len(json.dumps(blocks)) // 12)), turn)

    return reply


def _codex_paced(pacer: Pacer):
    from wire_fixtures import function_call, output_message, reasoning_item, response, responses_events

    def reply(body, index):
        turn = sum(1 for item in body.get("input", []) if item.get("type") == "function_call")
        if turn >= pacer.steps:
            output = [output_message(f"All {pacer.steps} steps are done.", f"msg_{pacer.session}_{turn}")]
        else:
            output = [reasoning_item(pacer.reasoning(turn), f"rs_{pacer.session}_{turn}"),
                      function_call(f"call_{pacer.session}_{turn}", "exec_command", {"cmd": pacer.command()})]
        resp = response(output, response_id=f"resp_{pacer.session}_{turn}")
        return pacer.stream(responses_events(resp, pieces=max(2, len(json.dumps(output)) // 12)), turn)

    return reply


def _chat_paced(pacer: Pacer, shell: str):
    """A DeepSeek-style chat upstream at a provider's pace: ``reasoning_content`` then one shell
    call a step, streamed with ``content: null`` and spaced JSON arguments (which OpenCode and
    Qwen Code send back as ``""`` and re-encoded)."""
    from agent_cli_fixtures import chat_stream

    def reply(body, index):
        if not body.get("tools"):  # OpenCode's title request: at once
            return chat_stream("Run the commands")
        turn = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant" and m.get("tool_calls"))
        if turn >= pacer.steps:
            return chat_stream(f"All {pacer.steps} steps are done.")
        args = {"command": pacer.command(), "description": f"Step {turn}"}
        text = pacer.reasoning(turn)
        events = chat_stream(reasoning=text, calls=((f"call_{pacer.session}_{turn}", shell, args),), pieces=max(2, len(text) // 12)).events
        return pacer.stream(events, turn, named=False)

    return reply


def _chat_runner(name: str):
    """``runner(bins, url, home, timeout=, prompt=)`` for OpenCode / Qwen Code, as the Claude
    Code and Codex runners of tests/test_serve_agents.py are called."""
    from agent_cli_fixtures import run_opencode, run_qwen

    def runner(bins, url, home, *, timeout, prompt):
        run = run_qwen(url, home, prompt, timeout=timeout) if name == "qwen" else run_opencode(name, url, home, prompt, timeout=timeout)
        return run.process

    return runner


def _stats(bases: list[str]) -> dict:
    """``/stats`` of one serve, or of the replicas summed (the counters this benchmark reads)."""
    import httpx

    got = [httpx.get(b + "/stats", timeout=60).json() for b in bases]
    merged = dict(got[0])
    merged["total"] = {**got[0]["total"], **{k: sum(g["total"][k] for g in got) for k in COUNTED}}
    merged["eager_scoring"] = {k: sum(g["eager_scoring"][k] for g in got) for k in ("fed_context", "fed_reasoning")}
    return merged


def _provider_breaks(bodies: list[bytes]) -> int:
    """Requests of one session that did not extend its previous request, as the upstream got
    them (cache markers aside: the client moves its marker every request)."""
    from bench_replicas import _unmarked

    loaded = [orjson.loads(b) for b in bodies]
    # the agent's own loop (its requests carry the tools), not a CLI's side requests (titles)
    history = [_unmarked(body.get("messages") or body.get("input")) for body in loaded if body.get("tools")]
    return sum(now[: len(before)] != before for before, now in zip(history, history[1:]))


def run_paced(name: str, args: argparse.Namespace, bins: Path) -> list[dict]:
    """The sessions of ``name`` straight to a paced upstream, then through one fresh serve."""
    import httpx
    import test_serve_agents as agents
    from bench_serve_budget import _idle
    from serve_fixtures import scripted_upstream

    pacer = Pacer(args.steps, args.tool_s)
    if name in ("opencode", "qwen"):
        reply, runner = _chat_paced(pacer, "run_shell_command" if name == "qwen" else "bash"), _chat_runner(name)
    else:
        reply, runner = (_claude_paced(pacer), agents._run_claude) if name == "claude" else (_codex_paced(pacer), agents._run_codex)
    prompt = f"Run the {args.steps} commands you are given, one at a time."
    rows: list[dict] = []

    def session(url: str, index: int) -> float:
        pacer.session = index
        with tempfile.TemporaryDirectory() as home:
            start = time.monotonic()
            done = runner(bins, url, Path(home), timeout=args.timeout, prompt=prompt)
            wall = time.monotonic() - start
        if done.returncode != 0:
            raise SystemExit(f"{name} exited {done.returncode}: {done.stderr[-2000:]}")
        return wall

    with scripted_upstream([reply] * 100_000) as up:
        direct = [session(up.url, i) for i in range(args.sessions)]
        cold = {"ICLR_PROMPT_CACHE_DIR": tempfile.mkdtemp(prefix="iclr-bench-p-")}
        started = [_serve(up.url, args, env=cold) for _ in range(args.replicas)]
        procs, bases = [p for p, _ in started], [b for _, b in started]
        front = bases[0]
        if args.replicas > 1:
            from bench_replicas import _balancer

            balancer, front = _balancer(bases)
        try:
            before = _stats(bases)
            for i in range(args.sessions):
                sent_before = len(up.raw)
                wall = session(front + "/v1", i)
                stats = _stats(bases)
                total, was = stats["total"], before["total"]
                eager, eager_was = stats["eager_scoring"], before["eager_scoring"]
                rows.append({
                    "cli": name, "session": i + 1, "p": "cold" if i == 0 else "kept", "wall_s": round(wall, 1),
                    "direct_s": round(direct[i], 1), "ratio": round(wall / direct[i], 3),
                    **{k: total[k] - was[k] for k in COUNTED},
                    "fed_context": eager["fed_context"] - eager_was["fed_context"],
                    "fed_reasoning": eager["fed_reasoning"] - eager_was["fed_reasoning"],
                    "added_latency_ms": total["added_latency_ms"], "scorer_profile": stats.get("scorer_profile"),
                    "replicas": args.replicas, "provider_breaks": _provider_breaks(up.raw[sent_before:]),
                    "rss_mib": [_rss_mib(p.pid) for p in procs],
                })
                print(json.dumps(rows[-1]), flush=True)
                for base in bases:
                    _idle(base, 900)
                before = _stats(bases)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=60)
    return rows


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy-model", default="smollm2")
    parser.add_argument("--max-tokens", type=int, default=None, help="iclr serve --max-tokens (default: serve's own)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--max-wait", default=None, help="iclr serve --max-wait (default: serve's own; inf: every step waits for its scores)")
    parser.add_argument("--cli", choices=("claude", "codex", "both", "opencode", "qwen"), default="both",
                        help="opencode / qwen: --pace provider only, a DeepSeek-style chat upstream (content null, spaced arguments)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds a CLI (and each of its requests) may take")
    parser.add_argument("--quick", action="store_true", help="--proxy-model fake")
    parser.add_argument("--pace", choices=("instant", "provider"), default="instant",
                        help="provider: a provider's pace, sessions against straight to the upstream (module docstring)")
    parser.add_argument("--steps", type=int, default=8, help="tool steps a session (--pace provider)")
    parser.add_argument("--sessions", type=int, default=2, help="sessions one after the other (--pace provider)")
    parser.add_argument("--tool-s", type=float, default=0.3, help="seconds each tool call runs (--pace provider)")
    parser.add_argument("--repo", type=Path, default=None, help="run this checkout's iclr serve (a 'before' row)")
    parser.add_argument("--replicas", type=int, default=1, help="serve replicas behind a round-robin balancer (--pace provider)")
    parser.add_argument("--state", default=None, help="iclr serve --state for every replica (a folder, redis://..., postgresql://...)")
    args = parser.parse_args()
    if args.quick:
        args.proxy_model = "fake"
    import test_serve_agents as agents

    bins = agents._clis()
    if bins is None:
        raise SystemExit("npm or the Claude Code / Codex CLIs are missing (set ICLR_AGENT_CLIS)")
    names = ("claude", "codex") if args.cli == "both" else (args.cli,)
    if args.pace == "instant":
        for name in names:
            print(json.dumps(run(name, args, bins)), flush=True)
        return
    rows = [row for name in names for row in run_paced(name, args, bins)]
    print(f"\nproxy model {args.proxy_model}; scorer {rows[0]['scorer_profile'] if rows else '-'}")
    print(f"| CLI | session | P | steps compressed | sent late | breaks at the provider | wall | direct | ratio | fed (context / reasoning) |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        print(f"| {r['cli']} | {r['session']} | {r['p']} | {r['steps_compressed'] - r['steps_late_compressed']} of {r['steps_completed']} "
              f"| {r['steps_late']} | {r['provider_breaks']} | {r['wall_s']} s | {r['direct_s']} s | {r['ratio']:.2f}x | {r['fed_context']} / {r['fed_reasoning']} |")


if __name__ == "__main__":
    main()
