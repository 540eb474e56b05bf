"""Claude Code, Codex, OpenCode, Qwen Code, Goose and the AI SDK through an ``iclr serve`` process: what the proxy adds per request.

Run from the repository root::

    python benchmarks/bench_serve_agents.py                    # SmolLM2 proxy, both CLIs
    python benchmarks/bench_serve_agents.py --quick            # --proxy-model fake: a smoke run
    python benchmarks/bench_serve_agents.py --max-tokens 8000  # a shorter scoring window
    python benchmarks/bench_serve_agents.py --pace provider --steps 8 --sessions 2 --cli claude
    python benchmarks/bench_serve_agents.py --pace provider --steps 6 --sessions 1 --cli opencode   # or qwen, goose, aisdk
    python benchmarks/bench_serve_agents.py --pace provider --cli claude --replicas 2 --state /tmp/iclr-state   # two replicas, round robin
    python benchmarks/bench_serve_agents.py --pace provider --cli codex --parallel 2 --sessions 1      # two Codex sessions at once
    python benchmarks/bench_serve_agents.py --pace provider --cli claude --subagents 2 --steps 4       # parallel subagents (Task tool)
    python benchmarks/bench_serve_agents.py --pace provider --cli opencode --via litellm --steps 6     # LiteLLM's guardrail, serve_url

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
feeds along the stream. ``--parallel N`` runs N sessions at once each round; ``--subagents K``
(Claude Code) has each session's first reply start K subagents at once, each running
``--steps`` steps of its own; ``--via litellm`` puts the LiteLLM proxy with the iclr guardrail
(``serve_url``: its hooks go to the serve, which runs the proxy model) in front; ``--busy K``
runs K CPU-bound processes beside both runs. The paced upstreams and the counting are in
``agents_paced.py``.

Claude Code and Codex send a large P (tens of KB of tool definitions), so with a CPU proxy
model the first compressed step of a conversation prefills all of it: on 2 shared, overloaded
cores one such step took 851 s. Run it on a quiet machine (or a GPU: ``--device cuda``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    if args.serve_log:
        cmd += ["--log-level", "debug"]
    tree = args.repo or ROOT  # another checkout's serve (a "before" row)
    log = open(args.serve_log, "ab") if args.serve_log else subprocess.DEVNULL  # for a late step's why
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(tree), **(env or {})}, cwd=tree, stdout=subprocess.DEVNULL, stderr=log)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy-model", default="smollm2")
    parser.add_argument("--max-tokens", type=int, default=None, help="iclr serve --max-tokens (default: serve's own)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--max-wait", default=None, help="iclr serve --max-wait (default: serve's own; inf: every step waits for its scores)")
    parser.add_argument("--cli", choices=("claude", "codex", "both", "opencode", "kilo", "qwen", "goose", "aisdk"), default="both",
                        help="opencode / qwen / goose / aisdk (the AI SDK's openai-compatible chat): --pace provider only, "
                             "a DeepSeek-style chat upstream (content null, spaced arguments); goose and aisdk through serve only")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds a CLI (and each of its requests) may take")
    parser.add_argument("--quick", action="store_true", help="--proxy-model fake")
    parser.add_argument("--pace", choices=("instant", "provider"), default="instant",
                        help="provider: a provider's pace, sessions against straight to the upstream (module docstring)")
    parser.add_argument("--steps", type=int, default=8, help="tool steps a session (--pace provider)")
    parser.add_argument("--sessions", type=int, default=2, help="rounds one after the other (--pace provider; a round: --parallel sessions at once)")
    parser.add_argument("--tool-s", type=float, default=0.3, help="seconds each tool call runs (--pace provider)")
    parser.add_argument("--repo", type=Path, default=None, help="run this checkout's iclr serve (a 'before' row)")
    parser.add_argument("--replicas", type=int, default=1, help="serve replicas behind a round-robin balancer (--pace provider)")
    parser.add_argument("--state", default=None, help="iclr serve --state for every replica (a folder, redis://..., postgresql://...)")
    parser.add_argument("--parallel", type=int, default=1, help="sessions of the CLI at once, each round (--pace provider)")
    parser.add_argument("--subagents", type=int, default=0, help="claude: subagents its first reply starts at once (the Task tool; --pace provider)")
    parser.add_argument("--via", choices=("serve", "litellm"), default="serve",
                        help="litellm: the LiteLLM proxy (.venv/litellm-proxy) whose iclr guardrail sends its hooks to the serve (--pace provider)")
    parser.add_argument("--serve-log", default=None, help="append serve's debug log (a line a request and a scorer batch, timed) to this file")
    parser.add_argument("--busy", type=int, default=0, help="CPU-bound processes beside the proxy, both runs (--pace provider)")
    args = parser.parse_args()
    if args.quick:
        args.proxy_model = "fake"
    import test_serve_agents as agents

    bins = agents._clis()
    if bins is None:
        raise SystemExit("npm or the Claude Code / Codex CLIs are missing (set ICLR_AGENT_CLIS)")
    names = ("claude", "codex") if args.cli == "both" else (args.cli,)
    if args.cli in ("goose", "aisdk") and (args.pace != "provider" or args.via != "serve"):
        parser.error(f"--cli {args.cli} runs with --pace provider through serve only")
    if args.pace == "instant":
        for name in names:
            print(json.dumps(run(name, args, bins)), flush=True)
        return
    from agents_paced import run_paced, table

    rows = [row for name in names for row in run_paced(name, args, bins, lambda upstream, env: _serve(upstream, args, env=env))]
    print(f"\nproxy model {args.proxy_model}; scorer {rows[0]['scorer_profile'] if rows else '-'}")
    print(table(rows))

if __name__ == "__main__":
    main()
